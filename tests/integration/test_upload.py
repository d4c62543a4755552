"""PUT /upload/<filename>: every answer of the upload contract, driven by curl (and a raw socket
for a client that goes away), and the promise that a rejected upload leaves nothing behind."""

from __future__ import annotations

import json
import re
import socket

import pytest

from wfhelpers import curl_upload, make_wheel, normalize, path_of, wait_for


def assert_nothing_left(harness, before, what: str) -> None:
    """No new blob, temp file or catalog row since `before` (polled briefly: a temp file may
    be removed just after the answer was sent)."""
    if not wait_for(lambda: harness.state() == before, timeout=3.0):
        now = harness.state()
        raise AssertionError(
            f"{what} left something behind:\n"
            f"  new blobs: {sorted(now.blobs - before.blobs)}\n"
            f"  new tmp: {sorted(now.tmp - before.tmp)}\n"
            f"  rows before: {before.rows}\n  rows after: {now.rows}"
        )


def assert_rejected(result, status: int, words, harness, before, what: str) -> None:
    """`words`: one regex, or several that must all match the body (case-insensitive)."""
    assert result.status == status, (
        f"{what}: expected {status}, got {result.status} (curl rc {result.rc}: {result.stderr}); "
        f"body: {result.body[:300]!r}"
    )
    for word in [words] if isinstance(words, str) else words:
        assert re.search(word, result.body, re.IGNORECASE), (
            f"{what}: body does not name the problem (looked for /{word}/): {result.body[:300]!r}"
        )
    assert_nothing_left(harness, before, what)


@pytest.fixture
def seeded(harness, server, upload_token, artifacts):
    """One wheel already stored through curl; returns it."""
    wheel = make_wheel(artifacts, "seed-pkg", "1.0")
    result = curl_upload(server, harness.root, wheel.path, token=upload_token)
    assert result.status == 201, result.body
    return wheel


def test_upload_201_then_200_for_identical_bytes(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "Demo_Pkg", "1.0", requires_python=">=3.8")
    result = curl_upload(server, harness.root, wheel.path, token=upload_token)
    assert result.status == 201, f"{result.status}: {result.body}"
    body = json.loads(result.body)
    assert body["filename"] == wheel.filename
    assert normalize(body["project"]) == "demo-pkg"
    assert body["version"] == "1.0"
    assert body["sha256"] == wheel.sha256
    entry = server.file_entry("demo-pkg", wheel.filename)
    assert path_of(body["url"]) == path_of(entry["url"])
    assert harness.filenames() == [wheel.filename]
    stored = harness.state()
    assert any(size == wheel.size for _path, size in stored.blobs), stored.blobs

    again = curl_upload(server, harness.root, wheel.path, token=upload_token)
    assert again.status == 200, f"{again.status}: {again.body}"
    assert harness.state() == stored, "re-uploading identical bytes changed the store"


def test_upload_with_bearer_token(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "bearer-pkg", "0.1")
    result = curl_upload(server, harness.root, wheel.path, bearer=upload_token)
    assert result.status == 201, f"{result.status}: {result.body}"
    assert harness.filenames() == [wheel.filename]


def test_upload_409_same_name_different_bytes(harness, seeded, server, upload_token, artifacts):
    before = harness.state()
    other = make_wheel(artifacts / "other", "seed-pkg", "1.0", value="different bytes")
    assert other.filename == seeded.filename and other.sha256 != seeded.sha256
    result = curl_upload(server, harness.root, other.path, token=upload_token)
    assert result.status == 409, f"{result.status}: {result.body}"
    assert result.body.startswith("File already exists"), result.body[:200]
    assert_nothing_left(harness, before, "409 upload")
    listed = server.file_entry("seed-pkg", seeded.filename)
    assert listed["hashes"] == {"sha256": seeded.sha256}


def _not_a_zip(artifacts):
    path = artifacts / "bad" / "notzip-1.0-py3-none-any.whl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"this is plain text, not a zip archive\n" * 50)
    return path


def _zip_without(member):
    def build(artifacts):
        return make_wheel(artifacts / f"no-{member}", "incomplete-pkg", "1.0", omit=(member,)).path

    return build


def _name_disagrees(artifacts):
    return make_wheel(artifacts / "name", "named-pkg", "1.0", metadata_name="other-project").path


MISMATCH = r"match|disagree|differ|inconsistent"


def _version_disagrees(artifacts):
    return make_wheel(artifacts / "ver", "versioned-pkg", "1.0", metadata_version="2.0").path


@pytest.mark.parametrize(
    "build, words",
    [
        pytest.param(_not_a_zip, r"zip|archive", id="not-a-zip"),
        pytest.param(_zip_without("METADATA"), [r"(?-i:METADATA)", r"missing|not found|absent|without"],
                     id="no-METADATA"),
        pytest.param(_zip_without("WHEEL"), [r"(?-i:WHEEL)", r"missing|not found|absent|without"],
                     id="no-WHEEL"),
        pytest.param(_name_disagrees, [r"name", r"other-project", MISMATCH], id="metadata-name-disagrees"),
        pytest.param(_version_disagrees, [r"version", r"2\.0", MISMATCH], id="metadata-version-disagrees"),
    ],
)
def test_upload_400_invalid_content(harness, seeded, server, upload_token, artifacts, build, words):
    path = build(artifacts)
    before = harness.state()
    result = curl_upload(server, harness.root, path, token=upload_token)
    assert_rejected(result, 400, words, harness, before, f"upload of {path.name}")


@pytest.mark.parametrize(
    "target, words",
    [
        pytest.param("/upload/pkg-1.0.whl", r"part", id="wrong-part-count"),
        pytest.param("/upload/pkg-1.0~beta-py3-none-any.whl", [r"version", r"1\.0~beta"],
                     id="bad-version"),
        pytest.param("/upload/..%2Fpkg-1.0-py3-none-any.whl", r"separator|slash|must not contain '/'",
                     id="dot-dot-slash"),
        pytest.param("/upload/sub%2Fpkg-1.0-py3-none-any.whl", r"separator|slash|must not contain '/'",
                     id="slash-inside"),
        pytest.param("/upload/sub%5Cpkg-1.0-py3-none-any.whl", r"separator|backslash", id="backslash"),
        pytest.param("/upload/pkg%01-1.0-py3-none-any.whl", r"control", id="control-char"),
        pytest.param("/upload/" + "p" * 280 + "-1.0-py3-none-any.whl", r"long|length|limit",
                     id="over-long"),
    ],
)
def test_upload_400_invalid_filename(harness, seeded, server, upload_token, artifacts, target, words):
    # A valid wheel body, so the file name is the only thing wrong.
    wheel = make_wheel(artifacts / "valid", "pkg", "1.0")
    before = harness.state()
    result = curl_upload(server, harness.root, wheel.path, token=upload_token, target=target)
    assert_rejected(result, 400, words, harness, before, f"PUT {target[:60]}")
    assert "\x01" not in result.body, "the control character was echoed back"
    assert all("\x01" not in v for v in result.headers.values())


AUTH_WORDS = r"credential|token|auth|password|login"


def test_upload_401_without_credentials(harness, seeded, server, artifacts):
    wheel = make_wheel(artifacts, "anon-pkg", "1.0")
    before = harness.state()
    result = curl_upload(server, harness.root, wheel.path)
    assert_rejected(result, 401, AUTH_WORDS, harness, before, "anonymous upload")
    assert result.headers.get("www-authenticate", "").startswith("Basic"), result.headers


def test_upload_401_wrong_token(harness, seeded, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "wrong-pkg", "1.0")
    before = harness.state()
    wrong = upload_token[:-4] + ("AAAA" if not upload_token.endswith("AAAA") else "BBBB")
    for kind in ("basic", "bearer"):
        if kind == "basic":
            result = curl_upload(server, harness.root, wheel.path, token=wrong)
        else:
            result = curl_upload(server, harness.root, wheel.path, bearer="not-a-token")
        assert_rejected(result, 401, r"credential|token|auth|password|invalid", harness, before,
                        f"upload with a wrong token ({kind})")
        assert result.headers.get("www-authenticate", "").startswith("Basic"), result.headers


def test_upload_401_before_body_with_expect(harness, seeded, server, artifacts):
    wheel = make_wheel(artifacts, "expect-pkg", "1.0", padding=256 * 1024)
    before = harness.state()
    result = curl_upload(
        server, harness.root, wheel.path,
        extra=["-H", "Expect: 100-continue", "--expect100-timeout", "20"],
    )
    assert_rejected(result, 401, AUTH_WORDS, harness, before, "anonymous upload with Expect")
    assert 100 not in result.interim, "the server invited the body (100 Continue) before the 401"
    assert result.size_upload == 0, f"curl sent {result.size_upload} body bytes before the 401"


def test_upload_403_read_token(harness, seeded, server, tokens, artifacts):
    wheel = make_wheel(artifacts, "reader-pkg", "1.0")
    before = harness.state()
    result = curl_upload(server, harness.root, wheel.path, token=tokens["read"])
    assert_rejected(result, 403, r"scope|permission|forbidden|upload|not allowed", harness, before,
                    "upload with a read token")


LIMIT = 64 * 1024
SIZE_WORDS = r"large|size|limit|exceed"


@pytest.fixture
def limited(harness, tokens):
    return harness.serve("--max-upload-size", str(LIMIT))


def test_upload_413_with_expect_continue_sends_no_body(harness, limited, upload_token, artifacts):
    small = make_wheel(artifacts, "small-pkg", "1.0")
    ok = curl_upload(limited, harness.root, small.path, token=upload_token)
    assert ok.status == 201, f"a wheel under the limit was refused: {ok.status} {ok.body}"

    big = make_wheel(artifacts, "big-pkg", "1.0", padding=4 * LIMIT)
    assert big.size > LIMIT
    before = harness.state()
    result = curl_upload(
        limited, harness.root, big.path, token=upload_token,
        extra=["-H", "Expect: 100-continue", "--expect100-timeout", "20"],
    )
    assert_rejected(result, 413, SIZE_WORDS, harness, before, "oversized upload (Expect)")
    assert 100 not in result.interim, "the server invited the body (100 Continue) before the 413"
    assert result.size_upload == 0, f"curl sent {result.size_upload} body bytes before the 413"


def test_upload_413_without_expect(harness, limited, upload_token, artifacts):
    big = make_wheel(artifacts, "big-pkg", "1.0", padding=4 * LIMIT)
    before = harness.state()
    # `Expect:` with no value stops curl from sending the header: the body follows at once.
    result = curl_upload(limited, harness.root, big.path, token=upload_token, extra=["-H", "Expect:"])
    assert_rejected(result, 413, SIZE_WORDS, harness, before, "oversized upload")
    assert limited.get("/simple/").status == 200, "server unusable after a 413"


def test_client_disconnect_mid_upload_leaves_nothing(harness, seeded, server, upload_token):
    before = harness.state()
    host, port = server.host.split(":")
    request = (
        f"PUT /upload/gone-1.0-py3-none-any.whl HTTP/1.1\r\n"
        f"Host: {server.host}\r\n"
        f"Authorization: Bearer {upload_token}\r\n"
        f"Content-Type: application/octet-stream\r\n"
        f"Content-Length: 1000000\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request + b"PK\x03\x04" + b"\0" * 996)
    # Let the server notice first (it logs the request), so the check below is not too early.
    wait_for(lambda: "gone-1.0-py3-none-any.whl" in server.log(), timeout=5.0)
    assert_nothing_left(harness, before, "an upload cut off by the client")
    assert wait_for(lambda: server.get("/simple/").status == 200), "server unusable afterwards"
    assert "gone" not in server.get("/simple/").text


def test_upload_local_version_label(harness, server, upload_token, artifacts):
    """A wheel whose file name carries a local version label (`+`) is stored byte for byte."""
    wheel = make_wheel(artifacts, "kern", "0.3+cu128torch2.8", tag="cp311-cp311-linux_x86_64")
    result = curl_upload(server, harness.root, wheel.path, token=upload_token)
    assert result.status == 201, f"{result.status}: {result.body}"
    entry = server.file_entry("kern", wheel.filename)
    assert entry["hashes"] == {"sha256": wheel.sha256}
    assert entry["core-metadata"] == {"sha256": wheel.metadata_sha256}
    assert harness.filenames() == [wheel.filename]
