"""The resolver and the install commands wheelforge hands out, end to end.

`GET /api/resolve` maps an installed torch to a variant view: from `cuda=` (torch.version.cuda),
`hip=`/`rocm=`, the `+cuXYZ` label of the torch version, or the table of the CUDA of PyTorch's
PyPI wheels (with a note); a combination without a build answers 404 with the nearest builds,
an unknown project 404. Every command printed (the resolver's pip line, the one-liner of
docs/views.md, the home page, the project page's default command) pins the version and names the
project in `--only-binary`, so that pip cannot fall back to building a public sdist of the same name.

The clients are real: pip 23.0.1 / 23.2.1 / 24.2 from the pyenv Pythons, curl, and Debian's
Poetry 1.3. The `torch` wheels here are STAND-INS, not PyTorch: tiny pure-Python packages named
torch that report a version, `torch.version.cuda`, `torch.version.hip` and
`torch._C._GLIBCXX_USE_CXX11_ABI`, as an installed PyTorch does. A local static index stands in
for PyPI and also holds a public sdist of the extension (a newer version, and the same version)
whose build cannot succeed: taking it is the failure `--only-binary` prevents."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import Harness
from wfhelpers import (
    JSON_TYPE,
    PIP_PYTHONS,
    PYENV,
    Artifact,
    clean_env,
    make_sdist,
    make_wheel,
    path_of,
    record_line,
    run,
    write_static_index,
    write_zip,
)

PROJECT = "wf-kernels"
DIST = "wf_kernels"
VIEWS_DOC = Path(__file__).resolve().parents[2] / "docs" / "views.md"
POETRY = Path("/usr/bin/poetry")
PIP_TIMEOUT = 120
# One wheel per pip's Python: pip 23.0.1 runs on 3.9, 23.2.1 on 3.11, 24.2 on 3.13.
PYTHONS = ("cp39", "cp311", "cp313")
# A Python with a pip but no wheel in the corpus (pip 23.2.1 on 3.12).
PYTHON_WITHOUT_WHEEL = PYENV / "3.12.1" / "bin" / "python"

# version -> labels. torch 2.9 has builds for CUDA 12.8 and 13.0 (an unpinned flat install, or a
# series-only view, takes 13.0); torch 2.11 only for 13.0; 2.14 is newer than wheelforge's
# table of PyPI defaults. 1.2.0 is yanked, so the pinned version is 1.1.0.
CORPUS = {
    "1.0.0": ("cu128torch2.9", "cu130torch2.9", "cu126torch2.8", "cu128torch2.8",
              "cu130torch2.11"),
    "1.1.0": ("cu128torch2.9", "cu130torch2.9", "cu128torch2.8", "cu130torch2.11", "cpu",
              "cu130torch2.14"),
    "1.2.0": ("cu128torch2.9",),
}
PINNED = "1.1.0"
PUBLIC_SDISTS = ("1.1.0", "9.0.0")  # on the stand-in PyPI


def series_of(label: str) -> str:
    match = re.search(r"torch(\d+\.\d+)", label)
    return match.group(1) if match else "2.9"  # the +cpu build is pinned to torch 2.9


def kernel_file(version_label: str, python: str) -> str:
    return f"{DIST}-{version_label}-{python}-{python}-linux_x86_64.whl"


def stand_in_torch(directory: Path, version: str, *, cuda: str | None, hip: str | None = None,
                   cxx11_abi: bool = True) -> Artifact:
    """torch-<version>-py3-none-any.whl: a STAND-IN for PyTorch (see the module docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    note = '"""STAND-IN for PyTorch made by wheelforge\'s resolver tests. This is not PyTorch."""\n'
    distinfo = f"torch-{version}.dist-info"
    metadata = (
        f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
        "Summary: STAND-IN for PyTorch used by wheelforge's tests (not PyTorch)\n"
    ).encode()
    members = [
        ("torch/__init__.py",
         f"{note}__version__ = {version!r}\nSTAND_IN = True\nfrom . import _C, version\n".encode()),
        ("torch/version.py",
         f"{note}__version__ = {version!r}\ncuda = {cuda!r}\nhip = {hip!r}\n".encode()),
        ("torch/_C.py", f"{note}_GLIBCXX_USE_CXX11_ABI = {cxx11_abi!r}\n".encode()),
        (f"{distinfo}/METADATA", metadata),
        (f"{distinfo}/WHEEL",
         b"Wheel-Version: 1.0\nGenerator: wheelforge-tests\nRoot-Is-Purelib: true\n"
         b"Tag: py3-none-any\n"),
    ]
    record = "".join(record_line(p, d) + "\n" for p, d in members) + f"{distinfo}/RECORD,,\n"
    members.append((f"{distinfo}/RECORD", record.encode()))
    path = directory / f"torch-{version}-py3-none-any.whl"
    write_zip(path, members)
    return Artifact(path, "torch", version, metadata)


# ---------------------------------------------------------------------------------------------
# One server with the corpus, a stand-in PyPI, shared by the tests of this module.


class Bed:
    def __init__(self, harness: Harness, server, standin: str, torch_wheel: Artifact):
        self.harness = harness
        self.server = server
        self.standin = standin  # .../simple/
        self.torch_wheel = torch_wheel  # reports 2.9.0, torch.version.cuda == "12.8"

    def resolve(self, query: str):
        return self.server.get(f"/api/resolve?{query}")


@pytest.fixture(scope="module")
def bed_module(request, wheelforge_bin):
    root = Path(tempfile.mkdtemp(prefix="wf-it-resolve-"))
    harness = Harness(wheelforge_bin, root)
    failed_before = request.session.testsfailed
    crashed: list[str] = []
    try:
        token = harness.token("upload")
        admin = harness.token("admin")
        server = harness.serve()
        art = harness.path("corpus")
        wheels = [
            make_wheel(art, PROJECT, f"{version}+{label}", tag=f"{py}-{py}-linux_x86_64",
                       requires_dist=(f"torch=={series_of(label)}.*",))
            for version, labels in CORPUS.items()
            for label in labels
            for py in PYTHONS
        ]
        wheels.append(make_wheel(art, "wf-purelib", "0.3"))
        wheels.append(make_sdist(art, "wf-sdist-only", "1.0"))
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda w: (w, server.put_file(w, token)), wheels))
        bad = [f"{w.filename}: {r.status} {r.text[:200]}" for w, r in answers if r.status != 201]
        assert not bad, "uploads failed:\n" + "\n".join(bad)
        yank = server.request(
            "POST", "/admin/yank",
            {"Authorization": f"Bearer {admin}",
             "Content-Type": "application/x-www-form-urlencoded"},
            urllib.parse.urlencode({"project": PROJECT, "version": "1.2.0+cu128torch2.9",
                                    "reason": "broken"}).encode(),
        )
        assert yank.status == 200, yank.text

        torch_wheel = stand_in_torch(harness.path("torch"), "2.9.0", cuda="12.8")
        public = [make_sdist(harness.path("public"), PROJECT, v) for v in PUBLIC_SDISTS]
        write_static_index(harness.path("standin"), [torch_wheel, *public])
        standin = harness.static_index(harness.root / "standin")
        yield Bed(harness, server, standin.url + "/simple/", torch_wheel)
    finally:
        crashed = harness.close()
        if request.session.testsfailed == failed_before and not crashed:
            shutil.rmtree(root, ignore_errors=True)
    if crashed:
        pytest.fail(f"{'; '.join(crashed)} (temp dir kept: {root})", pytrace=False)


@pytest.fixture
def bed(request, bed_module) -> Bed:
    request.node.wf_harness = bed_module.harness
    return bed_module


def view_files(server, view: str, project: str = PROJECT) -> list[str]:
    resp = server.get(f"{view}{project}/", {"Accept": JSON_TYPE})
    assert resp.status == 200, f"GET {view}{project}/ -> {resp.status}"
    return [f["filename"] for f in resp.json()["files"]]


def pinned_line(server_url: str, view: str, project: str = PROJECT, version: str = PINNED) -> str:
    return (f"pip install --extra-index-url {server_url}{view} --only-binary {project} "
            f"{project}=={version}")


# ---------------------------------------------------------------------------------------------
# Item 1: what the resolver answers


@pytest.mark.parametrize(
    "query, view, source, version",
    [
        # A torch from PyPI: no label; torch.version.cuda decides.
        ("torch=2.9.0&cuda=12.8", "/cu128/torch2.9/simple/", "cuda", PINNED),
        ("torch=2.9.0&cuda=13.0", "/cu130/torch2.9/simple/", "cuda", PINNED),
        ("torch=2.9.0&cuda=12.8&hip=None&abi=1", "/cu128/torch2.9/cxx11abi1/simple/", "cuda",
         PINNED),
        # cuda= wins over the table (2.11's PyPI wheels are CUDA 13.0).
        ("torch=2.11.0&cuda=13.0", "/cu130/torch2.11/simple/", "cuda", PINNED),
        # The label of a download.pytorch.org build, alone or with agreeing values. Only 1.0.0
        # has a CUDA 12.6 build for torch 2.8.
        ("torch=2.8.0%2Bcu128", "/cu128/torch2.8/simple/", "label", PINNED),
        ("torch=2.8.0%2Bcu126&cuda=12.6&hip=None", "/cu126/torch2.8/simple/", "cuda", "1.0.0"),
        # CPU builds: torch.version.cuda is None (printed "None").
        ("torch=2.9.0%2Bcpu&cuda=None&hip=None", "/cpu/torch2.9/simple/", "label", PINNED),
        ("torch=2.9.0&cuda=None&hip=None", "/cpu/torch2.9/simple/", "none", PINNED),
        ("torch=2.9.0&cuda=&hip=", "/cpu/torch2.9/simple/", "none", PINNED),
    ],
)
def test_resolve_takes_cuda_from_the_value_or_the_label(bed, query, view, source, version):
    resp = bed.resolve(f"{query}&project=WF_Kernels")
    assert resp.status == 200, resp.text
    assert resp.header("Content-Type") == "application/json"
    doc = resp.json()
    assert doc["view"] == view
    assert doc["index_url"] == bed.server.url + view
    assert doc["backend_source"] == source
    assert doc["project"] == PROJECT
    # 1.2.0 is yanked: the newest usable version in the view is pinned.
    assert doc["version"] == version
    assert doc["requirement"] == f"{PROJECT}=={version}"
    assert doc["pip"] == pinned_line(bed.server.url, view, version=version)
    assert doc["uv"] == "uv " + pinned_line(bed.server.url, view, version=version)
    assert doc["notes"] == [] or source == "none", doc["notes"]
    # The view lists the pinned version's build.
    assert any(f.startswith(f"{DIST}-{version}+") for f in view_files(bed.server, view))


def test_cuda_value_keeps_pip_away_from_the_cuda_13_build(bed):
    """What the issue reports: PyPI's torch 2.9.0 is a CUDA 12.8 build; the series-only view
    (what the resolver answered without CUDA) lists the CUDA 13.0 build."""
    assert sorted(view_files(bed.server, "/torch2.9/simple/")) == sorted(
        [kernel_file(f"{v}+cu130torch2.9", py) for v in ("1.0.0", "1.1.0") for py in PYTHONS]
        + [kernel_file("1.2.0+cu128torch2.9", py) for py in PYTHONS])
    doc = bed.resolve(f"torch=2.9.0&cuda=12.8&project={PROJECT}").json()
    files = view_files(bed.server, doc["view"])
    assert kernel_file(f"{PINNED}+cu128torch2.9", "cp311") in files
    assert not [f for f in files if "cu130" in f], files


@pytest.mark.parametrize(
    "torch, view, cuda",
    [
        ("2.9.0", "/cu128/torch2.9/simple/", "12.8"),
        ("2.8.0", "/cu128/torch2.8/simple/", "12.8"),
        ("2.11.0", "/cu130/torch2.11/simple/", "13.0"),
    ],
)
def test_without_cuda_the_pypi_default_is_assumed_and_noted(bed, torch, view, cuda):
    resp = bed.resolve(f"torch={torch}&project={PROJECT}")
    assert resp.status == 200, resp.text
    doc = resp.json()
    assert doc["view"] == view
    assert doc["cuda"] == cuda
    assert doc["backend_source"] == "pypi-default"
    assert len(doc["notes"]) == 1
    note = doc["notes"][0]
    assert f"assumed CUDA {cuda}" in note and "PyPI" in note and "cuda=" in note, note


def test_series_outside_the_table_selects_by_series_with_a_note(bed):
    doc = bed.resolve(f"torch=2.14.0&project={PROJECT}").json()
    assert doc["view"] == "/torch2.14/simple/"
    assert doc["backend"] is None and doc["backend_source"] == "unknown"
    assert "not in wheelforge's table" in doc["notes"][0], doc["notes"]
    assert doc["pip"] == pinned_line(bed.server.url, "/torch2.14/simple/")
    # With the value it is the CUDA view.
    doc = bed.resolve(f"torch=2.14.0&cuda=13.0&project={PROJECT}").json()
    assert doc["view"] == "/cu130/torch2.14/simple/" and doc["notes"] == []


@pytest.mark.parametrize(
    "query, named",
    [
        ("torch=2.8.0%2Bcu128&cuda=12.6", ["cuda=12.6", "2.8.0+cu128"]),
        ("torch=2.8.0%2Bcu128&cuda=None", ["cuda=None", "2.8.0+cu128"]),
        ("torch=2.9.0%2Bcpu&cuda=12.8", ["cuda=12.8", "2.9.0+cpu"]),
        ("torch=2.9.0&cuda=12.8&hip=6.4.43482-0f2d60242", ["cuda=12.8", "hip=6.4.43482"]),
        ("torch=2.9.0&cuda=twelve", ["cuda: 'twelve'"]),
        ("torch=2.9.0&hip=six", ["hip: 'six'"]),
        ("torch=2.9.0&cuda=12.8&abi=maybe", ["abi: 'maybe'"]),
        ("cuda=12.8", ["missing torch="]),
        ("torch=banana", ["torch:"]),
    ],
)
def test_bad_or_contradicting_values_are_400_naming_them(bed, query, named):
    resp = bed.resolve(f"{query}&project={PROJECT}")
    assert resp.status == 400, f"{query}: {resp.status} {resp.text[:300]}"
    assert resp.header("Content-Type") == "application/json"
    message = resp.json()["error"]
    for word in named:
        assert word in message, f"{word!r} not in {message!r}"


def test_unknown_project_is_404(bed):
    resp = bed.resolve("torch=2.9.0&cuda=12.8&project=no-such-project")
    assert resp.status == 404, resp.text
    assert resp.json() == {"error": "no such project: no-such-project"}
    assert resp.header("Location") is None


def test_no_build_is_404_with_the_nearest_builds(bed):
    resp = bed.resolve(f"torch=2.11.0&cuda=12.8&project={PROJECT}")
    assert resp.status == 404, resp.text
    assert resp.header("Content-Type") == "application/json"
    doc = resp.json()
    assert doc["view"] == "/cu128/torch2.11/simple/"
    assert "no build of wf-kernels for cu128/torch2.11" in doc["error"], doc["error"]
    assert "pip" not in doc
    assert view_files(bed.server, doc["view"]) == []
    nearest = [(n["torch"], n["backend"]) for n in doc["nearest"]]
    # Same torch series first (another CUDA major), then other series with CUDA 12.8, nearer
    # series first, then other CUDA 12 minors.
    assert nearest[0] == ("2.11", "cu130"), nearest
    assert nearest[1:4] == [("2.9", "cu128"), ("2.8", "cu128"), ("2.8", "cu126")], nearest
    first = doc["nearest"][0]
    assert first["versions"] == ["1.1.0", "1.0.0"]
    assert first["python"] == list(PYTHONS)
    assert first["view"] == "/cu130/torch2.11/simple/"
    # Yanked builds are not offered.
    assert all("1.2.0" not in n["versions"] for n in doc["nearest"]), doc["nearest"]
    # Every cell offered is a view that lists those builds.
    for cell in doc["nearest"]:
        assert cell["index_url"] == bed.server.url + cell["view"]
        listed = view_files(bed.server, cell["view"])
        for version in cell["versions"]:
            assert any(f.startswith(f"{DIST}-{version}+") for f in listed), (cell, listed)

    # A project without any wheel: 404 and nothing nearer.
    resp = bed.resolve("torch=2.9.0&cuda=12.8&project=wf-sdist-only")
    assert resp.status == 404
    assert resp.json()["nearest"] == []
    assert "has no wheel" in resp.json()["error"]
    # A pure-Python project fits every torch.
    doc = bed.resolve("torch=2.11.0&cuda=12.8&project=wf-purelib").json()
    assert doc["pip"] == pinned_line(bed.server.url, "/cu128/torch2.11/simple/", "wf-purelib",
                                     "0.3")


# ---------------------------------------------------------------------------------------------
# Item 2: the commands pin the version and refuse sdists; real pip installs from them


def documented_resolve_line() -> str:
    lines = [line for line in VIEWS_DOC.read_text().splitlines()
             if line.startswith("curl ") and "/api/resolve?" in line]
    assert len(lines) == 1, f"expected one resolve one-liner in docs/views.md, found {lines}"
    return lines[0]


def python_on_path(tmp_path: Path, python: Path) -> str:
    """A PATH whose `python` is `python` (the one-liners call `python`)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    link = bindir / "python"
    if not link.exists():
        link.symlink_to(python)
    return f"{bindir}:/usr/bin:/bin"


def install_stand_in_torch(bed: Bed, python: Path, target: Path) -> None:
    proc = run([python, "-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir",
                "--disable-pip-version-check", "--target", target, bed.torch_wheel.path],
               timeout=PIP_TIMEOUT)
    assert proc.returncode == 0, proc.stderr


def run_one_liner(line: str, tmp_path: Path, python: Path, torch_dir: Path):
    env = clean_env(PATH=python_on_path(tmp_path, python), PYTHONPATH=str(torch_dir))
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=60,
                          env=env, cwd=tmp_path)


def run_pip_line(bed: Bed, line: str, python: Path, workdir: Path, *extra: str):
    """Runs a printed `pip install ...` line with `python -m pip`, the stand-in PyPI as the
    index, into a fresh target; returns (process, target, report: name -> file name)."""
    words = line.split()
    assert words[:2] == ["pip", "install"], line
    target = workdir / "target"
    report = workdir / "report.json"
    shutil.rmtree(target, ignore_errors=True)
    report.unlink(missing_ok=True)
    proc = run([python, "-m", "pip", "install", *words[2:], *extra, "--target", target,
                "--report", report, "--index-url", bed.standin,
                "--no-cache-dir", "--disable-pip-version-check", "--no-input", "--retries", "0",
                "--timeout", "10"],
               timeout=PIP_TIMEOUT, cwd=workdir)
    chosen = {}
    if report.exists():
        for item in json.loads(report.read_text())["install"]:
            url = item["download_info"]["url"]
            chosen[item["metadata"]["name"]] = urllib.parse.unquote(path_of(url).rsplit("/", 1)[1])
    return proc, target, chosen


@pytest.mark.parametrize("pip_version", list(PIP_PYTHONS))
def test_pip_installs_the_cu128_build_from_the_resolved_url(bed, tmp_path, pip_version):
    """The acceptance test: a torch from PyPI reports 2.9.0 and torch.version.cuda 12.8; the
    one-liner of docs/views.md asks the index, and pip runs the line it answers."""
    python = PIP_PYTHONS[pip_version]
    if not python.exists():
        pytest.skip(f"{python} (pip {pip_version}) is not installed")
    torch_dir = tmp_path / "torch-env"
    install_stand_in_torch(bed, python, torch_dir)
    line = documented_resolve_line().replace("http://127.0.0.1:8080", bed.server.url).replace(
        "project=flash-attn", f"project={PROJECT}")
    asked = run_one_liner(line, tmp_path, python, torch_dir)
    assert asked.returncode == 0, asked.stderr
    doc = json.loads(asked.stdout)
    assert "error" not in doc, doc
    assert doc["torch"] == "2.9.0" and doc["cuda"] == "12.8", doc
    assert doc["view"] == "/cu128/torch2.9/cxx11abi1/simple/"
    assert doc["cxx11_abi"] is True and doc["backend_source"] == "cuda"
    proc, target, chosen = run_pip_line(bed, doc["pip"], python, tmp_path)
    assert proc.returncode == 0, f"pip failed:\n{proc.stdout}\n{proc.stderr}"
    major, minor = python.parent.parent.name.split(".")[:2]  # pyenv's .../3.11.7/bin/python
    py = f"cp{major}{minor}"
    assert chosen["wf-kernels"] == kernel_file(f"{PINNED}+cu128torch2.9", py), chosen
    assert chosen["torch"] == bed.torch_wheel.filename
    check = run([python, "-c", f"import {DIST}, torch; print({DIST}.VALUE, torch.version.cuda)"],
                cwd=tmp_path, env=clean_env(PYTHONPATH=str(target)))
    assert check.returncode == 0, check.stderr
    assert check.stdout.split() == [PROJECT, f"{PINNED}+cu128torch2.9", "12.8"]


def test_only_binary_keeps_pip_from_building_a_public_sdist(bed, tmp_path):
    """On a Python the index has no wheel for, the printed line fails at once; without
    `--only-binary` and the pin pip takes the public sdist of PyPI and tries to build it."""
    python = PYTHON_WITHOUT_WHEEL
    if not python.exists():
        pytest.skip(f"{python} is not installed")
    line = bed.resolve(f"torch=2.9.0&cuda=12.8&project={PROJECT}").json()["pip"]
    proc, target, chosen = run_pip_line(bed, line, python, tmp_path, "--no-deps")
    assert proc.returncode != 0, proc.stdout
    assert f"No matching distribution found for {PROJECT}=={PINNED}" in proc.stderr, proc.stderr
    assert "Building wheel" not in proc.stdout + proc.stderr
    assert not target.exists() or list(target.iterdir()) == []
    # What the resolver printed before: no pin, no --only-binary.
    unpinned = f"pip install --extra-index-url {bed.server.url}/cu128/torch2.9/simple/ {PROJECT}"
    proc, _, _ = run_pip_line(bed, unpinned, python, tmp_path, "--no-deps")
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"{DIST}-9.0.0.tar.gz" in text or "wf-kernels-9.0.0" in text.lower(), text
    assert re.search(r"(build dependencies|build wheel|metadata|backend)", text, re.I), text


def test_poetry_1_3_installs_from_the_commands_of_the_home_page(bed, tmp_path):
    """The home page's Poetry commands for Poetry before 1.5, run by Debian's Poetry 1.3 with
    the view URL of the resolver's answer; the stand-in PyPI is Poetry's default source."""
    if not POETRY.exists():
        pytest.skip(f"{POETRY} is not installed (Debian package python3-poetry)")
    version = run([POETRY, "--version"]).stdout
    if "1.3." not in version:
        pytest.skip(f"this test runs the Poetry 1.3 commands; found {version.strip()}")
    home = html.unescape(bed.server.get("/").text)
    block = re.search(r"<code>(poetry source add --secondary [^<]*)</code>", home)
    assert block, "no Poetry 1.3 commands on the home page"
    commands = block.group(1).splitlines()
    assert [c.split()[:3] for c in commands] == [["poetry", "source", "add"],
                                                 ["poetry", "add", "--source"]]
    assert "--only-binary" not in block.group(1)
    doc = bed.resolve(f"torch=2.9.0&cuda=12.8&project={PROJECT}").json()

    project = tmp_path / "consumer"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.poetry]\nname = "wf-consumer"\nversion = "0.1.0"\ndescription = ""\n'
        'authors = ["Wheelforge Tests <tests@example.invalid>"]\n\n'
        '[tool.poetry.dependencies]\npython = ">=3.9,<3.14"\n'
    )
    state = tmp_path / "poetry-state"
    env = clean_env(
        HOME=str(tmp_path / "home"), POETRY_CONFIG_DIR=str(state / "config"),
        POETRY_CACHE_DIR=str(state / "cache"), POETRY_VIRTUALENVS_IN_PROJECT="true",
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring", NO_COLOR="1", COLUMNS="1000",
    )

    def poetry(*args: str):
        return run([POETRY, "--no-interaction", *args], timeout=300, cwd=project, env=env)

    added = poetry("source", "add", "--default", "standin", bed.standin)
    assert added.returncode == 0, added.stdout + added.stderr
    for command in commands:
        words = command.replace(f"{bed.server.url}/simple/", doc["index_url"]).replace(
            "PROJECT==VERSION", doc["requirement"]).split()
        done = poetry(*words[1:])
        assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    lock = (project / "poetry.lock").read_text()
    files = re.findall(r'file = "([^"]+)"', lock)
    kernels = sorted(f for f in files if f.startswith(DIST))
    assert kernels == sorted(kernel_file(f"{PINNED}+cu128torch2.9", py) for py in PYTHONS), lock
    assert "torch-2.9.0-py3-none-any.whl" in files
    installed = run([project / ".venv" / "bin" / "python", "-c",
                     f"import {DIST}; print({DIST}.VALUE)"], cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout.split() == [PROJECT, f"{PINNED}+cu128torch2.9"]


# ---------------------------------------------------------------------------------------------
# The web UI's commands (item 2) and the project page's default command and hint (item 3)


def code_blocks(page: str) -> list[str]:
    return [html.unescape(c) for c in re.findall(r"<code[^>]*>(.*?)</code>", page, re.S)]


def test_home_page_commands_are_pinned_and_pass_torch_version_cuda(bed, tmp_path):
    home = bed.server.get("/").text
    blocks = code_blocks(home)
    installs = [b for b in blocks if b.startswith(("pip install", "uv pip install"))]
    assert installs, blocks
    for command in installs:
        assert command.endswith("--only-binary PROJECT PROJECT==VERSION"), command
    resolve = [b for b in blocks if b.startswith("curl ") and "/api/resolve?" in b]
    assert len(resolve) == 1, blocks
    assert "cuda=torch.version.cuda" in resolve[0] and "hip=torch.version.hip" in resolve[0]
    python = PIP_PYTHONS["23.2.1"]
    if not python.exists():
        pytest.skip(f"{python} is not installed")
    torch_dir = tmp_path / "torch-env"
    install_stand_in_torch(bed, python, torch_dir)
    asked = run_one_liner(resolve[0].replace("project=PROJECT", f"project={PROJECT}"), tmp_path,
                          python, torch_dir)
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["pip"] == pinned_line(bed.server.url,
                                                          "/cu128/torch2.9/cxx11abi1/simple/")


def test_project_page_shows_a_default_command_and_how_to_find_your_torch(bed, tmp_path):
    page = bed.server.get(f"/project/{PROJECT}/")
    assert page.status == 200
    text = page.text
    default = re.search(r'<code id="default-command">(.*?)</code>', text, re.S)
    assert default, "no default command before anything is chosen"
    command = html.unescape(default.group(1))
    # The newest version (1.2.0 is all yanked, so 1.1.0 is shown) for the newest torch series
    # whose PyPI CUDA has a build: 2.14 is not in the table, 2.11's CUDA 13.0 is built.
    assert command == pinned_line(bed.server.url, "/cu130/torch2.11/simple/"), command
    assert f"{PROJECT} {PINNED} built for PyTorch 2.11 from PyPI (CUDA 13.0)" in html.unescape(text)
    hint = re.search(r'<code id="torch-check">(.*?)</code>', text, re.S)
    assert hint and html.unescape(hint.group(1)) == (
        'python -c "import torch; print(torch.__version__, torch.version.cuda)"')
    resolve = re.search(r'<code id="resolve-command">(.*?)</code>', text, re.S)
    assert resolve and f"/api/resolve?project={PROJECT}&" in html.unescape(resolve.group(1))
    # The picker's own command, once chosen, is pinned the same way.
    chosen = bed.server.get(f"/project/{PROJECT}/?torch=2.9&backend=cu128&python=3.11").text
    picked = re.search(r'<code id="pip-command">(.*?)</code>', chosen, re.S)
    assert picked and html.unescape(picked.group(1)) == "python3.11 -m " + pinned_line(
        bed.server.url, "/cu128/torch2.9/simple/")
    assert "12.8 (cu128)" in chosen, "the CUDA menu speaks torch.version.cuda"
    # The default command installs with a real pip (the cp311 build for torch 2.11, CUDA 13.0).
    python = PIP_PYTHONS["23.2.1"]
    if not python.exists():
        pytest.skip(f"{python} is not installed")
    proc, _, chosen_files = run_pip_line(bed, command, python, tmp_path, "--no-deps")
    assert proc.returncode == 0, proc.stderr
    assert chosen_files == {"wf-kernels": kernel_file(f"{PINNED}+cu130torch2.11", "cp311")}
