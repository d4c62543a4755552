#!/usr/bin/env python3
"""wheelforge replicas behind haproxy: reads over 1, 2 and 3 replicas against nginx, uploads
spread over 3 replicas, and the change feed's lag under that upload load, in one run.

Starts a throwaway PostgreSQL cluster (tests/integration/pg_cluster.py) and a single-node
OpenStack Swift with its S3 API (tests/integration/swift_s3.py), then three wheelforge
replicas on that one catalog and one bucket (`file_serving = "redirect"`), each with haproxy
in front (tests/integration/haproxy.py, with the read-your-writes rules of docs/scale.md's
```haproxy block, no per-request log), and measures:

  upload    PUT of generated wheels by 64 clients at once through haproxy over the three
            replicas: uploads/s, p50/p99 latency
  feed lag  while those uploads run, a few more clients upload straight to one replica and
            poll another replica's PEP 691 page (every 5 ms) until it lists the file: the time
            from the upload's answer to the other replica listing it (p50/p99/max); and the
            replicas' `wheelforge_feed_lag_seconds` gauge sampled every 100 ms
  reads     wrk on the root page and a project page (HTML and PEP 691 JSON) through haproxy
            over 1, 2 and 3 replicas, against nginx serving the same pages (mirrored from a
            replica into a static tree) behind the same haproxy configuration; rounds
            alternate the targets

Prints a markdown report (also written to WORK/results.md with the raw numbers in
results.json). Judges nothing: `--smoke` fails only when a step did not work (an upload
refused, a page answered with an unexpected status, wrk errors, a file never listed by the
other replica).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(HERE))

import pg_cluster  # noqa: E402
import swift_s3  # noqa: E402
from backends import percentile, status_of, token_for  # noqa: E402
from bench import (  # noqa: E402
    Nginx,
    Wheelforge,
    git_commit,
    in_turn,
    log,
    machine_info,
    raw_put,
    run_wrk,
    summarize_rounds,
)
from haproxy import Haproxy, documented_backend  # noqa: E402
from wfhelpers import make_wheel  # noqa: E402

JSON = "application/vnd.pypi.simple.v1+json"
LAG_POLL_S = 0.005
LAG_TIMEOUT_S = 10.0


def get(url, accept=None, timeout=10):
    """(status, body) of a GET; (0, b"") when nothing answered."""
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""


def gauge(text: str, name: str):
    m = re.search(rf"^{name}(?:{{[^}}]*}})? ([0-9.eE+-]+)$", text, re.M)
    return float(m.group(1)) if m else None


def listed(url, project, filename) -> bool:
    status, body = get(f"{url}/simple/{project}/", JSON, timeout=5)
    if status != 200:
        return False
    return any(f["filename"] == filename for f in json.loads(body)["files"])


class LagProbe:
    """`clients` threads, each uploading `per_client` wheels straight to replica i and polling
    replica i+1's JSON page until it lists the file, while `under_load` is set (at least one
    probe each, at most `wheels` in all); and a thread sampling every replica's
    wheelforge_feed_lag_seconds every 100 ms meanwhile."""

    def __init__(self, replicas, token, wheels, clients, under_load: threading.Event):
        self.replicas, self.token, self.wheels, self.clients = replicas, token, wheels, clients
        self.under_load = under_load
        self.lags: list[float] = []
        self.failures: list[str] = []
        self.gauges: list[float] = []
        self._done = threading.Event()
        self._lock = threading.Lock()

    def _probe(self, k):
        for j, wheel in enumerate(self.wheels[k::self.clients]):
            if j and not self.under_load.is_set():
                return
            writer = self.replicas[(k + j) % len(self.replicas)]
            reader = self.replicas[(k + j + 1) % len(self.replicas)]
            status, body, _, _, answered = raw_put(writer.url, wheel.filename, wheel.data,
                                                   self.token)
            if status != 201:
                with self._lock:
                    self.failures.append(f"lag probe {wheel.filename}: {status} {body[:200]}")
                continue
            deadline = answered + LAG_TIMEOUT_S
            while True:
                if listed(reader.url, wheel.name, wheel.filename):
                    seen = time.monotonic()
                    with self._lock:
                        self.lags.append(seen - answered)
                    break
                if time.monotonic() > deadline:
                    with self._lock:
                        self.failures.append(f"lag probe {wheel.filename}: not listed by "
                                             f"{reader.url} within {LAG_TIMEOUT_S:.0f} s")
                    break
                time.sleep(LAG_POLL_S)

    def _sample(self):
        while not self._done.wait(0.1):
            for r in self.replicas:
                status, body = get(r.url + "/metrics", timeout=5)
                value = gauge(body.decode(errors="replace"), "wheelforge_feed_lag_seconds")
                if status == 200 and value is not None:
                    self.gauges.append(value)

    def run(self):
        sampler = threading.Thread(target=self._sample, daemon=True)
        sampler.start()
        with concurrent.futures.ThreadPoolExecutor(self.clients) as pool:
            list(pool.map(self._probe, range(self.clients)))
        self._done.set()
        sampler.join()

    def summary(self):
        ms = [x * 1000 for x in self.lags]
        g = [x * 1000 for x in self.gauges]
        return {
            "samples": len(ms),
            "p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99),
            "max_ms": max(ms) if ms else None,
            "gauge_samples": len(g), "gauge_p50_ms": percentile(g, 50),
            "gauge_p99_ms": percentile(g, 99), "gauge_max_ms": max(g) if g else None,
        }


def upload_through(url, token, wheels, clients):
    """PUTs every wheel with `clients` at once to `url`; per-upload seconds, failures."""
    def one(wheel):
        status, body, t0, _, t_resp = raw_put(url, wheel.filename, wheel.data, token)
        return status, body, t_resp - t0

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(one, wheels))
    wall = time.monotonic() - t0
    seconds = [r[2] * 1000 for r in results]
    return {
        "count": len(wheels), "clients": clients, "wall_s": wall, "per_s": len(wheels) / wall,
        "p50_ms": percentile(seconds, 50), "p99_ms": percentile(seconds, 99),
        "failures": [f"{w.filename}: {s} {b[:200]}" for w, (s, b, _) in zip(wheels, results)
                     if s != 201],
    }


def mirror_pages(url, projects, root: Path):
    """The replica's root page and `projects`' pages (HTML and JSON) as a static tree for
    nginx (bench/nginx.conf.in: index.html or index.json by the Accept header)."""
    for sub in [""] + [f"{p}/" for p in projects]:
        directory = root / "simple" / sub
        directory.mkdir(parents=True, exist_ok=True)
        for accept, name in (("text/html", "index.html"), (JSON, "index.json")):
            status, body = get(f"{url}/simple/{sub}", accept)
            if status != 200:
                raise SystemExit(f"{url}/simple/{sub} ({accept}) answered {status}")
            (directory / name).write_bytes(body)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "build" / "wheelforge"))
    ap.add_argument("--work", default=str(HERE / ".work-replicas"))
    ap.add_argument("--duration", type=int, default=4, help="seconds per wrk run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--uploads", type=int, default=384, help="wheels uploaded through haproxy")
    ap.add_argument("--clients", type=int, default=64, help="uploading at once")
    ap.add_argument("--lag-samples", type=int, default=300,
                    help="at most this many uploads straight to one replica, polled on "
                         "another, while the uploads through haproxy run")
    ap.add_argument("--lag-clients", type=int, default=3)
    ap.add_argument("--note", default=os.environ.get("BENCH_NOTE", ""))
    ap.add_argument("--smoke", action="store_true",
                    help="16 uploads, 3 lag samples, one round of 1 s of the JSON page (the "
                         "other pages fetched once)")
    args = ap.parse_args()
    if args.smoke:
        args.uploads, args.lag_samples, args.rounds, args.duration = 16, 3, 1, 1
    binary = str(Path(args.bin).resolve())
    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    problems: list[str] = []
    results: dict = {"machine": machine_info(), "commit": git_commit(), "note": args.note,
                     "binary": binary, "wrk": {}}
    started = time.monotonic()

    log(f"generating {args.uploads} + {args.lag_samples} wheels")
    wheels = [make_wheel(work / "wheels", f"bench-rep-{i // 4}", f"1.0.{i % 4}",
                         padding=20 * 1024) for i in range(args.uploads)]
    probes = [make_wheel(work / "wheels", f"bench-lag-{i}", "1.0", padding=20 * 1024)
              for i in range(args.lag_samples)]

    pg_root = Path(tempfile.mkdtemp(prefix="wf-bench-pg-"))
    cluster = pg_cluster.PgCluster(pg_root)
    swift_dir = work / "swift"
    servers, proxies = [], []
    nginx = None
    try:
        log("starting PostgreSQL 15 and Swift (s3api)")
        cluster.init()
        cluster.start()
        store = swift_s3.start(swift_dir)
        catalog = cluster.create_database()
        secret = work / "s3-secret"
        secret.write_text(store["secret_key"] + "\n")
        config = work / "wheelforge.toml"
        config.write_text(
            f'catalog = "{catalog}"\n'
            f'blob_store = "s3://{store["bucket"]}/bench"\n'
            'file_serving = "redirect"\n'
            "[s3]\n"
            f'endpoint = "{store["endpoint"]}"\n'
            f'region = "{store["region"]}"\n'
            f'access_key_id = "{store["access_key"]}"\n'
            f'secret_access_key_file = "{secret}"\n')

        log("starting three replicas")
        for i in range(3):
            wf = Wheelforge(binary, str(work / f"data-{i}"), str(work / f"replica{i}.log"),
                            ["--config", str(config)])
            wf.start()
            servers.append(wf)
        token = token_for(binary, work / "data-0", catalog)
        for wf in servers:
            deadline = time.monotonic() + 20
            while status_of(wf.url + "/readyz") != 200:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{wf.url} not ready within 20 s; see {wf.log_path}")
                time.sleep(0.05)
        results["startup_s"] = [round(wf.startup_s, 3) for wf in servers]

        rules = documented_backend(ROOT / "docs" / "scale.md")

        def haproxy(name, addresses):
            directory = work / f"haproxy-{name}"
            directory.mkdir()
            proxy = Haproxy(directory, addresses, backend_rules=rules, log_requests=False,
                            maxconn=4096)
            proxies.append(proxy)
            return proxy

        addresses = [wf.url.removeprefix("http://") for wf in servers]
        front = {f"{n} replica{'s' if n > 1 else ''}": haproxy(str(n), addresses[:n])
                 for n in (1, 2, 3)}
        three = front["3 replicas"]

        log(f"uploads: {args.uploads} by {args.clients} clients through haproxy over 3 "
            f"replicas, {args.lag_samples} feed lag probes beside them")
        under_load = threading.Event()
        under_load.set()
        probe = LagProbe(servers, token, probes, args.lag_clients, under_load)
        prober = threading.Thread(target=probe.run)
        prober.start()
        up = upload_through(three.url, token, wheels, args.clients)
        under_load.clear()
        prober.join()
        lag = probe.summary()
        results["upload"], results["feed_lag"] = up, lag
        problems += [f"upload {f}" for f in up["failures"]] + probe.failures
        log(f"  {up['per_s']:.1f} uploads/s, p50 {up['p50_ms']:.0f} ms, p99 "
            f"{up['p99_ms']:.0f} ms")
        if lag["samples"]:
            log(f"  feed lag ({lag['samples']} probes): p50 {lag['p50_ms']:.0f} ms, p99 "
                f"{lag['p99_ms']:.0f} ms, max {lag['max_ms']:.0f} ms; gauge p99 "
                f"{lag['gauge_p99_ms'] or 0:.0f} ms ({lag['gauge_samples']} samples)")

        # Every upload listed by every replica before the pages are copied and measured.
        project = "bench-rep-0"
        last = wheels[-1]
        for wf in servers:
            deadline = time.monotonic() + LAG_TIMEOUT_S
            while not listed(wf.url, last.name, last.filename):
                if time.monotonic() > deadline:
                    problems.append(f"{wf.url} does not list {last.filename}")
                    break
                time.sleep(0.05)
        mirror_pages(servers[0].url, [project], work / "static")
        nginx = Nginx(str(work / "static"), str(work / "nginx"), 1).start()
        front["nginx"] = haproxy("nginx", [nginx.url.removeprefix("http://")])

        cases = [("root page", "/simple/", []),
                 ("project HTML", f"/simple/{project}/", []),
                 ("project JSON", f"/simple/{project}/", [f"Accept: {JSON}"])]
        targets = list(front)
        threads = max(1, min(2, os.cpu_count() or 1))
        for label, path, headers in cases:
            if args.smoke and label != "project JSON":
                # One request each: the page answers through every front.
                for t in targets:
                    status, _ = get(front[t].url + path)
                    if status != 200:
                        problems.append(f"{label} {t}: {status}")
                continue
            rounds = {t: [] for t in targets}
            for i in range(args.rounds):
                for t in in_turn(targets, i):
                    r = run_wrk(front[t].url + path, args.connections, args.duration, headers,
                                threads)
                    r.pop("raw", None)
                    rounds[t].append(r)
                    if r["non2xx"] or r["socket_errors"] or not r["requests"]:
                        problems.append(f"{label} {t}: {r['non2xx']} non-2xx/3xx, "
                                        f"{r['socket_errors']} socket errors")
            for t in targets:
                s = summarize_rounds(rounds[t])
                results["wrk"].setdefault(label, {})[t] = s
                log(f"  {label} {t}: {s['rps']:.0f} req/s, p99 {s['p99_ms']:.2f} ms")
        with open("/proc/loadavg") as f:
            results["loadavg_at_end"] = " ".join(f.read().split()[:3])
    finally:
        for proxy in proxies:
            proxy.stop()
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
    results["wall_s"] = round(time.monotonic() - started, 1)
    report = render(results, args)
    (work / "results.json").write_text(json.dumps(results, indent=1))
    (work / "results.md").write_text(report)
    print(report)
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0


def fmt(v, unit=" ms", digits=0):
    return "-" if v is None else f"{v:.{digits}f}{unit}"


def render(r, args):
    m = r["machine"]
    up, lag = r["upload"], r["feed_lag"]
    lines = [f"### Replicas behind haproxy ({r['commit'][:7]})", "",
             f"Machine: {m['cpu']}, {m['nproc']} cores, {m['mem_gib']} GiB, {m['os']}, load "
             f"{m['loadavg_at_start']} at the start, {r.get('loadavg_at_end', '?')} at the end; "
             f"{r['wall_s']} s in all. {r['note']}".rstrip(), "",
             f"| uploads ({up['clients']} clients, haproxy over 3 replicas) | uploads/s | p50 | "
             "p99 |", "|---|---|---|---|",
             f"| {up['count']} wheels of 20 KiB | {up['per_s']:.1f} | {fmt(up['p50_ms'])} | "
             f"{fmt(up['p99_ms'])} |", "",
             "| feed lag under that load | samples | p50 | p99 | max |", "|---|---|---|---|---|",
             f"| upload answered on one replica → listed by another | {lag['samples']} | "
             f"{fmt(lag['p50_ms'])} | {fmt(lag['p99_ms'])} | {fmt(lag['max_ms'])} |",
             f"| `wheelforge_feed_lag_seconds` (every 100 ms, 3 replicas) | "
             f"{lag['gauge_samples']} | {fmt(lag['gauge_p50_ms'])} | {fmt(lag['gauge_p99_ms'])} "
             f"| {fmt(lag['gauge_max_ms'])} |", "",
             f"| page ({args.connections} connections, {args.rounds} rounds of "
             f"{args.duration} s) | through haproxy to | req/s | p50 | p99 (range) |",
             "|---|---|---|---|---|"]
    for label, by_t in r["wrk"].items():
        for t, s in by_t.items():
            lines.append(f"| {label} | {t} | {s['rps']:.0f} | {s['p50_ms']:.2f} ms | "
                         f"{s['p99_ms']:.2f} ms ({s['p99_min_ms']:.2f}–{s['p99_max_ms']:.2f}) |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
