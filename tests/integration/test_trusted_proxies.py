"""wheelforge behind a load balancer: a real haproxy (`option forwardfor`) on loopback in front
of the server, with `trusted_proxies` naming the address haproxy connects from. The client
address that the access log, the audit trail and the per-client cap use is the one haproxy
saw (past any other trusted hop), never what a client claims, and never the proxy's.

Addresses: haproxy connects to wheelforge from 127.0.0.3 (`source`), the only trusted proxy
besides 127.0.0.4, an "outer" proxy; clients connect from 127.0.0.5, 127.0.0.6 and 127.0.0.4.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from wfhelpers import make_wheel, metric_sum, upload_awaiting_body, wait_for

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
PROXY_SOURCE = "127.0.0.3"
OUTER_PROXY = "127.0.0.4"
CLIENT = "127.0.0.5"
OTHER_CLIENT = "127.0.0.6"

pytestmark = pytest.mark.skipif(not Path(HAPROXY).exists(), reason="haproxy is not installed")


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Haproxy:
    """haproxy in the foreground on 127.0.0.1:<free port>, forwarding to `backend`."""

    def __init__(self, root: Path, backend: str):
        self.port = free_port()
        self.config = root / "haproxy.cfg"
        self.log_path = root / "haproxy.log"
        self.config.write_text(
            "global\n"
            "  maxconn 200\n"
            "defaults\n"
            "  mode http\n"
            "  option forwardfor\n"
            "  timeout connect 5s\n"
            "  timeout client 30s\n"
            "  timeout server 30s\n"
            "frontend front\n"
            f"  bind 127.0.0.1:{self.port}\n"
            "  default_backend wheelforge\n"
            "backend wheelforge\n"
            f"  server wf {backend} source {PROXY_SOURCE}\n"
        )
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([HAPROXY, "-db", "-f", str(self.config)],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while True:
            assert self.proc.poll() is None, f"haproxy exited: {self.log_path.read_text()}"
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            assert time.monotonic() < deadline, "haproxy did not listen within 10 s"
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def request(self, method: str, target: str, *, source: str, headers=None, body=None):
        """One request through haproxy from `source`: (status, headers, body)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15,
                                          source_address=(source, 0))
        try:
            conn.request(method, target, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.msg, resp.read()
        finally:
            conn.close()

    def hold_upload(self, filename: str, token: str, *, source: str) -> socket.socket:
        """A connection through haproxy whose upload's head has reached wheelforge, which
        waits for its body (answered 100 Continue): a request in progress."""
        return upload_awaiting_body(("127.0.0.1", self.port), "wheels", filename, token,
                                    100000, source=source)


@pytest.fixture
def proxied(harness, tokens):
    """(server, haproxy): wheelforge trusting haproxy's source and the outer proxy."""
    server = harness.serve("--trusted-proxies", f"{PROXY_SOURCE},{OUTER_PROXY}/32",
                           "--max-connections-per-client", "2")
    proxy = Haproxy(harness.root, server.url.removeprefix("http://"))
    try:
        yield server, proxy
    finally:
        proxy.stop()


def audit_addresses(harness, project: str) -> dict[str, str]:
    """The address of each upload's audit row, by file name."""
    proc = harness.cli("audit", "--data-dir", str(harness.data_dir), "--project", project)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()[1:]]
    # TIME ACTION ACTOR [(DESCRIPTION)] ADDRESS PROJECT TARGET
    return {row[row.index(project) + 1]: row[row.index(project) - 1]
            for row in rows if row[1] == "upload"}


def access_client(server, method: str, target: str) -> list[str]:
    """The client addresses of the access log's lines for `method target`."""
    return re.findall(rf"req=\d+ (\S+) {method} {re.escape(target)} -> ", server.log())


def upload(send, artifact, token: str):
    return send("PUT", f"/upload/{artifact.filename}",
                {"Authorization": f"Bearer {token}",
                 "Content-Type": "application/octet-stream"}, artifact.data)


def test_the_client_behind_haproxy_is_logged_and_audited(harness, tokens, proxied, artifacts):
    server, proxy = proxied
    token = tokens["upload"]
    through = make_wheel(artifacts, "lb-pkg", "1.0")
    spoofed = make_wheel(artifacts, "lb-pkg", "2.0")
    outer = make_wheel(artifacts, "lb-pkg", "3.0")
    direct = make_wheel(artifacts, "lb-pkg", "4.0")

    def via(source, extra=None):
        def send(method, target, headers, body):
            return proxy.request(method, target, source=source,
                                 headers={**headers, **(extra or {})}, body=body)[0]
        return send

    # Through haproxy: the client is the address haproxy saw, not haproxy's own.
    assert upload(via(CLIENT), through, token) == 201
    # A client that writes the header itself: haproxy appends what it saw, which wins.
    assert upload(via(CLIENT, {"X-Forwarded-For": "198.51.100.66"}), spoofed, token) == 201
    # An outer trusted proxy's entry is passed by: its client is the client.
    assert upload(via(OUTER_PROXY, {"X-Forwarded-For": "203.0.113.7"}), outer, token) == 201
    # Straight to wheelforge from an untrusted peer: its header is not believed.
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=15,
                                      source_address=(OTHER_CLIENT, 0))
    conn.request("PUT", f"/upload/{direct.filename}", body=direct.data,
                 headers={"Authorization": f"Bearer {token}", "X-Forwarded-For": "203.0.113.99"})
    assert conn.getresponse().status == 201
    conn.close()

    assert audit_addresses(harness, "lb-pkg") == {
        through.filename: CLIENT,
        spoofed.filename: CLIENT,
        outer.filename: "203.0.113.7",
        direct.filename: OTHER_CLIENT,
    }
    # A request's line is logged once its answer is written: it may come after the answer.
    expected = [(through, CLIENT), (spoofed, CLIENT), (outer, "203.0.113.7"),
                (direct, OTHER_CLIENT)]
    for artifact, client in expected:
        target = f"/upload/{artifact.filename}"
        assert wait_for(lambda: access_client(server, "PUT", target) == [client]), (
            target, access_client(server, "PUT", target))
    assert metric_sum(server, "wheelforge_requests_forwarded") >= 3

    # A header that names no address: served, the proxy taken for the client.
    status, _, _ = proxy.request("GET", "/simple/?bad", source=OUTER_PROXY,
                                 headers={"X-Forwarded-For": "not-an-address"})
    assert status == 200
    assert wait_for(lambda: access_client(server, "GET", "/simple/?bad") == [PROXY_SOURCE]), (
        access_client(server, "GET", "/simple/?bad"))
    assert metric_sum(server, "wheelforge_requests_forwarded_malformed") == 1


def test_the_per_client_cap_counts_each_client_behind_the_proxy(harness, tokens, proxied):
    server, proxy = proxied
    token = tokens["upload"]
    # The cap is 2: two uploads of CLIENT in progress through haproxy fill it.
    held = [proxy.hold_upload(f"cap_pkg-1.{i}-py3-none-any.whl", token, source=CLIENT)
            for i in range(2)]
    try:
        status, headers, body = proxy.request("GET", "/simple/", source=CLIENT)
        assert status == 503, (status, body[:200])
        assert headers.get("Retry-After") == "1"
        assert b"2 per client" in body, body
        # Another client through the same proxy is served: the proxy's connections (three
        # open now, above the cap) are not the cap of everybody behind it.
        status, _, body = proxy.request("GET", "/simple/", source=OTHER_CLIENT)
        assert status == 200, (status, body[:200])
        assert metric_sum(server, "wheelforge_requests_refused_per_client") == 1
        held.pop().close()
        # The request ended with its connection: CLIENT is served again.
        assert wait_for(lambda: proxy.request("GET", "/simple/", source=CLIENT)[0] == 200)
    finally:
        for sock in held:
            sock.close()
