"""wheelforge under systemd: the notify protocol (READY, STATUS, WATCHDOG, RELOADING, STOPPING)
checked against a real unix datagram socket given as NOTIFY_SOCKET, socket activation through
systemd-socket-activate, and SIGTERM during an upload (it completes or leaves nothing; exit 0).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from wfhelpers import Server, clean_env, make_wheel, sha256_hex, store_state, wait_for


class NotifySocket:
    def __init__(self, path: Path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))

    def messages(self, timeout: float) -> list[tuple[float, str]]:
        """Every datagram received until `timeout` seconds pass without one... or total."""
        out = []
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                break
            out.append((time.monotonic(), data.decode()))
        return out

    def wait_for(self, prefix: str, timeout: float = 10) -> str:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                msg = self.sock.recv(4096).decode()
            except socket.timeout:
                break
            if msg.startswith(prefix):
                return msg
        raise AssertionError(f"no {prefix!r} notification within {timeout}s")

    def close(self):
        self.sock.close()


def start_serve(harness, env_extra: dict[str, str], args: list[str] | None = None):
    log = harness.root / "serve.log"
    proc = subprocess.Popen(
        [str(harness.binary), "serve", "--data-dir", str(harness.data_dir),
         "--listen", "127.0.0.1:0", *(args or [])],
        stdout=subprocess.PIPE, stderr=open(log, "ab"), stdin=subprocess.DEVNULL,
        env=clean_env(**env_extra),
    )
    line = proc.stdout.readline().decode()
    assert line.startswith("listening on http://127.0.0.1:"), (line, log.read_text())
    return proc, line.strip().removeprefix("listening on ")


def get(url: str, path: str) -> int:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1])


def test_notify_protocol(harness):
    sock = NotifySocket(harness.root / "notify.sock")
    proc = None
    try:
        proc, url = start_serve(
            harness, {"NOTIFY_SOCKET": str(sock.path), "WATCHDOG_USEC": "400000"}
        )
        ready = sock.wait_for("READY=1")
        assert f"STATUS=Serving {url}" in ready, ready

        # WATCHDOG=1 at half of WATCHDOG_USEC (0.2 s): about 7 in 1.5 s.
        beats = [t for t, m in sock.messages(1.5) if m == "WATCHDOG=1"]
        assert len(beats) >= 4, f"only {len(beats)} watchdog notifications in 1.5 s"
        gaps = [b - a for a, b in zip(beats, beats[1:])]
        assert max(gaps) < 0.4, f"watchdog gaps too long for WATCHDOG_USEC=400ms: {gaps}"

        proc.send_signal(signal.SIGHUP)
        reloading = sock.wait_for("RELOADING=1")
        assert "STATUS=" in reloading
        assert sock.wait_for("READY=1").startswith("READY=1")
        assert get(url, "/healthz") == 200, "server stopped serving after SIGHUP"

        proc.send_signal(signal.SIGTERM)
        stopping = sock.wait_for("STOPPING=1")
        assert "STATUS=Stopping" in stopping
        assert proc.wait(20) == 0
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()


def test_no_notifications_without_systemd(harness):
    server = harness.serve()
    assert server.get("/readyz").status == 200
    assert server.stop() == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_socket_activation(harness):
    activate = shutil.which("systemd-socket-activate")
    if not activate:
        pytest.skip("systemd-socket-activate (Debian package systemd) is not installed")
    port = free_port()
    log = harness.root / "activated.log"
    proc = subprocess.Popen(
        [activate, "-l", f"127.0.0.1:{port}", str(harness.binary), "serve",
         "--data-dir", str(harness.data_dir), "--listen", "127.0.0.1:1"],
        stdout=subprocess.PIPE, stderr=open(log, "ab"), env=clean_env(),
    )
    try:
        # The socket is listening before wheelforge runs; the first connection starts it.
        url = f"http://127.0.0.1:{port}"
        assert wait_for(lambda: _status_or_none(url, "/simple/") == 200, timeout=10), log.read_text()
        line = proc.stdout.readline().decode()
        assert line.strip() == f"listening on http://127.0.0.1:{port}", line
        assert "socket activation" in log.read_text()
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _status_or_none(url: str, path: str):
    try:
        return get(url, path)
    except OSError:
        return None


def _raw_upload_start(url: str, token: str, name: str, size: int) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall(
        f"PUT /upload/{name} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Length: {size}\r\n\r\n".encode()
    )
    return s


def test_sigterm_during_upload_completes_it(harness, tmp_path):
    wheel = make_wheel(tmp_path, "big-upload", "1.0", padding=8 * 1024 * 1024)
    data = wheel.data
    token = harness.token("upload")
    server = harness.serve()
    s = _raw_upload_start(server.url, token, wheel.filename, len(data))
    half = len(data) // 2
    s.sendall(data[:half])
    time.sleep(0.3)
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    s.sendall(data[half:])
    s.settimeout(30)
    response = b""
    while chunk := s.recv(65536):
        response += chunk
    s.close()
    assert response.startswith(b"HTTP/1.1 201"), response[:300]
    assert server.proc.wait(30) == 0
    server.stopped_by_us = True

    restarted = harness.serve()
    entry = restarted.file_entry("big-upload", wheel.filename)
    assert entry["hashes"]["sha256"] == wheel.sha256
    body = restarted.get(entry["url"])
    assert sha256_hex(body.body) == wheel.sha256


def test_sigterm_with_abandoned_upload_leaves_nothing(harness, tmp_path):
    wheel = make_wheel(tmp_path, "gone-upload", "1.0", padding=4 * 1024 * 1024)
    token = harness.token("upload")
    server = harness.serve()
    before = store_state(harness.data_dir)
    s = _raw_upload_start(server.url, token, wheel.filename, len(wheel.data))
    s.sendall(wheel.data[: len(wheel.data) // 3])
    time.sleep(0.3)
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    s.close()  # the client gives up: the upload must vanish and the server exit cleanly
    assert server.proc.wait(30) == 0
    server.stopped_by_us = True
    after = store_state(harness.data_dir)
    assert after.rows == before.rows
    assert after.blobs == before.blobs
    # Only the (now removed) session directory of the stopped server may differ in tmp/.
    leftovers = [p for p in (harness.data_dir / "tmp").rglob("*") if p.is_file()]
    assert leftovers == [], leftovers


def test_journald_priority_prefixes(harness):
    """Under journald (JOURNAL_STREAM names stderr), lines carry <N> priorities, no timestamps."""
    log = harness.root / "journal.log"
    with open(log, "ab") as err:
        st = os.fstat(err.fileno())
        proc = subprocess.Popen(
            [str(harness.binary), "serve", "--data-dir", str(harness.data_dir), "--listen",
             "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
            env=clean_env(JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}"),
        )
    try:
        url = proc.stdout.readline().decode().strip().removeprefix("listening on ")
        assert get(url, "/healthz") == 200
        assert get(url, "/simple/nope/") == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    lines = [line for line in log.read_text().splitlines() if line]
    assert lines, "nothing logged"
    assert all(line[:3] in ("<2>", "<3>", "<4>", "<6>", "<7>") for line in lines), lines[:5]
    assert any(line.startswith("<6>") and "GET /healthz -> 200" in line for line in lines), lines
    assert not any(line[3:7].isdigit() for line in lines), "timestamps are journald's job"
