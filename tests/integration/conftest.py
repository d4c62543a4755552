"""Fixtures for the wheelforge integration tests.

Each test gets its own temporary directory (removed when the test passes, kept and named in the
report when it fails) and, through `harness`, its own data directory and server processes,
which are always stopped at the end of the test.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

import wfbackend
from wfhelpers import (
    NginxIndex,
    Server,
    StaticIndex,
    catalog_filenames,
    run,
    store_state,
)


# Fixtures that start a private Slurm cluster, prepare a container engine or start a throwaway
# PostgreSQL cluster (see each module).
pytest_plugins = ("slurm_cluster", "container_engine", "pg_cluster")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "default_backend_only(reason): about SQLite or the local file layout themselves; "
        "deselected when WF_TEST_BACKEND=pg-s3 runs the suite on PostgreSQL + S3 (wfbackend.py)")


def pytest_report_header(config):
    return f"wheelforge stores: WF_TEST_BACKEND={wfbackend.BACKEND}"


def pytest_collection_modifyitems(config, items):
    """Under pg-s3, deselects the tests marked default_backend_only (reported as deselected,
    with each one's reason under -v)."""
    if wfbackend.BACKEND == "default":
        return
    kept, dropped = [], []
    for item in items:
        mark = item.get_closest_marker("default_backend_only")
        if mark is None:
            kept.append(item)
            continue
        reason = mark.kwargs.get("reason") or (mark.args[0] if mark.args else "")
        assert reason, f"{item.nodeid}: default_backend_only needs a reason"
        dropped.append(item)
        if config.getoption("verbose") > 0:
            print(f"\ndeselected on {wfbackend.BACKEND}: {item.nodeid}: {reason}")
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session", autouse=True)
def wf_backend(request):
    """Under WF_TEST_BACKEND=pg-s3: the session's PostgreSQL cluster and Swift, through which
    every wheelforge command of the suite runs (wfbackend.command())."""
    if wfbackend.BACKEND == "default":
        yield None
        return
    import swift_s3

    pg = request.getfixturevalue("pg_cluster")
    root = Path(tempfile.mkdtemp(prefix="wf-backend-"))
    info = swift_s3.start(root / "swift")
    backend = wfbackend.PgS3(pg, info, root)
    wfbackend.install(backend)
    try:
        yield backend
    finally:
        wfbackend.install(None)
        swift_s3.stop(root / "swift")
        shutil.rmtree(root, ignore_errors=True)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        item.wf_failed = True
        harness = getattr(item, "wf_harness", None)
        if harness is not None:
            report.sections.append(("wheelforge temp dir (kept)", str(harness.root)))
            for server in harness.servers:
                report.sections.append(
                    (f"wheelforge log {server.log_path}", server.log_tail(60) or "(empty)")
                )


@pytest.fixture(scope="session")
def wheelforge_bin() -> Path:
    value = os.environ.get("WHEELFORGE_BIN")
    if not value:
        pytest.skip("WHEELFORGE_BIN is not set (CTest sets it to the built wheelforge binary)")
    path = Path(value)
    assert path.is_file() and os.access(path, os.X_OK), f"WHEELFORGE_BIN={value} is not an executable"
    return path.resolve()


class Harness:
    """A temporary directory, one data directory, and the processes started on it."""

    def __init__(self, binary: Path, root: Path):
        self.binary = binary
        self.root = root
        self.data_dir = root / "data"
        self.data_dir.mkdir()
        self.servers: list[Server] = []
        self.indexes: list[StaticIndex] = []
        self._tokens: dict[str, str] = {}

    def path(self, *parts: str) -> Path:
        p = self.root.joinpath(*parts)
        p.mkdir(parents=True, exist_ok=True)
        return p

    def cli(self, *args: str, timeout: float = 60):
        return run([self.binary, *args], timeout=timeout, cwd=self.root)

    def token(self, scope: str) -> str:
        """A token of `scope` for this data directory (created once, then reused)."""
        if scope not in self._tokens:
            proc = self.cli("token", "create", "--data-dir", str(self.data_dir), "--scope", scope)
            assert proc.returncode == 0, f"token create failed ({proc.returncode}): {proc.stderr}"
            lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
            assert lines, f"token create printed nothing; stderr: {proc.stderr}"
            token = lines[-1]
            assert " " not in token, f"last line is not a bare token: {token!r}"
            self._tokens[scope] = token
        return self._tokens[scope]

    def ingest(self, *paths: Path, timeout: float = 120):
        return self.cli("ingest", "--data-dir", str(self.data_dir), *map(str, paths), timeout=timeout)

    def serve(self, *extra_args: str, env: dict[str, str] | None = None,
              binary: Path | None = None) -> Server:
        """Starts `wheelforge serve` on the data directory; `env` adds to its environment;
        `binary` is another wheelforge than the suite's (an older version)."""
        log_path = self.root / f"server{len(self.servers)}.log"
        server = Server(binary or self.binary, self.data_dir, log_path, list(extra_args), env)
        self.servers.append(server)
        server.start()
        return server

    def static_index(self, root: Path) -> StaticIndex:
        index = StaticIndex(root, self.root / f"static-index{len(self.indexes)}.log")
        self.indexes.append(index)
        index.start()
        return index

    def nginx(self, root: Path, tls: tuple[Path, Path] | None = None, extra: str = "") -> NginxIndex:
        """nginx serving `root` on loopback (HTTP, and HTTPS with `tls`); see NginxIndex."""
        index = NginxIndex(root, self.root / f"nginx{len(self.indexes)}", tls, extra)
        self.indexes.append(index)
        index.start()
        return index

    def state(self):
        return store_state(self.data_dir)

    def filenames(self) -> list[str]:
        return catalog_filenames(self.data_dir)

    def close(self) -> list[str]:
        """Stops everything; returns a description of each server that had died on its own."""
        crashed = []
        for server in self.servers:
            if server.crashed():
                crashed.append(f"server exited by itself with status {server.proc.returncode}")
            server.stop()
            # Sanitizer builds report memory errors and undefined behaviour on stderr.
            if re.search(r"ERROR: AddressSanitizer|runtime error: |ERROR: LeakSanitizer", server.log()):
                crashed.append(f"sanitizer report in {server.log_path}")
        for index in self.indexes:
            index.stop()
        backend = wfbackend.active()
        if backend is not None:
            backend.release_under(self.root)
        return crashed


@pytest.fixture
def harness(request, wheelforge_bin) -> Harness:
    root = Path(tempfile.mkdtemp(prefix="wf-it-"))
    h = Harness(wheelforge_bin, root)
    request.node.wf_harness = h
    crashed: list[str] = []
    try:
        yield h
    finally:
        crashed = h.close()
        if not getattr(request.node, "wf_failed", False) and not crashed:
            shutil.rmtree(root, ignore_errors=True)
    if crashed:
        pytest.fail(f"{'; '.join(crashed)} (temp dir kept: {root})", pytrace=False)


@pytest.fixture
def tokens(harness):
    """Tokens created before the server starts: upload, read."""
    return {"upload": harness.token("upload"), "read": harness.token("read")}


@pytest.fixture
def server(harness, tokens) -> Server:
    return harness.serve()


@pytest.fixture
def upload_token(tokens) -> str:
    return tokens["upload"]


@pytest.fixture
def artifacts(harness) -> Path:
    """Directory for the wheels and sdists a test builds."""
    return harness.path("artifacts")
