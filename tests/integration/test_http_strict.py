"""Strict HTTP/1.1 (RFC 9112) at the connection level, driven through raw sockets where curl
cannot produce the input: request framing (Transfer-Encoding), Host, bodies that stop before
their length, the connection caps (connections that never sent a request closed first to make
room, then idle keep-alive ones, 503 with Retry-After only when every connection is busy, a cap
per client address, 1,500 silent sockets that cannot lock a client out), the first-byte
deadline, tokens kept out of the logs, and tokens created by another process accepted at once.

Every refused upload is checked to leave nothing behind: no blob, temp file or catalog row,
and the pages' ETags unchanged.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import http.client
import os
import re
import resource
import select
import socket
import time

import pytest

from wfhelpers import (
    curl,
    curl_upload,
    http_request,
    make_wheel,
    put_awaiting_body,
    store_state,
    wait_for,
)

# ---------------------------------------------------------------------------------------------
# A raw HTTP/1.1 client


@dataclasses.dataclass
class RawResponse:
    version: str
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def parse_responses(data: bytes) -> tuple[list[RawResponse], bytes]:
    """Every complete response in `data` (bodies by Content-Length), and what is left over."""
    out: list[RawResponse] = []
    while True:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            return out, data
        head = data[:end].decode("latin-1").split("\r\n")
        match = re.fullmatch(r"(HTTP/1\.[01]) (\d{3}) ?.*", head[0])
        assert match, f"not a status line: {head[0]!r} (received {data[:300]!r})"
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        if len(data) < end + 4 + length:
            return out, data
        body = data[end + 4 : end + 4 + length]
        out.append(RawResponse(match.group(1), int(match.group(2)), headers, body))
        data = data[end + 4 + length :]


def read_until_closed(sock: socket.socket, timeout: float = 20.0) -> tuple[bytes, bool]:
    """Everything the server sends until it closes the connection (True) or `timeout` passes
    (False: the connection is still open)."""
    data = b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return data, False
        readable, _, _ = select.select([sock], [], [], left)
        if not readable:
            continue
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk


def connect(server, source: str | None = None) -> socket.socket:
    host, port = server.host.split(":")
    return socket.create_connection(
        (host, int(port)), timeout=20, source_address=(source, 0) if source else None
    )


def exchange(server, request: bytes, *, half_close: bool = False, source: str | None = None):
    """Sends `request` on a fresh connection and reads until the server closes it: (the
    responses, whether the server closed the connection, bytes after the last response)."""
    with contextlib.closing(connect(server, source)) as sock:
        try:
            sock.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before taking everything
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        data, closed = read_until_closed(sock)
    responses, rest = parse_responses(data)
    return responses, closed, rest


def chunked(data: bytes, piece: int = 4096) -> bytes:
    out = b""
    for i in range(0, len(data), piece):
        part = data[i : i + piece]
        out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return out + b"0\r\n\r\n"


def basic(token: str) -> str:
    return "Basic " + base64.b64encode(f"__token__:{token}".encode()).decode()


def pages_state(server, project: str) -> tuple:
    """The ETags of the root page and a project's page (404s count as None)."""
    root = server.get("/simple/")
    page = server.get(f"/simple/{project}/")
    return (root.status, root.header("ETag"), page.status, page.header("ETag"))


def assert_nothing_stored(harness, server, before_store, before_pages, project: str, what: str):
    assert wait_for(lambda: store_state(harness.data_dir) == before_store, timeout=5.0), (
        f"{what} left something behind: before {before_store}, after {store_state(harness.data_dir)}"
    )
    assert pages_state(server, project) == before_pages, f"{what} changed the pages"


# ---------------------------------------------------------------------------------------------
# 1. Transfer-Encoding: chunked alone, or 400 and the connection closed (RFC 9112 §6.1, §6.3)

SMUGGLED = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.mark.parametrize(
    "te_lines",
    [
        ["chunked, gzip"],
        ["gzip, chunked"],
        ["identity"],
        ["gzip"],
        ["x-unknown-coding"],
        ["chunked;ext=1"],
        ["gzip", "chunked"],
        ["chunked", "chunked"],
    ],
    ids=lambda v: " + ".join(v),
)
def test_transfer_encoding_other_than_chunked_alone_is_refused(harness, server, te_lines):
    te = "".join(f"Transfer-Encoding: {v}\r\n" for v in te_lines)
    request = f"GET /simple/ HTTP/1.1\r\nHost: {server.host}\r\n{te}\r\n".encode() + SMUGGLED
    responses, closed, rest = exchange(server, request)
    statuses = [r.status for r in responses]
    assert statuses == [400], (
        f"Transfer-Encoding {te_lines}: expected exactly one answer, a 400; got {statuses} "
        "(two answers mean the body was run as a second request)"
    )
    assert closed, "the connection stayed open after a framing error"
    assert rest == b"", f"bytes after the 400: {rest[:200]!r}"
    assert re.search(r"transfer.encoding", responses[0].text, re.IGNORECASE), responses[0].text
    assert responses[0].headers.get("connection", "").lower() == "close"
    assert server.get("/healthz").status == 200


def test_smuggled_request_is_never_run(harness, server, upload_token, artifacts):
    """`chunked, gzip` leaves the body length unknowable: the body, another request here, must
    not run. The smuggled request would upload a wheel; nothing may be stored."""
    wheel = make_wheel(artifacts, "smuggled", "1.0")
    smuggled = (
        f"PUT /upload/{wheel.filename} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {upload_token}\r\n"
        f"Content-Length: {wheel.size}\r\n\r\n"
    ).encode() + wheel.data
    before, pages = store_state(harness.data_dir), pages_state(server, "smuggled")
    request = (
        f"GET /simple/ HTTP/1.1\r\nHost: {server.host}\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"
    ).encode() + smuggled
    responses, closed, _ = exchange(server, request)
    assert [r.status for r in responses] == [400], [(r.status, r.text[:100]) for r in responses]
    assert closed
    assert_nothing_stored(harness, server, before, pages, "smuggled", "a smuggled upload")


@pytest.mark.parametrize(
    "version,te_lines",
    [
        ("1.1", ["gzip, chunked"]),
        ("1.1", ["gzip", "chunked"]),
        ("1.1", ["chunked, identity"]),
        ("1.0", ["chunked"]),
    ],
    ids=lambda v: v if isinstance(v, str) else " + ".join(v),
)
def test_upload_with_refused_transfer_encoding_stores_nothing(
    harness, server, upload_token, artifacts, version, te_lines
):
    wheel = make_wheel(artifacts, "framed", "1.0")
    before, pages = store_state(harness.data_dir), pages_state(server, "framed")
    te = "".join(f"Transfer-Encoding: {v}\r\n" for v in te_lines)
    request = (
        f"PUT /upload/{wheel.filename} HTTP/{version}\r\nHost: {server.host}\r\n"
        f"Authorization: Bearer {upload_token}\r\n{te}\r\n"
    ).encode() + chunked(wheel.data)
    responses, closed, _ = exchange(server, request)
    assert [r.status for r in responses] == [400], [(r.status, r.text[:200]) for r in responses]
    assert closed
    assert "Transfer-Encoding" in responses[0].text, responses[0].text
    if version == "1.0":
        assert "HTTP/1.0" in responses[0].text, responses[0].text
    assert_nothing_stored(harness, server, before, pages, "framed", f"TE {te_lines} on HTTP/{version}")


def test_chunked_upload_still_works(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "chunky", "1.0")
    request = (
        f"PUT /upload/{wheel.filename} HTTP/1.1\r\nHost: {server.host}\r\n"
        f"Authorization: Bearer {upload_token}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode() + chunked(wheel.data)
    responses, closed, _ = exchange(server, request)
    assert [r.status for r in responses] == [201], [(r.status, r.text[:200]) for r in responses]
    assert server.file_entry("chunky", wheel.filename)["hashes"]["sha256"] == wheel.sha256


# ---------------------------------------------------------------------------------------------
# 2. Host (RFC 9112 §3.2)


@pytest.mark.parametrize(
    "host_lines,words",
    [
        ([], "needs a Host"),
        (["a.example", "b.example"], "more than one Host"),
        (["a.example", "a.example"], "more than one Host"),
        (["exa mple"], "invalid Host"),
        (["user@host"], "invalid Host"),
        (["host/path"], "invalid Host"),
        (["host:80x"], "invalid Host"),
    ],
    ids=["missing", "two", "two-same", "space", "userinfo", "path", "bad-port"],
)
def test_bad_host_is_refused(harness, server, host_lines, words):
    hosts = "".join(f"Host: {h}\r\n" for h in host_lines)
    responses, closed, _ = exchange(server, f"GET /simple/ HTTP/1.1\r\n{hosts}\r\n".encode())
    assert [r.status for r in responses] == [400], [(r.status, r.text[:200]) for r in responses]
    assert words in responses[0].text, responses[0].text
    assert closed


def test_upload_without_host_stores_nothing(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "hostless", "1.0")
    before, pages = store_state(harness.data_dir), pages_state(server, "hostless")
    request = (
        f"PUT /upload/{wheel.filename} HTTP/1.1\r\nAuthorization: Bearer {upload_token}\r\n"
        f"Content-Length: {wheel.size}\r\n\r\n"
    ).encode() + wheel.data
    responses, closed, _ = exchange(server, request)
    assert [r.status for r in responses] == [400], [(r.status, r.text[:200]) for r in responses]
    assert closed
    assert_nothing_stored(harness, server, before, pages, "hostless", "an upload without Host")


@pytest.mark.parametrize(
    "request_head",
    [
        "GET /simple/ HTTP/1.0\r\n\r\n",
        "GET /simple/ HTTP/1.0\r\nHost: a.example\r\n\r\n",
        "GET /simple/ HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n",
        "GET /simple/ HTTP/1.1\r\nHost: \r\nConnection: close\r\n\r\n",
    ],
    ids=["http10-no-host", "http10-host", "ipv6-literal", "empty-host"],
)
def test_valid_hosts_are_served(harness, server, request_head):
    responses, _, _ = exchange(server, request_head.encode())
    assert [r.status for r in responses] == [200], [(r.status, r.text[:200]) for r in responses]


# ---------------------------------------------------------------------------------------------
# 3. A body that stops before its length: 408 with a message, and the temp file removed


def _partial_put(server, token: str, wheel, *, half_close: bool, wait: float = 20.0):
    """PUTs the first half of `wheel` with its full Content-Length; returns (responses, closed)."""
    half = wheel.data[: wheel.size // 2]
    request = (
        f"PUT /upload/{wheel.filename} HTTP/1.1\r\nHost: {server.host}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {wheel.size}\r\n\r\n"
    ).encode() + half
    with contextlib.closing(connect(server)) as sock:
        sock.sendall(request)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        data, closed = read_until_closed(sock, wait)
    responses, _ = parse_responses(data)
    return responses, closed


def _partial_form(server, token: str, wheel, *, half_close: bool):
    boundary = "wfboundary7d93"
    parts = [
        (":action", b"file_upload"),
        ("protocol_version", b"1"),
        ("name", wheel.name.encode()),
        ("version", wheel.version.encode()),
        ("filetype", b"bdist_wheel"),
    ]
    body = b""
    for name, value in parts:
        body += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        body += value + b"\r\n"
    body += (
        f'--{boundary}\r\nContent-Disposition: form-data; name="content"; filename="{wheel.filename}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    body += wheel.data + f"\r\n--{boundary}--\r\n".encode()
    request = (
        f"POST /legacy/ HTTP/1.1\r\nHost: {server.host}\r\nAuthorization: {basic(token)}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body[: len(body) - 1000]
    with contextlib.closing(connect(server)) as sock:
        sock.sendall(request)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        data, closed = read_until_closed(sock)
    responses, _ = parse_responses(data)
    return responses, closed


def test_upload_body_cut_short_by_half_close_gets_408(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "halfway", "1.0", padding=300_000)
    before, pages = store_state(harness.data_dir), pages_state(server, "halfway")
    responses, closed = _partial_put(server, upload_token, wheel, half_close=True)
    assert [r.status for r in responses] == [408], (
        f"a body that ended after {wheel.size // 2} of {wheel.size} bytes got "
        f"{[(r.status, r.text[:200]) for r in responses]} (closed: {closed})"
    )
    text = responses[0].text
    assert "incomplete" in text and f"of {wheel.size} bytes" in text, text
    assert closed
    assert_nothing_stored(harness, server, before, pages, "halfway", "a body cut short")
    assert wait_for(lambda: "upload of halfway-1.0-py3-none-any.whl aborted" in server.log())


def test_form_upload_cut_short_by_half_close_gets_408(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "halfform", "1.0", padding=200_000)
    before, pages = store_state(harness.data_dir), pages_state(server, "halfform")
    responses, closed = _partial_form(server, upload_token, wheel, half_close=True)
    assert [r.status for r in responses] == [408], [(r.status, r.text[:200]) for r in responses]
    assert "incomplete" in responses[0].text, responses[0].text
    assert closed
    assert_nothing_stored(harness, server, before, pages, "halfform", "a form cut short")


def test_upload_body_that_stalls_gets_408_at_the_read_deadline(harness, tokens, artifacts):
    server = harness.serve("--read-timeout", "2s")
    wheel = make_wheel(artifacts, "stalled", "1.0", padding=100_000)
    before, pages = store_state(harness.data_dir), pages_state(server, "stalled")
    responses, closed = _partial_put(server, tokens["upload"], wheel, half_close=False)
    assert [r.status for r in responses] == [408], (
        f"a body that stalled got {[(r.status, r.text[:200]) for r in responses]} (closed: {closed})"
    )
    text = responses[0].text
    assert "upload too slow" in text and "no data for 2 s" in text, text
    assert closed
    assert_nothing_stored(harness, server, before, pages, "stalled", "a stalled body")
    # The server goes on serving.
    wheel2 = make_wheel(artifacts, "after-stall", "1.0")
    assert curl_upload(server, harness.root, wheel2.path, token=tokens["upload"]).status == 201


def test_admin_body_cut_short_gets_408(harness, tokens):
    admin = harness.token("admin")
    server = harness.serve()
    request = (
        f"POST /admin/yank HTTP/1.1\r\nHost: {server.host}\r\nAuthorization: Bearer {admin}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 500\r\n\r\nproject=x"
    ).encode()
    responses, closed, _ = exchange(server, request, half_close=True)
    assert [r.status for r in responses] == [408], [(r.status, r.text[:200]) for r in responses]
    assert closed


# ---------------------------------------------------------------------------------------------
# 4. The connection caps


def _keep_alive_connections(server, n: int) -> list[http.client.HTTPConnection]:
    """`n` connections that each served a request and now sit idle, kept alive."""
    host, port = server.host.split(":")
    conns = []
    for _ in range(n):
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        assert resp.status == 200
        resp.read()
        assert not resp.will_close
        conns.append(conn)
    return conns


def _socket_closed(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except ConnectionResetError:
        return True


def _closed_by_server(conn: http.client.HTTPConnection) -> bool:
    return _socket_closed(conn.sock)


@pytest.mark.parametrize("threads", ["1", "3"])
def test_idle_keep_alive_connections_make_room_at_the_cap(harness, tokens, threads):
    server = harness.serve(
        "--max-connections", "3", "--max-connections-per-client", "10", "--network-threads", threads
    )
    held = _keep_alive_connections(server, 3)
    try:
        for i in range(3):
            # Each new client finds the server at its cap (the ones before it stay connected)
            # and is served: one idle keep-alive connection is closed for it.
            held += _keep_alive_connections(server, 1)
            assert wait_for(lambda: sum(_closed_by_server(c) for c in held[:-1]) == i + 1), (
                f"after {i + 1} new clients at the cap, "
                f"{sum(_closed_by_server(c) for c in held[:-1])} idle connections were closed"
            )
        assert sum(_closed_by_server(c) for c in held) == 3
    finally:
        for c in held:
            c.close()


def _busy_connection(server, token: str, i: int) -> socket.socket:
    """A connection in the middle of a request: the server has read its head and invited its
    body (100 Continue), which never comes. Neither new nor idle: never closed to make room."""
    return put_awaiting_body(server, f"busy{i}-1.0-py3-none-any.whl", token, 1000)


def test_at_the_cap_new_connections_get_503_with_retry_after(harness, tokens):
    server = harness.serve("--max-connections", "3", "--max-connections-per-client", "10")
    silent = [_busy_connection(server, tokens["upload"], i) for i in range(3)]
    try:
        responses, closed, _ = exchange(
            server, f"GET /simple/ HTTP/1.1\r\nHost: {server.host}\r\n\r\n".encode()
        )
        assert [r.status for r in responses] == [503], [(r.status, r.text[:200]) for r in responses]
        retry = responses[0].headers.get("retry-after", "")
        assert retry.isdigit() and int(retry) > 0, responses[0].headers
        assert "connection limit" in responses[0].text, responses[0].text
        assert closed
        # pip (through http.client) sees the 503 too, rather than a reset.
        resp = http_request(server.url, "GET", "/simple/")
        assert resp.status == 503 and resp.header("Retry-After") == retry
    finally:
        for s in silent:
            s.close()
    assert wait_for(lambda: http_request(server.url, "GET", "/healthz").status == 200), (
        "the server did not take connections again once the busy ones closed"
    )
    # The log is written by its own thread: the line comes soon, not necessarily before the 200.
    assert wait_for(lambda: "connection limit of 3 reached" in server.log()), server.log()


@contextlib.contextmanager
def _open_files(n: int):
    """This process may have `n` descriptors open (its soft RLIMIT_NOFILE raised, then put back);
    skips when the hard limit is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < n:
        pytest.skip(f"RLIMIT_NOFILE's hard limit is {hard}; this test needs {n} descriptors")
    if soft != resource.RLIM_INFINITY and soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _silent_connections(server, sources: list[str], per_source: int) -> list[socket.socket]:
    """`per_source` connections from each loopback address in `sources`, all established (the
    kernel has them in the server's accept queue or beyond), none sending a byte."""
    host, port = server.host.split(":")
    socks = []
    for source in sources:
        for _ in range(per_source):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind((source, 0))
            s.setblocking(False)
            s.connect_ex((host, int(port)))
    # poll, not select: the descriptors go past FD_SETSIZE.
    poller = select.poll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        poller.register(fd, select.POLLOUT)
    deadline = time.monotonic() + 20
    while by_fd:
        left = deadline - time.monotonic()
        assert left > 0, f"{len(by_fd)} of {len(socks)} connections not established in 20 s"
        for fd, _ in poller.poll(left * 1000):
            err = by_fd.pop(fd).getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            assert err == 0, f"connect failed: {os.strerror(err)}"
            poller.unregister(fd)
    return socks


def test_idle_sockets_from_many_addresses_do_not_lock_out_a_client(harness):
    # 1,500 connections that never send a byte, 250 from each of six addresses (so that the
    # per-client cap of 256 refuses none of them), against a server capped at 200: each new
    # one takes the place of the oldest silent one, and so does a real client, served at once.
    server = harness.serve("--max-connections", "200")
    sources = [f"127.0.0.{i}" for i in range(2, 8)]
    with _open_files(1500 + 200):
        silent = _silent_connections(server, sources, 250)
        try:
            started = time.monotonic()
            data, closed = b"", False
            with contextlib.closing(connect(server, "127.0.0.1")) as sock:
                sock.settimeout(5)  # blocking reads: its descriptor is past select's reach
                sock.sendall(
                    f"GET /simple/ HTTP/1.1\r\nHost: {server.host}\r\nConnection: close\r\n\r\n"
                    .encode()
                )
                with contextlib.suppress(TimeoutError, ConnectionResetError):
                    while chunk := sock.recv(65536):
                        data += chunk
                    closed = True
            took = time.monotonic() - started
            responses, _ = parse_responses(data)
            assert [r.status for r in responses] == [200], (
                [(r.status, r.text[:200]) for r in responses], closed)
            assert took < 1.0, f"a client among 1,500 idle sockets was served in {took:.2f} s"
        finally:
            for s in silent:
                s.close()
    # Every connection past the cap took the place of an older silent one: none was refused.
    metrics = http_request(server.url, "GET", "/metrics").body.decode()
    counts = dict(re.findall(r"^wheelforge_connections_(evicted|refused) (\d+)$", metrics, re.M))
    assert counts == {"evicted": str(1500 + 1 - 200), "refused": "0"}, counts
    assert wait_for(lambda: "closed a connection that had sent no request yet" in server.log())


@pytest.mark.parametrize("threads", ["1", "3"])
def test_idle_keep_alive_connections_go_after_those_that_never_sent_a_request(harness, threads):
    server = harness.serve(
        "--max-connections", "4", "--max-connections-per-client", "10", "--network-threads", threads
    )
    kept = _keep_alive_connections(server, 2)  # the older ones, each idle after its answer
    silent = [connect(server, "127.0.0.2") for _ in range(2)]
    # A connection joins its thread's list when that thread takes it over from the acceptor,
    # a moment after its acceptance.
    time.sleep(0.1)
    new = []
    try:
        # At the cap, each new client closes one: first the silent ones, oldest first, then
        # the keep-alive connection idle longest.
        for victim, survivors in ((silent[0], [silent[1], *kept]),
                                  (silent[1], kept),
                                  (kept[0], [kept[1]])):
            new += _keep_alive_connections(server, 1)
            closed_sock = victim if isinstance(victim, socket.socket) else victim.sock
            assert wait_for(lambda s=closed_sock: _socket_closed(s)), (
                f"after {len(new)} new clients the expected connection is still open")
            for other in survivors + new[:-1]:
                sock = other if isinstance(other, socket.socket) else other.sock
                assert not _socket_closed(sock), f"after {len(new)} new clients: the wrong one closed"
    finally:
        for c in kept + new:
            c.close()
        for s in silent:
            s.close()


def test_a_connection_that_sends_nothing_is_closed_at_the_first_byte_deadline(harness):
    server = harness.serve("--first-byte-timeout", "1s", "--read-timeout", "30s")
    with contextlib.closing(connect(server)) as silent, contextlib.closing(connect(server)) as slow:
        # The slow one sends its first bytes at once, and the rest of its head after the
        # first-byte deadline: the head has the read timeout.
        slow.sendall(b"GET /simple/ HTTP/1.1\r\n")
        data, closed = read_until_closed(silent, timeout=10)
        assert closed and data == b"", (
            "a connection that sent nothing stayed open well past its first-byte deadline of 1 s")
        slow.sendall(f"Host: {server.host}\r\nConnection: close\r\n\r\n".encode())
        data, closed = read_until_closed(slow, timeout=10)
    responses, _ = parse_responses(data)
    assert [r.status for r in responses] == [200], data[:300]


def test_per_client_connection_cap(harness, tokens):
    server = harness.serve("--max-connections", "50", "--max-connections-per-client", "2")
    silent = [connect(server) for _ in range(2)]
    try:
        responses, closed, _ = exchange(
            server, f"GET /simple/ HTTP/1.1\r\nHost: {server.host}\r\n\r\n".encode()
        )
        assert [r.status for r in responses] == [503], [(r.status, r.text[:200]) for r in responses]
        assert responses[0].headers.get("retry-after", "").isdigit(), responses[0].headers
        assert "2 connections per client" in responses[0].text, responses[0].text
        assert closed
        # Another address is not affected.
        responses, _, _ = exchange(
            server,
            f"GET /simple/ HTTP/1.1\r\nHost: {server.host}\r\nConnection: close\r\n\r\n".encode(),
            source="127.0.0.2",
        )
        assert [r.status for r in responses] == [200], [(r.status, r.text[:200]) for r in responses]
        silent.pop().close()
        assert wait_for(lambda: http_request(server.url, "GET", "/healthz").status == 200)
    finally:
        for s in silent:
            s.close()


# ---------------------------------------------------------------------------------------------
# 5. Tokens never reach the logs


def test_tokens_in_targets_are_redacted_in_the_log(harness, tokens):
    admin = harness.token("admin")
    server = harness.serve()
    secret = tokens["upload"]
    query_secret = "hunter2-query-secret"
    targets = [
        f"/simple/{secret}/",
        f"/api/resolve?project=x&token={query_secret}",
        f"/files/{'0' * 64}/{secret}-1.0-py3-none-any.whl?x={secret}",
        f"/upload/{secret}-1.0-py3-none-any.whl",
        f"/nope?access_token={query_secret}",
    ]
    for target in targets:
        http_request(server.url, "GET", target)
    # Admin requests are logged on a line of their own as well.
    http_request(
        server.url, "GET", f"/admin/builds?token={query_secret}", {"Authorization": f"Bearer {admin}"}
    )
    server.stop()
    log = server.log()
    assert log.count("wf_[redacted]") >= 4, log[-3000:]
    assert log.count("token=[redacted]") >= 3, log[-3000:]
    assert secret not in log and secret[3:20] not in log, "an API token reached the log"
    assert query_secret not in log, "a token= query value reached the log"
    assert "hunter2" not in log


# ---------------------------------------------------------------------------------------------
# 6. A token made by `wheelforge token create` works at once


def test_token_created_by_another_process_works_at_once(harness, artifacts):
    server = harness.serve("--private", "true")
    failures = []
    for i in range(20):
        proc = harness.cli(
            "token", "create", "--data-dir", str(harness.data_dir), "--scope", "upload"
        )
        assert proc.returncode == 0, proc.stderr
        token = proc.stdout.strip().splitlines()[-1]
        page = curl(["-u", f"__token__:{token}", server.url + "/simple/"], harness.root)
        wheel = make_wheel(artifacts, f"fresh-{i}", "1.0")
        upload = curl_upload(server, harness.root, wheel.path, token=token)
        if page.status != 200 or upload.status != 201:
            failures.append((i, page.status, upload.status, upload.body[:100]))
    assert not failures, f"fresh tokens refused (round, read, upload): {failures}"


def test_unknown_tokens_are_still_refused(harness, tokens):
    server = harness.serve("--private", "true")
    for i in range(30):
        bogus = f"wf_{'x' * 40}{i:03d}"
        resp = http_request(server.url, "GET", "/simple/", {"Authorization": f"Bearer {bogus}"})
        assert resp.status == 401, (i, resp.status)
        assert resp.header("WWW-Authenticate")
    assert http_request(server.url, "GET", "/simple/", {"Authorization": basic(tokens["read"])}).status == 200


# ---------------------------------------------------------------------------------------------
# Keep-alive deadlines: the wait for the next request's head


def test_idle_keep_alive_connection_is_closed_at_the_idle_deadline(harness):
    server = harness.serve("--idle-timeout", "2s", "--read-timeout", "30s")
    with contextlib.closing(connect(server)) as sock:
        sock.sendall(f"GET /simple/ HTTP/1.1\r\nHost: {server.host}\r\n\r\n".encode())
        # The first answer arrives, then the connection idles until the server closes it
        # (the idle timeout, 2 s; not the read timeout of 30 s, after which this gives up).
        data, closed = read_until_closed(sock, timeout=25.0)
    responses, rest = parse_responses(data)
    assert [r.status for r in responses] == [200], data[:300]
    assert rest == b"" and closed, "an idle keep-alive connection stayed open past its deadline"


def test_each_request_moves_the_idle_deadline(harness):
    # Requests every 0.5 s for 5 s on one connection with a 3 s idle timeout: each one starts
    # a new wait, so the connection serves them all and is closed only after the last.
    server = harness.serve("--idle-timeout", "3s")
    served = 0
    with contextlib.closing(connect(server)) as sock:
        data = b""
        for _ in range(10):
            sock.sendall(f"GET /simple/ HTTP/1.1\r\nHost: {server.host}\r\n\r\n".encode())
            while True:
                responses, rest = parse_responses(data)
                if len(responses) > served:
                    break
                chunk = sock.recv(65536)
                assert chunk, f"the server closed the connection after {served} requests"
                data += chunk
            served = len(responses)
            time.sleep(0.5)
        assert [r.status for r in responses] == [200] * 10
        # A head begun and never finished is cut off at the deadline of its wait.
        sock.sendall(b"GET /simple/ HTTP/1.1\r\n")
        tail, closed = read_until_closed(sock, timeout=25.0)
    assert closed and tail == b"", tail[:300]
