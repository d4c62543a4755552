"""PEP 825 variant wheels (docs/variants.md): variant wheels built here at test time, uploaded with
PUT, twine and `wheelforge ingest`; their variant.json read and checked at ingest (both schema
versions, malformed files and contradicting labels refused with nothing stored); the release's
`{name}-{version}-variants.json` served beside the project page, linked from the HTML and JSON
pages with its sha256, and following yank and delete; variant wheels in the torch/CUDA views by
their CUDA property; pip, which does not know variants, still installs the plain wheel."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest

from test_publish import twine
from wfhelpers import (
    JSON_TYPE,
    PIP_PYTHONS,
    assert_nothing_stored,
    dist_name,
    make_wheel,
    page_etags,
    parse_html,
    path_of,
    pip_args,
    run,
    sha256_hex,
    store_state,
    wait_for,
)

TAG = "cp311-cp311-linux_x86_64"
SCHEMA_003 = "https://variants-schema.wheelnext.dev/v0.0.3.json"
SCHEMA_010 = "https://variants-schema.wheelnext.dev/v0.1.0.json"
NVIDIA_PROVIDER = {
    "nvidia": {
        "requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"],
        "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin",
    }
}


def cuda_props(bound: str) -> dict:
    return {"nvidia": {"cuda_version_lower_bound": [bound]}}


def variant_doc(label: str, props: dict, *, schema: str = SCHEMA_003,
                namespaces: tuple[str, ...] = ("nvidia",), providers: dict | None = None) -> dict:
    doc = {"$schema": schema, "default-priorities": {"namespace": list(namespaces)},
           "variants": {label: props}}
    if providers is not None:
        doc["providers"] = providers
    return doc


def variant_wheel(directory: Path, project: str, version: str, label: str,
                  doc: dict | str | None, *, tag: str = TAG,
                  requires_dist: tuple[str, ...] = (), so: bytes | None = None):
    """A wheel named `{name}-{version}-{tag}-{label}.whl`; `doc` becomes its variant.json (a
    dict as JSON, a str as it is, None: no variant.json)."""
    distinfo = f"{dist_name(project)}-{version}.dist-info"
    extra: list[tuple[str, bytes]] = []
    if so is not None:
        extra.append((f"{dist_name(project).lower()}/_C.so", so))
    if doc is not None:
        text = doc if isinstance(doc, str) else json.dumps(doc, indent=2)
        extra.append((f"{distinfo}/variant.json", text.encode()))
    filename = f"{dist_name(project)}-{version}-{tag}-{label}.whl"
    return make_wheel(directory, project, version, tag=tag, requires_dist=requires_dist,
                      extra=tuple(extra), filename=filename)


def project_pages(server, project: str, view: str = "/simple/"):
    """(HTML anchors by text, JSON files by filename) of a project page."""
    html = server.get(f"{view}{project}/")
    assert html.status == 200, html.text[:300]
    anchors = {a["#text"]: a for a in parse_html(html.text).anchors}
    page = server.get(f"{view}{project}/", {"Accept": JSON_TYPE})
    assert page.status == 200
    files = {f["filename"]: f for f in page.json()["files"]}
    return anchors, files


def fetch_variants_json(server, project: str, view: str = "/simple/"):
    """Follows the variants.json link of the project's HTML and JSON pages; checks both name
    the same URL and hash, and that the body has that hash. Returns the parsed document."""
    anchors, files = project_pages(server, project, view)
    names = [n for n in anchors if n.endswith("-variants.json")]
    assert len(names) == 1, f"variants.json links on {view}{project}/: {names}"
    name = names[0]
    href, _, fragment = anchors[name]["href"].partition("#")
    page_url = f"{server.url}{view}{project}/"
    url = urllib.parse.urljoin(page_url, href)
    assert urllib.parse.urljoin(page_url, files[name]["url"]) == url
    assert fragment == "sha256=" + files[name]["hashes"]["sha256"]
    resp = server.get(path_of(url))
    assert resp.status == 200, resp.text[:300]
    assert resp.header("Content-Type") == "application/json"
    assert sha256_hex(resp.body) == files[name]["hashes"]["sha256"]
    assert files[name]["size"] == len(resp.body)
    return name, json.loads(resp.body)


# ---------------------------------------------------------------------------------------------
# Upload, variants.json, pip


def test_variant_wheels_served_with_their_variants_json(harness, server, upload_token,
                                                       artifacts, tmp_path):
    plain = make_wheel(artifacts, "wf-var", "1.0", tag="py3-none-any")
    cu128 = variant_wheel(artifacts, "wf-var", "1.0", "cu128",
                          variant_doc("cu128", cuda_props("12.8"), providers=NVIDIA_PROVIDER))
    cu126 = variant_wheel(artifacts, "wf-var", "1.0", "cu126",
                          variant_doc("cu126", cuda_props("12.6"), providers=NVIDIA_PROVIDER))
    for w in (plain, cu128):
        resp = server.put_file(w, upload_token)
        assert resp.status == 201, f"{w.filename}: {resp.text}"
    proc = twine(harness, f"{server.url}/legacy/", upload_token, [cu126.path])
    assert proc.returncode == 0, f"twine: {proc.stdout}\n{proc.stderr}"

    anchors, files = project_pages(server, "wf-var")
    assert {plain.filename, cu128.filename, cu126.filename} <= set(files)
    name, doc = fetch_variants_json(server, "wf-var")
    assert name == "wf_var-1.0-variants.json"
    assert doc["$schema"] == SCHEMA_003
    assert doc["default-priorities"] == {"namespace": ["nvidia"]}
    assert doc["providers"] == NVIDIA_PROVIDER
    assert doc["variants"] == {"cu126": cuda_props("12.6"), "cu128": cuda_props("12.8")}
    # The gzip a client may ask for does not change what the hash covers.
    gz = server.get("/simple/wf-var/wf_var-1.0-variants.json", {"Accept-Encoding": "gzip"})
    assert gz.status == 200 and sha256_hex(gz.body) == sha256_hex(
        server.get("/simple/wf-var/wf_var-1.0-variants.json").body)

    # pip knows nothing of variants: it skips the variant wheels and the JSON file and installs
    # the plain wheel (every pip the tests have: 23.0.1 reads HTML, later ones JSON).
    pythons = {v: p for v, p in PIP_PYTHONS.items() if p.exists()}
    if not pythons:
        pytest.skip("no pyenv Python with pip is installed")
    for version, python in pythons.items():
        report = tmp_path / f"report-{version}.json"
        proc = run([python, "-m", "pip", "install", "--target", tmp_path / f"target-{version}",
                    "--report", report, *pip_args(f"{server.url}/simple/"), "wf-var==1.0"],
                   timeout=120, cwd=tmp_path)
        assert proc.returncode == 0, f"pip {version}: {proc.stdout}\n{proc.stderr}"
        installed = json.loads(report.read_text())["install"]
        assert [urllib.parse.unquote(path_of(i["download_info"]["url"])).rsplit("/", 1)[-1]
                for i in installed] == [plain.filename], f"pip {version}"


def test_wheelhouse_import_and_the_pep825_schema(harness, artifacts):
    house = harness.path("wheelhouse")
    doc = variant_doc("x8664v3", {"x86_64": {"level": ["v3"]}}, schema=SCHEMA_010,
                      namespaces=("x86_64",))
    good = variant_wheel(house, "wf-house", "2.0", "x8664v3", doc)
    null = variant_wheel(house, "wf-house", "2.0", "null",
                         variant_doc("null", {}, schema=SCHEMA_010, namespaces=("x86_64",)))
    bad = variant_wheel(house / "bad", "wf-house", "2.0", "x8664v4", None)
    proc = harness.ingest(good.path, null.path, bad.path)
    out = proc.stdout + proc.stderr
    assert "has no wf_house-2.0.dist-info/variant.json" in out, out
    assert sorted(harness.filenames()) == sorted([good.filename, null.filename])
    server = harness.serve()
    _, doc_served = fetch_variants_json(server, "wf-house")
    assert doc_served["$schema"] == SCHEMA_010
    assert "providers" not in doc_served
    assert doc_served["variants"] == {"null": {}, "x8664v3": {"x86_64": {"level": ["v3"]}}}


# ---------------------------------------------------------------------------------------------
# Yank and delete


def test_variants_json_follows_yank_and_delete(harness, server, upload_token, artifacts):
    cu128 = variant_wheel(artifacts, "wf-life", "1.0", "cu128",
                          variant_doc("cu128", cuda_props("12.8")))
    cu126 = variant_wheel(artifacts, "wf-life", "1.0", "cu126",
                          variant_doc("cu126", cuda_props("12.6")))
    other = make_wheel(artifacts, "wf-life", "0.9")
    for w in (cu128, cu126, other):
        assert server.put_file(w, upload_token).status == 201
    url = "/simple/wf-life/wf_life-1.0-variants.json"
    _, doc = fetch_variants_json(server, "wf-life")
    assert set(doc["variants"]) == {"cu126", "cu128"}

    data = str(harness.data_dir)
    proc = harness.cli("yank", "--data-dir", data, "wf-life", "--file", cu126.filename)
    assert proc.returncode == 0, proc.stderr

    def labels():
        resp = server.get(url)
        return set(json.loads(resp.body)["variants"]) if resp.status == 200 else None

    assert wait_for(lambda: labels() == {"cu128"}), labels()
    _, doc = fetch_variants_json(server, "wf-life")  # the link's hash follows
    assert set(doc["variants"]) == {"cu128"}
    # The yanked wheel is still listed (PEP 592), the document just no longer maps its label.
    _, files = project_pages(server, "wf-life")
    assert files[cu126.filename]["yanked"] is True

    proc = harness.cli("delete", "--data-dir", data, cu128.filename)
    assert proc.returncode == 0, proc.stderr
    assert wait_for(lambda: server.get(url).status == 404)
    anchors, files = project_pages(server, "wf-life")
    assert not [n for n in list(anchors) + list(files) if n.endswith("-variants.json")]
    # A release without variant wheels never had one.
    assert server.get("/simple/wf-life/wf_life-0.9-variants.json").status == 404

    # Unyanking brings the label back.
    proc = harness.cli("yank", "--data-dir", data, "wf-life", "--file", cu126.filename, "--undo")
    assert proc.returncode == 0, proc.stderr
    assert wait_for(lambda: labels() == {"cu126"}), labels()


# ---------------------------------------------------------------------------------------------
# Refusals


def test_contradicting_and_malformed_variants_are_refused(harness, server, upload_token,
                                                          artifacts):
    first = variant_wheel(artifacts, "wf-bad", "1.0", "cu128",
                          variant_doc("cu128", cuda_props("12.8")))
    assert server.put_file(first, upload_token).status == 201
    d = artifacts / "bad"
    cases = [
        # The same label means other properties in another file of the release.
        (variant_wheel(d / "0", "wf-bad", "1.0", "cu128", variant_doc("cu128", cuda_props("12.6")),
                       tag="cp312-cp312-linux_x86_64"),
         409, ["variant label 'cu128'", "cuda_version_lower_bound :: 12.6",
               "cuda_version_lower_bound :: 12.8", first.filename]),
        # Another label whose file redefines cu128 in its table.
        (variant_wheel(d / "1", "wf-bad", "1.0", "cu126",
                       {**variant_doc("cu126", cuda_props("12.6")),
                        "variants": {"cu126": cuda_props("12.6"), "cu128": cuda_props("12.9")}}),
         409, ["variant label 'cu128'", "12.9", first.filename]),
        # Default priorities the release's variants.json could not hold together.
        (variant_wheel(d / "2", "wf-bad", "1.0", "cu130",
                       variant_doc("cu130", cuda_props("13.0"), namespaces=("nvidia", "x86_64"))),
         409, ["default-priorities", first.filename]),
        (variant_wheel(d / "3", "wf-bad", "1.0", "cu129", None), 400, ["has no", "variant.json"]),
        (variant_wheel(d / "4", "wf-bad", "1.0", "cu129", variant_doc("cu126", cuda_props("12.6"))),
         400, ["does not define 'cu129'"]),
        (variant_wheel(d / "5", "wf-bad", "1.0", "cu129", '{"variants": '), 400, ["not valid JSON"]),
        (variant_wheel(d / "6", "wf-bad", "1.0", "cu129",
                       variant_doc("cu129", cuda_props("12.9"),
                                   schema="https://variants-schema.wheelnext.dev/v9.0.0.json")),
         400, ["v9.0.0", "does not read"]),
        (variant_wheel(d / "7", "wf-bad", "1.0", "cu129",
                       variant_doc("cu129", {"amd": {"gfx": ["gfx90a"]}})),
         400, ["namespace 'amd'", "default-priorities.namespace"]),
        # The label in the file name breaks PEP 825's characters.
        (variant_wheel(d / "8", "wf-bad", "1.0", "CU129", variant_doc("cu129", cuda_props("12.9"))),
         400, ["variant label \"CU129\" is not valid"]),
        # A local label and a CUDA property that disagree.
        (variant_wheel(d / "9", "wf-bad", "1.0+cu126", "cu128", variant_doc("cu128", cuda_props("12.8"))),
         400, ["cuda_version_lower_bound :: 12.8", "'+cu126'"]),
    ]
    for wheel, status, words in cases:
        before = (store_state(harness.data_dir), page_etags(server, "wf-bad"))
        resp = server.put_file(wheel, upload_token)
        assert resp.status == status, f"{wheel.filename}: {resp.status} {resp.text}"
        for word in words:
            assert word in resp.text, f"{wheel.filename}: {word!r} not in {resp.text!r}"
        assert_nothing_stored(harness.data_dir, server, "wf-bad", before, wheel.filename)
    # twine is told the same.
    proc = twine(harness, f"{server.url}/legacy/", upload_token, [cases[0][0].path])
    assert proc.returncode != 0
    assert "variant label 'cu128'" in proc.stdout + proc.stderr
    _, doc = fetch_variants_json(server, "wf-bad")
    assert doc["variants"] == {"cu128": cuda_props("12.8")}


def test_cuda_property_against_the_linked_runtime(harness, server, upload_token, artifacts,
                                                  tmp_path):
    if not shutil.which("gcc"):
        pytest.skip("gcc not on PATH (Debian package build-essential)")
    subprocess.run(["gcc", "-shared", "-fPIC", "-x", "c", "-", "-o", "libcudart.so.13",
                    "-Wl,-soname,libcudart.so.13"], input="int cudaGetDeviceCount(int* n) "
                   "{ *n = 0; return 0; }\n", text=True, cwd=tmp_path, check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-x", "c", "-", "-o", "ext.so", "-Wl,--no-as-needed",
                    "-L.", "-l:libcudart.so.13"],
                   input="int cudaGetDeviceCount(int*);\nint f(void) { int n; "
                   "return cudaGetDeviceCount(&n); }\nvoid* PyInit__C(void) { return 0; }\n",
                   text=True, cwd=tmp_path, check=True)
    so = (tmp_path / "ext.so").read_bytes()
    wrong = variant_wheel(artifacts, "wf-linked", "1.0", "cu128",
                          variant_doc("cu128", cuda_props("12.8")), so=so)
    resp = server.put_file(wrong, upload_token)
    assert resp.status == 400, resp.text
    for word in ("cuda_version_lower_bound :: 12.8", "libcudart.so.13", "CUDA 13"):
        assert word in resp.text, resp.text
    right = variant_wheel(artifacts, "wf-linked", "1.0", "cu130",
                          variant_doc("cu130", cuda_props("13.0")), so=so)
    assert server.put_file(right, upload_token).status == 201


# ---------------------------------------------------------------------------------------------
# Views


def test_variant_wheels_in_the_torch_cuda_views(server, upload_token, artifacts):
    pin = ("torch==2.8.*",)
    cu128 = variant_wheel(artifacts, "wf-view", "1.0", "cu128",
                          variant_doc("cu128", cuda_props("12.8")), requires_dist=pin)
    cu126 = variant_wheel(artifacts, "wf-view", "1.0", "cu126",
                          variant_doc("cu126", cuda_props("12.6")), requires_dist=pin)
    cu130 = variant_wheel(artifacts, "wf-view", "1.0", "cu130",
                          variant_doc("cu130", cuda_props("13.0")), requires_dist=pin)
    for w in (cu128, cu126, cu130):
        assert server.put_file(w, upload_token).status == 201, w.filename

    def listed(view: str) -> list[str]:
        _, files = project_pages(server, "wf-view", view)
        return sorted(n for n in files if n.endswith(".whl"))

    assert listed("/cu128/torch2.8/simple/") == [cu128.filename]
    assert listed("/cu126/torch2.8/simple/") == [cu126.filename]
    assert listed("/cu129/torch2.8/simple/") == [cu128.filename]  # highest lower minor
    assert listed("/cu130/torch2.8/simple/") == [cu130.filename]
    assert listed("/cu128/torch2.9/simple/") == []  # another torch series
    assert listed("/cpu/torch2.8/simple/") == []
    # The view page links the release's document too, the same one as /simple/.
    _, in_view = fetch_variants_json(server, "wf-view", "/cu128/torch2.8/simple/")
    _, plain = fetch_variants_json(server, "wf-view")
    assert in_view == plain and set(plain["variants"]) == {"cu126", "cu128", "cu130"}
    # The coverage API places them by their property.
    doc = server.get("/api/projects/wf-view/variants").json()
    cells = {f["filename"]: f for v in doc["versions"] for f in v["files"]}
    assert cells[cu128.filename]["backend"] == "cuda"
    assert cells[cu128.filename]["cuda"] == "12.8"
    assert cells[cu128.filename]["torch"] == "2.8"
    assert cells[cu128.filename]["variant_label"] == "cu128"
    assert cells[cu128.filename]["variant_properties"] == cuda_props("12.8")
