#!/usr/bin/env python3
"""A scaled-down replay of a PyPI-sized catalog on PostgreSQL (docs/scale.md).

Starts a throwaway PostgreSQL cluster (tests/integration/pg_cluster.py), lets a wheelforge
server create the schema (its migrations) and upload one generated wheel, then copies that
real row into a synthetic catalog with SQL `generate_series`: `--files` rows (1M by default)
over `--projects` projects (50k: PyPI's 20 files per project), every column as the upload
wrote it but the project, the file name, the version, the digests and the time. Then measures:

  size      the tables' and indexes' bytes per file row (pg_total_relation_size)
  start-up  a replica started on that catalog: seconds until /readyz answers 200, its RSS then
            and its peak RSS (VmHWM)
  uploads   real uploads (PUT, blobs on the local disk) by 16 clients to the replica on that
            catalog: uploads/s, p50/p99, WAL bytes per upload, and when the replica has
            applied them all
  feed      N uploads' worth of catalog writes made by SQL while a replica runs (one
            transaction each: the `files` row, its triggers' `changes` row, NOTIFY), in two
            shapes: spread over many projects (each applied batch names more than 16 projects:
            a full load) and into one project (each batch reloads that project); the writes'
            rate and WAL bytes per upload, and the time until the replica's
            wheelforge_feed_position has reached the position after the last commit (its
            apply rate)

Prints markdown (also WORK/results.md, raw numbers in results.json). PostgreSQL runs as the
test harness starts it (fsync and synchronous_commit off): the write rates are an upper bound.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(HERE))

import pg_cluster  # noqa: E402
from backends import status_of, token_for, upload_all  # noqa: E402
from bench import Wheelforge, git_commit, log, machine_info, proc_status, raw_put  # noqa: E402
from replicas import get, gauge  # noqa: E402
from wfhelpers import make_wheel  # noqa: E402

# Columns the synthetic rows set themselves; every other column is copied from the real row.
OWN = {"id", "project_id", "filename", "version", "sha256", "metadata_sha256", "upload_time",
       "canonical"}


def psql(cluster, uri, sql, timeout=1800):
    proc = subprocess.run([str(cluster.bin / "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                           "-d", uri, "-c", sql], capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"psql failed: {proc.stderr}\n{sql[:400]}")
    return proc.stdout.strip()


def wait_ready(wf, timeout):
    t0 = time.monotonic()
    while status_of(wf.url + "/readyz") != 200:
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"{wf.url} not ready within {timeout} s; see {wf.log_path}")
        time.sleep(0.02)


def feed_position(wf):
    _, body = get(wf.url + "/metrics")
    return gauge(body.decode(errors="replace"), "wheelforge_feed_position")


def fill(cluster, uri, files, projects, template_project):
    """`projects` projects named replay-<i> and `files` files spread evenly over them, copied
    from the real row of `template_project`; triggers off for the fill (no feed rows)."""
    columns = psql(cluster, uri, "SELECT string_agg(column_name, ',' ORDER BY ordinal_position)"
                   " FROM information_schema.columns WHERE table_name = 'files'").split(",")
    copied = [c for c in columns if c not in OWN]
    per = max(1, files // projects)
    sql = f"""
SET session_replication_role = replica;
INSERT INTO projects (name, display_name, created_at)
  SELECT 'replay-' || p, 'replay-' || p, created_at
  FROM generate_series(1, {projects}) AS p,
       (SELECT created_at FROM projects WHERE name = '{template_project}') AS t;
INSERT INTO files (project_id, filename, version, sha256, metadata_sha256, upload_time, canonical,
                   {", ".join(copied)})
  SELECT pr.id,
         'replay_' || (i / {per} + 1) || '-1.0.' || (i % {per}) || '-py3-none-any.whl',
         '1.0.' || (i % {per}),
         md5(i::text) || md5((i + 1)::text),
         md5((-i)::text) || md5((-i - 1)::text),
         t.upload_time + i,
         'replay_' || (i / {per} + 1) || '-1.0.' || (i % {per}) || '-py3-none-any.whl',
         {", ".join("t." + c for c in copied)}
  FROM generate_series(0, {files - 1}) AS i
  JOIN projects pr ON pr.name = 'replay-' || (i / {per} + 1),
  (SELECT * FROM files LIMIT 1) AS t;
"""
    psql(cluster, uri, sql)
    psql(cluster, uri, "VACUUM ANALYZE")


def sizes(cluster, uri):
    rows = psql(cluster, uri, "SELECT relname, pg_total_relation_size(oid) FROM pg_class"
                " WHERE relname IN ('files', 'projects', 'changes') ORDER BY relname")
    return {name: int(size) for name, size in (r.split("|") for r in rows.splitlines())}


def write_feed(cluster, uri, n, projects, shape):
    """n single-row transactions (a file row each, as an upload writes it, with its triggers
    and a NOTIFY): `spread` over the projects, or all into `one` project. Returns the
    seconds taken, the WAL bytes written and the position after the last commit."""
    project = "(1 + (i * 7919) % " + str(projects) + ")" if shape == "spread" else "1"
    lsn0 = psql(cluster, uri, "SELECT pg_current_wal_lsn()")
    sql = f"""
DO $$
DECLARE pid BIGINT;
BEGIN
  FOR i IN 1..{n} LOOP
    SELECT id INTO pid FROM projects WHERE name = 'replay-' || {project};
    INSERT INTO files (project_id, filename, version, kind, sha256, size, upload_time,
                       metadata_sha256, metadata_size, python_tag, abi_tag, platform_tag,
                       canonical)
      VALUES (pid, 'feed_{shape}_' || i || '-2.0-py3-none-any.whl', '2.0', 'wheel',
              md5('f' || i) || md5('g' || i), 1000, 1700000000000000 + i,
              md5('m' || i) || md5('n' || i), 100, 'py3', 'none', 'any',
              'feed_{shape}_' || i || '-2.0-py3-none-any.whl');
    PERFORM pg_notify('wheelforge_changes', '');
    COMMIT;
  END LOOP;
END $$;
"""
    t0 = time.monotonic()
    psql(cluster, uri, sql)
    seconds = time.monotonic() - t0
    wal = int(psql(cluster, uri, f"SELECT pg_current_wal_lsn() - '{lsn0}'::pg_lsn"))
    target = int(psql(cluster, uri, "SELECT pg_snapshot_xmax(pg_current_snapshot())"))
    return t0, seconds, wal, target


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "build" / "wheelforge"))
    ap.add_argument("--work", default=str(HERE / ".work-scale"))
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--projects", type=int, default=50_000)
    ap.add_argument("--changes", type=int, default=2000, help="uploads' writes per shape")
    ap.add_argument("--startups", type=int, default=2)
    ap.add_argument("--baseline", help="another wheelforge binary (an earlier build): its start-ups "
                    "alternate with --bin's on the same catalog (--startups each); the feed and "
                    "uploads run on --bin only")
    ap.add_argument("--uploads", type=int, default=32)
    ap.add_argument("--upload-clients", type=int, default=16)
    ap.add_argument("--note", default="")
    ap.add_argument("--smoke", action="store_true", help="20k files, 1k projects, 200 changes")
    args = ap.parse_args()
    if args.smoke:
        args.files, args.projects, args.changes, args.startups = 20_000, 1000, 200, 1
        args.uploads = 40
    binary = str(Path(args.bin).resolve())
    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    results: dict = {"machine": machine_info(), "commit": git_commit(), "note": args.note,
                     "files": args.files, "projects": args.projects, "startups": [],
                     "feed": {}}
    pg_root = Path(tempfile.mkdtemp(prefix="wf-scale-pg-"))
    cluster = pg_cluster.PgCluster(pg_root)
    servers = []
    try:
        cluster.init()
        cluster.start()
        uri = cluster.create_database()
        log("the schema and one real upload")
        first = Wheelforge(binary, str(work / "data-0"), str(work / "first.log"),
                           ["--catalog", uri])
        first.start()
        servers.append(first)
        token = token_for(binary, work / "data-0", uri)
        wheel = make_wheel(work / "wheels", "template", "1.0", padding=1024)
        status, body, *_ = raw_put(first.url, wheel.filename, wheel.data, token)
        if status != 201:
            raise SystemExit(f"the template upload answered {status}: {body}")
        first.stop()
        servers.remove(first)

        log(f"filling {args.files} files over {args.projects} projects")
        t0 = time.monotonic()
        fill(cluster, uri, args.files, args.projects, "template")
        results["fill_s"] = round(time.monotonic() - t0, 1)
        results["sizes"] = sizes(cluster, uri)
        log(f"  {results['fill_s']} s; {results['sizes']}")

        # With a baseline, the two binaries take turns, the one under test last (the feed and
        # the uploads below run on it).
        order = [binary]
        if args.baseline:
            order = [os.path.abspath(args.baseline), binary]
        starts = args.startups * len(order)
        for i in range(starts):
            which = order[i % len(order)]
            wf = Wheelforge(which, str(work / f"data-{i + 1}"), str(work / f"replica{i}.log"),
                            ["--catalog", uri])
            t0 = time.monotonic()
            wf.start()
            servers.append(wf)
            wait_ready(wf, 600)
            ready = time.monotonic() - t0
            st = proc_status(wf.pid)
            results["startups"].append({"binary": "baseline" if which != binary else "tested",
                                        "ready_s": round(ready, 2), "listening_s":
                                        round(wf.startup_s, 2), "rss": st.get("VmRSS"),
                                        "hwm": st.get("VmHWM")})
            log(f"  start-up {i}: ready in {ready:.2f} s (listening after "
                f"{wf.startup_s:.2f} s), RSS {st.get('VmRSS', 0) / 2**20:.0f} MiB, peak "
                f"{st.get('VmHWM', 0) / 2**20:.0f} MiB")
            if i + 1 < starts:
                wf.stop()
                servers.remove(wf)
        replica = servers[-1]

        for shape in ("one", "spread"):
            before = feed_position(replica)
            t0, seconds, wal, target = write_feed(cluster, uri, args.changes, args.projects,
                                                  shape)
            deadline = time.monotonic() + 600
            while (feed_position(replica) or 0) < target and time.monotonic() < deadline:
                time.sleep(0.01)
            applied = time.monotonic() - t0
            st = proc_status(replica.pid)
            r = {"changes": args.changes, "write_s": round(seconds, 2),
                 "writes_per_s": round(args.changes / seconds),
                 "wal_bytes_per_change": round(wal / args.changes),
                 "applied_s": round(applied, 2), "caught_up_after_writes_s":
                 round(applied - seconds, 2),
                 "apply_per_s": round(args.changes / applied),
                 "reached": (feed_position(replica) or 0) >= target,
                 "position_before": before, "target": target,
                 "rss_after": st.get("VmRSS"), "hwm_after": st.get("VmHWM")}
            results["feed"][shape] = r
            log(f"  feed {shape}: {r}")

        # Real uploads (PUT, local blobs) to the replica on the large catalog: every writing
        # transaction takes the one row of `meta`, so this is the catalog's serialized write
        # rate with a client's round trips in it.
        log(f"  {args.uploads} uploads by {args.upload_clients} clients")
        paths = [make_wheel(work / "wheels", f"up-{i // 4}", f"1.0.{i % 4}").path
                 for i in range(args.uploads)]
        token = token_for(binary, work / "data-0", uri)
        lsn0 = psql(cluster, uri, "SELECT pg_current_wal_lsn()")
        t0 = time.monotonic()
        up = upload_all(replica.url, token, paths, args.upload_clients)
        wal = int(psql(cluster, uri, f"SELECT pg_current_wal_lsn() - '{lsn0}'::pg_lsn"))
        target = int(psql(cluster, uri, "SELECT pg_snapshot_xmax(pg_current_snapshot())"))
        deadline = time.monotonic() + 600
        while (feed_position(replica) or 0) < target and time.monotonic() < deadline:
            time.sleep(0.01)
        up.update({"wal_bytes_per_upload": round(wal / args.uploads),
                   "applied_s": round(time.monotonic() - t0, 2),
                   "reached": (feed_position(replica) or 0) >= target})
        results["uploads"] = up
        log(f"  uploads: {up}")
        text = (work / f"replica{starts - 1}.log").read_text(errors="replace")
        batches = re.findall(r"catalog feed: (\d+) change\(s\) applied", text)
        results["feed_batches"] = len(batches)
        results["sizes_after"] = sizes(cluster, uri)
        with open("/proc/loadavg") as f:
            results["loadavg_at_end"] = " ".join(f.read().split()[:3])
    finally:
        for wf in servers:
            wf.stop()
        try:
            cluster.stop("immediate")
        except Exception:  # noqa: BLE001 (not started)
            pass
        shutil.rmtree(pg_root, ignore_errors=True)

    (work / "results.json").write_text(json.dumps(results, indent=1))
    report = render(results)
    (work / "results.md").write_text(report)
    print(report)
    ok = all(r["reached"] for r in results["feed"].values()) and results["uploads"]["reached"]
    return 0 if ok and not results["uploads"]["failures"] else 1


def render(r):
    m = r["machine"]
    mib = 2**20
    s = r["sizes"]
    lines = [f"### Scaled-down replay ({r['commit'][:7]}): {r['files']:,} files, "
             f"{r['projects']:,} projects", "",
             f"Machine: {m['cpu']}, {m['nproc']} cores, {m['mem_gib']} GiB, load "
             f"{m['loadavg_at_start']} at the start, {r.get('loadavg_at_end', '?')} at the end. "
             f"{r['note']}".rstrip(), "",
             f"- fill by SQL: {r['fill_s']} s; `files` {s['files'] / mib:.0f} MiB with its "
             f"indexes ({s['files'] / r['files']:.0f} bytes a row), `projects` "
             f"{s['projects'] / mib:.1f} MiB", ""]
    lines += ["| start-up | binary | listening | /readyz 200 | RSS at ready | peak RSS |",
              "|---|---|---|---|---|---|"]
    for i, st in enumerate(r["startups"]):
        lines.append(f"| {i + 1} | {st.get('binary', 'tested')} | {st['listening_s']} s | "
                     f"{st['ready_s']} s | "
                     f"{(st['rss'] or 0) / mib:.0f} MiB | {(st['hwm'] or 0) / mib:.0f} MiB |")
    lines += ["", "| feed: uploads' writes by SQL | changes | writes/s | WAL per upload | "
              "applied after | apply rate | caught up after the last write | RSS after |",
              "|---|---|---|---|---|---|---|---|"]
    for shape, f in r["feed"].items():
        label = "into one project" if shape == "one" else "spread over the projects"
        lines.append(f"| {label} | {f['changes']} | {f['writes_per_s']} | "
                     f"{f['wal_bytes_per_change']} B | {f['applied_s']} s | "
                     f"{f['apply_per_s']}/s | {f['caught_up_after_writes_s']} s | "
                     f"{(f['rss_after'] or 0) / mib:.0f} MiB |")
    u = r["uploads"]
    lines += ["", f"| uploads (PUT, {u['clients']} clients, local blobs) | uploads/s | p50 | p99 | "
              "WAL per upload | all applied by the replica after |", "|---|---|---|---|---|---|",
              f"| {u['count']} wheels over {u['count'] // 4} new projects | {u['per_s']:.3g} | "
              f"{u['p50_ms']:.1f} ms | {u['p99_ms']:.1f} ms | {u['wal_bytes_per_upload']} B | "
              f"{u['applied_s']} s |"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
