"""Upstream indexes (docs/upstreams.md): wheelforge as the only --index-url in front of nginx
serving a static PEP 503 tree and of a second wheelforge (PEP 691 JSON with upload-time), both
on loopback, with real pips: local and upstream packages installed from one URL, the newer
upstream sdist of a local project never offered, the cooldown, a file whose bytes do not match
its hash refused and not stored, cached pages and files served with the upstream stopped, and
an upstream's password sent to its own origin only (never to a file it links, or redirects to,
on another port)."""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import re
import shutil
import signal
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

import wfbackend
from wfhelpers import (
    JSON_TYPE,
    PIP_PYTHONS,
    Artifact,
    Server,
    Response,
    clean_env,
    gunzip,
    http_request,
    make_sdist,
    make_wheel,
    pip_args,
    run,
    sha256_hex,
    wait_for,
    write_static_index,
    StoredBlob,
    catalog_query,
    stored_blob,
)

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None,
                                reason="nginx (Debian package nginx) is needed")


def blob_path(data_dir: Path, sha: str) -> StoredBlob:
    return stored_blob(data_dir, sha)


def write_config(harness, upstreams: list[dict]) -> Path:
    lines = []
    for u in upstreams:
        lines.append("[[upstream]]")
        for key, value in u.items():
            if isinstance(value, list):
                lines.append(f"{key} = [" + ", ".join(f'"{v}"' for v in value) + "]")
            elif isinstance(value, int):
                lines.append(f"{key} = {value}")
            else:
                lines.append(f'{key} = "{value}"')
    path = harness.root / "wheelforge.toml"
    path.write_text("\n".join(lines) + "\n")
    wfbackend.config_changed(path)  # a running server reads it again on SIGHUP
    return path


def pip_install(python: Path, index: str, target: Path, *reqs: str, cwd: Path):
    return run([python, "-m", "pip", "install", "--target", str(target), *pip_args(index), *reqs],
               timeout=180, cwd=cwd)


@pytest.fixture
def upstream_tree(harness, artifacts):
    """nginx with a PEP 503 tree: up-dep 1.0 (a wheel), and local-pkg 2.0 (an sdist: a newer
    public release of a project this index owns)."""
    up_dir = harness.path("upstream-artifacts")
    dep = make_wheel(up_dir, "up-dep", "1.0", module="up_dep", value="from upstream")
    public = make_sdist(up_dir, "local-pkg", "2.0")
    root = harness.path("tree")
    write_static_index(root, [dep, public])
    return {"root": root, "dep": dep, "public": public, "nginx": harness.nginx(root)}


@pytest.mark.parametrize("pip_version", sorted(PIP_PYTHONS))
def test_pip_installs_local_and_upstream_packages_from_one_url(harness, artifacts, upstream_tree,
                                                               pip_version):
    python = PIP_PYTHONS[pip_version]
    if not python.exists():
        pytest.skip(f"{python} (pip {pip_version}) is not installed")
    local = make_wheel(artifacts, "local-pkg", "1.0", module="local_pkg", value="local",
                       requires_dist=("up-dep",))
    assert harness.ingest(local.path).returncode == 0
    nginx = upstream_tree["nginx"]
    config = write_config(harness, [{"name": "static", "url": nginx.url + "/simple/",
                                     "metadata_ttl": "0"}])
    server = harness.serve("--config", str(config))

    # The local project's page lists only the local file: the public 2.0 sdist is not offered.
    page = http_request(server.url, "GET", "/simple/local-pkg/")
    assert page.status == 200
    assert "local_pkg-1.0-py3-none-any.whl" in page.text
    assert "2.0" not in page.text
    # An upstream project is listed through this server, never linked to the upstream.
    dep = upstream_tree["dep"]
    page = http_request(server.url, "GET", "/simple/up-dep/", {"Accept": JSON_TYPE})
    assert page.status == 200, page.text
    files = page.json()["files"]
    assert [f["filename"] for f in files] == [dep.filename]
    assert files[0]["url"] == f"/upstream/static/{dep.sha256}/{dep.filename}"
    assert files[0]["hashes"] == {"sha256": dep.sha256}

    cwd = harness.path("pip-cwd")
    target = harness.path("target")
    proc = pip_install(python, server.url + "/simple/", target, "local-pkg", cwd=cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = run([python, "-c", "import local_pkg, up_dep; print(local_pkg.VALUE, up_dep.VALUE)"],
              cwd=cwd, env=clean_env(PYTHONPATH=str(target)))
    assert out.stdout.strip() == "local from upstream", out.stdout + out.stderr
    assert blob_path(harness.data_dir, dep.sha256).is_file()  # stored on first download

    # The upstream stopped: the page is served from its copy (stale, with its age) and the
    # file from the store.
    nginx.stop()
    page = http_request(server.url, "GET", "/simple/up-dep/")
    assert page.status == 200
    assert (page.header("Wheelforge-Upstream-Stale") or "").startswith("static; age=")
    assert "<!-- upstream static: its files are listed from a cached page" in page.text
    target2 = harness.path("target2")
    proc = pip_install(python, server.url + "/simple/", target2, "local-pkg", cwd=cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (target2 / "up_dep").is_dir()


def test_a_file_whose_bytes_do_not_match_its_hash_is_refused_and_not_stored(harness, artifacts,
                                                                            upstream_tree):
    dep = upstream_tree["dep"]
    listed = dep.sha256
    # The host now serves other bytes under the listed name.
    other = make_wheel(harness.path("other"), "up-dep", "1.0", module="up_dep", value="tampered")
    shutil.copy2(other.path, upstream_tree["root"] / "files" / dep.filename)
    config = write_config(harness, [{"name": "static",
                                     "url": upstream_tree["nginx"].url + "/simple/"}])
    server = harness.serve("--config", str(config))
    refusal = f"sent {dep.filename} with sha256 {other.sha256}, but its page lists sha256 {listed}"
    # The answer streams while the file is fetched: when the refusal comes before any byte
    # was sent, it is a 502 naming it; after, the answer is cut short. Never a whole 200.
    status, body, complete = get_streamed(server.url, f"/upstream/static/{listed}/{dep.filename}")
    if status == 200:
        assert not complete
    else:
        assert (status, complete) == (502, True)
        assert refusal in body.decode(), body
    assert wait_for(lambda: refusal in server.log()), server.log_tail()
    assert not blob_path(harness.data_dir, listed).exists()
    assert not blob_path(harness.data_dir, other.sha256).exists()
    tmp = harness.data_dir / "tmp"
    # Nothing but the server's temp session lock is left of the fetch.
    assert not [p for p in tmp.rglob("*") if p.is_file() and p.name != ".lock"], list(tmp.rglob("*"))
    python = PIP_PYTHONS["24.2"]
    if python.exists():
        proc = pip_install(python, server.url + "/simple/", harness.path("t"), "up-dep",
                           cwd=harness.path("pip-cwd"))
        assert proc.returncode != 0


def get_streamed(base: str, target: str, timeout: float = 60) -> tuple[int, bytes, bool]:
    """GET on a fresh connection: the status, the body read, and whether it was complete."""
    parts = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", target)
        resp = conn.getresponse()
        try:
            return resp.status, resp.read(), True
        except http.client.IncompleteRead as e:
            return resp.status, e.partial, False
    finally:
        conn.close()


def upstream_blob_rows(data_dir: Path) -> list[tuple[str, str]]:
    return sorted(catalog_query(data_dir, "SELECT sha256, filename FROM upstream_blobs"))


class GatedUpstream:
    """A PEP 503 upstream in this process whose files arrive under the test's control: the
    project page lists `artifact` under its sha256, and a download of it gets the Content-Length
    (unless `sized` is false: then the body ends when the connection does) and the first half
    of `body` (the artifact's bytes unless told otherwise), then the rest once `release` is
    set. Counts the file downloads."""

    def __init__(self, artifact: Artifact, body: bytes | None = None, sized: bool = True):
        self.artifact = artifact
        self.sized = sized
        self.file_status = 200
        self.body = artifact.data if body is None else body
        self.release = threading.Event()
        self.file_requests = 0
        self._lock = threading.Lock()
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                a = upstream.artifact
                project = a.filename.split("-")[0].replace("_", "-")
                if self.path == f"/simple/{project}/":
                    page = (f'<html><body><a href="/files/{a.filename}#sha256={a.sha256}">'
                            f"{a.filename}</a></body></html>").encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                if self.path != f"/files/{a.filename}":
                    self.send_error(404)
                    return
                with upstream._lock:
                    upstream.file_requests += 1
                    body = upstream.body
                if upstream.file_status != 200:
                    self.send_error(upstream.file_status)
                    return
                half = len(body) // 2
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                if upstream.sized:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[:half])
                self.wfile.flush()
                if upstream.release.wait(120):
                    self.wfile.write(body[half:])

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def serve_through(harness, upstream: GatedUpstream) -> Server:
    """wheelforge with `upstream` as its one upstream, "gated"."""
    config = write_config(harness, [{"name": "gated", "url": upstream.url + "/simple/"}])
    return harness.serve("--config", str(config))


@pytest.fixture
def gated(harness):
    made = []

    def make(artifact: Artifact, body: bytes | None = None, sized: bool = True) -> GatedUpstream:
        made.append(GatedUpstream(artifact, body, sized))
        return made[-1]

    yield make
    for g in made:
        g.stop()


def link_of(server, project: str) -> str:
    page = http_request(server.url, "GET", f"/simple/{project}/", {"Accept": JSON_TYPE})
    assert page.status == 200, page.text
    return page.json()["files"][0]["url"]


def open_download(server, target: str) -> tuple[http.client.HTTPConnection,
                                                 http.client.HTTPResponse]:
    parts = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    conn.request("GET", target)
    return conn, conn.getresponse()


@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "chunked"])
def test_a_first_download_is_streamed_while_the_upstream_sends_it(harness, artifacts, gated,
                                                                  sized):
    dep = make_wheel(harness.path("up"), "up-dep", "1.0", module="up_dep", value="streamed",
                     padding=1 << 20)
    upstream = gated(dep, sized=sized)
    server = serve_through(harness, upstream)
    link = link_of(server, "up-dep")
    assert link == f"/upstream/gated/{dep.sha256}/{dep.filename}"
    # What the client reads before the upstream sends its second half (wheelforge keeps the
    # last byte it has back until the file is verified).
    part = len(dep.data) // 4

    conn, resp = open_download(server, link)
    try:
        assert resp.status == 200
        if sized:
            assert resp.getheader("Content-Length") == str(len(dep.data))
        else:  # neither the HTML page nor the upstream's answer gives the size
            assert resp.getheader("Content-Length") is None
            assert resp.getheader("Transfer-Encoding") == "chunked"
        assert resp.getheader("ETag") == f'"{dep.sha256}"'
        assert "immutable" in resp.getheader("Cache-Control")
        # The first part reaches the client while the upstream still holds back the rest.
        first = resp.read(part)
        assert first == dep.data[:part]
        assert not blob_path(harness.data_dir, dep.sha256).exists()
        upstream.release.set()
        assert first + resp.read() == dep.data
    finally:
        conn.close()
    # Stored, verified and recorded by the time the client has the last byte.
    assert blob_path(harness.data_dir, dep.sha256).read_bytes() == dep.data
    assert upstream_blob_rows(harness.data_dir) == [(dep.sha256, dep.filename)]
    assert upstream.file_requests == 1
    # Then served from the store, also with the upstream gone.
    upstream.stop()
    r = server.get_file(link)
    assert r.status == 200
    assert r.body == dep.data
    r = server.get_file(link, {"Range": "bytes=0-9"})
    assert (r.status, r.body) == (206, dep.data[:10])


def test_concurrent_first_downloads_share_one_upstream_fetch(harness, artifacts, gated):
    dep = make_wheel(harness.path("up"), "up-dep", "1.0", module="up_dep", value="shared",
                     padding=512 * 1024)
    upstream = gated(dep)
    server = serve_through(harness, upstream)
    link = link_of(server, "up-dep")
    # What the client reads before the upstream sends its second half (wheelforge keeps the
    # last byte it has back until the file is verified).
    part = len(dep.data) // 4
    downloads = [open_download(server, link) for _ in range(3)]
    try:
        # All three are answered from the one fetch while it is half done.
        firsts = [resp.read(part) for _, resp in downloads]
        assert firsts == [dep.data[:part]] * 3
        assert upstream.file_requests == 1
        upstream.release.set()
        for first, (_, resp) in zip(firsts, downloads):
            assert resp.status == 200
            assert first + resp.read() == dep.data
    finally:
        for conn, _ in downloads:
            conn.close()
    assert upstream.file_requests == 1
    assert upstream_blob_rows(harness.data_dir) == [(dep.sha256, dep.filename)]


def test_a_download_that_fails_before_its_first_byte_is_answered_with_the_error(harness,
                                                                               artifacts, gated):
    dep = make_wheel(harness.path("up"), "up-dep", "1.0", module="up_dep")
    upstream = gated(dep)
    upstream.file_status = 503
    server = serve_through(harness, upstream)
    link = link_of(server, "up-dep")
    status, body, complete = get_streamed(server.url, link)
    assert (status, complete) == (502, True)
    assert f"upstream gated answered 503 for {dep.filename}" in body.decode(), body
    assert upstream_blob_rows(harness.data_dir) == []
    # Not remembered as failed: the next request asks again.
    upstream.file_status = 200
    upstream.release.set()
    status, body, complete = get_streamed(server.url, link)
    assert (status, body, complete) == (200, dep.data, True)
    assert upstream.file_requests == 2


def test_a_download_left_by_its_client_still_stores_the_file(harness, artifacts, gated):
    dep = make_wheel(harness.path("up"), "up-dep", "1.0", module="up_dep", value="kept",
                     padding=512 * 1024)
    upstream = gated(dep)
    server = serve_through(harness, upstream)
    link = link_of(server, "up-dep")
    conn, resp = open_download(server, link)
    assert resp.status == 200
    assert resp.read(1000) == dep.data[:1000]
    conn.close()  # the client goes away mid-download
    upstream.release.set()
    assert wait_for(lambda: upstream_blob_rows(harness.data_dir), timeout=30), server.log_tail()
    assert blob_path(harness.data_dir, dep.sha256).read_bytes() == dep.data
    upstream.stop()
    r = server.get_file(link)
    assert (r.status, r.body) == (200, dep.data)
    assert upstream.file_requests == 1


@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "chunked"])
def test_a_tampered_file_streamed_in_part_is_cut_short_and_not_stored(harness, artifacts, gated,
                                                                      sized):
    dep = make_wheel(harness.path("up"), "up-dep", "1.0", module="up_dep", value="genuine",
                     padding=512 * 1024)
    tampered = bytearray(dep.data)
    tampered[-100] ^= 0xFF  # the second half differs: found only at the end
    upstream = gated(dep, bytes(tampered), sized=sized)
    server = serve_through(harness, upstream)
    link = link_of(server, "up-dep")
    # What the client reads before the upstream sends its second half (wheelforge keeps the
    # last byte it has back until the file is verified).
    part = len(dep.data) // 4

    conn, resp = open_download(server, link)
    try:
        assert resp.status == 200
        first = resp.read(part)
        assert first == dep.data[:part]
        upstream.release.set()
        # The connection ends before the last byte: the client never holds a whole answer.
        with pytest.raises(http.client.IncompleteRead) as cut:
            resp.read()
        assert len(first) + len(cut.value.partial) < len(dep.data)
    finally:
        conn.close()
    refusal = f"but its page lists sha256 {dep.sha256}: refused, nothing stored"
    assert wait_for(lambda: refusal in server.log()), server.log_tail()
    assert not blob_path(harness.data_dir, dep.sha256).exists()
    assert not blob_path(harness.data_dir, sha256_hex(bytes(tampered))).exists()
    assert upstream_blob_rows(harness.data_dir) == []
    tmp = harness.data_dir / "tmp"
    assert not [p for p in tmp.rglob("*") if p.is_file() and p.name != ".lock"], list(tmp.rglob("*"))

    # The upstream sends the right bytes again: the next request fetches and stores them.
    upstream.body = dep.data
    status, body, complete = get_streamed(server.url, link)
    assert (status, complete) == (200, True)
    assert body == dep.data
    assert upstream.file_requests == 2
    assert blob_path(harness.data_dir, dep.sha256).is_file()
    assert upstream_blob_rows(harness.data_dir) == [(dep.sha256, dep.filename)]


def test_the_cooldown_hides_fresh_files_of_a_json_upstream(harness, artifacts):
    # A second wheelforge as the upstream: its JSON pages carry upload-time.
    up_data = harness.root / "upstream-data"
    up_data.mkdir()
    old = make_wheel(artifacts, "cool-pkg", "1.0")
    assert harness.cli("ingest", "--data-dir", str(up_data), str(old.path)).returncode == 0
    upstream = Server(harness.binary, up_data, harness.root / "upstream.log", [])
    harness.servers.append(upstream)
    upstream.start()
    config = write_config(harness, [
        {"name": "fresh", "url": upstream.url + "/simple/"},
        {"name": "careful", "url": upstream.url + "/simple/", "cooldown_days": 1},
    ])
    # Only the cooled-down upstream may serve cool-pkg: the first is limited to another name.
    text = config.read_text().replace('name = "fresh"', 'name = "fresh"\nprojects = ["other"]')
    config.write_text(text)
    server = harness.serve("--config", str(config))
    page = http_request(server.url, "GET", "/simple/cool-pkg/", {"Accept": JSON_TYPE})
    assert page.status == 200, page.text
    assert page.json()["files"] == []  # uploaded upstream moments ago: hidden

    # Without the cooldown the same file is offered, with the upstream's upload-time.
    config.write_text(text.replace("cooldown_days = 1", "cooldown_days = 0"))
    harness.servers[-1].stop()
    server = harness.serve("--config", str(config))
    page = http_request(server.url, "GET", "/simple/cool-pkg/", {"Accept": JSON_TYPE})
    files = page.json()["files"]
    assert [f["filename"] for f in files] == [old.filename]
    assert files[0]["upload-time"].endswith("Z")


def test_unknown_names_are_404_and_bad_configuration_names_the_key(harness, upstream_tree):
    config = write_config(harness, [{"name": "static",
                                     "url": upstream_tree["nginx"].url + "/simple/"}])
    server = harness.serve("--config", str(config))
    r = http_request(server.url, "GET", "/simple/nowhere-at-all/")
    assert r.status == 404
    assert "no such project" in r.text
    bad = harness.root / "bad.toml"
    bad.write_text('[[upstream]]\nname = "x"\nurl = "ftp://example/"\n')
    proc = harness.cli("config", "check", "--config", str(bad))
    assert proc.returncode == 2
    assert "upstream.x.url: expected the http:// or https:// URL" in proc.stderr, proc.stderr


POETRY = Path("/usr/bin/poetry")
PDM = Path("/usr/bin/pdm")


def resolver_env(tmp: Path) -> dict[str, str]:
    return clean_env(
        HOME=str(tmp / "home"), POETRY_CONFIG_DIR=str(tmp / "poetry-config"),
        POETRY_CACHE_DIR=str(tmp / "poetry-cache"), POETRY_VIRTUALENVS_IN_PROJECT="true",
        PDM_CACHE_DIR=str(tmp / "pdm-cache"), PDM_CHECK_UPDATE="false",
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring", NO_COLOR="1", COLUMNS="1000",
    )


def test_poetry_and_pdm_install_local_and_upstream_packages_from_one_source(harness, artifacts,
                                                                            upstream_tree):
    """Debian's Poetry and pdm with wheelforge as their only source: the local project at its
    local version (not the upstream's newer sdist) and its dependency from the upstream."""
    if not POETRY.exists() and not PDM.exists():
        pytest.skip("neither poetry nor pdm is installed (Debian python3-poetry, python3-pdm)")
    local = make_wheel(artifacts, "local-pkg", "1.0", module="local_pkg", value="local",
                       requires_dist=("up-dep",))
    assert harness.ingest(local.path).returncode == 0
    config = write_config(harness, [{"name": "static",
                                     "url": upstream_tree["nginx"].url + "/simple/"}])
    server = harness.serve("--config", str(config))
    index = server.url + "/simple/"
    env = resolver_env(harness.root)
    checked = 0
    if POETRY.exists():
        project = harness.path("poetry-consumer")
        (project / "pyproject.toml").write_text(
            '[tool.poetry]\nname = "wf-consumer"\nversion = "0.1.0"\ndescription = ""\n'
            'authors = ["Wheelforge Tests <tests@example.invalid>"]\n\n'
            '[tool.poetry.dependencies]\npython = ">=3.9,<3.14"\n\n'
            f'[[tool.poetry.source]]\nname = "wheelforge"\nurl = "{index}"\ndefault = true\n'
        )
        done = run([POETRY, "--no-interaction", "add", "local-pkg"], timeout=300, cwd=project,
                   env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        lock = (project / "poetry.lock").read_text()
        assert 'name = "local-pkg"\nversion = "1.0"' in lock, lock
        assert upstream_tree["dep"].filename in lock, lock
        out = run([project / ".venv" / "bin" / "python", "-c",
                   "import local_pkg, up_dep; print(local_pkg.VALUE, up_dep.VALUE)"], cwd=project)
        assert out.stdout.strip() == "local from upstream", out.stdout + out.stderr
        checked += 1
    if PDM.exists():
        project = harness.path("pdm-consumer")
        (project / "pyproject.toml").write_text(
            '[project]\nname = "wf-consumer"\nversion = "0.1.0"\nrequires-python = ">=3.9"\n'
            'dependencies = []\n\n'
            f'[[tool.pdm.source]]\nname = "pypi"\nurl = "{index}"\nverify_ssl = false\n'
        )
        done = run([PDM, "add", "--no-self", "local-pkg"], timeout=300, cwd=project, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        lock = (project / "pdm.lock").read_text()
        assert 'name = "local-pkg"\nversion = "1.0"' in lock, lock
        assert upstream_tree["dep"].filename in lock, lock
        assert "local-pkg-2.0" not in lock and "local_pkg-2.0" not in lock, lock
        checked += 1
    assert checked > 0


def test_stored_upstream_files_are_covered_by_backup_and_fsck(harness, upstream_tree):
    dep = upstream_tree["dep"]
    config = write_config(harness, [{"name": "static",
                                     "url": upstream_tree["nginx"].url + "/simple/"}])
    server = harness.serve("--config", str(config))
    r = server.get_file(f"/upstream/static/{dep.sha256}/{dep.filename}")
    assert r.status == 200 and r.body == dep.data
    blob = blob_path(harness.data_dir, dep.sha256)
    assert blob.is_file()

    backup = harness.root / "backup"
    proc = harness.cli("backup", "--data-dir", str(harness.data_dir), str(backup))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sha = dep.sha256
    assert (backup / "blobs" / sha[:2] / sha[2:4] / sha).read_bytes() == dep.data

    proc = harness.cli("fsck", "--data-dir", str(harness.data_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    blob.replace_bytes(b"rotten")  # another size: a HEAD of an object sees it too
    proc = harness.cli("fsck", "--data-dir", str(harness.data_dir))
    assert proc.returncode != 0
    assert f"upstream:static/{dep.filename}" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_project_list_names_local_projects_that_also_exist_upstream(harness, artifacts,
                                                                    upstream_tree):
    for name in ("local-pkg", "only-here"):
        assert harness.ingest(make_wheel(artifacts, name, "1.0").path).returncode == 0
    config = write_config(harness, [{"name": "static",
                                     "url": upstream_tree["nginx"].url + "/simple/"}])
    proc = harness.cli("project", "list", "--config", str(config),
                       "--data-dir", str(harness.data_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()[1:]}
    assert proc.stdout.splitlines()[0].split()[-2:] == ["ALSO", "UPSTREAM"], proc.stdout
    assert rows["local-pkg"][-1] == "static", proc.stdout
    assert rows["only-here"][-1] == "-", proc.stdout
    # Without upstreams the listing is as before.
    plain = harness.cli("project", "list", "--data-dir", str(harness.data_dir))
    assert "UPSTREAM" not in plain.stdout

    # The server knows it from the pages `project list` cached: the metric and the project
    # page say so, without asking the upstream (stopped here).
    upstream_tree["nginx"].stop()
    server = harness.serve("--config", str(config))
    metrics = http_request(server.url, "GET", "/metrics").body.decode()
    assert 'wheelforge_upstream_shadowed_projects{upstream="static"} 1\n' in metrics, metrics
    page = http_request(server.url, "GET", "/project/local-pkg/").body.decode()
    assert "also exists on the upstream index static" in page, page
    page = http_request(server.url, "GET", "/project/only-here/").body.decode()
    assert "also exists on the upstream index" not in page


def test_printed_commands_name_this_index_alone_when_an_upstream_serves_every_name(
        harness, artifacts, upstream_tree):
    local = make_wheel(artifacts, "local-pkg", "1.0", module="local_pkg", value="local")
    assert harness.ingest(local.path).returncode == 0
    url = upstream_tree["nginx"].url + "/simple/"
    resolve = "/api/resolve?torch=2.8.0%2Bcu128&cuda=12.8&project=local-pkg"

    # An allow-list: other names still need another index, so pip is told to merge.
    config = write_config(harness, [{"name": "static", "url": url, "projects": ["up-dep"]}])
    server = harness.serve("--config", str(config))
    home = http_request(server.url, "GET", "/").text
    assert f"pip install --extra-index-url {server.url}/simple/ --only-binary" in home
    assert f"--extra-index-url {server.url}/cu128/torch2.8/simple/" in \
        http_request(server.url, "GET", resolve).json()["pip"]
    server.stop()

    # projects = "all": this index serves every name, and every command names it alone.
    config = write_config(harness, [{"name": "static", "url": url}])
    server = harness.serve("--config", str(config))
    home = http_request(server.url, "GET", "/").text
    assert f"pip install --index-url {server.url}/simple/ PROJECT==VERSION" in home
    assert f"index-url = {server.url}/simple/" in home
    assert "extra-index-url" not in home
    answer = http_request(server.url, "GET", resolve).json()
    assert answer["pip"].startswith(f"pip install --index-url {server.url}/cu128/torch2.8/simple/"), \
        answer
    page = http_request(server.url, "GET", "/project/local-pkg/").text
    assert f"pip install --index-url {server.url}/simple/ --only-binary local-pkg local-pkg==1.0" \
        in page
    assert "extra-index-url" not in page



def test_the_file_cache_bound_evicts_the_least_recently_used_upstream_files(harness, artifacts,
                                                                           upstream_tree):
    local = make_wheel(artifacts, "only-here", "1.0")
    assert harness.ingest(local.path).returncode == 0
    dep, public = upstream_tree["dep"], upstream_tree["public"]
    bound = max(len(dep.data), len(public.data)) + 1  # room for one, not for both
    assert bound < len(dep.data) + len(public.data)
    config = write_config(harness, [{"name": "static",
                                     "url": upstream_tree["nginx"].url + "/simple/"}])
    config.write_text(f'upstream_file_cache = "{bound}"\n' + config.read_text())
    server = harness.serve("--config", str(config))

    def download(f):
        r = server.get_file(f"/upstream/static/{f.sha256}/{f.filename}")
        assert r.status == 200 and r.body == f.data, r.body[:300]

    download(dep)
    assert blob_path(harness.data_dir, dep.sha256).is_file()
    download(public)  # the second evicts the first
    assert blob_path(harness.data_dir, public.sha256).is_file()
    assert not blob_path(harness.data_dir, dep.sha256).exists()
    download(dep)  # fetched again when asked, and the other evicted in turn
    assert blob_path(harness.data_dir, dep.sha256).is_file()
    assert not blob_path(harness.data_dir, public.sha256).exists()
    assert blob_path(harness.data_dir, local.sha256).is_file()  # local files never count

    # gc applies the bound too: with a smaller one the last upstream file goes, the local stays.
    proc = harness.cli("gc", "--data-dir", str(harness.data_dir), "--upstream-file-cache", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"evicted upstream static/{dep.filename}" in proc.stdout, proc.stdout
    assert not blob_path(harness.data_dir, dep.sha256).exists()
    assert blob_path(harness.data_dir, local.sha256).is_file()
    r = server.get_file(f"/files/{local.sha256}/{local.filename}")
    assert r.status == 200 and r.body == local.data
    download(dep)


def test_metadata_an_upstream_does_not_offer_is_read_from_the_stored_wheel(harness,
                                                                          upstream_tree):
    dep = upstream_tree["dep"]  # the static tree offers no core metadata
    config = write_config(harness, [{"name": "static",
                                     "url": upstream_tree["nginx"].url + "/simple/"}])
    server = harness.serve("--config", str(config))
    url = f"/upstream/static/{dep.sha256}/{dep.filename}"
    r = http_request(server.url, "GET", url + ".metadata")
    assert r.status == 404, r.body  # before the wheel is stored, as before
    r = http_request(server.url, "GET", url)
    assert r.status == 200 and r.body == dep.data
    upstream_tree["nginx"].stop()
    r = http_request(server.url, "GET", url + ".metadata")
    assert r.status == 200, r.body
    assert r.body == dep.metadata


def upstream_counter(server, metric: str) -> int:
    text = http_request(server.url, "GET", "/metrics").body.decode()
    prefix = f'wheelforge_upstream_{metric}_total{{upstream="static"}} '
    for line in text.splitlines():
        if line.startswith(prefix):
            return int(line[len(prefix):])
    raise AssertionError(f"no {prefix} in /metrics:\n{text}")


def test_merged_pages_change_at_once_with_a_local_upload_and_after_the_ttl_with_the_upstream(
        harness, artifacts, upstream_tree, upload_token):
    # local-pkg 1.0 here, 2.0 upstream, which may serve the name (serve_local).
    local = make_wheel(artifacts, "local-pkg", "1.0")
    config = write_config(harness, [{"name": "static",
                                     "url": upstream_tree["nginx"].url + "/simple/",
                                     "metadata_ttl": "2s", "serve_local": ["local-pkg"]}])
    server = harness.serve("--config", str(config))
    assert server.put_file(local, upload_token).status == 201
    public = upstream_tree["public"]

    def names(headers=None) -> tuple[list[str], Response]:
        r = http_request(server.url, "GET", "/simple/local-pkg/",
                         {"Accept": JSON_TYPE, **(headers or {})})
        assert r.status == 200, r.text
        body = gunzip(r.body) if r.header("Content-Encoding") == "gzip" else r.body
        return [f["filename"] for f in json.loads(body)["files"]], r

    files, first = names()
    assert files == [local.filename, public.filename]
    etag = first.header("ETag")
    # Asked again: the same page and validator; 304 for it; gzip with its own validator.
    files, again = names()
    assert files == [local.filename, public.filename] and again.header("ETag") == etag
    assert again.body == first.body
    r = http_request(server.url, "GET", "/simple/local-pkg/",
                     {"Accept": JSON_TYPE, "If-None-Match": etag})
    assert r.status == 304 and r.body == b""
    files, zipped = names({"Accept-Encoding": "gzip"})
    assert zipped.header("Content-Encoding") == "gzip"
    assert files == [local.filename, public.filename]
    assert gunzip(zipped.body) == first.body
    assert zipped.header("ETag") != etag
    r = http_request(server.url, "GET", "/simple/local-pkg/",
                     {"Accept": JSON_TYPE, "Accept-Encoding": "gzip",
                      "If-None-Match": zipped.header("ETag")})
    assert r.status == 304

    # A local upload is listed by the very next answer.
    newer = make_wheel(artifacts, "local-pkg", "1.1")
    assert server.put_file(newer, upload_token).status == 201
    files, uploaded = names()
    assert files == [local.filename, newer.filename, public.filename]
    assert uploaded.header("ETag") != etag
    r = http_request(server.url, "GET", "/simple/local-pkg/",
                     {"Accept": JSON_TYPE, "If-None-Match": etag})
    assert r.status == 200

    # A new upstream file is listed once the upstream's page has been asked again (TTL 2 s).
    misses = upstream_counter(server, "misses")
    fresh = make_sdist(harness.path("upstream-artifacts"), "local-pkg", "2.1")
    write_static_index(upstream_tree["root"], [upstream_tree["dep"], public, fresh])
    wait_for(lambda: names()[0] == [local.filename, newer.filename, public.filename,
                                    fresh.filename], timeout=15)
    assert upstream_counter(server, "misses") > misses
    files, _ = names()
    assert files == [local.filename, newer.filename, public.filename, fresh.filename]


def test_disk_copies_of_upstream_pages_stay_within_their_bound(harness, upstream_tree):
    # Each name the upstream does not have leaves a disk copy of its 404 (about 200 bytes,
    # counted as the 4 KiB block it takes): the bound holds ten of them.
    bound = 40960
    config = write_config(harness, [{"name": "static",
                                     "url": upstream_tree["nginx"].url + "/simple/"}])
    config.write_text(f'upstream_page_disk_cache = "{bound}"\n' + config.read_text())
    server = harness.serve("--config", str(config))
    pages = harness.data_dir / "upstream" / "pages" / "static"

    def disk() -> tuple[int, set[str]]:
        copies = [p for p in pages.iterdir() if p.is_file()]
        return sum(-(-p.stat().st_size // 4096) * 4096 for p in copies), {p.name for p in copies}

    names = [f"missing-{i:03d}" for i in range(60)]
    for name in names:
        assert http_request(server.url, "GET", f"/simple/{name}/").status == 404
        used, _ = disk()
        assert used <= bound
        # up-dep, asked between the others, stays.
        r = http_request(server.url, "GET", "/simple/up-dep/")
        assert r.status == 200 and upstream_tree["dep"].filename in r.text
    used, kept = disk()
    assert "up-dep" in kept and names[-1] in kept
    assert names[0] not in kept
    assert 0 < len(kept) < len(names)
    server.stop()

    # A new server: a kept page is read from its copy, an evicted one fetched again (and
    # copied again), still within the bound.
    server = harness.serve("--config", str(config))
    misses = upstream_counter(server, "misses")
    r = http_request(server.url, "GET", "/simple/up-dep/")
    assert r.status == 200 and upstream_tree["dep"].filename in r.text
    assert upstream_counter(server, "misses") == misses
    assert http_request(server.url, "GET", f"/simple/{names[0]}/").status == 404
    assert upstream_counter(server, "misses") == misses + 1
    used, kept = disk()
    assert names[0] in kept and used <= bound
    # A lower bound at start trims at once.
    server.stop()
    config.write_text(config.read_text().replace(f'"{bound}"', '"12288"'))
    server = harness.serve("--config", str(config))
    used, kept = disk()
    assert used <= 12288 and kept
    server.stop()

    # gc applies the bound too.
    before = len(kept)
    proc = harness.cli("gc", "--data-dir", str(harness.data_dir),
                       "--upstream-page-disk-cache", "4096")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    used, kept = disk()
    assert used <= 4096 and len(kept) < before
    assert f"removed {before - len(kept)} upstream page copies" in proc.stdout, proc.stdout


def test_sighup_says_that_upstream_changes_need_a_restart(harness, upstream_tree):
    url = upstream_tree["nginx"].url + "/simple/"
    config = write_config(harness, [{"name": "static", "url": url}])
    server = harness.serve("--config", str(config))

    def reload(count: int) -> str:
        server.proc.send_signal(signal.SIGHUP)
        line = wait_for(lambda: (re.findall(r"SIGHUP: (reload.*)$", server.log(), re.M) + [None] *
                                 count)[count - 1], 20.0)
        assert line, server.log_tail()
        return line

    assert "need a restart" not in reload(1)
    write_config(harness, [{"name": "static", "url": url, "cooldown_days": 3}])
    assert "([[upstream]] and upstream cache changes need a restart)" in reload(2)
    # The running configuration is the one from the start: no cooldown hides up-dep.
    r = http_request(server.url, "GET", "/simple/up-dep/")
    assert r.status == 200 and upstream_tree["dep"].name in r.text


def test_fetches_from_an_upstream_use_one_kept_connection(harness, artifacts, upstream_tree):
    config = write_config(harness, [{"name": "static",
                                     "url": upstream_tree["nginx"].url + "/simple/"}])
    server = harness.serve("--config", str(config))
    assert upstream_counter(server, "misses") == 0
    # Two pages and a file, one after the other: nginx keeps its connections open.
    assert http_request(server.url, "GET", "/simple/up-dep/").status == 200
    assert http_request(server.url, "GET", "/simple/local-pkg/").status == 200
    page = http_request(server.url, "GET", "/simple/up-dep/").text
    link = page.split('href="', 1)[1].split('"', 1)[0].split("#", 1)[0]
    r = http_request(server.url, "GET", urllib.parse.urljoin("/simple/up-dep/", link))
    assert r.status == 200 and r.body == upstream_tree["dep"].path.read_bytes()
    assert upstream_counter(server, "misses") == 2
    text = http_request(server.url, "GET", "/metrics").body.decode()
    assert "\nwheelforge_upstream_connections_opened_total 1\n" in text, text


class RecordingUpstream:
    """An HTTP server in this process that answers from `routes` (path -> (status, extra
    headers, body)) and records the Authorization header of every request (None when absent).
    With `credentials` ("user:password"), a request without them gets 401. A route whose
    headers have an ETag answers 304 to a request whose If-None-Match names it. Each answer
    waits `delay` seconds first (0: none)."""

    def __init__(self, credentials: str | None = None):
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.seen: list[tuple[str, str | None]] = []
        self.delay = 0.0
        self._lock = threading.Lock()
        expected = None
        if credentials is not None:
            expected = "Basic " + base64.b64encode(credentials.encode()).decode()
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                auth = self.headers.get("Authorization")
                with upstream._lock:
                    upstream.seen.append((self.path, auth))
                    route = upstream.routes.get(self.path)
                if expected is not None and auth != expected:
                    status, headers, body = 401, {"WWW-Authenticate": 'Basic realm="x"'}, b""
                elif route is None:
                    status, headers, body = 404, {}, b""
                else:
                    status, headers, body = route
                    etag = headers.get("ETag")
                    if etag is not None and self.headers.get("If-None-Match") == etag:
                        status, headers, body = 304, {"ETag": etag}, b""
                if upstream.delay:
                    time.sleep(upstream.delay)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def requests(self) -> list[tuple[str, str | None]]:
        with self._lock:
            return list(self.seen)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_upstream_credentials_go_only_to_the_upstreams_own_origin(harness):
    # The upstream (basic auth) lists three wheels: one it serves itself, one on another port
    # of the same host, and one it redirects to that other port. Only its own requests may
    # carry the password: the other server is not the upstream, as far as credentials go.
    password = "s3cret-upstream-pw"
    upstream = RecordingUpstream(credentials=f"mirror:{password}")
    other = RecordingUpstream()
    try:
        files = harness.path("cred-files")
        own, linked, redirected = (make_wheel(files, "cred-probe", v, module="cred_probe")
                                   for v in ("1.0", "1.1", "1.2"))
        wheel_type = {"Content-Type": "application/octet-stream"}
        upstream.routes[f"/files/{own.filename}"] = (200, wheel_type, own.data)
        upstream.routes[f"/files/{redirected.filename}"] = (
            302, {"Location": f"{other.url}/files/{redirected.filename}"}, b"")
        other.routes[f"/files/{linked.filename}"] = (200, wheel_type, linked.data)
        other.routes[f"/files/{redirected.filename}"] = (200, wheel_type, redirected.data)
        page = "".join(
            f'<a href="{href}#sha256={a.sha256}">{a.filename}</a>'
            for href, a in ((f"/files/{own.filename}", own),
                            (f"{other.url}/files/{linked.filename}", linked),
                            (f"/files/{redirected.filename}", redirected)))
        upstream.routes["/simple/cred-probe/"] = (
            200, {"Content-Type": "text/html"}, f"<html><body>{page}</body></html>".encode())
        config = write_config(harness, [{"name": "mirror", "url": upstream.url + "/simple/",
                                         "username": "mirror", "password": password}])
        server = harness.serve("--config", str(config))

        listed = http_request(server.url, "GET", "/simple/cred-probe/", {"Accept": JSON_TYPE})
        assert listed.status == 200, listed.text
        links = {f["filename"]: f["url"] for f in listed.json()["files"]}
        assert set(links) == {own.filename, linked.filename, redirected.filename}, links
        for artifact in (own, linked, redirected):
            r = http_request(server.url, "GET", links[artifact.filename])
            assert r.status == 200, (artifact.filename, r.status, r.text[:300])
            assert r.body == artifact.data, artifact.filename

        auth = "Basic " + base64.b64encode(f"mirror:{password}".encode()).decode()
        # The upstream's own page and files got the credentials (and nothing asked without).
        assert upstream.requests() == [("/simple/cred-probe/", auth),
                                       (f"/files/{own.filename}", auth),
                                       (f"/files/{redirected.filename}", auth)]
        # The other port saw both of its files, and never the Authorization header.
        assert sorted(other.requests()) == sorted([(f"/files/{linked.filename}", None),
                                                   (f"/files/{redirected.filename}", None)])
        assert password not in server.log()
    finally:
        upstream.stop()
        other.stop()


def documented_page_cap() -> int:
    """The size limit of an upstream page as docs/upstreams.md states it ("(64 MiB, ... for
    pages)"): the figure under test, so that the documentation and the code cannot disagree."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "upstreams.md").read_text()
    m = re.search(r"Each fetch has a size limit\s+\((\d+) MiB[^)]*for pages\)", doc)
    assert m, "docs/upstreams.md states no size limit for upstream pages"
    return int(m.group(1)) * 1024 * 1024


PAGE_CAP = documented_page_cap()


class SizedPageUpstream:
    """A PEP 503 upstream whose page of project `cap-<n>` is exactly PAGE_CAP + n bytes: one
    link with its sha256, then blanks (sent in 1 MiB pieces, with its Content-Length)."""

    def __init__(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                m = re.fullmatch(r"/simple/cap-(\d+)/", self.path)
                if not m:
                    self.send_error(404)
                    return
                name = f"cap_{m.group(1)}-1.0-py3-none-any.whl"
                head = (f'<html><body><a href="/files/{name}#sha256={"ab" * 32}">{name}</a>'
                        ).encode()
                tail = b"</body></html>\n"
                size = PAGE_CAP + int(m.group(1))
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(size))
                self.end_headers()
                self.wfile.write(head)
                left = size - len(head) - len(tail)
                piece = b" " * (1 << 20)
                while left > 0:
                    self.wfile.write(piece[:left])
                    left -= min(left, len(piece))
                self.wfile.write(tail)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_an_upstream_page_of_exactly_the_cap_is_read_and_one_byte_more_is_502(harness):
    upstream = SizedPageUpstream()
    try:
        config = write_config(harness, [{"name": "big", "url": upstream.url + "/simple/"}])
        server = harness.serve("--config", str(config))
        # 64 MiB through the fetcher takes seconds on a small shared host: a longer deadline
        # than http_request's.
        parts = urllib.parse.urlsplit(server.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        try:
            conn.request("GET", "/simple/cap-0/", headers={"Accept": JSON_TYPE})
            resp = conn.getresponse()
            status, body = resp.status, resp.read()
        finally:
            conn.close()
        assert status == 200, body[:500]
        assert [f["filename"] for f in json.loads(body)["files"]] == ["cap_0-1.0-py3-none-any.whl"]
        over = http_request(server.url, "GET", "/simple/cap-1/", {"Accept": JSON_TYPE})
        assert over.status == 502, over.text[:500]
        assert f"the answer is larger than {PAGE_CAP} bytes" in over.text, over.text[:500]
    finally:
        upstream.stop()
