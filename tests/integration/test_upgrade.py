"""A rolling upgrade across one PostgreSQL migration, as docs/scale.md's "Upgrades" describes:
two replicas of an older wheelforge (older_release.py: the commit before migration 6) serve one
PostgreSQL catalog and S3 bucket; a replica of this version joins and migrates the schema while
they run; the old ones go on serving and writing, and each version lists, serves and honours
what the other wrote within a second; an old replica started once the schema is newer is
refused with an error naming both versions; the old ones are then replaced one by one and
nothing is lost. Real PostgreSQL 15, Swift's S3 API and two builds of wheelforge on loopback;
runs under WF_TEST_BACKEND=pg-s3 (ctest integration-backends)."""

from __future__ import annotations

from pathlib import Path

import pytest

import older_release
import wfbackend
from test_claims import admin_post
from wfhelpers import catalog_query, make_wheel, path_of, run, wait_for

pytestmark = pytest.mark.skipif(
    wfbackend.BACKEND != "pg-s3",
    reason="a rolling upgrade is one of replicas sharing PostgreSQL: WF_TEST_BACKEND=pg-s3")

JSON = {"Accept": "application/vnd.pypi.simple.v1+json"}
WITHIN = 1.0


@pytest.fixture(scope="module")
def older_wheelforge() -> Path:
    """The older wheelforge; built here unless .ci/setup (or an earlier run) built it."""
    return older_release.build()


def schema_version(harness) -> int:
    rows = catalog_query(harness.data_dir, "SELECT version FROM wheelforge_schema WHERE id = 1")
    assert len(rows) == 1, rows
    return int(rows[0][0])


def listing(server, project: str) -> dict[str, dict]:
    page = server.get(f"/simple/{project}/", JSON)
    return {f["filename"]: f for f in page.json()["files"]} if page.status == 200 else {}


def on_each(servers, check) -> None:
    """`check(server)` comes true on every one of `servers` within a second."""
    for server in servers:
        assert wait_for(lambda s=server: check(s), timeout=WITHIN, interval=0.02), \
            server.log_tail()


def lists(wheel, project: str = "upgrade-demo"):
    return lambda server: wheel.filename in listing(server, project)


def old_cli(harness, binary: Path, *args: str):
    return run([str(binary), *args], cwd=harness.root)


def old_token(harness, binary: Path, scope: str) -> str:
    """A token made by the older wheelforge's `token create` (its first catalog write)."""
    proc = old_cli(harness, binary, "token", "create", "--data-dir", str(harness.data_dir),
                   "--scope", scope)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()[-1]


def serves_bytes(server, entry: dict, wheel) -> bool:
    got = server.get_file(path_of(entry["url"]))
    return got.status == 200 and got.body == wheel.data


def test_old_and_new_replicas_share_one_database_across_a_migration(harness, older_wheelforge,
                                                                     artifacts):
    old = older_wheelforge
    upload = old_token(harness, old, "upload")
    admin = old_token(harness, old, "admin")
    assert schema_version(harness) == older_release.SCHEMA
    old_a, old_b = (harness.serve(binary=old) for _ in range(2))
    for s in (old_a, old_b):
        assert wait_for(lambda s=s: s.get("/readyz").status == 200, timeout=10), s.log_tail()

    first = make_wheel(artifacts, "upgrade-demo", "1.0", value="old")
    put = old_a.put_file(first, upload)
    assert put.status == 201, put.text
    on_each([old_b], lists(first))

    # The new version joins while both old replicas run, and migrates the schema on connecting.
    new = harness.serve()
    assert wait_for(lambda: new.get("/readyz").status == 200, timeout=10), new.log_tail()
    assert schema_version(harness) > older_release.SCHEMA
    entry = listing(new, "upgrade-demo")[first.filename]
    assert entry["hashes"]["sha256"] == first.sha256 and serves_bytes(new, entry, first)

    # The old replicas go on writing on the newer schema; the new one lists it within a second.
    second = make_wheel(artifacts, "upgrade-demo", "1.1", value="old, migrated")
    put = old_b.put_file(second, upload)
    assert put.status == 201, put.text
    on_each([new, old_a], lists(second))
    # ... and follow what the new one writes.
    third = make_wheel(artifacts, "upgrade-demo", "1.2", value="new")
    put = new.put_file(third, upload)
    assert put.status == 201, put.text
    on_each([old_a, old_b], lists(third))
    for other in (old_a, old_b):
        assert serves_bytes(other, listing(other, "upgrade-demo")[third.filename], third)
    # One file name with other bytes, through either version: refused, the first kept.
    clash = make_wheel(harness.path("clash"), "upgrade-demo", "1.2", value="other bytes")
    assert clash.filename == third.filename
    assert old_a.put_file(clash, upload).status == 409
    # A yank and a token revocation through the new version reach the old ones.
    yank = admin_post(new, "/admin/yank", admin, "project=upgrade-demo&version=1.0&reason=old")
    assert yank.status == 200, yank.text
    on_each([old_a, old_b], lambda s: listing(s, "upgrade-demo")[first.filename].get("yanked"))
    made = admin_post(new, "/admin/tokens", admin, "scope=upload&description=upgrade-test")
    assert made.status in (200, 201), made.text
    fresh, fresh_id = made.json()["token"], made.json()["id"]
    fourth = make_wheel(artifacts, "upgrade-other", "1.0", value="fresh token")
    on_each([old_a], lambda s: s.put_file(fourth, fresh).status == 201)
    revoked = admin_post(new, f"/admin/tokens/{fresh_id}/revoke", admin)
    assert revoked.status == 200, revoked.text
    fifth = make_wheel(artifacts, "upgrade-other", "1.1", value="revoked token")
    on_each([old_a, old_b], lambda s: s.put_file(fifth, fresh).status == 401)

    # An old replica is not started again on the newer schema: refused, naming both versions.
    refused = old_cli(harness, old, "serve", "--data-dir", str(harness.data_dir),
                      "--listen", "127.0.0.1:0")
    assert refused.returncode != 0
    message = refused.stderr
    assert f"database schema version {schema_version(harness)} is newer than this wheelforge " \
           f"({older_release.SCHEMA})" in message, message
    assert "wheelforge@" not in message and "PostgreSQL at 127.0.0.1:" in message, message

    # The old replicas are replaced one by one; the new ones serve everything either wrote.
    for stopping in (old_a, old_b):
        assert stopping.stop() == 0, stopping.log_tail()
        replacement = harness.serve()
        assert wait_for(lambda r=replacement: r.get("/readyz").status == 200, timeout=10)
        files = listing(replacement, "upgrade-demo")
        assert set(files) == {first.filename, second.filename, third.filename}, sorted(files)
        for wheel in (first, second, third):
            assert files[wheel.filename]["hashes"]["sha256"] == wheel.sha256
            assert serves_bytes(replacement, files[wheel.filename], wheel)
        assert files[first.filename].get("yanked")
        assert set(listing(replacement, "upgrade-other")) == {fourth.filename}
