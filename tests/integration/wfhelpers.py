"""Helpers for the wheelforge integration tests: test artifacts built on the fly, a handle on a
running server, a plain HTTP client, the real clients (curl, pip) and a static stand-in index.

Everything binds to 127.0.0.1 and nothing here reaches the network.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import gzip
import hashlib
import html
import html.parser
import http.client
import io
import json
import os
import re
import selectors
import shutil
import signal
import socket
import sqlite3
import subprocess
import tarfile
import time
import urllib.parse
import zipfile
from pathlib import Path

import wfbackend

PYENV = Path("/root/.pyenv/versions")
# The pip versions whose behaviour differs in ways the index must serve (JSON vs HTML choice,
# PEP 658 metadata through `data-dist-info-metadata` only, PEP 714 `core-metadata`).
PIP_PYTHONS = {
    "23.0.1": PYENV / "3.9.18" / "bin" / "python",
    "23.2.1": PYENV / "3.11.7" / "bin" / "python",
    "24.2": PYENV / "3.13.0" / "bin" / "python",
}
PIP_ACCEPT = (
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, "
    "text/html; q=0.01"
)
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
SERVER_START_TIMEOUT = 30.0
SERVER_STOP_GRACE = 10.0
CLI_TIMEOUT = 60.0


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def normalize(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def dist_name(name: str) -> str:
    """PEP 427 escaped distribution name as it appears in file names."""
    return re.sub(r"[-_.]+", "_", name)


# ---------------------------------------------------------------------------------------------
# Artifacts


@dataclasses.dataclass
class Artifact:
    path: Path
    name: str
    version: str
    metadata: bytes  # exact METADATA / PKG-INFO bytes inside the archive

    @property
    def filename(self) -> str:
        return self.path.name

    @property
    def data(self) -> bytes:
        return self.path.read_bytes()

    @property
    def sha256(self) -> str:
        return sha256_hex(self.data)

    @property
    def size(self) -> int:
        return self.path.stat().st_size

    @property
    def metadata_sha256(self) -> str:
        return sha256_hex(self.metadata)


def metadata_text(
    name: str,
    version: str,
    *,
    requires_python: str | None = None,
    requires_dist: tuple[str, ...] = (),
    summary: str = "wheelforge integration test package",
    metadata_format: str = "2.1",
) -> str:
    lines = [
        f"Metadata-Version: {metadata_format}",
        f"Name: {name}",
        f"Version: {version}",
        f"Summary: {summary}",
    ]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    lines.extend(f"Requires-Dist: {req}" for req in requires_dist)
    return "\n".join(lines) + "\n"


def record_line(path: str, data: bytes) -> str:
    """A wheel RECORD line (without its newline) for a member."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def write_zip(path: Path, members: list[tuple[str, bytes]]) -> None:
    """Writes members deflated, in order, with fixed timestamps and 0644 permissions."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in members:
            info = zipfile.ZipInfo(member, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    *,
    tag: str = "py3-none-any",
    module: str | None = None,
    value: str | None = None,
    requires_python: str | None = None,
    requires_dist: tuple[str, ...] = (),
    metadata_name: str | None = None,
    metadata_version: str | None = None,
    metadata_format: str = "2.1",
    omit: tuple[str, ...] = (),
    filename: str | None = None,
    padding: int = 0,
    extra: tuple[tuple[str, bytes], ...] = (),
) -> Artifact:
    """Writes a small, valid, importable wheel into `directory` and returns it.

    `metadata_name` / `metadata_version` put other values into METADATA than into the file
    name, `metadata_format` another Metadata-Version; `omit` leaves out archive members by base
    name ("METADATA", "WHEEL", "RECORD"); `filename` overrides the file name on disk;
    `padding` adds a data file of that many incompressible bytes (for size limits); `extra`
    adds (path, data) members to the package, listed in RECORD."""
    directory.mkdir(parents=True, exist_ok=True)
    module = module or dist_name(name).lower()
    value = value if value is not None else f"{name} {version}"
    distinfo = f"{dist_name(name)}-{version}.dist-info"
    metadata = metadata_text(
        metadata_name or name,
        metadata_version or version,
        requires_python=requires_python,
        requires_dist=requires_dist,
        metadata_format=metadata_format,
    ).encode()
    purelib = "true" if tag.endswith("-any") else "false"
    wheel_meta = (
        f"Wheel-Version: 1.0\nGenerator: wheelforge-tests\nRoot-Is-Purelib: {purelib}\n"
        + "".join(f"Tag: {t}\n" for t in _expand_tags(tag))
    ).encode()
    members: list[tuple[str, bytes]] = [
        (f"{module}/__init__.py", f"VALUE = {value!r}\n__version__ = {version!r}\n".encode()),
    ]
    if padding:
        members.append((f"{module}/padding.bin", os.urandom(padding)))
    members.extend(extra)
    if "METADATA" not in omit:
        members.append((f"{distinfo}/METADATA", metadata))
    if "WHEEL" not in omit:
        members.append((f"{distinfo}/WHEEL", wheel_meta))
    record = "".join(record_line(p, d) + "\n" for p, d in members) + f"{distinfo}/RECORD,,\n"
    if "RECORD" not in omit:
        members.append((f"{distinfo}/RECORD", record.encode()))
    filename = filename or f"{dist_name(name)}-{version}-{tag}.whl"
    path = directory / filename
    write_zip(path, members)
    return Artifact(path, name, version, metadata)


def _expand_tags(tag: str) -> list[str]:
    pythons, abis, platforms = tag.split("-")
    return [
        f"{p}-{a}-{pl}"
        for p in pythons.split(".")
        for a in abis.split(".")
        for pl in platforms.split(".")
    ]


def make_sdist(
    directory: Path,
    name: str,
    version: str,
    *,
    requires_python: str | None = None,
    metadata_format: str = "2.1",
    filename: str | None = None,
) -> Artifact:
    """Writes `<name>-<version>.tar.gz` (or `filename`) with `<name>-<version>/PKG-INFO` and a
    module; `metadata_format` is PKG-INFO's Metadata-Version."""
    directory.mkdir(parents=True, exist_ok=True)
    base = f"{dist_name(name).lower()}-{version}"
    pkg_info = metadata_text(
        name, version, requires_python=requires_python, metadata_format=metadata_format
    ).encode()
    members = {
        f"{base}/PKG-INFO": pkg_info,
        f"{base}/pyproject.toml": b'[build-system]\nrequires = []\nbuild-backend = "none"\n',
        f"{base}/{dist_name(name).lower()}/__init__.py": b"VALUE = 1\n",
    }
    path = directory / (filename or f"{base}.tar.gz")
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 1704067200
            tf.addfile(info, io.BytesIO(data))
    return Artifact(path, name, version, pkg_info)


# ---------------------------------------------------------------------------------------------
# Plain HTTP


@dataclasses.dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self):
        return json.loads(self.body)


def http_request(
    base: str,
    method: str,
    target: str,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> Response:
    """Sends one request on a fresh connection; `target` is sent exactly as given (already
    percent-encoded). No redirects are followed and no content coding is undone."""
    parts = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=15)
    try:
        conn.request(method, target, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return Response(resp.status, resp.msg, data)
    finally:
        conn.close()


def path_of(url: str) -> str:
    """The path (percent-encoded, without query and fragment) of an absolute or relative URL."""
    return urllib.parse.urlsplit(url).path


class AnchorParser(html.parser.HTMLParser):
    """Collects <a> elements (attributes already unescaped, plus their text) and <meta>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[dict[str, str | None]] = []
        self.metas: list[dict[str, str | None]] = []
        self._current: dict[str, str | None] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._current = dict(attrs)
            self._current["#text"] = ""
            self.anchors.append(self._current)
        elif tag == "meta":
            self.metas.append(dict(attrs))

    def handle_data(self, data):
        if self._current is not None:
            self._current["#text"] = (self._current["#text"] or "") + data

    def handle_endtag(self, tag):
        if tag == "a":
            self._current = None


def parse_html(text: str) -> AnchorParser:
    parser = AnchorParser()
    parser.feed(text)
    parser.close()
    return parser


def gunzip(data: bytes) -> bytes:
    return gzip.decompress(data)


# ---------------------------------------------------------------------------------------------
# The server under test


def clean_env(**extra: str) -> dict[str, str]:
    """Environment for child processes: no proxies, no user pip configuration."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.lower().endswith("_proxy") and not k.startswith(("PIP_", "PYTHON"))
    }
    env.update(
        NO_PROXY="*",
        no_proxy="*",
        PIP_CONFIG_FILE="/dev/null",
        PIP_NO_INPUT="1",
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.update(wfbackend.environment())
    env.update(extra)
    return env


def run(cmd: list[str], *, timeout: float = CLI_TIMEOUT, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("env", clean_env())
    return subprocess.run(
        wfbackend.command(cmd, kwargs.get("cwd")), capture_output=True, text=True, timeout=timeout, **kwargs
    )


class Server:
    """One `wheelforge serve` process on 127.0.0.1 with a free port."""

    def __init__(
        self,
        binary: Path,
        data_dir: Path,
        log_path: Path,
        extra_args: list[str],
        env: dict[str, str] | None = None,
    ):
        self.binary = binary
        self.data_dir = data_dir
        self.log_path = log_path
        self.extra_args = extra_args
        self.env = env or {}
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.stopped_by_us = False

    def start(self) -> None:
        cmd = wfbackend.command([
            str(self.binary),
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            "127.0.0.1:0",
            *self.extra_args,
        ])
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=clean_env(**self.env),
            )
        finally:
            log.close()
        line = self._read_first_line(SERVER_START_TIMEOUT)
        match = re.fullmatch(r"listening on (http://127\.0\.0\.1:(\d+))", line.strip())
        if not match or int(match.group(2)) == 0:
            raise AssertionError(f"unexpected first line from `serve`: {line!r}")
        self.url = match.group(1)

    def _read_first_line(self, timeout: float) -> str:
        assert self.proc and self.proc.stdout
        deadline = time.monotonic() + timeout
        buf = b""
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"`serve` printed no line within {timeout:.0f}s; got {buf!r}")
                if not sel.select(left):
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise AssertionError(
                        f"`serve` exited (status {self.proc.wait(5)}) before listening; "
                        f"log: {self.log_tail()}"
                    )
                buf += chunk
        return buf.split(b"\n", 1)[0].decode()

    def crashed(self) -> bool:
        """True when the process ended without being told to."""
        return self.proc is not None and not self.stopped_by_us and self.proc.poll() is not None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        self.stopped_by_us = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(SERVER_STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stdout:
            self.proc.stdout.close()
        return self.proc.returncode

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    # -- HTTP shortcuts

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.url).netloc

    def request(self, method: str, target: str, headers=None, body=None) -> Response:
        return http_request(self.url, method, target, headers, body)

    def get(self, target: str, headers=None) -> Response:
        return self.request("GET", target, headers)

    def fetch(self, method: str, target: str, headers=None) -> Response:
        """A GET or HEAD of a file as a client that follows redirects sees it: a `302` to the
        object store (file_serving = redirect, WF_TEST_BACKEND=pg-s3) is followed once, to
        the presigned URL, with the same headers less Authorization (as pip and curl do)."""
        resp = self.request(method, target, headers)
        location = resp.header("Location")
        if resp.status != 302 or not location or not location.startswith("http"):
            return resp
        parts = urllib.parse.urlsplit(location)
        rest = {k: v for k, v in (headers or {}).items() if k.lower() != "authorization"}
        return http_request(f"{parts.scheme}://{parts.netloc}", method,
                            parts.path + ("?" + parts.query if parts.query else ""), rest)

    def get_file(self, target: str, headers=None) -> Response:
        return self.fetch("GET", target, headers)

    def head(self, target: str, headers=None) -> Response:
        return self.request("HEAD", target, headers)

    def put_file(self, artifact: Artifact, token: str, filename: str | None = None) -> Response:
        """Uploads with a Bearer token through a plain PUT (curl-free, for test setup)."""
        name = urllib.parse.quote(filename or artifact.filename, safe="")
        return self.request(
            "PUT",
            f"/upload/{name}",
            {"Authorization": f"Bearer {token}", "Content-Type": "application/octet-stream"},
            artifact.data,
        )

    def project_json(self, project: str) -> dict:
        resp = self.get(f"/simple/{project}/", {"Accept": JSON_TYPE})
        assert resp.status == 200, f"GET /simple/{project}/ -> {resp.status}: {resp.text[:300]}"
        return resp.json()

    def file_entry(self, project: str, filename: str) -> dict:
        page = self.project_json(project)
        for entry in page["files"]:
            if entry["filename"] == filename:
                return entry
        raise AssertionError(f"{filename} not listed on /simple/{project}/: {page}")


@dataclasses.dataclass(frozen=True)
class StoreState:
    """What a rejected upload must not change: blob and temp files, and catalog rows."""

    blobs: frozenset[tuple[str, int]]
    tmp: frozenset[tuple[str, int]]
    rows: tuple[str, ...]


def _tree(root: Path) -> frozenset[tuple[str, int]]:
    if not root.exists():
        return frozenset()
    out = set()
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            with contextlib.suppress(FileNotFoundError):
                out.add((str(p.relative_to(root)), p.stat().st_size))
    return frozenset(out)


def catalog_rows(data_dir: Path) -> tuple[str, ...]:
    """Every row of the catalog's `files` table (sorted, each as one string): SQLite's
    DATA_DIR/wheelforge.db, or the data directory's PostgreSQL database under pg-s3."""
    backend = wfbackend.active()
    if backend is not None:
        rows = backend.sql(data_dir, "SELECT * FROM files")
        return tuple(sorted(repr(tuple(r)) for r in rows or []))
    db = data_dir / "wheelforge.db"
    if not db.exists():
        return ()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        try:
            cur = conn.execute("SELECT * FROM files")
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return ()
            raise
        return tuple(sorted(repr(row) for row in cur.fetchall()))
    finally:
        conn.close()


def catalog_query(data_dir: Path, sql: str) -> list[tuple]:
    """Rows of a read-only query on the data directory's catalog, on either backend. Under
    pg-s3 every value comes back as text (NULL as ''); compare with str() on both sides."""
    backend = wfbackend.active()
    if backend is not None:
        return [tuple(r) for r in backend.sql(data_dir, sql) or []]
    db = data_dir / "wheelforge.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def catalog_execute(data_dir: Path, sql: str) -> None:
    """Runs one writing statement (values written into the SQL, no parameters) on the data
    directory's catalog, on either backend: for tests that age a row behind the server."""
    backend = wfbackend.active()
    if backend is not None:
        assert backend.sql(data_dir, sql) is not None, f"{data_dir} has no catalog yet"
        return
    conn = sqlite3.connect(data_dir / "wheelforge.db", timeout=10)
    try:
        with conn:
            conn.execute(sql)
    finally:
        conn.close()


def catalog_filenames(data_dir: Path) -> list[str]:
    return sorted(row[0] for row in catalog_query(data_dir, "SELECT filename FROM files"))


def blob_objects(data_dir: Path) -> frozenset[tuple[str, int]]:
    """(path below blobs/, size) of every stored blob: DATA_DIR/blobs, or the data directory's
    prefix in the object store under pg-s3 (PREFIX/blobs/...)."""
    backend = wfbackend.active()
    if backend is not None:
        return backend.blobs(data_dir)
    return _tree(data_dir / "blobs")


class StoredBlob:
    """The blob of a sha256 in a data directory's blob store (DATA_DIR/blobs/aa/bb/SHA, or
    PREFIX/blobs/aa/bb/SHA in the object store under pg-s3), with pathlib's names for what
    tests do with it."""

    def __init__(self, data_dir: Path, sha: str):
        self.data_dir, self.sha = data_dir, sha
        self.local = data_dir / "blobs" / sha[:2] / sha[2:4] / sha

    def __repr__(self) -> str:
        return f"StoredBlob({self.data_dir}, {self.sha})"

    def __getattr__(self, name):
        """Anything else (chmod, write_bytes, stat) is the local file's, on the default backend."""
        if wfbackend.active() is not None:
            raise AttributeError(f"StoredBlob.{name} exists only for local files")
        return getattr(self.local, name)

    def _object(self):
        backend = wfbackend.active()
        if backend is None:
            return None, None
        return backend, backend.blob_key(self.data_dir, self.sha)

    def exists(self) -> bool:
        backend, key = self._object()
        if backend is None:
            return self.local.exists()
        if key is None:
            return False
        from botocore.exceptions import ClientError

        try:
            backend.s3().head_object(Bucket=backend.bucket, Key=key)
            return True
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    is_file = exists

    def read_bytes(self) -> bytes:
        backend, key = self._object()
        if backend is None:
            return self.local.read_bytes()
        assert key is not None, f"{self.data_dir} has no object store prefix yet"
        return backend.s3().get_object(Bucket=backend.bucket, Key=key)["Body"].read()

    def _drop_cached_copy(self) -> None:
        """An object's local copy in the read cache (DATA_DIR/cache/blobs/aa/bb/SHA, trusted by
        its sha256) goes too, so that readers see what the store now holds."""
        cached = self.data_dir / "cache" / "blobs" / self.sha[:2] / self.sha[2:4] / self.sha
        with contextlib.suppress(FileNotFoundError):
            cached.unlink()

    def unlink(self) -> None:
        backend, key = self._object()
        if backend is None:
            self.local.unlink()
        else:
            backend.s3().delete_object(Bucket=backend.bucket, Key=key)
            self._drop_cached_copy()

    def replace_bytes(self, data: bytes) -> None:
        """Puts other bytes under the blob's name behind the server's back (damage): the local
        file (read-only, made writable for the change) or the object."""
        backend, key = self._object()
        if backend is None:
            self.local.parent.mkdir(parents=True, exist_ok=True)
            if self.local.exists():
                self.local.chmod(0o644)
            self.local.write_bytes(data)
            self.local.chmod(0o444)
        else:
            assert key is not None, f"{self.data_dir} has no object store prefix yet"
            backend.s3().put_object(Bucket=backend.bucket, Key=key, Body=data)
            self._drop_cached_copy()

    def flip_byte(self, offset: int = 10) -> None:
        """Damages the blob in place: one byte inverted, the size kept."""
        data = bytearray(self.read_bytes())
        data[offset] ^= 0xFF
        self.replace_bytes(bytes(data))


def put_blob(data_dir: Path, data: bytes) -> str:
    """Puts bytes into the data directory's blob store by hand, where the store would keep
    them (an orphan: no row references it); returns their sha256."""
    sha = sha256_hex(data)
    if wfbackend.active() is not None:
        wfbackend.active().stores(data_dir)  # the prefix, made on first use
    StoredBlob(data_dir, sha).replace_bytes(data)
    return sha


def stored_blob(data_dir: Path, sha: str) -> StoredBlob:
    return StoredBlob(data_dir, sha)


def store_state(data_dir: Path) -> StoreState:
    return StoreState(blob_objects(data_dir), _tree(data_dir / "tmp"), catalog_rows(data_dir))


def page_etags(server: Server, project: str) -> dict[str, str | None]:
    """The ETags of the pages a stored file of `project` would change: /simple/ and the
    project's page (HTML and JSON) and its web UI page. None for a page that answers 404."""
    pages = {
        "/simple/ (HTML)": ("/simple/", "text/html"),
        "/simple/ (JSON)": ("/simple/", JSON_TYPE),
        f"/simple/{project}/ (HTML)": (f"/simple/{project}/", "text/html"),
        f"/simple/{project}/ (JSON)": (f"/simple/{project}/", JSON_TYPE),
        f"/project/{project}/": (f"/project/{project}/", "text/html"),
    }
    out: dict[str, str | None] = {}
    for key, (target, accept) in pages.items():
        resp = server.get(target, {"Accept": accept})
        assert resp.status in (200, 404), f"GET {target} -> {resp.status}: {resp.text[:200]}"
        out[key] = resp.header("ETag") if resp.status == 200 else None
    return out


def assert_nothing_stored(
    data_dir: Path, server: Server, project: str, before: tuple[StoreState, dict], what: str
) -> None:
    """After a refusal: no new blob, temp file or catalog row since `before` (polled briefly,
    a temp file may be removed just after the answer), and the pages' ETags unchanged.
    `before` is (store_state(data_dir), page_etags(server, project)), taken before the
    upload."""
    state, etags = before
    if not wait_for(lambda: store_state(data_dir) == state, timeout=3.0):
        now = store_state(data_dir)
        raise AssertionError(
            f"{what} left something behind:\n"
            f"  new blobs: {sorted(now.blobs - state.blobs)}\n"
            f"  new tmp: {sorted(now.tmp - state.tmp)}\n"
            f"  rows before: {state.rows}\n  rows after: {now.rows}"
        )
    assert page_etags(server, project) == etags, f"{what} changed the pages"


def put_awaiting_body(server: Server, filename: str, token: str, length: int,
                      timeout: float = 20) -> socket.socket:
    """A connection that sent the head of `PUT /upload/<filename>` with `Expect: 100-continue`
    and got 100 Continue: the server checked the token and waits for `length` body bytes."""
    host, port = server.host.split(":")
    return upload_awaiting_body((host, int(port)), server.host, filename, token, length, timeout)


def upload_awaiting_body(address: tuple[str, int], host: str, filename: str, token: str,
                         length: int, timeout: float = 20,
                         source: str | None = None) -> socket.socket:
    """put_awaiting_body() through any address (a proxy in front of the server), from the
    local address `source` when given."""
    sock = socket.create_connection(address, timeout=timeout,
                                    source_address=(source, 0) if source else None)
    sock.sendall(
        f"PUT /upload/{filename} HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {length}\r\n"
        "Expect: 100-continue\r\n\r\n".encode()
    )
    interim = b""
    while b"\r\n\r\n" not in interim:
        chunk = sock.recv(1)
        assert chunk, f"connection closed before 100 Continue: {interim!r}"
        interim += chunk
    assert interim.startswith(b"HTTP/1.1 100"), interim
    return sock


def metric_sum(server: Server, name: str, **labels: str) -> float:
    """The sum of the /metrics samples named `name` whose labels include `labels` (0 when
    none)."""
    text = server.get("/metrics").text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        metric, _, rest = series.partition("{")
        if metric != name:
            continue
        if all(f'{key}="{want}"' in rest for key, want in labels.items()):
            total += float(value)
    return total


def wait_for(predicate, timeout: float = 5.0, interval: float = 0.1):
    """Polls until `predicate()` is truthy; returns its last value (falsy on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------
# curl


@dataclasses.dataclass
class CurlResult:
    rc: int
    status: int
    size_upload: int
    headers: dict[str, str]  # lower-case names, last value wins
    body: str
    stderr: str
    interim: list[int]  # status codes of 1xx answers before the final one ("100 Continue")


def curl(args: list[str], workdir: Path, *, timeout: float = 60) -> CurlResult:
    """Runs curl with `args` (URL included); returns the final status, headers and body."""
    exe = shutil.which("curl")
    if exe is None:
        import pytest

        pytest.skip("curl is not installed")
    header_file = workdir / "curl-headers.txt"
    body_file = workdir / "curl-body.txt"
    for f in (header_file, body_file):
        f.unlink(missing_ok=True)
    proc = subprocess.run(
        [
            exe,
            "-sS",
            "--noproxy",
            "*",
            "--max-time",
            str(int(timeout) - 5),
            "-D",
            str(header_file),
            "-o",
            str(body_file),
            "-w",
            "%{http_code} %{size_upload}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(),
    )
    code, size_upload = (proc.stdout.split() + ["0", "0"])[:2]
    headers: dict[str, str] = {}
    interim: list[int] = []
    if header_file.exists():
        blocks = re.split(r"\r?\n\r?\n", header_file.read_text(errors="replace").strip())
        for block in blocks[:-1]:
            match = re.match(r"HTTP/\S+ (1\d\d)", block)
            if match:
                interim.append(int(match.group(1)))
        # Only the final response's headers.
        for line in blocks[-1].splitlines()[1:]:
            if ":" in line:
                key, value = line.split(":", 1)
                headers[key.strip().lower()] = value.strip()
    body = body_file.read_text(errors="replace") if body_file.exists() else ""
    return CurlResult(
        proc.returncode, int(code), int(float(size_upload)), headers, body, proc.stderr, interim
    )


def curl_upload(
    server: Server,
    workdir: Path,
    artifact_path: Path,
    *,
    token: str | None = None,
    bearer: str | None = None,
    target: str = "/upload/",
    extra: list[str] | None = None,
) -> CurlResult:
    """`curl [-u __token__:TOKEN] -T FILE http://HOST/upload/` (curl appends the file name when
    the target ends with a slash)."""
    args = ["-T", str(artifact_path)]
    if token is not None:
        args += ["-u", f"__token__:{token}"]
    if bearer is not None:
        args += ["-H", f"Authorization: Bearer {bearer}"]
    args += extra or []
    args.append(server.url + target)
    return curl(args, workdir)


# ---------------------------------------------------------------------------------------------
# pip and a static stand-in for PyPI


def pip_args(index_url: str, extra_index_url: str | None = None) -> list[str]:
    args = [
        "--index-url",
        index_url,
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--no-input",
        "--timeout",
        "10",
        "--retries",
        "0",
    ]
    if extra_index_url:
        args += ["--extra-index-url", extra_index_url]
    return args


def write_static_index(root: Path, artifacts: list[Artifact]) -> None:
    """A PEP 503 tree under `root`: simple/index.html, simple/<project>/index.html and
    files/<name>, as a static host would serve it."""
    simple = root / "simple"
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    projects: dict[str, list[Artifact]] = {}
    for a in artifacts:
        shutil.copy2(a.path, files / a.filename)
        projects.setdefault(normalize(a.name), []).append(a)
    simple.mkdir(parents=True, exist_ok=True)
    root_links = "".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(projects))
    (simple / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{root_links}</body></html>\n")
    for project, items in projects.items():
        links = "".join(
            f'<a href="../../files/{urllib.parse.quote(a.filename)}#sha256={a.sha256}">'
            f"{html.escape(a.filename)}</a>\n"
            for a in items
        )
        (simple / project).mkdir(exist_ok=True)
        (simple / project / "index.html").write_text(
            f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n"
        )


class StaticIndex:
    """`python3 -m http.server` bound to 127.0.0.1 on a free port, serving a directory."""

    def __init__(self, root: Path, log_path: Path):
        self.root = root
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> None:
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                ["/usr/bin/python3", "-u", "-m", "http.server", "--bind", "127.0.0.1",
                 "--directory", str(self.root), "0"],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=clean_env(),
            )
        finally:
            log.close()
        assert self.proc.stdout
        deadline = time.monotonic() + 20
        buf = b""
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf and time.monotonic() < deadline:
                if sel.select(max(0.0, deadline - time.monotonic())):
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        break
                    buf += chunk
        match = re.search(rb"port (\d+)", buf)
        if not match:
            raise AssertionError(f"static index did not start: {buf!r}")
        self.url = f"http://127.0.0.1:{int(match.group(1))}"

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout:
            self.proc.stdout.close()


def make_test_ca(directory: Path) -> tuple[Path, Path]:
    """A throwaway certificate authority (openssl command): its certificate and key."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "ca.pem", directory / "ca.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=wheelforge test CA", "-keyout", str(key),
         "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key


def make_server_cert(directory: Path, ca: tuple[Path, Path], name: str,
                     alt_names: str = "IP:127.0.0.1,DNS:localhost") -> tuple[Path, Path]:
    """A server certificate signed by `ca` for `alt_names` (subjectAltName syntax): its
    certificate and key, as `name`.pem and `name`.key in `directory`."""
    cert, key, csr = directory / f"{name}.pem", directory / f"{name}.key", directory / f"{name}.csr"
    ext = directory / f"{name}.ext"
    ext.write_text(f"subjectAltName={alt_names}\n")
    subprocess.run(
        ["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr)],
        check=True, capture_output=True, timeout=60,
    )
    subprocess.run(
        ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
         "-CAcreateserial", "-days", "2", "-out", str(cert), "-extfile", str(ext)],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key


def free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NginxIndex:
    """nginx serving a directory (a static PEP 503 tree) on 127.0.0.1, over HTTP and, given a
    certificate and key, HTTPS too; its own prefix, configuration and logs under `prefix`.
    `extra` is added to the server block, with @HTTP_PORT@ and @HTTPS_PORT@ replaced."""

    def __init__(self, root: Path, prefix: Path, tls: tuple[Path, Path] | None = None,
                 extra: str = ""):
        self.root, self.prefix, self.tls, self.extra = root, prefix, tls, extra
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.https_url = ""

    def _config(self, http_port: int, https_port: int) -> str:
        listen = f"listen 127.0.0.1:{http_port};\n"
        tls = ""
        if self.tls:
            listen += f"        listen 127.0.0.1:{https_port} ssl;\n"
            tls = f"ssl_certificate {self.tls[0]};\n        ssl_certificate_key {self.tls[1]};\n"
        extra = self.extra.replace("@HTTP_PORT@", str(http_port)).replace("@HTTPS_PORT@", str(https_port))
        p = self.prefix
        # Run as root, nginx would drop its workers to `nobody`; keep the invoking user.
        user = "user root;" if os.geteuid() == 0 else ""
        return f"""{user}
worker_processes 1;
daemon off;
pid {p}/nginx.pid;
error_log {p}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {p}/access.log;
    client_body_temp_path {p}/client_body;
    proxy_temp_path {p}/proxy;
    fastcgi_temp_path {p}/fastcgi;
    uwsgi_temp_path {p}/uwsgi;
    scgi_temp_path {p}/scgi;
    types {{ text/html html; application/octet-stream whl; }}
    default_type application/octet-stream;
    server {{
        {listen}        {tls}        root {self.root};
        index index.html;
        {extra}
    }}
}}
"""

    def start(self) -> None:
        self.prefix.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            http_port, https_port = free_port(), free_port()
            conf = self.prefix / "nginx.conf"
            conf.write_text(self._config(http_port, https_port))
            stderr = open(self.prefix / "stderr.log", "ab")
            try:
                self.proc = subprocess.Popen(
                    ["nginx", "-p", str(self.prefix), "-e", str(self.prefix / "error.log"),
                     "-c", str(conf)],
                    stdout=subprocess.DEVNULL, stderr=stderr, stdin=subprocess.DEVNULL,
                )
            finally:
                stderr.close()
            self.url = f"http://127.0.0.1:{http_port}"
            self.https_url = f"https://127.0.0.1:{https_port}" if self.tls else ""
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    http_request(self.url, "GET", "/")
                    return
                except OSError:
                    time.sleep(0.05)
            self.stop()  # a port taken meanwhile: again with others
        raise AssertionError(f"nginx did not start; see {self.prefix}/error.log")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: workers finish, then exit
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
