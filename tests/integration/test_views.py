"""Variant views end to end (docs/views.md): a corpus of one extension project built for several
versions × CUDA 12.6/12.8/12.9/13.0 × torch 2.6–2.11 × cp310–cp313, in both label styles
(`+cu128torch2.8` and `+cu12torch2.7cxx11abiTRUE`), uploaded through PUT /upload/. Real pip
installs through a view must take exactly the build the selection rules call for, where the
flat /simple/ index makes pip take the lexically highest label. Also: view pages (negotiation,
ETag, gzip, root page), invalid selectors, the variants and resolve APIs, a label that
contradicts its torch pin, and new uploads showing up in the right views without a restart.

Every expected file below is reasoned from the rules by hand, not computed."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import Harness
from wfhelpers import (
    JSON_TYPE,
    PIP_ACCEPT,
    PIP_PYTHONS,
    clean_env,
    gunzip,
    make_wheel,
    normalize,
    parse_html,
    path_of,
    pip_args,
    run,
    write_static_index,
)

PROJECT = "wf-kernels"
DIST = "wf_kernels"
PYTHONS = ("cp310", "cp311", "cp312", "cp313")
PIP_VERSION = "23.2.1"  # on pyenv 3.11.7: the install checks use the cp311 files
PIP_TIMEOUT = 120

# Label styles as real projects ship them: torch 2.6/2.7 only as major-only CUDA builds for both
# C++ ABIs (`+cu12torch2.7cxx11abiTRUE`), newer series per CUDA minor (`+cu128torch2.8`).
T26 = ("cu12torch2.6cxx11abiFALSE", "cu12torch2.6cxx11abiTRUE")
T27 = ("cu12torch2.7cxx11abiFALSE", "cu12torch2.7cxx11abiTRUE")
T28 = ("cu126torch2.8", "cu128torch2.8")
T29 = ("cu128torch2.9", "cu130torch2.9")
T210 = ("cu126torch2.10", "cu128torch2.10", "cu130torch2.10")
T211 = ("cu126torch2.11", "cu128torch2.11", "cu130torch2.11")
# 1.2.0 dropped torch 2.6 and added a CUDA 12.9 build for torch 2.8 (the only 12.9 build).
CORPUS = {
    "1.0.0": T26 + T27 + T28 + T29,
    "1.1.0": T26 + T27 + T28 + T29 + T210 + T211,
    "1.2.0": T27 + T28 + ("cu129torch2.8",) + T29 + T210 + T211,
}
CORPUS_SIZE = sum(len(labels) for labels in CORPUS.values()) * len(PYTHONS)
TORCH_STUBS = ("2.6.0", "2.7.0", "2.8.0", "2.9.0", "2.10.0", "2.11.0")


def series_of(label: str) -> str:
    return re.search(r"torch(\d+\.\d+)", label).group(1)


def kernel_file(version_label: str, python: str = "cp311") -> str:
    """`1.2.0+cu128torch2.8` → the wheel's file name for `python` on linux_x86_64."""
    return f"{DIST}-{version_label}-{python}-{python}-linux_x86_64.whl"


# ---------------------------------------------------------------------------------------------
# One server with the whole corpus, shared by the read-only tests of this module.


class Corpus:
    def __init__(self, harness: Harness, server, standin_url: str, upload_token: str):
        self.harness = harness
        self.server = server
        self.standin = standin_url  # a stand-in PyPI holding only torch stubs
        self.upload_token = upload_token


def upload_all(server, token: str, wheels) -> None:
    """PUT every wheel, four at a time; each must be stored (201)."""
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda w: (w, server.put_file(w, token)), wheels))
    bad = [f"{w.filename}: {r.status} {r.text[:200]}" for w, r in answers if r.status != 201]
    assert not bad, "uploads failed:\n" + "\n".join(bad)


@pytest.fixture(scope="module")
def corpus_module(request, wheelforge_bin):
    root = Path(tempfile.mkdtemp(prefix="wf-it-views-"))
    harness = Harness(wheelforge_bin, root)
    failed_before = request.session.testsfailed
    crashed: list[str] = []
    try:
        token = harness.token("upload")
        server = harness.serve()
        art = harness.path("corpus")
        wheels = [
            make_wheel(
                art,
                PROJECT,
                f"{version}+{label}",
                tag=f"{py}-{py}-linux_x86_64",
                requires_python=">=3.10",
                requires_dist=(f"torch=={series_of(label)}.*",),
            )
            for version, labels in CORPUS.items()
            for label in labels
            for py in PYTHONS
        ]
        # A generic pure-Python project (in every view) and a CPU-only one whose torch series
        # comes from its Requires-Dist pin alone (label `+cpu`).
        wheels.append(make_wheel(art, "wf-purelib", "0.3"))
        wheels.append(
            make_wheel(art, "wf-cpu-ops", "0.5.0+cpu", tag="cp311-cp311-linux_x86_64",
                       requires_dist=("torch==2.8.*",))
        )
        assert len(wheels) == CORPUS_SIZE + 2
        upload_all(server, token, wheels)

        stubs = [make_wheel(harness.path("stubs"), "torch", v) for v in TORCH_STUBS]
        write_static_index(harness.path("standin"), stubs)
        standin = harness.static_index(harness.root / "standin")
        yield Corpus(harness, server, standin.url + "/simple/", token)
    finally:
        crashed = harness.close()
        if request.session.testsfailed == failed_before and not crashed:
            shutil.rmtree(root, ignore_errors=True)
    if crashed:
        pytest.fail(f"{'; '.join(crashed)} (temp dir kept: {root})", pytrace=False)


@pytest.fixture
def corpus(request, corpus_module) -> Corpus:
    # Lets conftest's report hook show the shared server's log when a test fails.
    request.node.wf_harness = corpus_module.harness
    return corpus_module


def view_files(server, view: str, project: str = PROJECT) -> list[str]:
    """File names listed on `view`'s project page (JSON), in page order."""
    resp = server.get(f"{view}{project}/", {"Accept": JSON_TYPE})
    assert resp.status == 200, f"GET {view}{project}/ -> {resp.status}: {resp.text[:300]}"
    assert resp.header("Content-Type") == JSON_TYPE
    return [f["filename"] for f in resp.json()["files"]]


def view_projects(server, view: str) -> set[str]:
    resp = server.get(view, {"Accept": JSON_TYPE})
    assert resp.status == 200, f"GET {view} -> {resp.status}: {resp.text[:300]}"
    return {normalize(p["name"]) for p in resp.json()["projects"]}


# ---------------------------------------------------------------------------------------------
# What each view lists: one build per (version, python, abi, platform), for every python tag.

# view -> {public version: the label the rules select, for all four python tags}; versions not
# named have no compatible build in the view.
VIEW_LISTINGS = {
    # Exact CUDA minor.
    "/cu128/torch2.8/simple/": {v: "cu128torch2.8" for v in CORPUS},
    "/cu126/torch2.8/simple/": {v: "cu126torch2.8" for v in CORPUS},
    # No 12.9 build before 1.2.0: the highest lower minor (12.8), never 12.6.
    "/cu129/torch2.8/simple/": {
        "1.0.0": "cu128torch2.8", "1.1.0": "cu128torch2.8", "1.2.0": "cu129torch2.8"},
    "/cu129/torch2.9/simple/": {v: "cu128torch2.9" for v in CORPUS},
    # Major-only view: the major-only build, else the lowest minor (safest for any 12.x).
    "/cu12/torch2.8/simple/": {v: "cu126torch2.8" for v in CORPUS},
    # torch 2.9 exists for 12.8 and 13.0 only: a 12.6 view may not take 12.8, 13.0 is another
    # major, and 12.x builds are not for a 13.0 view.
    "/cu126/torch2.9/simple/": {},
    "/cu130/torch2.9/simple/": {v: "cu130torch2.9" for v in CORPUS},
    "/cu130/torch2.8/simple/": {},
    "/cpu/torch2.8/simple/": {},
    # Only major-only builds: the series' default ABI (TRUE from 2.7, FALSE up to 2.6) unless
    # the view names one. Segments in any order.
    "/cu128/torch2.7/simple/": {v: "cu12torch2.7cxx11abiTRUE" for v in CORPUS},
    "/cu128/torch2.7/cxx11abi0/simple/": {v: "cu12torch2.7cxx11abiFALSE" for v in CORPUS},
    "/cu126/torch2.6/simple/": {
        "1.0.0": "cu12torch2.6cxx11abiFALSE", "1.1.0": "cu12torch2.6cxx11abiFALSE"},
    "/torch2.6/cxx11abi1/cu126/simple/": {
        "1.0.0": "cu12torch2.6cxx11abiTRUE", "1.1.0": "cu12torch2.6cxx11abiTRUE"},
    # Other torch series are never listed, whatever their labels sort like.
    "/cu128/torch2.11/simple/": {"1.1.0": "cu128torch2.11", "1.2.0": "cu128torch2.11"},
    "/cu130/torch2.11/simple/": {"1.1.0": "cu130torch2.11", "1.2.0": "cu130torch2.11"},
    "/cu126/torch2.10/simple/": {"1.1.0": "cu126torch2.10", "1.2.0": "cu126torch2.10"},
    # No backend named: CUDA, newest first.
    "/torch2.10/simple/": {"1.1.0": "cu130torch2.10", "1.2.0": "cu130torch2.10"},
    # No torch named: the highest series with an eligible build (≤ 12.8 or major-only 12).
    "/cu128/simple/": {
        "1.0.0": "cu128torch2.9", "1.1.0": "cu128torch2.11", "1.2.0": "cu128torch2.11"},
}


@pytest.mark.parametrize("view", list(VIEW_LISTINGS))
def test_view_lists_one_best_build_per_group(corpus, view):
    expected = sorted(
        kernel_file(f"{version}+{label}", py)
        for version, label in VIEW_LISTINGS[view].items()
        for py in PYTHONS
    )
    assert sorted(view_files(corpus.server, view)) == expected
    # The HTML page lists the same files.
    page = parse_html(corpus.server.get(f"{view}{PROJECT}/", {"Accept": "text/html"}).text)
    assert sorted(a["#text"].strip() for a in page.anchors) == expected


def test_simple_stays_complete(corpus):
    files = view_files(corpus.server, "/simple/")
    assert len(files) == CORPUS_SIZE == len(set(files))


def test_view_root_lists_only_projects_with_something(corpus):
    server = corpus.server
    assert view_projects(server, "/simple/") == {PROJECT, "wf-purelib", "wf-cpu-ops"}
    assert view_projects(server, "/cu128/torch2.8/simple/") == {PROJECT, "wf-purelib"}
    assert view_projects(server, "/cpu/torch2.8/simple/") == {"wf-cpu-ops", "wf-purelib"}
    assert view_projects(server, "/cpu/torch2.9/simple/") == {"wf-purelib"}
    assert view_projects(server, "/cu126/torch2.9/simple/") == {"wf-purelib"}
    # HTML root links stay inside the view.
    page = parse_html(server.get("/cu128/torch2.8/simple/", {"Accept": "text/html"}).text)
    hrefs = {path_of(urllib.parse.urljoin("/cu128/torch2.8/simple/", a["href"]))
             for a in page.anchors}
    assert hrefs == {f"/cu128/torch2.8/simple/{PROJECT}/", "/cu128/torch2.8/simple/wf-purelib/"}


def test_view_project_pages(corpus):
    server = corpus.server
    # Generic wheels are listed as in /simple/.
    assert view_files(server, "/cu130/torch2.11/simple/", "wf-purelib") == [
        "wf_purelib-0.3-py3-none-any.whl"]
    # The pin-only torch series of `+cpu` selects too.
    assert view_files(server, "/cpu/torch2.8/simple/", "wf-cpu-ops") == [
        "wf_cpu_ops-0.5.0+cpu-cp311-cp311-linux_x86_64.whl"]
    # An existing project with nothing in the view: an empty page, not a 404.
    assert view_files(server, "/cpu/torch2.9/simple/", "wf-cpu-ops") == []
    empty = server.get("/cu128/torch2.8/simple/wf-cpu-ops/", {"Accept": "text/html"})
    assert empty.status == 200 and parse_html(empty.text).anchors == []
    # Unknown projects are still 404; non-normalized names redirect inside the view.
    assert server.get("/cu128/torch2.8/simple/no-such-project/").status == 404
    moved = server.get("/cu128/torch2.8/simple/WF_Kernels/")
    assert moved.status == 301
    assert path_of(moved.header("Location")) == f"/cu128/torch2.8/simple/{PROJECT}/"


def test_view_page_negotiation_etag_and_gzip(corpus):
    server = corpus.server
    view = "/cu129/torch2.8/simple/"
    target = f"{view}{PROJECT}/"
    js = server.get(target, {"Accept": PIP_ACCEPT})
    assert js.status == 200 and js.header("Content-Type") == JSON_TYPE
    assert "accept" in (js.header("Vary") or "").lower()
    html = server.get(target, {"Accept": "text/html"})
    assert html.status == 200 and html.header("Content-Type").startswith("text/html")
    # The same file URLs, hashes and metadata as /simple/.
    flat = {f["filename"]: f for f in server.project_json(PROJECT)["files"]}
    for entry in js.json()["files"]:
        assert entry == flat[entry["filename"]]
    anchors = parse_html(html.text).anchors
    assert len(anchors) == 12
    for a in anchors:
        name = a["#text"].strip()
        assert path_of(a["href"]) == path_of(flat[name]["url"])
        assert a["href"].endswith(f"#sha256={flat[name]['hashes']['sha256']}")

    # Cached like other pages: ETag per representation, 304 on revalidation.
    html_etag, json_etag = html.header("ETag"), js.header("ETag")
    assert html_etag and json_etag and html_etag != json_etag
    again = server.get(target, {"Accept": "text/html", "If-None-Match": html_etag})
    assert again.status == 304 and again.body == b""
    again = server.get(target, {"Accept": PIP_ACCEPT, "If-None-Match": json_etag})
    assert again.status == 304 and again.body == b""
    assert server.get(target, {"Accept": PIP_ACCEPT, "If-None-Match": html_etag}).status == 200
    # Another view of the same project is another page.
    other = server.get(f"/cu128/torch2.8/simple/{PROJECT}/", {"Accept": "text/html"})
    assert other.header("ETag") != html_etag
    assert server.get(
        f"/cu128/torch2.8/simple/{PROJECT}/", {"If-None-Match": html_etag}).status == 200
    root_etag = server.get(view).header("ETag")
    assert root_etag and server.get(view, {"If-None-Match": root_etag}).status == 304

    for headers in ({"Accept": "text/html"}, {"Accept": PIP_ACCEPT}):
        plain = server.get(target, {**headers, "Accept-Encoding": "identity"})
        packed = server.get(target, {**headers, "Accept-Encoding": "gzip"})
        assert packed.status == 200 and packed.header("Content-Encoding") == "gzip"
        assert packed.header("Content-Type") == plain.header("Content-Type")
        assert gunzip(packed.body) == plain.body
        assert int(packed.header("Content-Length")) == len(packed.body)


@pytest.mark.parametrize(
    "path, named",
    [
        ("/cu128/bogus/simple/", ["'bogus'"]),
        (f"/cu128/torch2.8/bogus/simple/{PROJECT}/", ["'bogus'"]),
        ("/cu128/cpu/simple/", ["'cpu'", "'cu128'"]),
        ("/torch2.8/torch2.9/simple/", ["'torch2.9'", "'torch2.8'"]),
        (f"/cu128/cxx11abiTRUE/simple/{PROJECT}/", ["'cxx11abiTRUE'"]),
        ("/CU128/simple/", ["'CU128'"]),
        ("/rocm6/simple/", ["'rocm6'"]),
    ],
)
def test_invalid_view_segments(corpus, path, named):
    resp = corpus.server.get(path)
    assert resp.status == 404, f"{path}: {resp.status} {resp.text[:300]}"
    for word in named:
        assert word in resp.text, f"{path}: {word} not named in {resp.text!r}"
    for form in ("cuXY", "cpu", "rocmX.Y", "torchX.Y", "cxx11abi0", "cxx11abi1"):
        assert form in resp.text, f"{path}: valid form {form} not listed in {resp.text!r}"


# ---------------------------------------------------------------------------------------------
# pip


@pytest.fixture(scope="module")
def pip_python():
    python = PIP_PYTHONS[PIP_VERSION]
    if not python.exists():
        pytest.skip(f"{python} (pip {PIP_VERSION}) is not installed")
    return python


def pip_install(corpus, python, view: str, requirement: str, workdir: Path, *, target=None):
    """`pip install --extra-index-url <server><view> REQUIREMENT` with the stand-in PyPI as the
    index: a dry run with a report, or a real install into `target`. Returns (process, report:
    {normalized name: (file name, URL)})."""
    report_path = workdir / "report.json"
    report_path.unlink(missing_ok=True)
    mode = ["--target", target] if target else ["--dry-run", "--ignore-installed"]
    proc = run(
        [python, "-m", "pip", "install", *mode, "--only-binary", ":all:", "--report",
         report_path, *pip_args(corpus.standin, corpus.server.url + view), requirement],
        timeout=PIP_TIMEOUT,
        cwd=workdir,
    )
    chosen = {}
    if report_path.exists():
        for item in json.loads(report_path.read_text())["install"]:
            url = item["download_info"]["url"]
            name = urllib.parse.unquote(path_of(url).rsplit("/", 1)[1])
            chosen[normalize(item["metadata"]["name"])] = (name, url)
    return proc, chosen


# (view, requirement, the file pip must take for cp311, the torch pin it brings along)
PIP_CASES = [
    pytest.param("/cu128/torch2.8/simple/", PROJECT, "1.2.0+cu128torch2.8", "2.8.0",
                 id="exact-cu128-torch2.8"),
    pytest.param("/cu129/torch2.8/simple/", PROJECT, "1.2.0+cu129torch2.8", "2.8.0",
                 id="exact-cu129-torch2.8"),
    pytest.param("/cu129/torch2.8/simple/", f"{PROJECT}==1.1.0", "1.1.0+cu128torch2.8", "2.8.0",
                 id="pinned-lower-minor-fallback"),
    pytest.param("/cu129/torch2.9/simple/", PROJECT, "1.2.0+cu128torch2.9", "2.9.0",
                 id="lower-minor-fallback"),
    pytest.param("/cu128/torch2.7/simple/", PROJECT, "1.2.0+cu12torch2.7cxx11abiTRUE", "2.7.0",
                 id="major-only-default-abi-true"),
    pytest.param("/cu128/torch2.7/cxx11abi0/simple/", PROJECT, "1.2.0+cu12torch2.7cxx11abiFALSE",
                 "2.7.0", id="abi-view-0"),
    pytest.param("/cu126/torch2.6/simple/", PROJECT, "1.1.0+cu12torch2.6cxx11abiFALSE", "2.6.0",
                 id="newest-version-lacks-series-default-abi-false"),
    pytest.param("/torch2.6/cxx11abi1/cu126/simple/", PROJECT, "1.1.0+cu12torch2.6cxx11abiTRUE",
                 "2.6.0", id="abi-view-1-any-order"),
    pytest.param("/cu128/torch2.11/simple/", PROJECT, "1.2.0+cu128torch2.11", "2.11.0",
                 id="torch2.11-only"),
    pytest.param("/cu126/torch2.10/simple/", f"{PROJECT}==1.1.0", "1.1.0+cu126torch2.10",
                 "2.10.0", id="pinned-old-version"),
    pytest.param("/cu128/torch2.8/simple/", f"{PROJECT}==1.0.0", "1.0.0+cu128torch2.8", "2.8.0",
                 id="pinned-oldest-version"),
    # The flat index: pip orders equal public versions by local label, lexically per segment,
    # so `cu130torch2` beats `cu12…`/`cu128…`, and 11 > 10 > 9 numerically.
    pytest.param("/simple/", PROJECT, "1.2.0+cu130torch2.11", "2.11.0", id="flat-simple"),
    pytest.param("/simple/", f"{PROJECT}==1.0.0", "1.0.0+cu130torch2.9", "2.9.0",
                 id="flat-simple-pinned"),
]


@pytest.mark.parametrize("view, requirement, expected, torch", PIP_CASES)
def test_pip_takes_the_expected_build(corpus, pip_python, tmp_path, view, requirement,
                                      expected, torch):
    proc, chosen = pip_install(corpus, pip_python, view, requirement, tmp_path)
    assert proc.returncode == 0, f"pip failed:\n{proc.stdout}\n{proc.stderr}"
    assert PROJECT in chosen, f"pip report has no {PROJECT}: {chosen}"
    name, url = chosen[PROJECT]
    assert name == kernel_file(expected), f"pip took {name} from {view}"
    assert url.startswith(corpus.server.url + "/files/"), url
    assert chosen["torch"][0] == f"torch-{torch}-py3-none-any.whl"
    assert chosen["torch"][1].startswith(corpus.standin.rsplit("/simple/", 1)[0])


def test_views_change_what_pip_installs(corpus, pip_python, tmp_path):
    """The same unpinned install: from /simple/ pip takes the build for torch 2.11 and CUDA 13
    (and would bring torch 2.11 along); from the view it takes the one for the user's torch."""
    _, flat = pip_install(corpus, pip_python, "/simple/", PROJECT, tmp_path)
    _, view = pip_install(corpus, pip_python, "/cu128/torch2.8/simple/", PROJECT, tmp_path)
    assert flat[PROJECT][0] == kernel_file("1.2.0+cu130torch2.11")
    assert flat["torch"][0] == "torch-2.11.0-py3-none-any.whl"
    assert view[PROJECT][0] == kernel_file("1.2.0+cu128torch2.8")
    assert view["torch"][0] == "torch-2.8.0-py3-none-any.whl"


@pytest.mark.parametrize(
    "view",
    ["/cu126/torch2.9/simple/", "/cu130/torch2.8/simple/", "/cpu/torch2.8/simple/"],
    ids=["never-higher-minor", "other-cuda-major", "no-cpu-build"],
)
def test_pip_fails_cleanly_without_a_compatible_build(corpus, pip_python, tmp_path, view):
    assert view_files(corpus.server, view) == []
    target = tmp_path / "target"
    target.mkdir()
    proc, chosen = pip_install(corpus, pip_python, view, PROJECT, tmp_path, target=target)
    assert proc.returncode != 0, f"pip succeeded from {view}:\n{proc.stdout}\n{chosen}"
    assert re.search(rf"No matching distribution found for {PROJECT}", proc.stderr), proc.stderr
    assert PROJECT not in chosen
    assert list(target.iterdir()) == [], "a failed install left files behind"


@pytest.mark.parametrize(
    "view, requirement, expected, torch",
    [
        ("/cu129/torch2.8/simple/", f"{PROJECT}==1.1.0", "1.1.0+cu128torch2.8", "2.8.0"),
        ("/cu128/torch2.7/simple/", PROJECT, "1.2.0+cu12torch2.7cxx11abiTRUE", "2.7.0"),
        ("/simple/", PROJECT, "1.2.0+cu130torch2.11", "2.11.0"),
    ],
    ids=["lower-minor-fallback", "major-only", "flat-simple"],
)
def test_real_install_imports_the_expected_build(corpus, pip_python, tmp_path, view,
                                                 requirement, expected, torch):
    target = tmp_path / "target"
    proc, chosen = pip_install(corpus, pip_python, view, requirement, tmp_path, target=target)
    assert proc.returncode == 0, f"pip failed:\n{proc.stdout}\n{proc.stderr}"
    assert chosen[PROJECT][0] == kernel_file(expected)
    check = run(
        [pip_python, "-c",
         f"import {DIST}, torch; print({DIST}.VALUE); print({DIST}.__file__); "
         "print(torch.__version__)"],
        cwd=tmp_path,
        env=clean_env(PYTHONPATH=str(target)),
    )
    assert check.returncode == 0, check.stderr
    value, location, torch_version = check.stdout.splitlines()
    assert value == f"{PROJECT} {expected}"
    assert location.startswith(str(target))
    assert torch_version == torch


# ---------------------------------------------------------------------------------------------
# API


def test_api_variants(corpus):
    server = corpus.server
    resp = server.get(f"/api/projects/{PROJECT}/variants")
    assert resp.status == 200, resp.text[:300]
    assert resp.header("Content-Type").startswith("application/json")
    doc = resp.json()
    assert [v["version"] for v in sorted(doc["versions"], key=lambda v: v["version"])] == list(
        CORPUS)
    files = {f["filename"]: f for v in doc["versions"] for f in v["files"]}
    assert len(files) == CORPUS_SIZE
    for v in doc["versions"]:
        for f in v["files"]:
            assert f["filename"].startswith(f"{DIST}-{v['version']}+")

    old_abi = files[kernel_file("1.2.0+cu12torch2.7cxx11abiTRUE", "cp313")]
    assert old_abi["python"] == ["cp313"] and old_abi["abi"] == "cp313"
    assert old_abi["platform"] == ["linux_x86_64"]
    assert (old_abi["backend"], old_abi["cuda"], old_abi["torch"], old_abi["cxx11_abi"]) == (
        "cuda", "12", "2.7", True)
    assert old_abi["variant"] == "cu12 torch2.7 cxx11abi1"
    new = files[kernel_file("1.2.0+cu129torch2.8", "cp310")]
    assert (new["python"], new["abi"], new["platform"]) == (["cp310"], "cp310", ["linux_x86_64"])
    assert (new["backend"], new["cuda"], new["torch"], new["cxx11_abi"]) == (
        "cuda", "12.9", "2.8", None)
    assert new["variant"] == "cu129 torch2.8"
    abi_false = files[kernel_file("1.0.0+cu12torch2.6cxx11abiFALSE")]
    assert (abi_false["torch"], abi_false["cxx11_abi"]) == ("2.6", False)

    assert doc["axes"]["torch"] == ["2.6", "2.7", "2.8", "2.9", "2.10", "2.11"]
    assert doc["axes"]["backend"] == ["cu12", "cu126", "cu128", "cu129", "cu130"]
    assert doc["axes"]["python"] == list(PYTHONS)
    cells = {(c["version"], c["torch"], c["backend"]): c["python"] for c in doc["matrix"]}
    expected_cells = {
        (version, series_of(label), re.match(r"cu\d+", label).group(0))
        for version, labels in CORPUS.items()
        for label in labels
    }
    assert set(cells) == expected_cells
    assert all(pythons == list(PYTHONS) for pythons in cells.values())

    etag = resp.header("ETag")
    assert etag
    assert server.get(f"/api/projects/{PROJECT}/variants", {"If-None-Match": etag}).status == 304
    assert server.get("/api/projects/no-such-project/variants").status == 404


@pytest.mark.parametrize(
    "query, project, view, version",
    [
        ("torch=2.8.0%2Bcu128", PROJECT, "/cu128/torch2.8/simple/", "1.2.0"),
        ("torch=2.8.0%2Bcu128&abi=1", PROJECT, "/cu128/torch2.8/cxx11abi1/simple/", "1.2.0"),
        ("torch=2.9.1%2Bcu130", PROJECT, "/cu130/torch2.9/simple/", "1.2.0"),
        # 1.2.0 dropped torch 2.6: the newest version in the view is pinned.
        ("torch=2.6.0%2Bcu126&abi=0", PROJECT, "/cu126/torch2.6/cxx11abi0/simple/", "1.1.0"),
        ("torch=2.8.0%2Bcpu", "wf-cpu-ops", "/cpu/torch2.8/simple/", "0.5.0"),
        # A PyPI torch: no label, torch.version.cuda says which CUDA.
        ("torch=2.9.0&cuda=12.9", PROJECT, "/cu129/torch2.9/simple/", "1.2.0"),
    ],
)
def test_api_resolve(corpus, query, project, view, version):
    server = corpus.server
    resp = server.get(f"/api/resolve?{query}&project={project.upper().replace('-', '_')}")
    assert resp.status == 200, resp.text[:300]
    doc = resp.json()
    assert doc["view"] == view
    assert doc["index_url"] == server.url + view
    assert doc["version"] == version
    assert doc["pip"] == (f"pip install --extra-index-url {server.url}{view} "
                          f"--only-binary {project} {project}=={version}")
    # The resolved view is a working view that lists the pinned version.
    assert any(f"-{version}+" in name for name in view_files(server, view, project))


def test_api_resolve_without_backend_and_errors(corpus):
    server = corpus.server
    # No label and no cuda=: the CUDA of PyTorch 2.8's PyPI wheels (12.8), said in a note.
    doc = server.get("/api/resolve?torch=2.8.0").json()
    assert doc["view"] == "/cu128/torch2.8/simple/"
    assert doc["backend_source"] == "pypi-default"
    assert doc["notes"] and "assumed CUDA 12.8" in doc["notes"][0], doc["notes"]
    assert view_files(server, "/cu128/torch2.8/simple/") == sorted(
        kernel_file(f"{v}+cu128torch2.8", py) for v in CORPUS for py in PYTHONS
    )
    for query in ("torch=banana", "", "torch=2.8.0%2Bcu128&abi=maybe"):
        bad = server.get(f"/api/resolve?{query}")
        assert bad.status == 400, f"{query!r}: {bad.status} {bad.text[:200]}"
    # No build of the project in the view: 404 with the nearest builds.
    missing = server.get(f"/api/resolve?torch=2.9.0&cuda=12.6&project={PROJECT}")
    assert missing.status == 404, missing.text[:300]
    assert missing.json()["nearest"][0]["view"] == "/cu128/torch2.9/simple/"


# ---------------------------------------------------------------------------------------------
# Uploads


@pytest.mark.parametrize(
    "label, pin, named",
    [
        ("cu128torch2.8", "torch==2.9.*", ["cu128torch2.8", "torch==2.9.*"]),
        ("cu12torch2.7cxx11abiTRUE", "torch==2.8.*", ["cu12torch2.7cxx11abiTRUE", "torch==2.8.*"]),
    ],
    ids=["compact-style", "abi-style"],
)
def test_label_contradicting_torch_pin_is_rejected(harness, server, upload_token, artifacts,
                                                  label, pin, named):
    good = make_wheel(artifacts, PROJECT, "1.0.0+cu128torch2.8", tag="cp311-cp311-linux_x86_64",
                      requires_dist=("torch==2.8.*",))
    assert server.put_file(good, upload_token).status == 201
    before = harness.state()
    bad = make_wheel(artifacts / "bad", PROJECT, f"2.0.0+{label}", tag="cp311-cp311-linux_x86_64",
                     requires_dist=(pin,))
    resp = server.put_file(bad, upload_token)
    assert resp.status == 400, f"{resp.status}: {resp.text[:300]}"
    for word in named:  # the label may be shown normalized (lower case)
        assert word.lower() in resp.text.lower(), f"{word!r} not named in {resp.text!r}"
    assert harness.state() == before, "a rejected upload left something behind"
    assert [f["filename"] for f in server.project_json(PROJECT)["files"]] == [good.filename]


def test_new_upload_appears_in_its_views_without_restart(harness, server, upload_token,
                                                          artifacts):
    project = "wf-late"
    first = make_wheel(artifacts, project, "1.0.0+cu128torch2.8", tag="cp311-cp311-linux_x86_64",
                       requires_dist=("torch==2.8.*",))
    assert server.put_file(first, upload_token).status == 201

    views = {
        "in": ["/cu128/torch2.9/simple/", "/cu129/torch2.9/simple/", "/cu12/torch2.9/simple/",
               "/torch2.9/simple/", "/cu128/simple/"],
        "out": ["/cu126/torch2.9/simple/", "/cu130/torch2.9/simple/", "/cpu/torch2.9/simple/",
                "/cu128/torch2.10/simple/"],
    }
    before = {}
    for view in views["in"] + views["out"]:
        resp = server.get(f"{view}{project}/", {"Accept": JSON_TYPE})
        assert resp.status == 200, f"{view}: {resp.status}"
        before[view] = resp
    for view in views["in"][:4] + views["out"]:
        assert before[view].json()["files"] == [], view
        assert project not in view_projects(server, view)
    assert view_files(server, "/cu128/torch2.8/simple/", project) == [first.filename]

    # Only a CUDA label in the file name: the torch series comes from the Requires-Dist pin.
    late = make_wheel(artifacts, project, "1.0.0+cu128", tag="cp311-cp311-linux_x86_64",
                      requires_dist=("torch==2.9.*",))
    assert server.put_file(late, upload_token).status == 201

    for view in views["in"]:
        assert view_files(server, view, project) == [late.filename], view
        assert project in view_projects(server, view), view
        # The cached page was replaced: a new ETag, and the old one no longer revalidates.
        old_etag = before[view].header("ETag")
        fresh = server.get(f"{view}{project}/", {"Accept": JSON_TYPE, "If-None-Match": old_etag})
        assert fresh.status == 200, f"{view}: stale page answered {fresh.status}"
        assert fresh.header("ETag") != old_etag
    for view in views["out"]:
        assert view_files(server, view, project) == [], view
        assert project not in view_projects(server, view), view
    # The torch 2.8 view still lists its own build, and /simple/ lists both.
    assert view_files(server, "/cu128/torch2.8/simple/", project) == [first.filename]
    assert sorted(f["filename"] for f in server.project_json(project)["files"]) == sorted(
        [first.filename, late.filename])
