"""A real haproxy (Debian's) in the foreground on loopback, in front of one or more wheelforge
servers, for the tests of wheelforge behind a load balancer (test_trusted_proxies.py,
test_replicas.py). Its log (one line per request: method, target, status, the backend server,
the X-Wheelforge-Min-Position header it sent there and the X-Wheelforge-Position answered) is written to haproxy.log beside its
configuration."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from wfhelpers import free_port

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"

# The request log: the header is captured in the backend, after the backend's own rules set it.
LOG_FORMAT = '"%HM %HU %ST server=%s min=%[capture.req.hdr(0)] position=%[capture.res.hdr(0)]"'
LOG_LINE = re.compile(r"^(\S+) (\S+) (\d+) server=(\S+) min=(\S*) position=(\S*)$")


def documented_backend(doc: Path) -> list[str]:
    """The lines of the first ```haproxy block of `doc` (docs/scale.md), without its `server`
    lines and comments: the rules a test puts in front of its own servers, so that what the
    documentation tells an operator to write is what the test runs."""
    text = doc.read_text()
    block = re.search(r"```haproxy\n(.*?)```", text, re.S)
    assert block, f"{doc} has no ```haproxy block"
    lines = []
    for line in block.group(1).splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("server ") or \
                stripped.startswith("backend "):
            continue
        lines.append("  " + stripped)
    return lines


@dataclasses.dataclass(frozen=True)
class Logged:
    """One request as haproxy logged it."""

    method: str
    target: str
    status: int
    server: str  # the backend server that answered ("wf0", "wf1", ...)
    min_position: str  # the X-Wheelforge-Min-Position haproxy sent ("-" when none)
    position: str  # the X-Wheelforge-Position answered ("-" when none)


class Haproxy:
    """haproxy on 127.0.0.1:<free port>, forwarding to `servers` ("host:port", round robin),
    from the local address `source` when given, with `backend_rules` before the servers.
    `log_requests=False` logs nothing per request and `maxconn` caps the connections (the
    benchmarks, bench/replicas.py, put it under load)."""

    def __init__(self, root: Path, servers: list[str], *, source: str | None = None,
                 forwardfor: bool = True, backend_rules: list[str] | None = None,
                 log_requests: bool = True, maxconn: int = 200):
        self.port = free_port()
        self.config = root / "haproxy.cfg"
        self.log_path = root / "haproxy.log"
        via = f" source {source}" if source else ""
        lines = [
            "global",
            f"  maxconn {maxconn}",
            "  log stdout format raw local0",
            "defaults",
            "  mode http",
            *(["  log global"] if log_requests else []),
            *(["  option forwardfor"] if forwardfor else []),
            "  timeout connect 5s",
            "  timeout client 30s",
            "  timeout server 30s",
            "frontend front",
            f"  bind 127.0.0.1:{self.port}",
            "  declare capture request len 32",
            "  declare capture response len 32",
            f"  log-format {LOG_FORMAT}",
            "  default_backend wheelforge",
            "backend wheelforge",
            "  balance roundrobin",
            *(backend_rules or []),
            "  http-request capture req.hdr(X-Wheelforge-Min-Position) id 0",
            "  http-response capture res.hdr(X-Wheelforge-Position) id 0",
        ]
        lines += [f"  server wf{i} {address}{via}" for i, address in enumerate(servers)]
        self.config.write_text("\n".join(lines) + "\n")
        check = subprocess.run([HAPROXY, "-c", "-f", str(self.config)], capture_output=True,
                               text=True, timeout=30)
        assert check.returncode == 0, f"haproxy -c: {check.stdout}{check.stderr}"
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

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[Logged]:
        """The requests haproxy logged, in order."""
        found = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            m = LOG_LINE.match(line.strip())
            if m:
                found.append(Logged(m[1], m[2], int(m[3]), m[4], m[5], m[6]))
        return found

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

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
