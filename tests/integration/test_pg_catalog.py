"""The catalog in PostgreSQL (docs/storage.md, "Catalog backends"): `wheelforge serve --catalog
postgresql://...` takes twine uploads that pip installs, with a token made by `wheelforge token
create --catalog URL`, and keeps everything across a restart; while the database is down an
upload answers 503 naming it and pages are still served, and once it is back the next upload
succeeds without a restart; a restart of the database during a loop of uploads loses no
acknowledged upload, and /readyz answers 503 naming it meanwhile; two servers on one database racing to upload one file name with
different bytes have exactly one winner. Real PostgreSQL 15 (pg_cluster.py), real twine, pip
and wheelforge processes on loopback."""

from __future__ import annotations

import concurrent.futures
import re
import threading
import time

from test_pip import PIP_TIMEOUT, pip_python_or_skip
from test_publish import output_of, twine
from wfhelpers import make_wheel, metric_sum, path_of, pip_args, run, wait_for


def listed_sha(server, project: str, filename: str) -> str | None:
    """The sha256 the project's JSON page lists for `filename`; None while it lists none."""
    page = server.get(f"/simple/{project}/", {"Accept": "application/vnd.pypi.simple.v1+json"})
    if page.status != 200:
        return None
    for entry in page.json()["files"]:
        if entry["filename"] == filename:
            return entry["hashes"]["sha256"]
    return None


def create_token(harness, catalog: str, scope: str = "upload") -> str:
    proc = harness.cli("token", "create", "--catalog", catalog, "--data-dir",
                       str(harness.data_dir), "--scope", scope)
    assert proc.returncode == 0, f"token create failed: {proc.stderr}"
    return proc.stdout.strip().splitlines()[-1]


def db_name(uri: str) -> str:
    """The database as wheelforge names it: "PostgreSQL at 127.0.0.1:PORT/DB"."""
    return "PostgreSQL at " + uri.split("@", 1)[1]


def test_upload_install_token_and_restart(harness, pg_database, artifacts):
    token = create_token(harness, pg_database)
    server = harness.serve("--catalog", pg_database)
    wheel = make_wheel(artifacts, "pg-demo", "1.0", module="pg_demo", value="from postgres")
    proc = twine(harness, server.url + "/legacy/", token, [wheel.path])
    assert proc.returncode == 0, f"twine upload failed:\n{output_of(proc)}"

    python = pip_python_or_skip("24.2")
    target = harness.path("target")
    proc = run([python, "-m", "pip", "install", "--target", target,
                *pip_args(server.url + "/simple/"), "pg-demo==1.0"], timeout=PIP_TIMEOUT)
    assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"
    assert (target / "pg_demo" / "__init__.py").read_text().find("from postgres") >= 0

    # The catalog is the database's: no SQLite catalog appeared in the data directory.
    assert not (harness.data_dir / "wheelforge.db").exists()
    rows = harness.cli("token", "list", "--catalog", pg_database, "--data-dir",
                       str(harness.data_dir))
    assert rows.returncode == 0, rows.stderr
    assert re.search(r"^1\s+upload\b", rows.stdout, re.M), rows.stdout
    audit = harness.cli("audit", "--catalog", pg_database, "--data-dir", str(harness.data_dir))
    assert audit.returncode == 0, audit.stderr
    assert wheel.filename in audit.stdout, audit.stdout

    # A backup of a PostgreSQL catalog is pg_dump's archive, with the blobs beside it.
    backup = harness.cli("backup", "--catalog", pg_database, "--data-dir", str(harness.data_dir),
                         str(harness.root / "backup"))
    assert backup.returncode == 0, backup.stderr
    assert (harness.root / "backup" / "catalog.pgdump").exists()
    assert not (harness.root / "backup" / "wheelforge.db").exists()

    # A restart keeps everything: the file, its page, the token.
    server.stop()
    again = harness.serve("--catalog", pg_database)
    page = again.get("/simple/pg-demo/")
    assert page.status == 200 and wheel.filename in page.text
    entry = again.file_entry("pg-demo", wheel.filename)
    assert entry["hashes"]["sha256"] == wheel.sha256
    second = make_wheel(artifacts, "pg-demo", "1.1")
    assert again.put_file(second, token).status == 201


def test_database_outage_answers_503_and_heals_without_restart(harness, pg_cluster, pg_database,
                                                              artifacts):
    token = create_token(harness, pg_database)
    server = harness.serve("--catalog", pg_database)
    first = make_wheel(artifacts, "outage-demo", "1.0")
    assert server.put_file(first, token).status == 201

    pg_cluster.stop()
    during = make_wheel(artifacts, "outage-demo", "1.1")
    answer = server.put_file(during, token)
    assert answer.status == 503, (answer.status, answer.text)
    assert db_name(pg_database) in answer.text, answer.text
    assert "wheelforge@" not in answer.text
    # Pages and files are still served, from memory.
    page = server.get("/simple/outage-demo/")
    assert page.status == 200 and first.filename in page.text
    assert during.filename not in page.text
    url = server.file_entry("outage-demo", first.filename)["url"]
    assert server.get(path_of(url)).status == 200

    pg_cluster.start()
    retry = server.put_file(during, token)
    assert retry.status == 201, (retry.status, retry.text)
    page = server.get("/simple/outage-demo/")
    assert during.filename in page.text


def test_database_restarted_during_uploads_loses_nothing_acknowledged(harness, pg_cluster,
                                                                    pg_database, artifacts):
    """A loop of uploads runs while PostgreSQL stops and starts again: every upload answered
    2xx is listed and downloadable afterwards, every other one got 503 naming the database;
    /readyz says 503 naming it while it is down and 200 once it is back; pages are served
    from memory meanwhile; /metrics counts the catalog's calls and its errors."""
    token = create_token(harness, pg_database)
    server = harness.serve("--catalog", pg_database)
    assert server.get("/readyz").status == 200
    answers: list[tuple[object, int, str]] = []
    done = threading.Event()

    def upload_loop() -> None:
        for i in range(400):
            if done.is_set():
                return
            wheel = make_wheel(harness.path(f"loop{i}"), "restart-demo", f"1.{i}")
            r = server.put_file(wheel, token)
            answers.append((wheel, r.status, r.text))
            if r.status >= 300:
                time.sleep(0.05)  # the database is down: no need to spin

    def acknowledged() -> int:
        return sum(1 for _, status, _ in answers if status < 300)

    loop = threading.Thread(target=upload_loop, daemon=True)
    loop.start()
    try:
        assert wait_for(lambda: acknowledged() >= 3, timeout=30), answers[-1:]
        pg_cluster.stop()
        before = acknowledged()
        # Uploads answer 503 naming the database, /readyz too; pages are still served.
        assert wait_for(lambda: any(s == 503 for _, s, _ in answers), timeout=10)
        ready = wait_for(lambda: (r := server.get("/readyz")).status == 503 and r, timeout=10)
        assert ready, "/readyz stayed 200 with the database down"
        assert db_name(pg_database) in ready.text and "wheelforge@" not in ready.text, ready.text
        page = server.get("/simple/restart-demo/")
        assert page.status == 200 and answers[0][0].filename in page.text
        assert metric_sum(server, "wheelforge_catalog_errors_total", backend="postgresql",
                          error="unavailable") > 0
        pg_cluster.start()
        assert wait_for(lambda: server.get("/readyz").status == 200, timeout=10), \
            server.get("/readyz").text
        assert wait_for(lambda: acknowledged() >= before + 3, timeout=30), answers[-1:]
    finally:
        done.set()
        loop.join(timeout=30)
    assert not loop.is_alive()

    failed = [(w.filename, status, text) for w, status, text in answers if status >= 300]
    assert failed, "no upload met the outage"
    for filename, status, text in failed:
        assert status == 503 and db_name(pg_database) in text, (filename, status, text)
    page = server.project_json("restart-demo")
    listed = {f["filename"]: f for f in page["files"]}
    for wheel, status, _ in answers:
        if status >= 300:
            continue
        assert wheel.filename in listed, f"{wheel.filename} was acknowledged and is not listed"
        assert listed[wheel.filename]["hashes"]["sha256"] == wheel.sha256
        body = server.get(path_of(listed[wheel.filename]["url"]))
        assert body.status == 200 and body.body == wheel.data, wheel.filename
    # The catalog's calls were timed, by kind.
    for kind in ("read", "write"):
        assert metric_sum(server, "wheelforge_catalog_call_duration_seconds_count",
                          backend="postgresql", kind=kind) > 0, kind


def test_two_servers_racing_for_one_name_have_one_winner(harness, pg_database, artifacts):
    token = create_token(harness, pg_database)
    a = harness.serve("--catalog", pg_database)
    b = harness.serve("--catalog", pg_database)
    for round_ in range(3):
        version = f"1.{round_}"
        contenders = [make_wheel(harness.path(f"race{round_}-{i}"), "race-demo", version,
                                 value=f"bytes {i}") for i in range(4)]
        assert len({w.sha256 for w in contenders}) == 4
        servers = [a, b, a, b]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda i: servers[i].put_file(contenders[i], token),
                                    range(4)))
        statuses = sorted(r.status for r in answers)
        assert statuses == [201, 409, 409, 409], [(r.status, r.text) for r in answers]
        winner = contenders[[r.status for r in answers].index(201)]
        # Both servers list the winner's bytes under that name (each notices the other's
        # commits at its next look at the catalog).
        for server in (a, b):
            assert wait_for(lambda s=server: listed_sha(s, "race-demo", winner.filename),
                            timeout=10) == winner.sha256
