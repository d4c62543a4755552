"""Private read mode, native HTTPS, and token management, through the real binary with curl and
pip: missing credentials get 401 with WWW-Authenticate (so pip uses .netrc or the URL's
credentials), HTTPS works with a certificate made by the test (and a TLS connection that sends
nothing is closed at the first-byte deadline), revoked tokens stop working, and
project-limited upload tokens stay inside their project.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import wfbackend

from wfhelpers import (
    Server,
    clean_env,
    http_request,
    make_wheel,
    pip_args,
    run,
    wait_for,
)

PIP_PYTHON = Path("/root/.pyenv/versions/3.11.7/bin/python")


def basic(token: str) -> dict[str, str]:
    import base64

    return {"Authorization": "Basic " + base64.b64encode(f"__token__:{token}".encode()).decode()}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def private_server(harness, tmp_path):
    tokens = {scope: harness.token(scope) for scope in ("read", "upload")}
    server = harness.serve("--private", "true")
    wheel = make_wheel(tmp_path, "secret-pkg", "1.0", module="secret_pkg", value="42")
    assert server.put_file(wheel, tokens["upload"]).status == 201
    return server, tokens, wheel


def test_private_reads_need_a_read_token(private_server):
    server, tokens, wheel = private_server
    for path in ("/simple/", "/simple/secret-pkg/", "/api/projects/secret-pkg/variants", "/metrics"):
        resp = server.get(path)
        assert resp.status == 401, (path, resp.status)
        assert (resp.header("WWW-Authenticate") or "").startswith("Basic realm="), path
    assert server.get("/simple/", basic("wrong")).status == 401
    page = server.get("/simple/secret-pkg/", basic(tokens["read"]))
    assert page.status == 200 and wheel.filename in page.text
    # Higher scopes read too; liveness probes stay open for load balancers.
    assert server.get("/simple/", bearer(tokens["upload"])).status == 200
    assert server.get("/healthz").status == 200
    assert server.get("/readyz").status == 200
    url = "/files/" + wheel.sha256 + "/" + wheel.filename
    assert server.get(url).status == 401
    assert server.get_file(url, basic(tokens["read"])).body == wheel.data


def _pip_install(index_url: str, target: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(PIP_PYTHON), "-m", "pip", "install", "--target", str(target), *pip_args(index_url),
         "secret-pkg"],
        capture_output=True, text=True, timeout=120, env=env,
    )


@pytest.mark.skipif(not PIP_PYTHON.exists(), reason="pyenv Python 3.11.7 (pip 23.2.1) is missing")
def test_pip_with_credentials_in_url_and_netrc(private_server, tmp_path):
    server, tokens, _ = private_server
    host = server.url.removeprefix("http://")

    no_creds = _pip_install(f"{server.url}/simple/", tmp_path / "t0", clean_env(HOME=str(tmp_path)))
    assert no_creds.returncode != 0, "pip installed from a private index without credentials"
    assert not (tmp_path / "t0" / "secret_pkg").exists()

    in_url = _pip_install(f"http://__token__:{tokens['read']}@{host}/simple/", tmp_path / "t1",
                          clean_env(HOME=str(tmp_path)))
    assert in_url.returncode == 0, in_url.stderr
    assert (tmp_path / "t1" / "secret_pkg" / "__init__.py").exists()

    home = tmp_path / "home"
    home.mkdir()
    netrc = home / ".netrc"
    netrc.write_text(f"machine {host.split(':')[0]} login __token__ password {tokens['read']}\n")
    netrc.chmod(0o600)
    with_netrc = _pip_install(f"{server.url}/simple/", tmp_path / "t2", clean_env(HOME=str(home)))
    assert with_netrc.returncode == 0, with_netrc.stderr
    assert (tmp_path / "t2" / "secret_pkg" / "__init__.py").exists()


def test_revoked_token_stops_working(harness, tmp_path):
    token = harness.token("upload")
    server = harness.serve()
    listing = harness.cli("token", "list", "--data-dir", str(harness.data_dir))
    assert listing.returncode == 0
    assert token not in listing.stdout, "token list printed a secret"
    ids = [line.split()[0] for line in listing.stdout.splitlines()[1:] if " upload " in line]
    assert ids, listing.stdout
    first = make_wheel(tmp_path, "rev-pkg", "1.0")
    assert server.put_file(first, token).status == 201
    revoke = harness.cli("token", "revoke", "--data-dir", str(harness.data_dir), ids[0])
    assert revoke.returncode == 0, revoke.stderr
    second = make_wheel(tmp_path, "rev-pkg", "2.0")
    # The running server notices the catalog change within its poll interval.
    assert wait_for(lambda: server.put_file(second, token).status == 401, timeout=5)
    assert "revoked" in harness.cli("token", "list", "--data-dir", str(harness.data_dir)).stdout
    assert harness.cli("token", "revoke", "--data-dir", str(harness.data_dir), "999999").returncode != 0


def test_project_limited_upload_token(harness, tmp_path):
    proc = harness.cli("token", "create", "--data-dir", str(harness.data_dir), "--scope", "upload",
                       "--project", "Mine_Pkg")
    assert proc.returncode == 0, proc.stderr
    limited = proc.stdout.strip().splitlines()[-1]
    server = harness.serve()
    mine = make_wheel(tmp_path, "mine-pkg", "1.0")
    other = make_wheel(tmp_path, "other-pkg", "1.0")
    assert server.put_file(mine, limited).status == 201
    resp = server.put_file(other, limited)
    assert resp.status == 403 and "mine-pkg" in resp.text, (resp.status, resp.text)
    assert "other-pkg" not in [f for f in harness.filenames() if f.startswith("other")]


def _make_cert(directory: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if not openssl:
        pytest.skip("openssl (Debian package openssl) is not installed")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
         "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key


def _start_tls(harness, cert: Path, key: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    log = harness.root / "tls.log"
    proc = subprocess.Popen(
        wfbackend.command([harness.binary, "serve", "--data-dir", harness.data_dir, "--listen",
                           "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, *extra]),
        stdout=subprocess.PIPE, stderr=open(log, "ab"), env=clean_env(),
    )
    line = proc.stdout.readline().decode().strip()
    assert line.startswith("listening on https://127.0.0.1:"), (line, log.read_text())
    return proc, line.removeprefix("listening on ")


def test_https_with_curl_and_pip(harness, tmp_path):
    cert, key = _make_cert(tmp_path)
    token = harness.token("upload")
    wheel = make_wheel(tmp_path, "tls-pkg", "1.0", module="tls_pkg", value="7")
    proc, url = _start_tls(harness, cert, key)
    try:
        upload = run(["curl", "-sS", "--cacert", str(cert), "-u", f"__token__:{token}", "-T",
                      str(wheel.path), "-o", "/dev/null", "-w", "%{http_code}", f"{url}/upload/"])
        assert upload.stdout == "201", (upload.stdout, upload.stderr)
        page = run(["curl", "-sS", "--cacert", str(cert), f"{url}/simple/tls-pkg/"])
        assert wheel.filename in page.stdout
        untrusted = run(["curl", "-sS", f"{url}/simple/"])
        assert untrusted.returncode != 0, "curl accepted an unknown certificate"
        plain = run(["curl", "-sS", "--max-time", "5", url.replace("https://", "http://") + "/simple/"])
        assert wheel.filename not in plain.stdout
        if PIP_PYTHON.exists():
            target = tmp_path / "target"
            env = clean_env(HOME=str(tmp_path))
            # requests lets REQUESTS_CA_BUNDLE (and friends) override pip's --cert.
            for var in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
                env.pop(var, None)
            pip = subprocess.run(
                [str(PIP_PYTHON), "-m", "pip", "install", "--target", str(target), "--cert",
                 str(cert), *pip_args(f"{url}/simple/"), "tls-pkg"],
                capture_output=True, text=True, timeout=120, env=env,
            )
            assert pip.returncode == 0, pip.stderr
            assert (target / "tls_pkg" / "__init__.py").exists()
    finally:
        proc.terminate()
        assert proc.wait(20) == 0


def test_tls_certificate_reloaded_on_sighup(harness, tmp_path):
    import signal
    import ssl

    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    cert, key = _make_cert(first_dir)
    new_cert, new_key = _make_cert(second_dir)
    live_cert, live_key = tmp_path / "live-cert.pem", tmp_path / "live-key.pem"
    shutil.copy(cert, live_cert)
    shutil.copy(key, live_key)
    proc, url = _start_tls(harness, live_cert, live_key)
    host, port = url.removeprefix("https://").split(":")
    try:
        assert ssl.get_server_certificate((host, int(port))).strip() == cert.read_text().strip()
        shutil.copy(new_cert, live_cert)
        shutil.copy(new_key, live_key)
        proc.send_signal(signal.SIGHUP)
        assert wait_for(
            lambda: ssl.get_server_certificate((host, int(port))).strip() == new_cert.read_text().strip(),
            timeout=5,
        ), "the new certificate is not served after SIGHUP"
    finally:
        proc.terminate()
        assert proc.wait(20) == 0


def test_a_tls_connection_that_sends_nothing_is_closed_at_the_first_byte_deadline(harness,
                                                                                 tmp_path):
    import select
    import socket
    import ssl
    import time

    cert, key = _make_cert(tmp_path)
    proc, url = _start_tls(harness, cert, key, "--first-byte-timeout", "1s", "--read-timeout", "30s")
    host, port = url.removeprefix("https://").split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=20) as silent:
            # No ClientHello: closed at the first-byte deadline (1 s), not the read timeout.
            deadline = time.monotonic() + 10
            closed = False
            while not closed and time.monotonic() < deadline:
                if select.select([silent], [], [], deadline - time.monotonic())[0]:
                    try:
                        closed = silent.recv(1) == b""
                    except ConnectionResetError:
                        closed = True
            assert closed, "a TLS connection that sent nothing stayed open past its deadline"
        # A client that speaks is served as before.
        context = ssl.create_default_context(cafile=str(cert))
        with socket.create_connection((host, int(port)), timeout=20) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                        .encode())
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
        assert data.startswith(b"HTTP/1.1 200"), data[:300]
    finally:
        proc.terminate()
        assert proc.wait(20) == 0


def test_tls_needs_both_files(harness, tmp_path):
    cert, _ = _make_cert(tmp_path)
    proc = run([harness.binary, "serve", "--data-dir", str(harness.data_dir), "--listen",
                "127.0.0.1:0", "--tls-cert", str(cert)], timeout=30)
    assert proc.returncode != 0
    assert "key" in proc.stderr
