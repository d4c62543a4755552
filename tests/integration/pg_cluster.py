"""A throwaway PostgreSQL cluster for the tests of the PostgreSQL catalog (docs/storage.md,
"Catalog backends").

`pg_cluster` (one per test session) is a real PostgreSQL server from Debian's `postgresql`
package (initdb + pg_ctl on a temp directory, a free loopback port, its Unix socket in the temp
directory, fsync off): started on first use, stopped when the session ends. It runs as
`nobody` when the tests run as root (the server refuses root). `pg_database` gives each test a
fresh database on it, as a libpq URI. A test may stop and start the server (`stop()`,
`start()`); the fixture starts it again for the next test.

When PostgreSQL's server programs are missing the tests that use these fixtures fail: CI
installs them (.ci/setup).
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

PG_TIMEOUT = 60.0


def _bin_dir() -> Path:
    env = os.environ.get("WF_PG_BIN")
    if env:
        return Path(env)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail("PostgreSQL's server programs (initdb, pg_ctl) are not installed under "
                    "/usr/lib/postgresql/*/bin: install Debian's postgresql (.ci/setup does)",
                    pytrace=False)
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    """One PostgreSQL server on 127.0.0.1:port, superuser `wheelforge` (trust auth)."""

    def __init__(self, root: Path):
        self.bin = _bin_dir()
        self.root = root
        self.data = root / "data"
        self.port = _free_port()
        self.running = False
        self._names = itertools.count(1)
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            os.chown(root, 65534, 65534)
            self._as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]

    def _run(self, *args: str) -> None:
        proc = subprocess.run([*self._as_user, *args], capture_output=True, text=True,
                              timeout=PG_TIMEOUT)
        assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"

    def init(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "wheelforge", "-A",
                  "trust", "-E", "UTF8", "--locale=C", "--no-sync")

    def start(self) -> None:
        if self.running:
            return
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l",
                  str(self.root / "server.log"), "-w", "-t", "30", "-o", options, "start")
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        if not self.running:
            return
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")
        self.running = False

    def create_database(self) -> str:
        """A new empty database; returns its libpq URI."""
        name = f"wf_it_{os.getpid()}_{next(self._names)}"
        proc = subprocess.run(
            [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U",
             "wheelforge", name], capture_output=True, text=True, timeout=PG_TIMEOUT)
        assert proc.returncode == 0, f"createdb failed: {proc.stderr}"
        return self.uri(name)

    def uri(self, database: str) -> str:
        return f"postgresql://wheelforge@127.0.0.1:{self.port}/{database}"

    def psql(self, uri: str, sql: str) -> str:
        """Runs SQL on a database; returns its unaligned output."""
        proc = subprocess.run([str(self.bin / "psql"), "-X", "-A", "-t", "-d", uri, "-c", sql],
                              capture_output=True, text=True, timeout=PG_TIMEOUT)
        assert proc.returncode == 0, f"psql failed: {proc.stderr}"
        return proc.stdout.strip()

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = (self.root / "server.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@pytest.fixture(scope="session")
def pg_cluster():
    root = Path(tempfile.mkdtemp(prefix="wf-pg-"))
    cluster = PgCluster(root)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        try:
            cluster.stop("immediate")
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_database(pg_cluster) -> str:
    """A fresh database on the session's cluster (started again if a test stopped it)."""
    pg_cluster.start()
    uri = pg_cluster.create_database()
    yield uri
    pg_cluster.start()
