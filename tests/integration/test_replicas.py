"""Several wheelforge processes on one PostgreSQL catalog and one S3 bucket serve one index
(docs/scale.md): three replicas follow the catalog's change feed (LISTEN/NOTIFY with a poll as
the safety net), so an upload, a yank and a token revocation made through one are honoured by
the others within a second; a write's answer carries the catalog position it reached
(X-Wheelforge-Position) and another replica asked for that position
(X-Wheelforge-Min-Position) answers only once it has applied it; two replicas racing for one
file name with different bytes have exactly one winner; the feed's LISTEN connection
terminated by the database (pg_terminate_backend) leaves the replicas converging by polling
and listening again; haproxy with docs/scale.md's rules in front of them lets pip install what
twine uploaded a moment before (read your writes through the load balancer); a replica killed
mid-upload leaves nothing visible, and a PostgreSQL restart loses nothing acknowledged; five
concurrent misses of one upstream page over three replicas make one upstream fetch. Real
PostgreSQL 15, haproxy, Swift's S3 API, twine and wheelforge processes on loopback; runs under WF_TEST_BACKEND=pg-s3 (ctest integration-backends)."""

from __future__ import annotations

import concurrent.futures
import shutil
import time
from pathlib import Path

import pytest

import wfbackend
from test_claims import admin_post
from haproxy import Haproxy, documented_backend
from test_pip import pip_python_or_skip
from test_publish import output_of, twine
from test_upstream import RecordingUpstream, write_config
from wfhelpers import clean_env, make_wheel, pip_args, run, upload_awaiting_body, wait_for

pytestmark = pytest.mark.skipif(
    wfbackend.BACKEND != "pg-s3",
    reason="replicas share a PostgreSQL catalog and an S3 bucket: WF_TEST_BACKEND=pg-s3")

# The promise of docs/scale.md: a change made through one replica is on every other's pages
# within a second.
WITHIN = 1.0
JSON = {"Accept": "application/vnd.pypi.simple.v1+json"}
DOCS = Path(__file__).resolve().parents[2] / "docs"


def listing(server, project: str) -> dict[str, dict]:
    """The project's files as the replica's JSON page lists them, by file name."""
    page = server.get(f"/simple/{project}/", JSON)
    if page.status != 200:
        return {}
    return {f["filename"]: f for f in page.json()["files"]}


def within(predicate, seconds: float = WITHIN):
    """Polls `predicate` (every 20 ms) for at most `seconds`; its last value."""
    return wait_for(predicate, timeout=seconds, interval=0.02)


@pytest.fixture
def replicas(harness):
    servers = [harness.serve() for _ in range(3)]
    for s in servers:
        assert wait_for(lambda s=s: s.get("/readyz").status == 200, timeout=10), s.log_tail()
    return servers


def test_upload_yank_and_revoke_reach_every_replica_within_a_second(harness, replicas, artifacts):
    a, b, c = replicas
    token = harness.token("upload")
    admin = harness.token("admin")

    wheel = make_wheel(artifacts, "feed-demo", "1.0", value="one")
    proc = twine(harness, a.url + "/legacy/", token, [wheel.path])
    assert proc.returncode == 0, f"twine upload failed:\n{output_of(proc)}"
    for other in (b, c):
        assert within(lambda o=other: wheel.filename in listing(o, "feed-demo")), other.log_tail()

    # Read your writes: B, asked for the position A's answer names, lists the file at once.
    second = make_wheel(artifacts, "feed-demo", "1.1", value="two")
    put = a.put_file(second, token)
    assert put.status == 201, put.text
    position = put.header("X-Wheelforge-Position")
    assert position and position.isdigit(), put.header
    page = b.get("/simple/feed-demo/", {**JSON, "X-Wheelforge-Min-Position": position})
    assert page.status == 200
    assert second.filename in {f["filename"] for f in page.json()["files"]}
    # A position nobody reached yet is refused once the (bounded) wait is over, naming the lag.
    far = str(int(position) + 10**9)
    started = time.monotonic()
    late = c.get("/simple/feed-demo/", {**JSON, "X-Wheelforge-Min-Position": far})
    assert late.status == 503 and "behind" in late.text, (late.status, late.text)
    assert late.header("Retry-After") == "1"
    assert time.monotonic() - started < 15

    # A yank through A: B and C say so within a second.
    yank = admin_post(a, "/admin/yank", admin, "project=feed-demo&version=1.0&reason=broken")
    assert yank.status == 200, yank.text
    assert yank.header("X-Wheelforge-Position")
    for other in (b, c):
        assert within(lambda o=other: listing(o, "feed-demo")[wheel.filename].get("yanked")), \
            other.log_tail()

    # A token made and revoked through A: B and C take it, then refuse it, within a second.
    made = admin_post(a, "/admin/tokens", admin, "scope=upload&description=replica-test")
    assert made.status in (200, 201), made.text
    fresh = made.json()["token"]
    fresh_id = made.json()["id"]
    third = make_wheel(artifacts, "feed-token-demo", "1.0", value="three")
    assert within(lambda: b.put_file(third, fresh).status == 201)
    revoked = admin_post(a, f"/admin/tokens/{fresh_id}/revoke", admin)
    assert revoked.status == 200, revoked.text
    fourth = make_wheel(artifacts, "feed-token-demo", "1.1", value="four")
    for other in (b, c):
        assert within(lambda o=other: o.put_file(fourth, fresh).status == 401), other.log_tail()


def test_racing_replicas_have_one_winner(harness, replicas):
    a, b, _ = replicas
    token = harness.token("upload")
    contenders = [make_wheel(harness.path(f"race{i}"), "race-feed", "1.0", value=f"bytes {i}")
                  for i in range(2)]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda i: [a, b][i].put_file(contenders[i], token), range(2)))
    assert sorted(r.status for r in answers) == [201, 409], [(r.status, r.text) for r in answers]
    winner = contenders[[r.status for r in answers].index(201)]
    for s in replicas:
        assert within(lambda s=s: listing(s, "race-feed").get(winner.filename, {}).get(
            "hashes", {}).get("sha256") == winner.sha256), s.log_tail()


def feed_backends(harness) -> int:
    """How many connections of this database are feed readers (LISTENing replicas)."""
    rows = wfbackend.active().sql(
        harness.data_dir,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid()"
        " AND (query LIKE 'LISTEN%' OR query LIKE '%pg_snapshot_xmin(pg_current_snapshot())%')")
    return int(rows[0][0])


def test_replicas_converge_after_their_listen_connections_are_terminated(harness, replicas,
                                                                          artifacts):
    a, b, c = replicas
    token = harness.token("upload")
    assert wait_for(lambda: feed_backends(harness) == 3, timeout=5)
    wfbackend.active().sql(
        harness.data_dir,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND (query LIKE 'LISTEN%' OR query LIKE '%pg_snapshot_xmin(pg_current_snapshot())%')")
    # Each replica notices, connects again and listens again (its next poll).
    first = make_wheel(artifacts, "relisten-demo", "1.0", value="one")
    assert a.put_file(first, token).status == 201
    for other in (b, c):
        assert wait_for(lambda o=other: first.filename in listing(o, "relisten-demo"),
                        timeout=5), other.log_tail()
    assert wait_for(lambda: feed_backends(harness) == 3, timeout=5)
    # Listening again: the next change is on every page within a second.
    second = make_wheel(artifacts, "relisten-demo", "1.1", value="two")
    assert c.put_file(second, token).status == 201
    for other in (a, b):
        assert within(lambda o=other: second.filename in listing(o, "relisten-demo")), \
            other.log_tail()


def test_twine_then_pip_through_haproxy_read_their_own_write(harness, replicas, artifacts):
    """haproxy, with the rules docs/scale.md gives operators, in front of the three replicas:
    pip installs what twine uploaded a moment before, and every request of pip's reached its
    replica asking for the upload's catalog position."""
    python = pip_python_or_skip("24.2")
    token = harness.token("upload")
    proxy = Haproxy(harness.root, [s.url.removeprefix("http://") for s in replicas],
                    forwardfor=False, backend_rules=documented_backend(DOCS / "scale.md"))
    try:
        wheel = make_wheel(artifacts, "lb-ryw-demo", "1.0", value="through haproxy")
        proc = twine(harness, proxy.url + "/legacy/", token, [wheel.path])
        assert proc.returncode == 0, f"twine upload failed:\n{output_of(proc)}"
        uploaded = len(proxy.requests())
        target = harness.path("target")
        proc = run([python, "-m", "pip", "install", "--no-deps", "--target", target,
                    *pip_args(proxy.url + "/simple/"), "lb-ryw-demo==1.0"],
                   timeout=120, cwd=harness.path("pip-cwd"))
        assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"
        check = run([python, "-c", "import lb_ryw_demo; print(lb_ryw_demo.VALUE)"],
                    timeout=60, cwd=harness.path("pip-cwd"), env=clean_env(PYTHONPATH=str(target)))
        assert check.stdout.strip() == "through haproxy", check.stdout + check.stderr
    finally:
        proxy.stop()
    log = proxy.requests()
    written = [r for r in log[:uploaded] if r.method == "POST" and r.position != "-"]
    assert len(written) == 1 and written[0].status < 300, log
    position = int(written[0].position)
    reads = log[uploaded:]
    assert any(r.target == "/simple/lb-ryw-demo/" for r in reads), reads
    for r in reads:
        assert r.min_position != "-" and int(r.min_position) >= position, (position, r)
    # Round robin: the upload and pip's requests were spread over the replicas.
    assert len({r.server for r in log}) >= 2, log


def test_a_replica_killed_mid_upload_leaves_nothing_and_a_database_restart_loses_nothing(
        harness, replicas, artifacts, pg_cluster):
    a, b, c = replicas
    token = harness.token("upload")
    backend = wfbackend.active()
    kept = make_wheel(artifacts, "kill-demo", "1.0", value="kept")
    assert a.put_file(kept, token).status == 201
    before = backend.blobs(harness.data_dir)

    # kill -9 of A while half of an upload's body has reached it.
    held = make_wheel(artifacts, "kill-demo", "1.1", value="held", padding=400_000)
    host, port = a.url.removeprefix("http://").rsplit(":", 1)
    sock = upload_awaiting_body((host, int(port)), host, held.filename, token, held.size)
    sock.sendall(held.data[: held.size // 2])
    a.stopped_by_us = True
    a.proc.kill()
    a.proc.wait(10)
    sock.close()
    for other in (b, c):
        files = listing(other, "kill-demo")
        assert kept.filename in files and held.filename not in files, files
    assert backend.blobs(harness.data_dir) == before
    rows = backend.sql(harness.data_dir,
                       f"SELECT count(*) FROM files WHERE filename = '{held.filename}'")
    assert rows == [["0"]], rows

    # PostgreSQL restarted: B and C keep serving their pages meanwhile, saying how old they
    # may be once their feed has gone unread for 5 s, and afterwards every acknowledged file
    # is listed, by them and by A started again, and new uploads spread.
    assert b.get("/simple/kill-demo/").header("Wheelforge-Catalog-Stale") is None
    pg_cluster.stop()
    try:
        for other in (b, c):
            assert kept.filename in listing(other, "kill-demo")
        stale = wait_for(lambda: (r := b.get("/simple/kill-demo/")).header(
            "Wheelforge-Catalog-Stale") and r, timeout=15)
        assert stale and stale.status == 200 and kept.filename in stale.text, b.log_tail()
        age = stale.header("Wheelforge-Catalog-Stale")
        assert age.startswith("age=") and int(age[4:]) >= 5, age
    finally:
        pg_cluster.start()
    assert wait_for(lambda: b.get("/simple/kill-demo/").header("Wheelforge-Catalog-Stale") is None,
                    timeout=15), b.log_tail()
    after = make_wheel(artifacts, "kill-demo", "1.2", value="after")
    answer = wait_for(lambda: (r := b.put_file(after, token)).status != 503 and r, timeout=20)
    assert answer and answer.status == 201, (answer.status, answer.text) if answer else b.log_tail()
    restarted = harness.serve()
    assert wait_for(lambda: restarted.get("/readyz").status == 200, timeout=10), \
        restarted.log_tail()
    for server in (b, c, restarted):
        assert wait_for(lambda s=server: {kept.filename, after.filename} <= set(
            listing(s, "kill-demo")), timeout=5), server.log_tail()
        assert held.filename not in listing(server, "kill-demo")


def test_five_misses_of_one_upstream_page_over_three_replicas_make_one_fetch(harness):
    # An upstream that takes a second to answer: every request below misses while the first
    # fetch runs. Alone, each replica would fetch the page once (its own misses share a fetch).
    upstream = RecordingUpstream()
    upstream.delay = 1.0
    wheel = "shared_dep-1.0-py3-none-any.whl"
    upstream.routes["/simple/shared-dep/"] = (
        200, {"Content-Type": "text/html"},
        f'<html><body><a href="../../files/{wheel}#sha256={"5" * 64}">{wheel}</a></body></html>'
        .encode())
    try:
        config = write_config(harness, [{"name": "up", "url": upstream.url + "/simple/"}])
        servers = [harness.serve("--config", str(config)) for _ in range(3)]
        for s in servers:
            assert wait_for(lambda s=s: s.get("/readyz").status == 200, timeout=10), s.log_tail()
        with concurrent.futures.ThreadPoolExecutor(5) as pool:
            pages = list(pool.map(lambda i: listing(servers[i % 3], "shared-dep"), range(5)))
        assert all(list(p) == [wheel] for p in pages), pages
        fetches = [path for path, _ in upstream.requests() if path == "/simple/shared-dep/"]
        assert len(fetches) == 1, f"{len(fetches)} upstream fetches for five concurrent misses"
        # The copy is the catalog's: a replica started now, with no disk copy of its own (the
        # replicas of this test share one data directory: it is removed), lists the page
        # without a fetch.
        shutil.rmtree(harness.data_dir / "upstream" / "pages")
        late = harness.serve("--config", str(config))
        assert wait_for(lambda: late.get("/readyz").status == 200, timeout=10), late.log_tail()
        assert list(listing(late, "shared-dep")) == [wheel]
        fetches = [path for path, _ in upstream.requests() if path == "/simple/shared-dep/"]
        assert len(fetches) == 1, fetches
    finally:
        upstream.stop()


def test_a_page_the_upstream_confirms_again_serves_every_replica_without_another_fetch(harness):
    # The upstream answers 304 to a conditional request. Once the page is older than its TTL,
    # the replica that asks first revalidates it; the others then use the catalog's copy,
    # whose validation time moved, rather than each asking the upstream in turn.
    upstream = RecordingUpstream()
    wheel = "renewed_dep-1.0-py3-none-any.whl"
    upstream.routes["/simple/renewed-dep/"] = (
        200, {"Content-Type": "text/html", "ETag": '"v1"'},
        f'<html><body><a href="../../files/{wheel}#sha256={"6" * 64}">{wheel}</a></body></html>'
        .encode())
    try:
        config = write_config(harness, [{"name": "up", "url": upstream.url + "/simple/",
                                         "metadata_ttl": 2, "page_timeout": "20s"}])
        servers = [harness.serve("--config", str(config)) for _ in range(3)]
        for s in servers:
            assert wait_for(lambda s=s: s.get("/readyz").status == 200, timeout=10), s.log_tail()

        def asked():
            return [path for path, _ in upstream.requests() if path == "/simple/renewed-dep/"]

        for s in servers:
            assert list(listing(s, "renewed-dep")) == [wheel]
        assert len(asked()) == 1, asked()
        time.sleep(2.5)  # past the TTL on every replica
        assert list(listing(servers[0], "renewed-dep")) == [wheel]
        assert len(asked()) == 2, asked()  # the revalidation (answered 304)
        for s in servers[1:]:
            assert list(listing(s, "renewed-dep")) == [wheel]
        assert len(asked()) == 2, f"{len(asked()) - 2} more fetches after the 304"
    finally:
        upstream.stop()
