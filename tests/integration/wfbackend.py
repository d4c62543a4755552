"""The stores the integration suite runs on: WF_TEST_BACKEND picks them for a whole pytest run.

- unset or "default": SQLite (DATA_DIR/wheelforge.db) and files (DATA_DIR/blobs), as a fresh
  machine runs.
- "pg-s3": the catalog in PostgreSQL and the files in an S3 object store served by redirect
  (`file_serving = "redirect"`): one throwaway PostgreSQL cluster (pg_cluster.py) and one Swift
  with its S3 API (swift_s3.py) per session; every data directory a test uses gets its own
  fresh database and its own key prefix in the bucket, created when a wheelforge command first
  names that data directory and dropped when the test's harness closes.

Every wheelforge command the suite runs (servers and CLI alike) goes through `command()`, which
adds `--catalog`, `--blob-store` and a configuration holding the `[s3]` table. A command that
already names a catalog or blob store (the backend-specific tests) is left as it is.

Tests about SQLite or the local file layout themselves are marked `default_backend_only` with a
reason; under pg-s3 they are deselected (pytest reports them as deselected, not passed).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import subprocess
from pathlib import Path

BACKEND = os.environ.get("WF_TEST_BACKEND", "default") or "default"
BACKENDS = ("default", "pg-s3")
if BACKEND not in BACKENDS:
    raise RuntimeError(f"WF_TEST_BACKEND={BACKEND!r}: expected one of {', '.join(BACKENDS)}")

# What a GET of a stored file answers: the bytes, or a redirect to the object store.
FILE_GET_STATUS = 302 if BACKEND == "pg-s3" else 200

# Subcommands without the common options (--config, --catalog, ...) or that open no store
# (`config check` prints the configuration it was given).
_NO_STORE_COMMANDS = {"upstream", "config", "--version", "--help", "-h"}


class PgS3:
    """The session's PostgreSQL cluster and S3 store, and one database + prefix per data dir."""

    def __init__(self, pg, swift: dict, root: Path):
        self.pg = pg
        self.swift = swift
        self.root = root
        secret = root / "s3-secret"
        secret.write_text(swift["secret_key"] + "\n")
        self.s3_table = (
            "[s3]\n"
            f'endpoint = "{swift["endpoint"]}"\n'
            f'region = "{swift["region"]}"\n'
            f'access_key_id = "{swift["access_key"]}"\n'
            f'secret_access_key_file = "{secret}"\n'
        )
        self.config = root / "s3.toml"
        self.config.write_text(self.s3_table)
        self.bucket = swift["bucket"]
        self._dirs: dict[Path, tuple[str, str]] = {}  # data dir -> (catalog URI, prefix)
        self._n = itertools.count(1)
        self._client = None

    def stores(self, data_dir: Path) -> tuple[str, str]:
        """(catalog URI, key prefix) of a data directory; a fresh database on first use."""
        data_dir = Path(os.path.abspath(data_dir))
        if data_dir not in self._dirs:
            self.pg.start()  # a fault test may have stopped it
            uri = self.pg.create_database()
            self._dirs[data_dir] = (uri, f"it{os.getpid()}-{next(self._n)}")
        return self._dirs[data_dir]

    def restore(self, backup: Path) -> None:
        """Restores a `wheelforge backup` of a data directory as docs/operations.md says:
        DEST/catalog.pgdump into a fresh database with pg_restore, and DEST/blobs/ copied into
        a fresh key prefix (same keys below it); then `backup` names those stores."""
        backup = Path(os.path.abspath(backup))
        self.pg.start()
        uri = self.pg.create_database()
        proc = subprocess.run(
            [str(self.pg.bin / "pg_restore"), "--no-owner", "--exit-on-error", "--dbname", uri,
             str(backup / "catalog.pgdump")], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise AssertionError(f"pg_restore of {backup} failed: {proc.stderr}")
        prefix = f"it{os.getpid()}-{next(self._n)}"
        blobs = backup / "blobs"
        for path in sorted(p for p in blobs.rglob("*") if p.is_file()):
            key = f"{prefix}/blobs/{path.relative_to(blobs).as_posix()}"
            self.s3().put_object(Bucket=self.bucket, Key=key, Body=path.read_bytes())
        self._dirs[backup] = (uri, prefix)

    def known(self, data_dir: Path) -> tuple[str, str] | None:
        return self._dirs.get(Path(os.path.abspath(data_dir)))

    def release_under(self, root: Path) -> None:
        """Drops the databases of the data directories under `root` (a test's temp dir)."""
        root = Path(os.path.abspath(root))
        for d in [d for d in self._dirs if d == root or root in d.parents]:
            uri, _prefix = self._dirs.pop(d)
            name = uri.rsplit("/", 1)[1]
            self.pg.start()
            subprocess.run(
                [str(self.pg.bin / "dropdb"), "-h", "127.0.0.1", "-p", str(self.pg.port), "-U",
                 "wheelforge", "--force", "--if-exists", name],
                capture_output=True, text=True, timeout=60)

    # -- reading the stores directly (tests compare what a request left behind)

    def sql(self, data_dir: Path, query: str) -> list[list[str]] | None:
        """Rows of a query on the data directory's database (None before it has one). A write
        first takes wheelforge's write lock exclusively (the advisory lock every write transaction
        takes first), in one transaction with it, so that it never deadlocks with a server's
        write."""
        known = self.known(data_dir)
        if known is None:
            return None
        commands = ["-c", query]
        if re.match(r"\s*(UPDATE|INSERT|DELETE)\b", query, re.IGNORECASE):
            commands = ["-1", "-c", r"\o /dev/null", "-c",
                        "SELECT pg_advisory_xact_lock(33608185435223141)", "-c", r"\o",
                        *commands]
        proc = subprocess.run(
            [str(self.pg.bin / "psql"), "-X", "-A", "-t", "-F", "\x1f", "-R", "\x1e", "-v", "ON_ERROR_STOP=1",
             "-d", known[0], *commands], capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            if "does not exist" in proc.stderr:  # the server has not created its schema yet
                return None
            raise AssertionError(f"psql {query!r} failed: {proc.stderr}")
        # psql ends the last record with a newline and prints nothing at all for no rows: a
        # row whose one value is NULL or empty is an empty record, not a missing one.
        if not proc.stdout:
            return []
        out = proc.stdout[:-1] if proc.stdout.endswith("\n") else proc.stdout
        return [rec.split("\x1f") for rec in out.split("\x1e")]

    def s3(self):
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.client(
                "s3", endpoint_url=self.swift["endpoint"], region_name=self.swift["region"],
                aws_access_key_id=self.swift["access_key"],
                aws_secret_access_key=self.swift["secret_key"],
                config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}))
        return self._client

    def blob_key(self, data_dir: Path, sha: str) -> str | None:
        known = self.known(data_dir)
        return None if known is None else f"{known[1]}/blobs/{sha[:2]}/{sha[2:4]}/{sha}"

    def blobs(self, data_dir: Path) -> frozenset[tuple[str, int]]:
        """(key below PREFIX/blobs/, size) of every object of the data directory's prefix."""
        known = self.known(data_dir)
        if known is None:
            return frozenset()
        base = f"{known[1]}/blobs/"
        out = set()
        for page in self.s3().get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                       Prefix=base):
            for obj in page.get("Contents", []):
                out.add((obj["Key"][len(base):], obj["Size"]))
        return frozenset(out)


_active: PgS3 | None = None


def install(backend: PgS3 | None) -> None:
    global _active
    _active = backend


def active() -> PgS3 | None:
    """The pg-s3 stores of this session, or None on the default backend."""
    return _active


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def command(argv: list, cwd=None, data_dir=None) -> list[str]:
    """The wheelforge command line `argv` on the session's backend (unchanged on the default
    one, for other programs, for subcommands without store options and for commands that
    name their own catalog or blob store). The data directory is `--data-dir`'s, else
    `data_dir` (one a configuration file names), else CWD/data."""
    argv = [str(a) for a in argv]
    b = _active
    if b is None or len(argv) < 2 or Path(argv[0]).name != "wheelforge":
        return argv
    if argv[1] in _NO_STORE_COMMANDS or "--help" in argv or "--" in argv:
        return argv
    if any(a.split("=", 1)[0] in ("--catalog", "--blob-store") for a in argv):
        return argv
    config = _option(argv, "--config")
    if config is not None:
        text = Path(config if os.path.isabs(config) else os.path.join(cwd or os.getcwd(), config)
                    ).read_text()
        if re.search(r"(?m)^\s*(catalog|blob_store)\s*=", text):
            return argv
        merged = _merge(Path(config if os.path.isabs(config) else os.path.join(cwd or os.getcwd(),
                                                                               config)), text, b)
        i = argv.index("--config") if "--config" in argv else None
        if i is not None:
            argv[i + 1] = str(merged)
        else:
            argv = [a if not a.startswith("--config=") else f"--config={merged}" for a in argv]
    else:
        argv += ["--config", str(b.config)]
    data_dir = _option(argv, "--data-dir") or (str(data_dir) if data_dir else "data")
    if not os.path.isabs(data_dir):
        data_dir = os.path.join(cwd or os.getcwd(), data_dir)
    uri, prefix = b.stores(Path(data_dir))
    return argv + ["--catalog", uri, "--blob-store", f"s3://{b.bucket}/{prefix}"]


def _merge(config: Path, text: str, b: PgS3) -> Path:
    """The copy of a configuration that pg-s3 commands get: its text plus the [s3] table."""
    merged = Path(str(config) + ".pg-s3.toml")
    if re.search(r"(?m)^\s*\[s3\]\s*$", text) is None:
        text = text.rstrip("\n") + "\n\n" + b.s3_table
    merged.write_text(text)
    return merged


def config_changed(config: Path) -> None:
    """After a test rewrote a configuration file that a running server reads (SIGHUP): on
    pg-s3 that server reads the copy command() made, which is made again from the new text."""
    config = Path(os.path.abspath(config))
    if _active is not None and Path(str(config) + ".pg-s3.toml").exists():
        _merge(config, config.read_text(), _active)


_file_serving = "redirect"


@contextlib.contextmanager
def file_serving(mode: str):
    """Servers started inside answer file URLs with `mode` ("redirect" or "proxy") on pg-s3:
    for tests about how the server itself sends a file's bytes (Range, HEAD, ETag)."""
    global _file_serving
    before, _file_serving = _file_serving, mode
    try:
        yield
    finally:
        _file_serving = before


def environment() -> dict[str, str]:
    """What every wheelforge process gets in its environment on this backend."""
    return {"WHEELFORGE_FILE_SERVING": _file_serving} if _active is not None else {}


def restore_backup(backup: Path) -> None:
    """Makes a `wheelforge backup` directory what a restore makes of it, so that servers and
    commands on `backup` (as a data directory) use the restored stores: nothing to do on the
    default backend (the backup is a complete data directory); on pg-s3, PgS3.restore()."""
    if _active is not None:
        _active.restore(backup)
