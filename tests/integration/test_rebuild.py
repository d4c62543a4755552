"""Rebuilds publish: a forced rebuild of a cell that was built before is published under the next
PEP 427 build tag (`...+cu130torch2.9-1-cp311-...`, then `-2-`), which pip prefers for the same
version and tags and which the variant views list instead of the build before; a rebuild whose
contents equal the published build's publishes nothing; deleted build numbers stay taken;
`yank_superseded` yanks the superseded builds; a request with nothing to build is refused.

Part 1 builds wf-demo-ext (test_runner.py's CUDA package, compiled with nvcc) for the Pythons
that carry pip 23.0.1, 23.2.1 and 24.2, changes its kernel, rebuilds it, and installs the rebuild
with each pip. Part 2 follows the numbering rules with a build that is reproducible byte for byte
(a small pure-Python package written by a script), which nvcc's output is not.

The `torch` wheels are STAND-INS (see test_runner.py): tiny packages named torch.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from pathlib import Path

import pytest

from conftest import Harness
from test_runner import (
    DEMO_INIT,
    DEMO_KERNEL,
    MATRIX_BUILD_TIMEOUT,
    PIP_TIMEOUT,
    Admin,
    attach,
    fetch_wheel,
    require_tools,
    shared_harness,
    upload_stand_in_torch,
    view_files,
    write_config,
    write_demo_package,
)
from test_ui import basic, form_token, login, origin, post
from wfhelpers import PIP_PYTHONS, Server, clean_env, pip_args, run, wait_for

PROJECT = "wf-demo-ext"
TORCH = "2.9"
LABEL = f"cu130torch{TORCH}"
VIEW = f"cu130/torch{TORCH}"


def python_of(interpreter: Path) -> str:
    """"3.11" for .../3.11.7/bin/python."""
    return ".".join(interpreter.parent.parent.name.split(".")[:2])


# The cells: one per Python that carries a pip version under test.
PIP_CELLS = {pip: python_of(python) for pip, python in PIP_PYTHONS.items()}
PYTHONS = {python_of(python): python for python in PIP_PYTHONS.values()}


def numbered(wheel: str, build: int) -> str:
    """The file name of build `build` of `wheel` (a name without build tag)."""
    stem, py, abi, plat = wheel[: -len(".whl")].rsplit("-", 3)
    return f"{stem}-{build}-{py}-{abi}-{plat}.whl"


def content_digest(data: bytes) -> str:
    """The contents a rebuild is compared by (docs/runner.md, "Rebuilds"): every file's name and
    bytes (and whether it is executable), without RECORD and without WHEEL's Build line."""
    entries = []
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            top, _, rest = info.filename.partition("/")
            body = zf.read(info)
            if top.endswith(".dist-info") and rest in ("RECORD", "RECORD.jws", "RECORD.p7s"):
                continue
            if top.endswith(".dist-info") and rest == "WHEEL":
                body = b"".join(line for line in body.splitlines(keepends=True)
                                if not line.lower().startswith(b"build:"))
            executable = bool((info.external_attr >> 16) & 0o111)
            entries.append((info.filename, executable, hashlib.sha256(body).hexdigest()))
    return hashlib.sha256(repr(sorted(entries)).encode()).hexdigest()


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def simple_files(server: Server, project: str) -> dict[str, dict]:
    return {f["filename"]: f for f in server.project_json(project)["files"]}


# ---------------------------------------------------------------------------------------------
# Part 1: the CUDA package, rebuilt after a source change

# wf_demo_ext with revision(): 1 until the kernel defines wf_demo_revision.
REBUILD_INIT = DEMO_INIT + '''

def revision():
    library = _library()
    return library.wf_demo_revision() if hasattr(library, "wf_demo_revision") else 1
'''

REVISION_2 = """
// The source change of the rebuild.
extern "C" int wf_demo_revision() { return 2; }
"""


class CudaBed:
    def __init__(self, h: Harness, server: Server, admin: Admin, source: Path):
        self.h = h
        self.server = server
        self.admin = admin
        self.source = source
        self.first: dict[str, dict] = {}   # python -> job of the first build
        self.second: dict[str, dict] = {}  # python -> job of the rebuild
        self.refused = None                # the answer to a build with nothing to do


def jobs_by_python(admin: Admin, build: dict) -> dict[str, dict]:
    done = admin.wait_jobs([j["id"] for j in build["jobs"]], MATRIX_BUILD_TIMEOUT)
    return {job["python"]: job for job in done.values()}


@pytest.fixture(scope="module")
def _cuda_bed(request, wheelforge_bin):
    require_tools(nvcc=True)
    for python in PYTHONS.values():
        if not python.exists():
            pytest.skip(f"{python} is not installed")
    with shared_harness(request, wheelforge_bin, "wf-it-rebuild-") as h:
        h.token("upload")
        source = write_demo_package(h.path("src", PROJECT))
        (source / "wf_demo_ext" / "__init__.py").write_text(REBUILD_INIT)
        config = write_config(
            h.root / "wheelforge.toml",
            {"demo": {
                "project": PROJECT,
                "source": {"path": str(source)},
                "arch_variable": "TORCH_CUDA_ARCH_LIST",
                "arch_value": "8.0",
                "local_version_variable": "WF_DEMO_LOCAL_VERSION",
                "import_check": "import wf_demo_ext; assert wf_demo_ext.check()",
                "gb_per_job": 1.0,
                "timeout": "10m",
                "build_requires": [],
                "matrix": {"python": sorted(PYTHONS), "torch": [TORCH], "cuda": ["13.0"]},
            }},
            pythons=PYTHONS,
        )
        server = h.serve("--config", str(config))
        upload_stand_in_torch(h, server, versions=(f"{TORCH}.0+cu130",))
        bed = CudaBed(h, server, Admin(server, h.token("admin")), source)
        bed.first = jobs_by_python(bed.admin, bed.admin.submit("demo", "1.0.0"))
        bed.refused = bed.admin.request("POST", "/admin/builds", {"recipe": "demo", "version": "1.0.0"})
        (source / "kernel.cu").write_text(DEMO_KERNEL + REVISION_2)
        bed.second = jobs_by_python(bed.admin, bed.admin.submit("demo", "1.0.0", force=True))
        yield bed


@pytest.fixture
def cuda_bed(request, _cuda_bed):
    yield from attach(request, _cuda_bed)


def require_built(bed: CudaBed) -> None:
    failed = [bed.admin.describe(j) for j in list(bed.first.values()) + list(bed.second.values())
              if j["state"] != "succeeded"]
    if failed:
        pytest.fail("\n\n".join(failed), pytrace=False)


def test_first_build_has_no_build_tag_and_a_second_request_has_nothing_to_do(cuda_bed):
    bed = cuda_bed
    require_built(bed)
    assert sorted(bed.first) == sorted(PYTHONS)
    for python, job in bed.first.items():
        py = "cp" + python.replace(".", "")
        assert re.fullmatch(rf"wf_demo_ext-1\.0\.0\+{LABEL}-{py}-{py}-manylinux_2_\d+_x86_64"
                            rf"(\.manylinux2014_x86_64)?\.whl", job["wheel"]), job
        assert job["build_number"] == 0, job
    # Nothing to do: 409 with the reason, and no build recorded.
    assert bed.refused.status == 409, bed.refused.text
    assert bed.refused.text.startswith("all cells built; use force to rebuild"), bed.refused.text
    builds = bed.admin.request("GET", "/admin/builds").json()["builds"]
    assert len(builds) == 2, builds  # the first build and the forced one


def test_forced_rebuild_is_published_under_build_tag_1(cuda_bed):
    bed = cuda_bed
    require_built(bed)
    listed = simple_files(bed.server, PROJECT)
    for python, job in bed.second.items():
        first = bed.first[python]
        assert job["wheel"] == numbered(first["wheel"], 1), job
        assert job["build_number"] == 1, job
        assert job["glibc_floor"] == first["glibc_floor"] and job["glibc_floor"], job
        assert job["reason"] == "", job
        log = bed.admin.log_text(job["id"])
        assert f"was published before (highest build 0, other contents): this rebuild is build 1" in log, log[-3000:]
        # Both builds are published; the rebuild carries its number inside too.
        assert {first["wheel"], job["wheel"]} <= set(listed), sorted(listed)
        _entry, data = fetch_wheel(bed.server, job["wheel"], PROJECT)
        wheel_file = members(data)[f"wf_demo_ext-1.0.0+{LABEL}.dist-info/WHEEL"].decode()
        assert "\nBuild: 1\n" in wheel_file, wheel_file
    # The forced build's record says so.
    build = bed.admin.build(next(iter(bed.second.values()))["build_id"])["build"]
    assert build["force"] is True and build["yank_superseded"] is False, build


def test_the_view_lists_the_rebuild_and_the_old_build_stays_downloadable(cuda_bed):
    bed = cuda_bed
    require_built(bed)
    assert view_files(bed.server, VIEW, PROJECT) == {j["wheel"] for j in bed.second.values()}
    for job in bed.first.values():
        # Not yanked, not deleted: its URL serves the same bytes as before.
        entry, data = fetch_wheel(bed.server, job["wheel"], PROJECT)
        assert entry["yanked"] is False, entry
        assert members(data)[f"wf_demo_ext-1.0.0+{LABEL}.dist-info/METADATA"]


@pytest.mark.parametrize("pip_version", sorted(PIP_PYTHONS))
def test_pip_installs_the_rebuild_from_the_view(cuda_bed, pip_version):
    bed = cuda_bed
    require_built(bed)
    python = PIP_PYTHONS[pip_version]
    job = bed.second[PIP_CELLS[pip_version]]
    version = run([python, "-m", "pip", "--version"], timeout=60)
    assert version.stdout.startswith(f"pip {pip_version} "), version.stdout
    target = bed.h.path(f"pip-{pip_version}")
    neutral = bed.h.path("neutral-cwd")
    proc = run([python, "-m", "pip", "install", "--target", target,
                *pip_args(f"{bed.server.url}/{VIEW}/simple/"), f"{PROJECT}==1.0.0"],
               timeout=PIP_TIMEOUT, cwd=neutral)
    assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"
    dist_info = target / f"wf_demo_ext-1.0.0+{LABEL}.dist-info"
    assert "\nBuild: 1\n" in (dist_info / "WHEEL").read_text(), "pip installed another build"
    check = run([python, "-c", "import wf_demo_ext; print(wf_demo_ext.check(), wf_demo_ext.revision())"],
                timeout=60, cwd=neutral, env=clean_env(PYTHONPATH=str(target)))
    assert check.returncode == 0, check.stderr
    assert check.stdout.split() == ["True", "2"], (check.stdout, job["wheel"])


def test_coverage_and_job_page_show_the_build_number(cuda_bed):
    bed = cuda_bed
    require_built(bed)
    doc = bed.server.get(f"/api/projects/{PROJECT}/variants").json()
    files = {f["filename"]: f for v in doc["versions"] for f in v["files"]}
    for python, job in bed.second.items():
        old = bed.first[python]["wheel"]
        assert files[job["wheel"]]["build"] == 1 and files[job["wheel"]]["build_tag"] == "1"
        assert files[job["wheel"]]["superseded_by"] is None
        assert files[old]["build"] == 0 and files[old]["superseded_by"] == job["wheel"]
        assert files[job["wheel"]]["glibc"] == files[old]["glibc"]
    [cell] = [c for c in doc["matrix"] if c["torch"] == TORCH]
    assert {b["filename"] for b in cell["builds"]} == {j["wheel"] for j in bed.second.values()}
    assert all(b["build"] == 1 for b in cell["builds"]), cell
    job = next(iter(bed.second.values()))
    page = bed.server.get(f"/jobs/{job['id']}", basic(bed.h.token("admin")))
    assert page.status == 200, page.status
    assert "<dt>Build number</dt><dd>1 (build tag -1-)</dd>" in page.text, page.text[:3000]
    assert f"<dt>glibc floor</dt><dd>{job['glibc_floor']}</dd>" in page.text


def test_third_rebuild_of_the_same_source_follows_the_contents_rule(cuda_bed):
    """The same source again: nvcc writes names of its temporary files into the binary, so the
    .so differs from build 1's and the rebuild is build 2 (with only the .so differing); were
    the bytes reproduced, the job would publish nothing and name build 1."""
    bed = cuda_bed
    require_built(bed)
    third = jobs_by_python(bed.admin, bed.admin.submit("demo", "1.0.0", force=True))
    for python, job in third.items():
        assert job["state"] == "succeeded", bed.admin.describe(job)
        previous = bed.second[python]["wheel"]
        _entry, before = fetch_wheel(bed.server, previous, PROJECT)
        if job["reason"]:
            assert job["reason"] == (f"the identical file is already published: {previous} (build 1); "
                                     "nothing new to publish"), job
            assert job["wheel"] == previous and job["build_number"] == 1, job
            continue
        assert job["wheel"] == numbered(bed.first[python]["wheel"], 2) and job["build_number"] == 2, job
        _entry, after = fetch_wheel(bed.server, job["wheel"], PROJECT)
        assert content_digest(after) != content_digest(before)
        old, new = members(before), members(after)
        changed = {n for n in set(old) | set(new)
                   if old.get(n) != new.get(n) and not n.endswith((".dist-info/RECORD", ".dist-info/WHEEL"))}
        assert changed and all(n.endswith(".so") for n in changed), changed


def test_build_form_shows_why_nothing_was_started(cuda_bed):
    bed = cuda_bed
    require_built(bed)
    cookie = login(bed.server, bed.h.token("admin"))
    csrf = form_token(bed.server, cookie)
    resp = post(bed.server, "/builds/", {"csrf": csrf, "recipe": "demo", "version": "1.0.0"},
                {"Cookie": cookie, **origin(bed.server)})
    assert resp.status == 409, resp.status
    assert "The build was not started: all cells built; use force to rebuild" in resp.text, resp.text[:3000]


# ---------------------------------------------------------------------------------------------
# Part 2: the numbering rules, with a build that reproduces its bytes

# Writes wf-repro 1.0.0 (+$WF_REPRO_LOCAL_VERSION) from payload.txt, with fixed times: the same
# source gives the same wheel, byte for byte.
REPRO_BUILDER = '''\
import base64, hashlib, os, sys, zipfile

out = sys.argv[1]
version = "1.0.0"
if os.environ.get("WF_REPRO_LOCAL_VERSION"):
    version += "+" + os.environ["WF_REPRO_LOCAL_VERSION"]
payload = open("payload.txt").read().strip()
dist_info = "wf_repro-%s.dist-info" % version
members = [
    ("wf_repro/__init__.py", ("PAYLOAD = %r\\n" % payload).encode()),
    (dist_info + "/METADATA", ("Metadata-Version: 2.1\\nName: wf-repro\\nVersion: %s\\n" % version).encode()),
    (dist_info + "/WHEEL", b"Wheel-Version: 1.0\\nGenerator: repro\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"),
]
record = ""
for name, data in members:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += "%s,sha256=%s,%d\\n" % (name, digest, len(data))
members.append((dist_info + "/RECORD", (record + dist_info + "/RECORD,,\\n").encode()))
with zipfile.ZipFile(os.path.join(out, "wf_repro-%s-py3-none-any.whl" % version), "w") as zf:
    for name, data in members:
        info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        zf.writestr(info, data)
'''

REPRO = "wf_repro-1.0.0+cu130torch2.9-py3-none-any.whl"


def test_numbering_rules_with_a_reproducible_build(harness):
    require_tools(nvcc=False)
    h = harness
    h.token("upload")
    admin_token = h.token("admin")
    source = h.path("src", "wf-repro")
    (source / "make_wheel.py").write_text(REPRO_BUILDER)
    payload = source / "payload.txt"
    payload.write_text("one\n")
    python = PIP_PYTHONS["24.2"]
    config = write_config(
        h.root / "wheelforge.toml",
        {"repro": {
            "project": "wf-repro",
            "source": {"path": str(source)},
            "command": "{python} make_wheel.py {out}",
            "local_version_variable": "WF_REPRO_LOCAL_VERSION",
            "import_check": "import wf_repro",
            "gb_per_job": 0.25,
            "timeout": "5m",
            "build_requires": [],
            "matrix": {"python": ["3.13"], "torch": [TORCH], "cuda": ["13.0"]},
        }},
        pythons={"3.13": python},
    )
    server = h.serve("--config", str(config))
    upload_stand_in_torch(h, server, versions=(f"{TORCH}.0+cu130",))
    admin = Admin(server, admin_token)

    def build(**fields) -> dict:
        created = admin.submit("repro", "1.0.0", force=True, **fields)
        [job] = admin.wait_jobs([j["id"] for j in created["jobs"]], MATRIX_BUILD_TIMEOUT).values()
        assert job["state"] == "succeeded", admin.describe(job)
        return job

    def cli_build(*flags: str):
        return h.cli("build", "--config", str(config), "--data-dir", str(h.data_dir),
                     "--server-url", server.url, "repro", "1.0.0", *flags, timeout=MATRIX_BUILD_TIMEOUT)

    first = admin.run_one("repro", timeout=MATRIX_BUILD_TIMEOUT)
    assert first["state"] == "succeeded", admin.describe(first)
    assert first["wheel"] == REPRO and first["build_number"] == 0, first

    # The same source again: nothing new to publish (through the command line this time).
    proc = cli_build("--force")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 succeeded, 0 failed" in proc.stdout, proc.stdout
    same = admin.request("GET", "/admin/builds").json()["builds"][0]
    [same_job] = admin.build(same["id"])["jobs"]
    assert same_job["reason"] == (f"the identical file is already published: {REPRO} (build 0); "
                                  "nothing new to publish"), same_job
    assert same_job["wheel"] == REPRO and same_job["build_number"] == 0, same_job
    assert "step: smoke test" not in admin.log_text(same_job["id"])
    assert set(simple_files(server, "wf-repro")) == {REPRO}

    # Other contents: build 1. The same again: nothing (build 1 is the published one).
    payload.write_text("two\n")
    second = build()
    assert second["wheel"] == numbered(REPRO, 1) and second["build_number"] == 1, second
    again = build()
    assert again["reason"].startswith(f"the identical file is already published: {numbered(REPRO, 1)} (build 1)")
    assert set(simple_files(server, "wf-repro")) == {REPRO, numbered(REPRO, 1)}

    # Build 1 deleted: build 0 is the published one again, and build 1's name stays taken.
    resp = server.request("DELETE", f"/admin/files/{numbered(REPRO, 1)}",
                          {"Authorization": f"Bearer {admin_token}"})
    assert resp.status == 200, resp.text
    payload.write_text("one\n")
    back = build()
    assert back["reason"].startswith(f"the identical file is already published: {REPRO} (build 0)"), back
    payload.write_text("three\n")
    proc = cli_build("--force", "--yank-superseded")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    third = admin.build(admin.request("GET", "/admin/builds").json()["builds"][0]["id"])
    assert third["build"]["yank_superseded"] is True, third
    [third_job] = third["jobs"]
    assert third_job["wheel"] == numbered(REPRO, 2) and third_job["build_number"] == 2, third_job
    assert f"yanked {REPRO} (superseded by build 2)" in admin.log_text(third_job["id"])

    # The superseded build is yanked with the reason, and stays downloadable; the deleted one
    # is gone; the view lists build 2, which pip installs. (The server sees what the command
    # published at its next look at the catalog.)
    assert wait_for(lambda: numbered(REPRO, 2) in simple_files(server, "wf-repro"))
    listed = simple_files(server, "wf-repro")
    assert set(listed) == {REPRO, numbered(REPRO, 2)}, sorted(listed)
    assert listed[REPRO]["yanked"] == "superseded by build 2", listed[REPRO]
    assert listed[numbered(REPRO, 2)]["yanked"] is False
    fetch_wheel(server, REPRO, "wf-repro")
    assert view_files(server, VIEW, "wf-repro") == {numbered(REPRO, 2)}
    target = h.path("pip-target")
    proc = run([python, "-m", "pip", "install", "--target", target,
                *pip_args(f"{server.url}/{VIEW}/simple/"), "wf-repro==1.0.0"],
               timeout=PIP_TIMEOUT, cwd=h.path("neutral"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check = run([python, "-c", "import wf_repro; print(wf_repro.PAYLOAD)"], timeout=60,
                cwd=h.path("neutral"), env=clean_env(PYTHONPATH=str(target)))
    assert check.stdout.strip() == "three", check.stdout + check.stderr

    # Without force, nothing to do: said, with exit status 0 and no build recorded.
    builds_before = len(admin.request("GET", "/admin/builds").json()["builds"])
    proc = cli_build()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "repro 1.0.0: all cells built; use --force to rebuild" in proc.stdout, proc.stdout
    assert len(admin.request("GET", "/admin/builds").json()["builds"]) == builds_before
    resp = admin.request("POST", "/admin/builds", {"recipe": "repro", "version": "1.0.0"})
    assert resp.status == 409 and "all cells built; use force to rebuild" in resp.text, resp.text
    assert admin.request("POST", "/admin/builds", {"recipe": "repro", "version": "1.0.0",
                                                   "yank_superseded": "yes"}).status == 400
