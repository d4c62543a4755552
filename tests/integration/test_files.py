"""File downloads: HEAD/GET headers, byte ranges, no content coding, PEP 658 `.metadata`,
percent-encoded `+` in local version labels, unknown files."""

from __future__ import annotations

import urllib.parse

import pytest

import wfbackend
from wfhelpers import make_wheel, path_of, sha256_hex


@pytest.fixture(autouse=True)
def server_sends_the_bytes():
    """How the server itself sends a file: with an S3 blob store (WF_TEST_BACKEND=pg-s3) under
    `file_serving = "proxy"`, where it answers from its read cache (a redirect hands the bytes
    to the store: test_s3_store.py)."""
    with wfbackend.file_serving("proxy"):
        yield


@pytest.fixture
def wheel(server, upload_token, artifacts):
    w = make_wheel(artifacts, "files-pkg", "2.0", requires_python=">=3.8", padding=3000)
    resp = server.put_file(w, upload_token)
    assert resp.status == 201, f"{resp.status}: {resp.text}"
    return w


@pytest.fixture
def url(server, wheel) -> str:
    """The file's URL path as the project page lists it."""
    return path_of(server.file_entry("files-pkg", wheel.filename)["url"])


def test_head(server, wheel, url):
    resp = server.head(url)
    assert resp.status == 200
    assert resp.body == b""
    assert int(resp.header("Content-Length")) == wheel.size
    assert resp.header("ETag")
    assert resp.header("Accept-Ranges") == "bytes"
    assert "immutable" in (resp.header("Cache-Control") or "")
    assert resp.header("Content-Encoding") is None


def test_get_whole_file_never_gzip(server, wheel, url):
    head = server.head(url)
    resp = server.get(url, {"Accept-Encoding": "gzip, deflate, br"})
    assert resp.status == 200
    assert resp.header("Content-Encoding") is None, "a download was content-coded"
    assert resp.body == wheel.data
    assert int(resp.header("Content-Length")) == wheel.size
    assert resp.header("ETag") == head.header("ETag")
    assert resp.header("Accept-Ranges") == "bytes"
    assert "immutable" in (resp.header("Cache-Control") or "")


@pytest.mark.parametrize(
    "spec, first, last",
    [
        pytest.param("bytes=0-9", 0, 9, id="first-ten"),
        pytest.param("bytes=-10", -10, -1, id="suffix"),
        pytest.param("bytes=100-", 100, -1, id="open-ended"),
        pytest.param("bytes=50-99999999", 50, -1, id="past-end-clamped"),
    ],
)
def test_range(server, wheel, url, spec, first, last):
    size = wheel.size
    first, last = first % size, last % size
    resp = server.get(url, {"Range": spec, "Accept-Encoding": "gzip"})
    assert resp.status == 206, f"{spec}: {resp.status}"
    assert resp.header("Content-Range") == f"bytes {first}-{last}/{size}"
    assert resp.body == wheel.data[first : last + 1]
    assert int(resp.header("Content-Length")) == last - first + 1
    assert resp.header("Content-Encoding") is None


@pytest.mark.parametrize("spec_of", [lambda n: f"bytes={n}-", lambda n: f"bytes={n + 10}-{n + 20}"],
                         ids=["at-end", "beyond-end"])
def test_unsatisfiable_range_is_416(server, wheel, url, spec_of):
    resp = server.get(url, {"Range": spec_of(wheel.size)})
    assert resp.status == 416
    assert resp.header("Content-Range") == f"bytes */{wheel.size}"


def test_metadata_file(server, wheel, url):
    entry = server.file_entry("files-pkg", wheel.filename)
    resp = server.get(url + ".metadata", {"Accept-Encoding": "identity"})
    assert resp.status == 200
    assert resp.body == wheel.metadata, "the .metadata file differs from METADATA in the wheel"
    assert sha256_hex(resp.body) == entry["core-metadata"]["sha256"]
    head = server.head(url + ".metadata")
    assert head.status == 200
    assert int(head.header("Content-Length")) == len(wheel.metadata)


def test_local_version_plus_sign(server, upload_token, artifacts):
    w = make_wheel(artifacts, "flash_attn", "2.8.3+cu128torch2.8", tag="cp311-cp311-linux_x86_64")
    assert "+" in w.filename
    assert server.put_file(w, upload_token).status == 201
    listed = path_of(server.file_entry("flash-attn", w.filename)["url"])
    directory, name = listed.rsplit("/", 1)
    assert urllib.parse.unquote(name) == w.filename
    encoded = f"{directory}/{urllib.parse.quote(w.filename, safe='')}"
    assert "%2B" in encoded
    for target in {listed, encoded, f"{directory}/{w.filename}", encoded.replace("%2B", "%2b")}:
        resp = server.get(target)
        assert resp.status == 200, f"GET {target}: {resp.status}"
        assert resp.body == w.data
        meta = server.get(target + ".metadata")
        assert meta.status == 200, f"GET {target}.metadata: {meta.status}"
        assert meta.body == w.metadata


@pytest.mark.parametrize(
    "target_of",
    [
        pytest.param(lambda url: "/files/" + "0" * 64 + "/nope-1.0-py3-none-any.whl", id="unknown"),
        pytest.param(lambda url: "/files/" + "0" * 64 + "/nope-1.0-py3-none-any.whl.metadata",
                     id="unknown-metadata"),
        pytest.param(lambda url: url.rsplit("/", 1)[0] + "/other-2.0-py3-none-any.whl",
                     id="known-digest-other-name"),
    ],
)
def test_unknown_file_is_404(server, wheel, url, target_of):
    for method in ("GET", "HEAD"):
        resp = server.request(method, target_of(url))
        assert resp.status == 404, f"{method} {target_of(url)}: {resp.status}"


def test_large_files_back_to_back_on_one_connection(server, upload_token, artifacts):
    """Large bodies stream corked (full segments); each response must still end cleanly so that
    the next request on the same keep-alive connection, small or large, is answered in full."""
    import http.client
    import time

    big = make_wheel(artifacts, "big-files-pkg", "1.0", padding=6_000_000)
    assert server.put_file(big, upload_token).status == 201
    big_url = path_of(server.file_entry("big-files-pkg", big.filename)["url"])
    host, port = server.host.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        for target, expected in [
            (big_url, big.data),
            (big_url + ".metadata", big.metadata),
            (big_url, big.data),
            ("/simple/", None),
            (big_url, big.data),
        ]:
            t0 = time.monotonic()
            conn.request("GET", target)
            resp = conn.getresponse()
            body = resp.read()
            assert resp.status == 200, (target, resp.status)
            if expected is not None:
                assert sha256_hex(body) == sha256_hex(expected), target
            # A response that ended without its last segment would stall until a timeout.
            assert time.monotonic() - t0 < 10, f"{target} took {time.monotonic() - t0:.1f} s"
    finally:
        conn.close()


@pytest.mark.parametrize("reset", [False, True], ids=["close", "reset"])
def test_clients_that_leave_mid_download_do_not_stop_the_server(server, upload_token, artifacts, reset):
    """A client that goes away while a file streams (pip cancelled, a lost network) makes the
    next write fail with EPIPE or ECONNRESET: that ends its connection and nothing else."""
    import socket
    import struct
    import time

    big = make_wheel(artifacts, "leaver-pkg", "1.0", padding=8_000_000)
    assert server.put_file(big, upload_token).status == 201
    big_url = path_of(server.file_entry("leaver-pkg", big.filename)["url"])
    host, port = server.host.split(":")
    for _ in range(5):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(f"GET {big_url} HTTP/1.1\r\nHost: {server.host}\r\n\r\n".encode())
            assert sock.recv(16384).startswith(b"HTTP/1.1 200 ")
            if reset:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        time.sleep(0.1)  # the server meets the closed socket on its next write
    assert not server.crashed(), server.log_tail()
    assert server.get("/healthz").status == 200
    resp = server.get(big_url)
    assert resp.status == 200 and sha256_hex(resp.body) == big.sha256
