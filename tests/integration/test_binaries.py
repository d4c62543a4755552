"""What the wheel's own binaries say (docs/publishing.md; docs/torch-labels.md, "What the
binaries say"): every wheel's ELF members are read at ingest. Extension modules are compiled with gcc at test time: one bound to a torch
series (it imports c10:: C++ symbols), one on torch's stable C ABI (aoti_torch_* only), ones
linking a stub CUDA runtime (libcudart.so.12 / .13, built here). Checked with curl-free HTTP
and real pip: a label the binaries contradict is refused with the library named and nothing
stored; a stable-ABI build fits every torch series from its Requires-Dist minimum on (and a
series-bound build wins where one exists), pip installs it from two series' views; the C++ ABI
preference table of docs/torch-labels.md holds case by case; the inspector's JSON and page;
damaged ELF members are answered, not fatal."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import urllib.parse
from pathlib import Path

import pytest

from wfhelpers import (
    JSON_TYPE,
    PIP_PYTHONS,
    assert_nothing_stored,
    catalog_execute,
    make_sdist,
    make_wheel,
    page_etags,
    path_of,
    pip_args,
    run,
    store_state,
    wait_for,
    write_static_index,
)
from test_ops import blob_path, write_blob

PIP_VERSION = "23.2.1"  # pyenv 3.11.7
TAG = "cp311-cp311-linux_x86_64"
ABI3 = "cp39-abi3-linux_x86_64"

SERIES_BOUND_C = """
#include <string>
namespace c10 { namespace detail {
[[noreturn]] void torchCheckFail(const char*, const char*, unsigned, const std::string&); } }
extern "C" void* PyInit__C() { c10::detail::torchCheckFail("f", "x.cpp", 1, std::string("m")); }
"""
STABLE_C = """
typedef struct AtenTensorOpaque* AtenTensorHandle;
int aoti_torch_get_device_type(AtenTensorHandle, int*);
int device_of(AtenTensorHandle t) { int d = 0; aoti_torch_get_device_type(t, &d); return d; }
void* PyInit__C(void) { return 0; }
"""
CUDA_EXT_C = """
int cudaGetDeviceCount(int*);
int devices(void) { int n = 0; cudaGetDeviceCount(&n); return n; }
void* PyInit__C(void) { return 0; }
"""


@pytest.fixture(scope="module")
def objects(tmp_path_factory) -> dict[str, bytes]:
    """The shared objects, compiled once for the module."""
    if not (shutil.which("gcc") and shutil.which("g++")):
        pytest.skip("gcc/g++ not on PATH (Debian package build-essential)")
    d = tmp_path_factory.mktemp("objects")

    def cc(compiler: str, source: str, out: str, *flags: str) -> bytes:
        src = d / (out + (".cpp" if compiler == "g++" else ".c"))
        src.write_text(source)
        proc = subprocess.run([compiler, "-shared", "-fPIC", "-O1", str(src), "-o", str(d / out),
                               *flags], capture_output=True, text=True, cwd=d, check=False)
        assert proc.returncode == 0, proc.stderr
        return (d / out).read_bytes()

    out = {"bound": cc("g++", SERIES_BOUND_C, "bound.so"), "stable": cc("gcc", STABLE_C, "stable.so")}
    for major in ("12", "13"):
        cc("gcc", "int cudaGetDeviceCount(int* n) { *n = 0; return 0; }\n",
           f"libcudart.so.{major}", f"-Wl,-soname,libcudart.so.{major}")
        out[f"cuda{major}"] = cc("gcc", CUDA_EXT_C, f"ext{major}.so", "-Wl,--no-as-needed",
                                 "-L.", f"-l:libcudart.so.{major}")
    # Many exports, for the inspector's bound on listed symbols.
    many = "".join(f"int wf_export_{i}(void) {{ return {i}; }}\n" for i in range(620))
    out["many"] = cc("gcc", many, "many.so")
    return out


def ext_wheel(directory: Path, project: str, version: str, so: bytes, *, tag: str = TAG,
              requires_dist: tuple[str, ...] = (), extra: tuple[tuple[str, bytes], ...] = ()):
    module = project.replace("-", "_")
    return make_wheel(directory, project, version, tag=tag, requires_dist=requires_dist,
                      extra=((f"{module}/_C.so", so),) + extra)


def view_files(server, view: str, project: str) -> list[str]:
    resp = server.get(f"{view}{project}/", {"Accept": JSON_TYPE})
    assert resp.status == 200, f"{view}{project}/ -> {resp.status}: {resp.text[:300]}"
    return [f["filename"] for f in resp.json()["files"]]


def coverage(server, project: str) -> dict:
    resp = server.get(f"/api/projects/{project}/variants")
    assert resp.status == 200, resp.text[:300]
    return resp.json()


# ---------------------------------------------------------------------------------------------
# Labels the binaries contradict


@pytest.mark.parametrize(
    "label, so, named",
    [
        ("cu128torch2.8", "cuda13", ["'+cu128torch2.8'", "libcudart.so.13", "CUDA 13"]),
        ("cu130torch2.9", "cuda12", ["'+cu130torch2.9'", "libcudart.so.12", "CUDA 12"]),
        ("cpu", "cuda12", ["'+cpu'", "libcudart.so.12", "needs CUDA"]),
    ],
)
def test_label_contradicted_by_the_binary_is_refused(harness, server, upload_token, artifacts,
                                                     objects, label, so, named):
    # Another file of the project first, so that its pages exist to compare.
    assert server.put_file(make_wheel(artifacts, "wf-ext", "0.1"), upload_token).status == 201
    wheel = ext_wheel(artifacts, "wf-ext", f"1.0+{label}", objects[so])
    before = (store_state(harness.data_dir), page_etags(server, "wf-ext"))
    resp = server.put_file(wheel, upload_token)
    assert resp.status == 400, f"{resp.status}: {resp.text}"
    for word in named:
        assert word in resp.text, f"{word!r} not in {resp.text!r}"
    assert "wf_ext/_C.so" in resp.text
    assert_nothing_stored(harness.data_dir, server, "wf-ext", before, f"+{label}")


def test_agreeing_labels_are_stored_with_their_findings(server, upload_token, artifacts, objects):
    cases = {
        "1.0+cu128torch2.8": objects["cuda12"],  # same major, any minor
        "1.0+cu130": objects["cuda13"],
        "1.0+torch2.8": objects["stable"],  # a torch2.8 label on a stable-ABI binary is fine
        "1.0+cpu": objects["bound"],
    }
    for version, so in cases.items():
        resp = server.put_file(ext_wheel(artifacts, "wf-ok", version, so), upload_token)
        assert resp.status == 201, f"{version}: {resp.status} {resp.text}"
    files = {f["filename"]: f for v in coverage(server, "wf-ok")["versions"] for f in v["files"]}
    cu128 = files[f"wf_ok-1.0+cu128torch2.8-{TAG}.whl"]["binaries"]
    assert cu128["cuda_runtime"] == 12 and cu128["cuda_library"] == "libcudart.so.12"
    assert cu128["torch_binding"] == "none"
    module = cu128["modules"][0]
    assert module["path"] == "wf_ok/_C.so" and module["extension_module"] is True
    assert "libcudart.so.12" in module["needed"] and module["glibc"]
    stable = files[f"wf_ok-1.0+torch2.8-{TAG}.whl"]["binaries"]
    assert stable["torch_binding"] == "stable-abi"
    assert stable["torch_symbol"] == "aoti_torch_get_device_type"
    assert stable["torch_from"] is None  # its label names the series
    bound = files[f"wf_ok-1.0+cpu-{TAG}.whl"]["binaries"]
    assert bound["torch_binding"] == "series"
    assert bound["torch_symbol"].startswith("_ZN3c106detail14torchCheckFail")
    assert bound["glibcxx"].startswith("3.4.")


def test_damaged_elf_members_are_answered_not_fatal(server, upload_token, artifacts, objects):
    garbage = b"\x7fELF" + b"\xff" * 300
    truncated = objects["bound"][:64]
    wheel = ext_wheel(artifacts, "wf-damaged", "1.0", objects["stable"],
                      extra=(("wf_damaged/garbage.so", garbage),
                             ("wf_damaged/truncated.so", truncated)))
    resp = server.put_file(wheel, upload_token)
    assert resp.status == 201, resp.text
    files = [f for v in coverage(server, "wf-damaged")["versions"] for f in v["files"]]
    modules = {m["path"]: m for m in files[0]["binaries"]["modules"]}
    assert "unsupported ELF class" in modules["wf_damaged/garbage.so"]["problem"]
    assert modules["wf_damaged/truncated.so"]["problem"]
    assert modules["wf_damaged/_C.so"]["problem"] is None
    assert files[0]["binaries"]["torch_binding"] == "stable-abi"
    contents = server.get(f"/api/files/{wheel.sha256}/contents").json()
    problems = {b["path"]: b["problem"] for b in contents["binaries"]}
    assert "unsupported ELF class" in problems["wf_damaged/garbage.so"]
    page = server.get(f"/inspect/{wheel.sha256}")
    assert page.status == 200 and "Cannot be read as ELF" in page.text
    assert server.get("/healthz").status == 200


# ---------------------------------------------------------------------------------------------
# Stable-ABI builds in views


def test_stable_abi_build_spans_later_series(harness, server, upload_token, artifacts, objects,
                                             tmp_path):
    stable = ext_wheel(artifacts, "wf-stable", "1.0+cu130", objects["stable"], tag=ABI3,
                       requires_dist=("torch>=2.9",))
    bound = ext_wheel(artifacts, "wf-stable", "1.0+cu130torch2.10", objects["bound"], tag=ABI3,
                      requires_dist=("torch==2.10.*",))
    other = ext_wheel(artifacts, "wf-stable", "1.0+cu128torch2.8", objects["bound"], tag=ABI3)
    for w in (stable, bound, other):
        resp = server.put_file(w, upload_token)
        assert resp.status == 201, f"{w.filename}: {resp.text}"

    expected = {
        "/cu130/torch2.8/simple/": [],  # below its minimum
        "/cu130/torch2.9/simple/": [stable.filename],
        "/cu130/torch2.10/simple/": [bound.filename],  # the series-bound build wins
        "/cu130/torch2.11/simple/": [stable.filename],
        "/cu130/torch2.13/simple/": [stable.filename],
        "/cu128/torch2.9/simple/": [],  # another CUDA major
        "/cu128/torch2.8/simple/": [other.filename],
    }
    for view, files in expected.items():
        assert view_files(server, view, "wf-stable") == files, view

    doc = coverage(server, "wf-stable")
    assert doc["axes"]["torch"] == ["2.8", "2.9", "2.10"]
    cells = {(c["torch"], c["backend"]): c for c in doc["matrix"]}
    assert set(cells) == {("2.8", "cu128"), ("2.9", "cu130"), ("2.10", "cu130")}
    spanned = [b["filename"] for b in cells[("2.9", "cu130")]["builds"]]
    assert spanned == [stable.filename]
    assert cells[("2.9", "cu130")]["builds"][0]["torch_from"] == "2.9"
    assert {b["filename"] for b in cells[("2.10", "cu130")]["builds"]} == {
        stable.filename, bound.filename}
    files = {f["filename"]: f for v in doc["versions"] for f in v["files"]}
    assert files[stable.filename]["binaries"]["torch_from"] == "2.9"
    assert files[stable.filename]["binaries"]["torch_binding"] == "stable-abi"

    # pip, from two series' views, with a stand-in PyPI holding torch 2.9 and 2.11.
    python = PIP_PYTHONS[PIP_VERSION]
    if not python.exists():
        pytest.skip(f"{python} (pip {PIP_VERSION}) is not installed")
    stubs = [make_wheel(harness.path("stubs"), "torch", v) for v in ("2.9.0", "2.11.0")]
    write_static_index(harness.path("standin"), stubs)
    standin = harness.static_index(harness.root / "standin").url + "/simple/"
    for series in ("2.9", "2.11"):
        target = tmp_path / f"target-{series}"
        report = tmp_path / f"report-{series}.json"
        proc = run([python, "-m", "pip", "install", "--target", target, "--only-binary", ":all:",
                    "--report", report, *pip_args(standin, f"{server.url}/cu130/torch{series}/simple/"),
                    "wf-stable", f"torch=={series}.*"], timeout=120, cwd=tmp_path)
        assert proc.returncode == 0, f"pip from torch{series}:\n{proc.stdout}\n{proc.stderr}"
        chosen = {item["metadata"]["name"].lower():
                  urllib.parse.unquote(path_of(item["download_info"]["url"]))
                  for item in json.loads(report.read_text())["install"]}
        assert chosen["wf-stable"].endswith("/" + stable.filename), chosen
        assert (target / "wf_stable" / "_C.so").read_bytes() == objects["stable"]


# ---------------------------------------------------------------------------------------------
# The C++ ABI preference table (docs/torch-labels.md, "Which build a view lists"), case by case:
# (view, labels uploaded for one version, the label the view must list or None).
ABI_TABLE = [
    # A 2.7+ Linux label without an ABI has the C++11 ABI: the exact CUDA minor then wins.
    ("/cu128/torch2.8/simple/", ["cu12torch2.8cxx11abiTRUE", "cu128torch2.8"], "cu128torch2.8"),
    ("/cu128/torch2.8/cxx11abi1/simple/", ["cu12torch2.8cxx11abiTRUE", "cu128torch2.8"],
     "cu128torch2.8"),
    # A lower minor beats major-only once the ABIs tie.
    ("/cu128/torch2.8/simple/", ["cu12torch2.8cxx11abiTRUE", "cu126torch2.8"], "cu126torch2.8"),
    # The inferred TRUE is not listed in an old-ABI view; the explicit FALSE is.
    ("/cu128/torch2.8/cxx11abi0/simple/", ["cu128torch2.8", "cu12torch2.8cxx11abiFALSE"],
     "cu12torch2.8cxx11abiFALSE"),
    ("/cu128/torch2.8/cxx11abi0/simple/", ["cu128torch2.8"], None),
    # Up to 2.6 nothing is inferred: the series' own ABI (FALSE) beats an unknown one.
    ("/cu126/torch2.6/simple/", ["cu126torch2.6", "cu12torch2.6cxx11abiFALSE"],
     "cu12torch2.6cxx11abiFALSE"),
    ("/cu126/torch2.6/cxx11abi1/simple/", ["cu126torch2.6", "cu12torch2.6cxx11abiTRUE"],
     "cu12torch2.6cxx11abiTRUE"),
    ("/cu126/torch2.6/cxx11abi0/simple/", ["cu126torch2.6"], "cu126torch2.6"),
    # A series' explicit ABI against its default: the default wins.
    ("/cu128/torch2.8/simple/", ["cu128torch2.8cxx11abiFALSE", "cu12torch2.8"], "cu12torch2.8"),
]


def test_abi_preference_table(server, upload_token, artifacts):
    for i, (view, labels, expected) in enumerate(ABI_TABLE):
        version = f"1.{i}"
        for label in labels:
            w = make_wheel(artifacts, "wf-abi", f"{version}+{label}", tag=TAG)
            assert server.put_file(w, upload_token).status == 201
    for i, (view, labels, expected) in enumerate(ABI_TABLE):
        version = f"1.{i}"
        listed = [f for f in view_files(server, view, "wf-abi") if f.startswith(f"wf_abi-{version}+")]
        want = [] if expected is None else [f"wf_abi-{version}+{expected}-{TAG}.whl"]
        assert listed == want, f"case {i}: {view} with {labels}"
    files = {f["filename"]: f for v in coverage(server, "wf-abi")["versions"] for f in v["files"]}
    inferred = files[f"wf_abi-1.0+cu128torch2.8-{TAG}.whl"]
    assert inferred["cxx11_abi"] is None and inferred["effective_cxx11_abi"] is True
    old = files[f"wf_abi-1.5+cu126torch2.6-{TAG}.whl"]
    assert old["cxx11_abi"] is None and old["effective_cxx11_abi"] is None


# ---------------------------------------------------------------------------------------------
# The inspector


def test_inspector_api_and_page(server, upload_token, artifacts, objects):
    wheel = ext_wheel(artifacts, "wf-inspect", "2.0+cu128torch2.8", objects["cuda12"],
                      extra=(("wf_inspect/libmany.so", objects["many"]),
                             ("wf_inspect/data.bin", b"x" * 1000)))
    assert server.put_file(wheel, upload_token).status == 201
    resp = server.get(f"/api/files/{wheel.sha256}/contents")
    assert resp.status == 200 and resp.header("Content-Type") == "application/json"
    doc = resp.json()
    assert doc["filename"] == wheel.filename and doc["sha256"] == wheel.sha256
    members = {m["name"]: m for m in doc["members"]}
    assert members["wf_inspect/data.bin"]["size"] == 1000
    assert members["wf_inspect/_C.so"]["size"] == len(objects["cuda12"])
    assert doc["members_total"] == len(doc["members"]) and doc["members_truncated"] is False
    binaries = {b["path"]: b for b in doc["binaries"]}
    ext = binaries["wf_inspect/_C.so"]
    assert ext["extension_module"] is True and ext["cuda_runtime"] == 12
    assert "PyInit__C" in [e["name"] for e in ext["exported"]]
    assert ext["exported_truncated"] is False
    many = binaries["wf_inspect/libmany.so"]
    assert many["exported_total"] >= 620 and many["exported_truncated"] is True
    assert len(many["exported"]) == 500
    assert doc["summary"]["cuda_runtime"] == 12
    etag = resp.header("ETag")
    assert server.get(f"/api/files/{wheel.sha256}/contents", {"If-None-Match": etag}).status == 304

    page = server.get(f"/inspect/{wheel.sha256}", {"Accept": "text/html"})
    assert page.status == 200 and page.header("Content-Type").startswith("text/html")
    for text in ("wf_inspect/_C.so", "libcudart.so.12", "PyInit__C", "wf_inspect/data.bin",
                 "Showing the first 500 of"):
        assert text in page.text, text
    project = server.get("/project/wf-inspect/", {"Accept": "text/html"})
    assert f'href="/inspect/{wheel.sha256}"' in project.text

    assert server.get(f"/api/files/{'0' * 64}/contents").status == 404
    assert server.get("/inspect/not-a-digest").status == 404


# ---------------------------------------------------------------------------------------------
# Wheels stored before ingest read their binaries: `wheelforge reinspect`


def file_findings(server, project: str) -> dict[str, dict | None]:
    return {f["filename"]: f["binaries"]
            for v in coverage(server, project)["versions"] for f in v["files"]}


def older_catalog(data_dir: Path, sql: str = "") -> None:
    """Makes the catalog look as a wheelforge before binary findings (schema 11) left it, after
    `sql`; the server must be stopped (it reopens it upgraded: every wheel without findings)."""
    db = sqlite3.connect(data_dir / "wheelforge.db")
    try:
        # The undoing of migrations 19 (attestations), 18 (job leases), 17 (trusted
        # publishing), 16 (container provenance of jobs), 15 (upstream blob use), 14 (upstream
        # blobs), 13 (variant wheels) and 12 (findings).
        db.executescript(sql + "ALTER TABLE tokens DROP COLUMN publisher_id;"
                         " ALTER TABLE files DROP COLUMN provenance_size;"
                         " ALTER TABLE files DROP COLUMN provenance_sha256;"
                         " ALTER TABLE jobs DROP COLUMN lease_expires_at;"
                         " ALTER TABLE jobs DROP COLUMN claimed_by;"
                         " DROP TABLE oidc_jtis; DROP TABLE trusted_publishers;"
                         " ALTER TABLE jobs DROP COLUMN engine_command;"
                         " ALTER TABLE jobs DROP COLUMN image_digest;"
                         " ALTER TABLE jobs DROP COLUMN image;"
                         " ALTER TABLE upstream_blobs DROP COLUMN last_used_at;"
                         " DROP TABLE upstream_blobs; ALTER TABLE files DROP COLUMN variant;"
                         " ALTER TABLE files DROP COLUMN binaries; PRAGMA user_version = 11;")
        db.commit()
    finally:
        db.close()


def reinspect(harness) -> subprocess.CompletedProcess:
    return run([harness.binary, "reinspect", "--data-dir", str(harness.data_dir)], cwd=harness.root)


@pytest.mark.default_backend_only(reason="rolls a SQLite catalog back to schema 11, as an older "
                                  "wheelforge (SQLite only) left it")
def test_reinspect_records_the_findings_of_wheels_stored_before_inspection(
        harness, tokens, artifacts, objects):
    token = tokens["upload"]
    server = harness.serve()
    stable = ext_wheel(artifacts, "wf-old", "1.0+cu130", objects["stable"], tag=ABI3,
                       requires_dist=("torch>=2.9",))
    pure = make_wheel(artifacts, "wf-old", "0.9")
    sdist = make_sdist(artifacts, "wf-old", "0.9")
    # A binary that links CUDA 13 under a cu128 label: refused today, stored by older versions.
    # Its row is made here from one that agrees (same name, same METADATA) by giving it the
    # lying wheel's bytes.
    lying = ext_wheel(artifacts / "lying", "wf-old", "1.0+cu128torch2.8", objects["cuda13"],
                      tag=ABI3)
    assert server.put_file(lying, token).status == 400
    agreeing = ext_wheel(artifacts / "agreeing", "wf-old", "1.0+cu128torch2.8", objects["cuda12"],
                         tag=ABI3)
    assert lying.filename == agreeing.filename and lying.metadata == agreeing.metadata
    for w in (stable, pure, sdist, agreeing):
        assert server.put_file(w, token).status == 201, w.filename
    server.stop()
    lying_sha = write_blob(harness.data_dir, lying.data)
    older_catalog(harness.data_dir, f"UPDATE files SET sha256 = '{lying_sha}', size = {lying.size}"
                                    f" WHERE filename = '{lying.filename}';")

    server = harness.serve()
    assert all(v is None for v in file_findings(server, "wf-old").values())
    # Without findings the stable-ABI wheel counts as a build without a torch series: listed in
    # every series' view, below its minimum too.
    assert stable.filename in view_files(server, "/cu130/torch2.8/simple/", "wf-old")
    assert stable.filename in view_files(server, "/cu130/torch2.10/simple/", "wf-old")
    contents = server.get(f"/api/files/{stable.sha256}/contents")
    assert contents.status == 200 and contents.json()["summary"] is None
    assert contents.json()["binaries"][0]["torch_binding"] == "stable-abi"  # read live
    assert server.get(f"/inspect/{stable.sha256}").status == 200
    assert server.get("/project/wf-old/", {"Accept": "text/html"}).status == 200

    proc = reinspect(harness)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert f"recorded {stable.filename}: 1 binary, torch stable-abi (from 2.9 on)" in out, out
    assert f"recorded {pure.filename}: no binaries" in out, out
    assert f"recorded {lying.filename}: 1 binary, no torch, CUDA 13 (libcudart.so.13)" in out, out
    warning = [line for line in out.splitlines() if line.startswith(f"warning: {lying.filename}")]
    assert len(warning) == 1 and "libcudart.so.13" in warning[0] and "'+cu128torch2.8'" in warning[0], out
    assert sdist.filename not in out
    assert ("recorded the findings of 3 of 3 wheels without findings (1 contradicting their "
            "labels); 0 recorded meanwhile, 0 deleted meanwhile, 0 left without findings") in out, out

    # The running server reloads: the coverage API shows the findings, the stable-ABI wheel
    # spans the series from its minimum on, and the contradicting wheel stays stored and served.
    assert wait_for(lambda: stable.filename not in view_files(server, "/cu130/torch2.8/simple/",
                                                              "wf-old"), timeout=10)
    assert stable.filename in view_files(server, "/cu130/torch2.10/simple/", "wf-old")
    findings = file_findings(server, "wf-old")
    assert findings[sdist.filename] is None
    assert findings[stable.filename]["torch_binding"] == "stable-abi"
    assert findings[stable.filename]["torch_from"] == "2.9"
    assert findings[stable.filename]["modules"][0]["path"] == "wf_old/_C.so"
    assert findings[pure.filename]["modules"] == []
    assert findings[lying.filename]["cuda_runtime"] == 13
    assert findings[lying.filename]["cuda_library"] == "libcudart.so.13"
    assert lying.filename in [f["filename"] for f in server.project_json("wf-old")["files"]]
    assert lying.filename in view_files(server, "/cu128/torch2.8/simple/", "wf-old")
    assert server.get(f"/api/files/{stable.sha256}/contents").json()["summary"]["torch_from"] == "2.9"

    # Idempotent: a second run finds nothing to do and changes nothing.
    again = reinspect(harness)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "recorded the findings of 0 of 0 wheels without findings" in again.stdout, again.stdout
    assert file_findings(server, "wf-old") == findings


def test_reinspect_leaves_unreadable_wheels_without_findings_and_retries_them(
        harness, tokens, artifacts, objects):
    server = harness.serve()
    wheels = [ext_wheel(artifacts, "wf-retry", f"1.{i}+cu130", objects["cuda13"], tag=ABI3)
              for i in range(2)]
    for w in wheels:
        assert server.put_file(w, tokens["upload"]).status == 201
    # Clearing the column while the server runs is what an upgraded older catalog holds too.
    catalog_execute(harness.data_dir, "UPDATE files SET binaries = NULL")
    assert wait_for(lambda: all(v is None for v in file_findings(server, "wf-retry").values()), timeout=10)
    damaged = blob_path(harness.data_dir, wheels[0].sha256)
    original = damaged.read_bytes()
    damaged.replace_bytes(original[:-100] + b"\0" * 100)

    proc = reinspect(harness)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # "its blob has sha256 ..." (a local file), "the stored bytes of blob ... have sha256 ..."
    # (an object, read through the read cache).
    failed = [line for line in proc.stdout.splitlines()
              if line.startswith(f"failed {wheels[0].filename}: ")]
    assert len(failed) == 1 and re.search(r" ha(s|ve) sha256 [0-9a-f]{64}", failed[0]), proc.stdout
    assert f"recorded {wheels[1].filename}: 1 binary, no torch, CUDA 13" in proc.stdout
    assert "1 left without findings" in proc.stdout and "wheelforge fsck" in proc.stdout
    assert wait_for(lambda: file_findings(server, "wf-retry")[wheels[1].filename] is not None,
                    timeout=10)
    assert file_findings(server, "wf-retry")[wheels[0].filename] is None

    damaged.replace_bytes(original)
    proc = reinspect(harness)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"recorded {wheels[0].filename}: 1 binary, no torch, CUDA 13" in proc.stdout
    assert wheels[1].filename not in proc.stdout
    assert wait_for(lambda: all(v is not None for v in file_findings(server, "wf-retry").values()), timeout=10)


@pytest.mark.default_backend_only(reason="a data directory without a catalog: on pg-s3 every "
                                  "data directory the suite names gets its own database")
def test_reinspect_refuses_a_directory_without_a_catalog(harness):
    proc = run([harness.binary, "reinspect", "--data-dir", str(harness.root / "nothing")],
               cwd=harness.root)
    assert proc.returncode == 2
    assert "is not a wheelforge data directory" in proc.stderr, proc.stderr
