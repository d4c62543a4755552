#!/usr/bin/env python3
"""wheelforge on PostgreSQL + S3 against wheelforge on SQLite + files, in the same run.

Starts a throwaway PostgreSQL cluster (tests/integration/pg_cluster.py) and a single-node
OpenStack Swift with its S3 API (tests/integration/swift_s3.py) on temp directories and loopback
ports, then three servers:

  files     the default: SQLite catalog, blobs in DATA_DIR/blobs
  pg-s3     catalog = postgresql://..., blob_store = s3://..., file_serving = redirect
  proxy     a second process on the same PostgreSQL + S3 index with file_serving = proxy

and measures, alternating the servers round by round:

  upload    PUT of generated wheels by several clients at once: uploads/s, p50/p99 latency,
            and the throughput of a few larger wheels (streamed to the store, multipart on S3)
  pages     wrk on the root page, a project page (HTML and PEP 691 JSON)
  file      wrk on a file URL: 200 with the bytes (files, proxy) or 302 to a presigned URL
            (pg-s3), against nginx answering the same 302 with `return 302` (the floor for a
            redirect)

Prints a markdown report (also written to WORK/results.md with the raw numbers in
results.json). Judges nothing: `--smoke` fails only when a step did not work (an upload
refused, a page or file answered with an unexpected status, wrk errors).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(HERE))

import pg_cluster  # noqa: E402
import swift_s3  # noqa: E402
from bench import (  # noqa: E402
    Wheelforge,
    free_port,
    log,
    machine_info,
    git_commit,
    raw_put,
    run_wrk,
    summarize_rounds,
)
from wfhelpers import make_wheel  # noqa: E402

MIB = 1024 * 1024


def percentile(values, pct):
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


class RedirectNginx:
    """nginx (one worker, like the 2-core server runs) answering every request with a 302 to
    `target`: what a redirect costs at nginx's level."""

    def __init__(self, prefix: Path, target: str):
        self.prefix, self.target = prefix, target
        self.proc = None
        self.url = None

    def start(self):
        shutil.rmtree(self.prefix, ignore_errors=True)
        self.prefix.mkdir(parents=True)
        port = free_port()
        user = "user root;" if os.geteuid() == 0 else ""
        conf = f"""{user}
worker_processes 1;
daemon off;
error_log {self.prefix}/error.log warn;
pid {self.prefix}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path {self.prefix}/body;
  proxy_temp_path {self.prefix}/proxy;
  fastcgi_temp_path {self.prefix}/fastcgi;
  uwsgi_temp_path {self.prefix}/uwsgi;
  scgi_temp_path {self.prefix}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location / {{ return 302 "{self.target}"; }}
  }}
}}
"""
        path = self.prefix / "nginx.conf"
        path.write_text(conf)
        self.proc = subprocess.Popen(["nginx", "-p", str(self.prefix), "-c", str(path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if status_of(self.url + "/x") == 302:
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise SystemExit(f"nginx did not start; see {self.prefix}/error.log")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=15)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def redirect_location(url):
    try:
        OPENER.open(url, timeout=10)
    except urllib.error.HTTPError as e:
        if e.code == 302:
            return e.headers["Location"]
    raise SystemExit(f"{url} did not answer a redirect")


def status_of(url, headers=None):
    try:
        with OPENER.open(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def make_corpus(directory: Path, small: int, large: int, large_mib: int):
    """`small` wheels of about 20 KiB over small // 4 projects, `large` of `large_mib` MiB."""
    wheels = []
    for i in range(small):
        wheels.append(make_wheel(directory, f"bench-be-{i // 4}", f"1.0.{i % 4}",
                                 padding=20 * 1024).path)
    big = []
    for i in range(large):
        big.append(make_wheel(directory, "bench-be-large", f"2.0.{i}",
                              padding=large_mib * MIB).path)
    return wheels, big


def token_for(binary, data_dir, catalog):
    args = [binary, "token", "create", "--data-dir", str(data_dir), "--scope", "upload"]
    if catalog:
        args += ["--catalog", catalog]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1]


def upload_all(url, token, paths, clients):
    """PUTs every file with `clients` at once; returns per-upload seconds and failures."""
    def one(path):
        data = Path(path).read_bytes()
        status, body, t0, _, t_resp = raw_put(url, Path(path).name, data, token)
        return status, body, t_resp - t0, len(data)

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(one, paths))
    wall = time.monotonic() - t0
    failures = [f"{Path(p).name}: {s} {b[:200]}" for p, (s, b, _, _) in zip(paths, results)
                if s not in (200, 201)]
    seconds = [r[2] for r in results]
    size = sum(r[3] for r in results)
    return {
        "count": len(paths), "clients": clients, "wall_s": wall,
        "per_s": len(paths) / wall if wall else None, "mb_per_s": size / wall / 1e6,
        "p50_ms": percentile(seconds, 50) * 1000, "p99_ms": percentile(seconds, 99) * 1000,
        "failures": failures,
    }


def store_alone(store, paths, clients):
    """The object store's own pace for what one upload asks of it (PUT and HEAD of its METADATA,
    PUT and HEAD of the wheel), signed by the harness's own client: the ceiling for pg-s3."""
    endpoint, bucket = store["endpoint"], store["bucket"]

    def one(path):
        data = Path(path).read_bytes()
        key = f"/{bucket}/reference/{Path(path).name}"
        t0 = time.monotonic()
        codes = (swift_s3.s3_request(endpoint, "PUT", key + ".metadata", data[:600])[0],
                 swift_s3.s3_request(endpoint, "HEAD", key + ".metadata")[0],
                 swift_s3.s3_request(endpoint, "PUT", key, data)[0],
                 swift_s3.s3_request(endpoint, "HEAD", key)[0])
        return codes, time.monotonic() - t0

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(one, paths))
    wall = time.monotonic() - t0
    seconds = [r[1] for r in results]
    return {
        "count": len(paths), "clients": clients, "wall_s": wall, "per_s": len(paths) / wall,
        "p50_ms": percentile(seconds, 50) * 1000, "p99_ms": percentile(seconds, 99) * 1000,
        "failures": [f"{Path(p).name}: {codes}" for p, (codes, _) in zip(paths, results)
                     if any(c != 200 for c in codes)],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "build" / "wheelforge"))
    ap.add_argument("--work", default=str(HERE / ".work-backends"))
    ap.add_argument("--duration", type=int, default=4, help="seconds per wrk run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", default="64,512")
    ap.add_argument("--uploads", type=int, default=400, help="small wheels uploaded per server")
    ap.add_argument("--clients", type=int, default=8, help="uploading at once")
    ap.add_argument("--large", type=int, default=4, help="large wheels uploaded per server")
    ap.add_argument("--large-mib", type=int, default=64)
    ap.add_argument("--note", default=os.environ.get("BENCH_NOTE", ""))
    ap.add_argument("--smoke", action="store_true",
                    help="40 uploads, 1 large of 8 MiB, one round of 1 s at 64 connections")
    args = ap.parse_args()
    if args.smoke:
        args.uploads, args.large, args.large_mib = 40, 1, 8
        args.rounds, args.duration, args.connections = 1, 1, "64"
    conns = [int(c) for c in args.connections.split(",")]
    binary = str(Path(args.bin).resolve())
    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    problems: list[str] = []
    results: dict = {"machine": machine_info(), "commit": git_commit(), "note": args.note,
                     "binary": binary, "uploads": {}, "wrk": {}}

    log(f"generating {args.uploads} small and {args.large} large ({args.large_mib} MiB) wheels")
    # One corpus for both indexes: each has a store of its own, so neither finds a file stored.
    wheels, big = make_corpus(work / "wheels", args.uploads, args.large, args.large_mib)

    pg_root = Path(tempfile.mkdtemp(prefix="wf-bench-pg-"))
    cluster = pg_cluster.PgCluster(pg_root)
    swift_dir = work / "swift"
    servers = []
    nginx = None
    try:
        log("starting PostgreSQL 15 and Swift (s3api)")
        cluster.init()
        cluster.start()
        store = swift_s3.start(swift_dir)
        catalog = cluster.create_database()
        secret = work / "s3-secret"
        secret.write_text(store["secret_key"] + "\n")

        def s3_config(serving):
            path = work / f"wheelforge-{serving}.toml"
            path.write_text(
                f'catalog = "{catalog}"\n'
                f'blob_store = "s3://{store["bucket"]}/bench"\n'
                f'file_serving = "{serving}"\n'
                "[s3]\n"
                f'endpoint = "{store["endpoint"]}"\n'
                f'region = "{store["region"]}"\n'
                f'access_key_id = "{store["access_key"]}"\n'
                f'secret_access_key_file = "{secret}"\n')
            return path

        files = Wheelforge(binary, str(work / "data-files"), str(work / "files.log"))
        pgs3 = Wheelforge(binary, str(work / "data-pg-s3"), str(work / "pg-s3.log"),
                          ["--config", str(s3_config("redirect"))])
        tokens = {"files": token_for(binary, work / "data-files", None),
                  "pg-s3": token_for(binary, work / "data-pg-s3", catalog)}
        named = {"files": files, "pg-s3": pgs3}
        for wf in named.values():
            wf.start()
            servers.append(wf)

        # Uploads: files first for one half, pg-s3 first for the other, so that neither
        # always runs on a warmer machine.
        corpora = {"files": (wheels, big), "pg-s3": (wheels, big)}
        half = len(wheels) // 2
        for phase, order in ((0, ("files", "pg-s3")), (1, ("pg-s3", "files"))):
            for name in order:
                small = corpora[name][0][:half] if phase == 0 else corpora[name][0][half:]
                r = upload_all(named[name].url, tokens[name], small, args.clients)
                log(f"  upload {name} (part {phase + 1}): {r['per_s']:.1f}/s, p50 "
                    f"{r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms")
                results["uploads"].setdefault(name, {}).setdefault("small", []).append(r)
                problems += [f"{name}: upload {f}" for f in r["failures"]]
        r = store_alone(store, wheels[:half], args.clients)
        log(f"  the store alone (PUT, HEAD, PUT, HEAD per wheel): {r['per_s']:.1f}/s, p50 "
            f"{r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms")
        results["uploads"]["store alone"] = {"small": [r]}
        problems += [f"store alone: {f}" for f in r["failures"]]
        for name in ("files", "pg-s3"):
            r = upload_all(named[name].url, tokens[name], corpora[name][1], 1)
            log(f"  large upload {name}: {r['mb_per_s']:.0f} MB/s, p50 {r['p50_ms']:.0f} ms")
            results["uploads"][name]["large"] = r
            problems += [f"{name}: large upload {f}" for f in r["failures"]]

        proxy = Wheelforge(binary, str(work / "data-proxy"), str(work / "proxy.log"),
                           ["--config", str(s3_config("proxy"))])
        proxy.start()
        servers.append(proxy)
        named["proxy"] = proxy

        # A file URL of each index (the first small wheel), as the project page names it.
        project = "bench-be-0"
        file_urls = {}
        for name, wf in named.items():
            page = urllib.request.urlopen(
                urllib.request.Request(wf.url + f"/simple/{project}/",
                                       headers={"Accept": "application/vnd.pypi.simple.v1+json"}),
                timeout=10).read()
            first = json.loads(page)["files"][0]["url"]
            file_urls[name] = urllib.parse.urljoin(wf.url + f"/simple/{project}/", first)
        redirect_status = status_of(file_urls["pg-s3"])
        if redirect_status != 302:
            problems.append(f"pg-s3: a file URL answered {redirect_status}, not 302")
        # nginx answers with the very Location the index gave: the same bytes on the wire.
        location = redirect_location(file_urls["pg-s3"])
        nginx = RedirectNginx(work / "nginx", location.replace('"', "%22"))
        nginx.start()

        cases = [
            ("root page", "/simple/", []),
            ("project HTML", f"/simple/{project}/", []),
            ("project JSON", f"/simple/{project}/",
             ["Accept: application/vnd.pypi.simple.v1+json"]),
            ("file", None, []),
        ]
        threads = max(1, min(4, os.cpu_count() or 1))
        for label, path, headers in cases:
            targets = ["files", "pg-s3"] + (["proxy", "nginx 302"] if path is None else [])
            for c in conns:
                rounds = {t: [] for t in targets}
                for i in range(args.rounds):
                    turn = targets[i % len(targets):] + targets[:i % len(targets)]
                    for t in turn:
                        if t == "nginx 302":
                            url = nginx.url + "/files/x.whl"
                        elif path is None:
                            url = file_urls[t]
                        else:
                            url = named[t].url + path
                        r = run_wrk(url, c, args.duration, headers, threads)
                        r.pop("raw", None)
                        rounds[t].append(r)
                        if r["non2xx"] or r["socket_errors"] or not r["requests"]:
                            problems.append(f"{label} {t} c={c}: {r['non2xx']} non-2xx/3xx, "
                                            f"{r['socket_errors']} socket errors")
                for t in targets:
                    s = summarize_rounds(rounds[t])
                    results["wrk"].setdefault(label, {}).setdefault(str(c), {})[t] = s
                    log(f"  {label} c={c} {t}: {s['rps']:.0f} req/s, p99 {s['p99_ms']:.2f} ms")
    finally:
        if nginx:
            nginx.stop()
        for wf in servers:
            wf.stop()
        swift_s3.stop(swift_dir)
        try:
            cluster.stop("immediate")
        except Exception:  # noqa: BLE001 (not started)
            pass
        shutil.rmtree(pg_root, ignore_errors=True)

    results["problems"] = problems
    report = render(results)
    (work / "results.json").write_text(json.dumps(results, indent=1))
    (work / "results.md").write_text(report)
    print(report)
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0


def render(r):
    m = r["machine"]
    lines = [f"### PostgreSQL + S3 against SQLite + files ({r['commit']})", "",
             f"Machine: {m['cpu']}, {m['nproc']} cores, {m['mem_gib']} GiB, {m['os']}, load at start "
             f"{m['loadavg_at_start']}. {r['note']}".rstrip(),
             "", "| upload | uploads/s | p50 | p99 | large MB/s |", "|---|---|---|---|---|"]
    for name, u in r["uploads"].items():
        small = u["small"]
        per_s = statistics.mean(x["per_s"] for x in small)
        p50 = statistics.mean(x["p50_ms"] for x in small)
        p99 = max(x["p99_ms"] for x in small)
        large = u.get("large", {}).get("mb_per_s")
        lines.append(f"| {name} | {per_s:.1f} | {p50:.1f} ms | {p99:.1f} ms | "
                     f"{large:.0f} |" if large else f"| {name} | {per_s:.1f} | {p50:.1f} ms | "
                     f"{p99:.1f} ms | - |")
    lines += ["", "| case | connections | server | req/s | p50 | p99 (range) |",
              "|---|---|---|---|---|---|"]
    for label, by_c in r["wrk"].items():
        for c, by_t in by_c.items():
            for t, s in by_t.items():
                lines.append(f"| {label} | {c} | {t} | {s['rps']:.0f} | {s['p50_ms']:.2f} ms | "
                             f"{s['p99_ms']:.2f} ms ({s['p99_min_ms']:.2f}–{s['p99_max_ms']:.2f}) |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
