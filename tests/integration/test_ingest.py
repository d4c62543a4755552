"""`wheelforge ingest`: a wheelhouse tree as build scripts leave it, imported while the server
runs; bad files are reported one line each, good ones appear without a restart, identical files
are skipped on a second run."""

from __future__ import annotations

import re
import shutil

from pathlib import Path

from wfhelpers import JSON_TYPE, blob_objects, catalog_rows, make_wheel, wait_for

LABEL = "cu128torch2.8"


def build_wheelhouse(root):
    """wheelhouse/fa2.8.3/torch2.8/cu12x/*.whl: good wheels, and one whose METADATA version
    lacks the local label of its file name."""
    cu128 = root / "wheelhouse" / "fa2.8.3" / "torch2.8" / "cu128"
    cu126 = root / "wheelhouse" / "fa2.8.3" / "torch2.8" / "cu126"
    good = [
        make_wheel(cu128, "flash_attn", f"2.8.3+{LABEL}", tag="cp311-cp311-linux_x86_64"),
        make_wheel(cu128, "flash_attn", f"2.8.3+{LABEL}", tag="cp312-cp312-linux_x86_64"),
        make_wheel(cu126, "flash_attn", "2.8.3+cu126torch2.8", tag="cp311-cp311-linux_x86_64"),
        make_wheel(cu128, "fa_kernels", f"0.1+{LABEL}", tag="py3-none-any"),
    ]
    bad = make_wheel(
        cu128, "flash_attn", f"2.8.3+{LABEL}", tag="cp313-cp313-linux_x86_64", metadata_version="2.8.3"
    )
    return root / "wheelhouse", good, bad


def listed(server, project):
    resp = server.get(f"/simple/{project}/", {"Accept": JSON_TYPE})
    if resp.status != 200:
        return set()
    return {f["filename"] for f in resp.json()["files"]}


def lines_naming(text, filename):
    return [line for line in text.splitlines() if filename in line]


def test_ingest_wheelhouse_into_running_server(harness, server):
    wheelhouse, good, bad = build_wheelhouse(harness.root)
    assert server.get("/simple/flash-attn/").status == 404

    proc = harness.ingest(wheelhouse)
    assert proc.returncode != 0, "ingest succeeded although one file is invalid"
    reported = lines_naming(proc.stderr, bad.filename)
    assert len(reported) == 1, f"expected one line naming {bad.filename}:\n{proc.stderr}"
    assert re.search(r"version", reported[0], re.IGNORECASE), f"no reason given: {reported[0]}"
    for wheel in good:
        assert not any(re.search(r"reject|invalid|error", line, re.IGNORECASE)
                       for line in lines_naming(proc.stderr, wheel.filename)), proc.stderr

    expected = {
        "flash-attn": {w.filename for w in good if w.name == "flash_attn"},
        "fa-kernels": {w.filename for w in good if w.name == "fa_kernels"},
    }
    for project, filenames in expected.items():
        assert wait_for(lambda: listed(server, project) == filenames, timeout=5.0), (
            f"/simple/{project}/ lists {listed(server, project)}, expected {filenames}"
        )
    root = server.get("/simple/", {"Accept": JSON_TYPE}).json()
    assert {p["name"].replace("_", "-").lower() for p in root["projects"]} == set(expected)
    assert harness.filenames() == sorted(w.filename for w in good)

    # A second run finds the good files already stored and still reports the bad one.
    before = harness.state()
    again = harness.ingest(wheelhouse)
    assert again.returncode != 0
    assert len(lines_naming(again.stderr, bad.filename)) == 1, again.stderr
    assert harness.state() == before, "re-ingesting identical files changed the store"

    bad.path.unlink()
    clean = harness.ingest(wheelhouse)
    assert clean.returncode == 0, f"ingest of only good (already stored) files failed:\n{clean.stderr}"
    assert harness.state() == before
    assert listed(server, "flash-attn") == expected["flash-attn"]


def test_ingest_files_before_serving(harness, tokens, artifacts):
    wheels = [make_wheel(artifacts, "offline-pkg", v) for v in ("1.0", "1.1")]
    proc = harness.ingest(*(w.path for w in wheels))
    assert proc.returncode == 0, proc.stderr
    server = harness.serve()
    assert listed(server, "offline-pkg") == {w.filename for w in wheels}
    for wheel in wheels:
        entry = server.file_entry("offline-pkg", wheel.filename)
        assert entry["hashes"] == {"sha256": wheel.sha256}
        assert entry["core-metadata"] == {"sha256": wheel.metadata_sha256}


def blob_names(data_dir):
    return {Path(key).name for key, _size in blob_objects(data_dir)}


def test_ingest_batches_answer_every_file_as_if_one_at_a_time(harness, artifacts):
    """A wheelhouse larger than one batch (files are stored and recorded in batches of 128),
    plus copies of stored names at the end: one with the same bytes (skipped), two with other
    bytes (rejected, whether the first copy is in the same batch or an earlier one). The
    rejected bytes are not kept anywhere."""
    house = artifacts / "house"
    wheels = [make_wheel(house, "many-pkg", f"1.{i}") for i in range(140)]
    order = sorted(wheels, key=lambda w: str(w.path))
    first, last = order[0], order[-1]  # in the first and in the last batch
    same = artifacts / "same" / last.filename
    same.parent.mkdir()
    shutil.copy(last.path, same)
    clash_late = make_wheel(artifacts / "clash1", "many-pkg", last.version, value="other bytes")
    clash_early = make_wheel(artifacts / "clash2", "many-pkg", first.version, value="other too")
    assert clash_late.filename == last.filename and clash_late.sha256 != last.sha256

    proc = harness.ingest(house, same, clash_late.path, clash_early.path)
    assert proc.returncode == 1, f"ingest with two conflicting files exited {proc.returncode}"
    added = [line for line in proc.stdout.splitlines() if line.startswith("added ")]
    assert len(added) == len(wheels), proc.stdout[-2000:]
    assert lines_naming(proc.stdout, str(same)) == [
        f"skipped {same} (identical file already stored)"
    ], proc.stdout[-2000:]
    for clash in (clash_late, clash_early):
        reported = lines_naming(proc.stderr, str(clash.path))
        assert len(reported) == 1 and "File already exists" in reported[0], proc.stderr
    assert proc.stdout.splitlines()[-1] == f"{len(wheels)} added, 1 skipped, 2 rejected"

    rows = catalog_rows(harness.data_dir)
    assert len(rows) == len(wheels), rows[:5]
    assert harness.filenames() == sorted(w.filename for w in wheels)
    kept = blob_names(harness.data_dir)
    assert kept == {w.sha256 for w in wheels} | {w.metadata_sha256 for w in wheels}, (
        f"unexpected blobs: {sorted(kept - {w.sha256 for w in wheels} - {w.metadata_sha256 for w in wheels})[:3]}"
    )
    assert not any((harness.data_dir / "tmp").iterdir()), list((harness.data_dir / "tmp").iterdir())
