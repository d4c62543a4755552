"""One file per canonical name: file names are compared after normalization (the project name
per PEP 503, the version per PEP 440, the build tag by number, the compressed tag sets as sets),
and a release has one sdist. Identical bytes under another spelling are the stored file, other
bytes are a 409 (also after the name was deleted), through PUT, twine and `wheelforge ingest`,
and two racing uploads of two spellings cannot both win.

After every refusal, nothing is stored (no blob, temp file or row) and the pages' ETags stay."""

from __future__ import annotations

import json
import re
import shutil
import threading
from pathlib import Path

from test_publish import delete_request, output_of, twine
from wfhelpers import (
    Artifact,
    assert_nothing_stored,
    curl_upload,
    make_sdist,
    make_wheel,
    page_etags,
    store_state,
    wait_for,
)

PROJECT = "demo-pkg"
ALREADY = r"^File already exists"


def copy_as(artifact: Artifact, directory: Path, filename: str) -> Artifact:
    """The same bytes under another file name."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    shutil.copyfile(artifact.path, path)
    return Artifact(path, artifact.name, artifact.version, artifact.metadata)


def snapshot(harness, server, project: str = PROJECT):
    return store_state(harness.data_dir), page_etags(server, project)


def listed_sha256(server, project: str = PROJECT) -> dict[str, str]:
    page = server.project_json(project)
    return {f["filename"]: f["hashes"]["sha256"] for f in page["files"]}


def test_identical_bytes_under_another_spelling_are_the_stored_file(
    harness, server, upload_token, artifacts
):
    wheel = make_wheel(artifacts, "Demo_Pkg", "1.0")
    assert wheel.filename == "Demo_Pkg-1.0-py3-none-any.whl"
    first = curl_upload(server, harness.root, wheel.path, token=upload_token)
    assert first.status == 201, f"{first.status}: {first.body}"

    for spelling in (
        "demo.pkg-1.0-py3-none-any.whl",
        "demo_pkg-1.0-py3-none-any.whl",
        "DEMO_PKG-1.0.0-py3-none-any.whl",
    ):
        copy = copy_as(wheel, artifacts / spelling, spelling)
        before = snapshot(harness, server)
        result = curl_upload(server, harness.root, copy.path, token=upload_token)
        assert result.status == 200, f"PUT {spelling}: {result.status} {result.body}"
        body = json.loads(result.body)
        assert body["filename"] == wheel.filename, body
        assert body["sha256"] == wheel.sha256, body
        assert_nothing_stored(harness.data_dir, server, PROJECT, before, f"PUT {spelling}")
    assert harness.filenames() == [wheel.filename]


def _other_name(artifacts: Path) -> Artifact:
    return make_wheel(artifacts / "name", "demo.pkg", "1.0", tag="py2.py3-none-any",
                      value="other bytes", filename="demo.pkg-1.0-py2.py3-none-any.whl")


def _other_version(artifacts: Path) -> Artifact:
    return make_wheel(artifacts / "version", "Demo_Pkg", "1.0.0", tag="py2.py3-none-any")


def _other_tag_order(artifacts: Path) -> Artifact:
    return make_wheel(artifacts / "tags", "Demo_Pkg", "1.0", tag="py3.py2-none-any",
                      value="other bytes")


def _other_case(artifacts: Path) -> Artifact:
    return make_wheel(artifacts / "case", "DEMO_PKG", "1.0", tag="PY2.py3-none-ANY",
                      value="other bytes")


def test_other_bytes_under_another_spelling_409(harness, server, upload_token, artifacts):
    stored = make_wheel(artifacts, "Demo_Pkg", "1.0", tag="py2.py3-none-any")
    first = curl_upload(server, harness.root, stored.path, token=upload_token)
    assert first.status == 201, f"{first.status}: {first.body}"

    for build in (_other_name, _other_version, _other_tag_order, _other_case):
        other = build(artifacts)
        assert other.filename != stored.filename and other.sha256 != stored.sha256
        before = snapshot(harness, server)
        result = curl_upload(server, harness.root, other.path, token=upload_token)
        assert result.status == 409, f"PUT {other.filename}: {result.status} {result.body}"
        assert re.match(ALREADY, result.body), result.body
        assert stored.filename in result.body, f"the stored file is not named: {result.body}"
        assert_nothing_stored(harness.data_dir, server, PROJECT, before, f"PUT {other.filename}")
    assert listed_sha256(server) == {stored.filename: stored.sha256}


def test_other_build_tags_and_tags_are_other_files(harness, server, upload_token, artifacts):
    """The rule compares names, it does not merge different files: these are all stored."""
    wheels = [
        make_wheel(artifacts / "a", "Demo_Pkg", "1.0", tag="py2.py3-none-any"),
        make_wheel(artifacts / "b", "Demo_Pkg", "1.0", tag="py3-none-any"),
        make_wheel(artifacts / "c", "Demo_Pkg", "1.0.1", tag="py2.py3-none-any"),
        make_wheel(artifacts / "d", "Demo_Pkg", "1.0", tag="py2.py3-none-any",
                   filename="Demo_Pkg-1.0-1-py2.py3-none-any.whl"),
    ]
    for wheel in wheels:
        result = curl_upload(server, harness.root, wheel.path, token=upload_token)
        assert result.status == 201, f"PUT {wheel.filename}: {result.status} {result.body}"
    # The build tag 01 sorts as 1 (PEP 427): the same file name as the one above.
    zero = make_wheel(artifacts / "e", "Demo_Pkg", "1.0", tag="py2.py3-none-any", value="x",
                      filename="Demo_Pkg-1.0-01-py2.py3-none-any.whl")
    before = snapshot(harness, server)
    result = curl_upload(server, harness.root, zero.path, token=upload_token)
    assert result.status == 409, f"{result.status}: {result.body}"
    assert_nothing_stored(harness.data_dir, server, PROJECT, before, "build tag 01 after 1")
    assert sorted(listed_sha256(server)) == sorted(w.filename for w in wheels)


def test_deleted_name_stays_reserved_in_every_spelling(harness, upload_token, artifacts):
    admin = harness.token("admin")
    server = harness.serve()
    wheel = make_wheel(artifacts, "Demo_Pkg", "1.0")
    keep = make_wheel(artifacts, "Demo_Pkg", "2.0")
    for artifact in (wheel, keep):
        result = curl_upload(server, harness.root, artifact.path, token=upload_token)
        assert result.status == 201, f"{result.status}: {result.body}"
    answer = delete_request(server, wheel.filename, admin)
    assert 200 <= answer.status < 300, answer.describe()

    candidates = [
        copy_as(wheel, artifacts / "same", "demo.pkg-1.0-py3-none-any.whl"),
        make_wheel(artifacts / "rebuilt", "demo_pkg", "1.0.0", value="rebuilt"),
    ]
    for other in candidates:
        before = snapshot(harness, server)
        result = curl_upload(server, harness.root, other.path, token=upload_token)
        assert result.status == 409, f"PUT {other.filename}: {result.status} {result.body}"
        assert re.match(ALREADY, result.body), result.body
        assert re.search(r"deleted", result.body) and wheel.filename in result.body, result.body
        assert_nothing_stored(harness.data_dir, server, PROJECT, before, f"PUT {other.filename}")
    assert listed_sha256(server) == {keep.filename: keep.sha256}


def test_damaged_file_is_healed_by_its_bytes_under_another_spelling(harness, tokens, artifacts):
    from test_ops import VERIFY, blob_path, flip_byte

    server = harness.serve()
    token = tokens["upload"]
    wheel = make_wheel(artifacts, "Demo_Pkg", "1.0", padding=30_000)
    keep = make_wheel(artifacts, "Demo_Pkg", "2.0")
    for artifact in (wheel, keep):
        assert server.put_file(artifact, token).status == 201
    flip_byte(blob_path(harness.data_dir, wheel.sha256))
    repair = harness.cli("fsck", "--data-dir", str(harness.data_dir), "--min-age", "0", "--repair",
                         *VERIFY)
    assert repair.returncode == 1 and f"withdrew {wheel.filename}" in repair.stdout, repair.stdout
    assert wait_for(lambda: wheel.filename not in listed_sha256(server), timeout=10)

    # Other bytes under another spelling are still refused: the name is the damaged file's.
    other = make_wheel(artifacts / "other", "demo.pkg", "1.0.0", value="other bytes")
    before = snapshot(harness, server)
    result = curl_upload(server, harness.root, other.path, token=token)
    assert result.status == 409, f"{result.status}: {result.body}"
    assert_nothing_stored(harness.data_dir, server, PROJECT, before, f"PUT {other.filename}")

    # The file's own bytes under another spelling heal it, under its stored name.
    copy = copy_as(wheel, artifacts / "copy", "demo.pkg-1.0.0-py3-none-any.whl")
    result = curl_upload(server, harness.root, copy.path, token=token)
    assert result.status in (200, 201), f"{result.status}: {result.body}"
    assert json.loads(result.body)["filename"] == wheel.filename, result.body
    assert wait_for(lambda: listed_sha256(server) == {wheel.filename: wheel.sha256,
                                                      keep.filename: keep.sha256}, timeout=10)
    assert sorted(harness.filenames()) == sorted([wheel.filename, keep.filename])
    assert blob_path(harness.data_dir, wheel.sha256).read_bytes() == wheel.data


def test_one_sdist_per_release(harness, server, upload_token, artifacts):
    sdist = make_sdist(artifacts, "demo-pkg", "1.0")
    assert sdist.filename == "demo_pkg-1.0.tar.gz"
    first = curl_upload(server, harness.root, sdist.path, token=upload_token)
    assert first.status == 201, f"{first.status}: {first.body}"

    others = [
        make_sdist(artifacts / "legacy", "demo-pkg", "1.0", requires_python=">=3.9",
                   filename="demo-pkg-1.0.tar.gz"),
        make_sdist(artifacts / "dotted", "Demo.Pkg", "1.0", requires_python=">=3.10",
                   filename="Demo.Pkg-1.0.tar.gz"),
        make_sdist(artifacts / "longer", "demo-pkg", "1.0.0"),
    ]
    for other in others:
        before = snapshot(harness, server)
        result = curl_upload(server, harness.root, other.path, token=upload_token)
        assert result.status == 409, f"PUT {other.filename}: {result.status} {result.body}"
        assert re.match(ALREADY, result.body), result.body
        assert "only one sdist per release" in result.body, result.body
        assert sdist.filename in result.body, result.body
        assert_nothing_stored(harness.data_dir, server, PROJECT, before, f"PUT {other.filename}")

    # A wheel of the release, and the sdist of the next release, are welcome.
    for artifact in (make_wheel(artifacts, "demo-pkg", "1.0"), make_sdist(artifacts, "demo-pkg", "1.1")):
        result = curl_upload(server, harness.root, artifact.path, token=upload_token)
        assert result.status == 201, f"PUT {artifact.filename}: {result.status} {result.body}"


def test_twine_other_spelling_and_second_sdist(harness, server, upload_token, artifacts):
    url = server.url + "/legacy/"
    wheel = make_wheel(artifacts, "Demo_Pkg", "1.0")
    sdist = make_sdist(artifacts, "Demo_Pkg", "1.0")
    first = twine(harness, url, upload_token, [wheel.path, sdist.path])
    assert first.returncode == 0, f"twine upload failed:\n{output_of(first)}"

    same = copy_as(wheel, artifacts / "same", "demo.pkg-1.0-py3-none-any.whl")
    other = make_wheel(artifacts / "other", "demo.pkg", "1.0.0", value="other bytes",
                       filename="demo.pkg-1.0.0-py3-none-any.whl")
    second_sdist = make_sdist(artifacts / "sdist", "demo-pkg", "1.0", requires_python=">=3.9",
                              filename="demo-pkg-1.0.tar.gz")
    for artifact in (same, other, second_sdist):
        before = snapshot(harness, server)
        proc = twine(harness, url, upload_token, [artifact.path])
        text = output_of(proc)
        assert proc.returncode != 0, f"twine stored {artifact.filename}:\n{text}"
        assert "409" in text and "File already exists" in text, text
        assert_nothing_stored(harness.data_dir, server, PROJECT, before,
                              f"twine upload of {artifact.filename}")

    before = snapshot(harness, server)
    skipped = twine(harness, url, upload_token, [same.path, other.path, second_sdist.path],
                    "--skip-existing")
    text = output_of(skipped)
    assert skipped.returncode == 0, f"--skip-existing did not skip:\n{text}"
    for artifact in (same, other, second_sdist):
        assert re.search(rf"Skipping {re.escape(artifact.filename)}", text), text
    assert_nothing_stored(harness.data_dir, server, PROJECT, before, "twine --skip-existing")
    assert sorted(harness.filenames()) == sorted([wheel.filename, sdist.filename])


def test_ingest_applies_the_rule_per_file(harness, server, upload_token, artifacts):
    uploaded = make_wheel(artifacts, "Demo_Pkg", "1.0")
    result = curl_upload(server, harness.root, uploaded.path, token=upload_token)
    assert result.status == 201, f"{result.status}: {result.body}"

    house = harness.root / "wheelhouse"
    # Another spelling of the uploaded file with other bytes, two spellings of one new file
    # with other bytes (one batch), and an identical copy under another spelling.
    clash = make_wheel(house / "a", "demo.pkg", "1.0", value="clash",
                       filename="demo.pkg-1.0-py3-none-any.whl")
    first = make_wheel(house / "b", "Demo_Pkg", "2.0", value="first")
    second = make_wheel(house / "c", "demo_pkg", "2.0.0", value="second")
    same = copy_as(uploaded, house / "d", "demo_pkg-1.0.0-py3-none-any.whl")
    before = snapshot(harness, server)
    proc = harness.ingest(house)
    assert proc.returncode != 0, f"ingest accepted every file:\n{proc.stdout}{proc.stderr}"

    def line(artifact: Artifact) -> str:
        found = [x for x in (proc.stdout + proc.stderr).splitlines() if str(artifact.path) in x]
        assert len(found) == 1, f"expected one line for {artifact.path}:\n{proc.stdout}{proc.stderr}"
        return found[0]

    assert line(clash).startswith("rejected") and "File already exists" in line(clash)
    assert uploaded.filename in line(clash), line(clash)
    assert line(first).startswith("added"), line(first)
    assert line(second).startswith("rejected") and "File already exists" in line(second)
    assert line(same).startswith("skipped"), line(same)
    assert sorted(harness.filenames()) == sorted([uploaded.filename, first.filename])
    state, _etags = before
    assert len(store_state(harness.data_dir).rows) == len(state.rows) + 1


def test_racing_uploads_of_two_spellings_one_wins(harness, server, upload_token, artifacts):
    rounds = 6
    for n in range(rounds):
        version = f"3.{n}"
        a = make_wheel(artifacts / f"{n}a", "Demo_Pkg", version, value="a")
        b = make_wheel(artifacts / f"{n}b", "demo.pkg", version, value="b",
                       filename=f"demo.pkg-{version}-py3-none-any.whl")
        barrier = threading.Barrier(2)
        statuses: dict[str, int] = {}

        def put(artifact: Artifact) -> None:
            barrier.wait()
            statuses[artifact.filename] = server.put_file(artifact, upload_token).status

        threads = [threading.Thread(target=put, args=(x,)) for x in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(statuses.values()) == [201, 409], f"round {n}: {statuses}"
        winner = a if statuses[a.filename] == 201 else b
        listed = {f: s for f, s in listed_sha256(server).items() if f"-{version}-" in f}
        assert listed == {winner.filename: winner.sha256}, f"round {n}: {listed}"
    assert len(harness.filenames()) == rounds
