"""`wheelforge migrate` (docs/operations.md, "Moving an index"): an index built on SQLite + files
with twine (uploads, a yank, a token that claimed its project, a trusted publisher) is copied
into PostgreSQL + an S3 store (pg_cluster.py, swift_s3.py), interrupted by SIGKILL after two
blobs and run again; a server on the copy serves the same pages and hashes, keeps the yank,
takes the token, and pip installs through the store's redirect; the copy is migrated back into
a fresh SQLite + files data directory that holds every row of the original and passes fsck. A source blob whose bytes
do not match its sha256 is refused, named, before any row is copied; a target that is the
source is refused."""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path

from swift_s3 import swift_s3 as swift  # noqa: F401 (the session's Swift)
from test_pip import PIP_TIMEOUT, pip_python_or_skip
from test_publish import output_of, twine
from wfhelpers import clean_env, make_wheel, pip_args, run

TABLES = ["tokens", "projects", "files", "deleted_files", "damaged_blobs", "upstream_blobs",
          "audit", "builds", "jobs", "trusted_publishers", "oidc_jtis"]


def s3_config(harness, store: dict) -> Path:
    """A configuration with only the [s3] table: the blob store stays as the flags say."""
    secret = harness.root / "s3-secret"
    secret.write_text(store["secret_key"] + "\n")
    config = harness.root / "wheelforge.toml"
    config.write_text(
        "[s3]\n"
        f'endpoint = "{store["endpoint"]}"\n'
        f'region = "{store["region"]}"\n'
        f'access_key_id = "{store["access_key"]}"\n'
        f'secret_access_key_file = "{secret}"\n'
    )
    return config


def migrate(harness, *args: str, env: dict[str, str] | None = None):
    return run([harness.binary, "migrate", *args], timeout=120, cwd=harness.root,
               env=clean_env(**(env or {})))


def rows(db: Path) -> dict[str, set[tuple]]:
    """Every row of every table; a token's without its last use (the copy's server used it)."""
    columns = {"tokens": "id, hash, scope, project, description, created_at, revoked_at, "
                         "expires_at, created_by"}
    with sqlite3.connect(db) as conn:
        return {t: set(conn.execute(f"SELECT {columns.get(t, '*')} FROM {t}").fetchall())
                for t in TABLES}


def test_sqlite_files_to_postgres_s3_and_back(harness, pg_database, swift, artifacts):  # noqa: F811
    token = harness.token("upload")
    server = harness.serve()
    wheels = [make_wheel(artifacts, "mig-app", "1.0", module="mig_app", value="one"),
              make_wheel(artifacts, "mig-app", "1.1", module="mig_app", value="eleven"),
              make_wheel(artifacts, "mig-lib", "2.0", module="mig_lib", value="lib")]
    proc = twine(harness, server.url + "/legacy/", token, [w.path for w in wheels])
    assert proc.returncode == 0, f"twine upload failed:\n{output_of(proc)}"
    server.stop()
    data = str(harness.data_dir)
    yank = harness.cli("yank", "--data-dir", data, "mig-app", "1.0", "--reason", "broken")
    assert yank.returncode == 0, yank.stderr
    issuer = harness.root / "issuer.toml"
    issuer.write_text('[[oidc_issuer]]\nname = "github"\n'
                      'url = "https://token.actions.githubusercontent.com"\n')
    publisher = harness.cli("publisher", "add", "mig-app", "--issuer", "github", "--claim",
                            "repository=example-org/mig-app", "--config", str(issuer),
                            "--data-dir", data)
    assert publisher.returncode == 0, publisher.stderr
    original = rows(harness.data_dir / "wheelforge.db")
    assert original["audit"] and original["tokens"] and original["trusted_publishers"]

    config = str(s3_config(harness, swift))
    prefix = "mig-" + uuid.uuid4().hex[:8]
    store = f"s3://{swift['bucket']}/{prefix}"
    forward = ["--config", config, "--data-dir", data, "--to-catalog", pg_database,
               "--to-blob-store", store]
    # Killed (SIGKILL) after two of the six blobs: no row reached the target yet.
    killed = migrate(harness, *forward, env={"WHEELFORGE_TEST_MIGRATE_KILL_AFTER_BLOBS": "2"})
    assert killed.returncode == -9, output_of(killed)
    assert killed.stdout.count(" copied: ") == 2, killed.stdout
    done = migrate(harness, *forward)
    assert done.returncode == 0, output_of(done)
    assert done.stdout.count(" present: ") == 2 and done.stdout.count(" copied: ") == 4, done.stdout
    assert "4 blobs copied" in done.stdout and "2 present" in done.stdout, done.stdout
    assert "table files: 3 copied, 0 present" in done.stdout, done.stdout
    # Once more: everything is there, nothing is written.
    again = migrate(harness, *forward)
    assert again.returncode == 0, output_of(again)
    assert "0 rows copied" in again.stdout and "0 blobs copied" in again.stdout, again.stdout

    # A server on the copy: same pages and hashes, the yank, the token (owner of its projects).
    server = harness.serve("--config", config, "--catalog", pg_database, "--blob-store", store)
    for w in wheels:
        entry = server.file_entry(w.name, w.filename)
        assert entry["hashes"] == {"sha256": w.sha256}
    assert server.file_entry("mig-app", wheels[0].filename)["yanked"] == "broken"
    assert server.file_entry("mig-app", wheels[1].filename).get("yanked") in (None, False)
    late = make_wheel(artifacts, "mig-app", "1.2", module="mig_app", value="twelve")
    assert server.put_file(late, token).status == 201
    python = pip_python_or_skip("24.2")
    target = harness.path("target")
    proc = run([python, "-m", "pip", "install", "--target", target,
                *pip_args(server.url + "/simple/"), "mig-app==1.1"], timeout=PIP_TIMEOUT)
    assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"
    assert "eleven" in (target / "mig_app" / "__init__.py").read_text()
    server.stop()

    # Back into a fresh SQLite + files data directory: every original row, and the new upload.
    fresh = harness.root / "fresh"
    back = migrate(harness, "--config", config, "--data-dir", data, "--catalog", pg_database,
                   "--blob-store", store, "--to-catalog", "sqlite", "--to-blob-store", "file",
                   "--to-data-dir", str(fresh))
    assert back.returncode == 0, output_of(back)
    copied = rows(fresh / "wheelforge.db")
    for table in TABLES:
        assert original[table] <= copied[table], table
    assert len(copied["files"]) == 4
    fsck = harness.cli("fsck", "--data-dir", str(fresh))
    assert fsck.returncode == 0, output_of(fsck)


def test_corrupt_source_blob_and_same_target_are_refused(harness, artifacts):
    wheel = make_wheel(artifacts, "mig-bad", "1.0")
    assert harness.ingest(wheel.path).returncode == 0
    data = str(harness.data_dir)

    same = migrate(harness, "--data-dir", data, "--to-catalog", "sqlite")
    assert same.returncode == 2 and "the target is the source" in same.stderr, output_of(same)

    blob = harness.data_dir / "blobs" / wheel.sha256[:2] / wheel.sha256[2:4] / wheel.sha256
    os.chmod(blob, 0o644)
    blob.write_bytes(wheel.data[:-1] + bytes([wheel.data[-1] ^ 1]))
    fresh = harness.root / "fresh"
    proc = migrate(harness, "--data-dir", data, "--to-data-dir", str(fresh))
    assert proc.returncode == 1, output_of(proc)
    assert wheel.filename in proc.stderr and "corrupt" in proc.stderr, proc.stderr
    # No row was copied, and no blob under the damaged one's key.
    assert not (fresh / "blobs" / wheel.sha256[:2] / wheel.sha256[2:4] / wheel.sha256).exists()
    with sqlite3.connect(fresh / "wheelforge.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM files").fetchone() == (0,)
