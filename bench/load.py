#!/usr/bin/env python3
"""The load part of the suite alone, for a many-core machine: wrk against wheelforge and nginx
(the same number of network threads and workers) on the large index, the servers taking turns,
several rounds, medians and ranges; with what the scheduler saw during each run (run-queue
wait of the server's threads, of wrk's threads and of the whole machine, from /proc) and how
the load spread over the server's threads and workers. bench/device.sh runs it on the device
machine from a bundle made by bench/device_bundle.sh; see bench/README.md.

Nothing here asserts a threshold.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the suite's helpers: servers, wrk, rounds)

MIB = 2**20


# ---- what the scheduler saw --------------------------------------------------------------------


def tasks_of(pids):
    """{tid: (run_ns, wait_ns, slices, utime+stime ticks, voluntary, involuntary switches)} of
    every thread of the given processes."""
    out = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    run_ns, wait_ns, slices = (int(x) for x in f.read().split())
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ticks = int(fields[11]) + int(fields[12])
                vol = invol = 0
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches"):
                            vol = int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches"):
                            invol = int(line.split()[1])
                out[int(tid)] = (run_ns, wait_ns, slices, ticks, vol, invol)
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass
    return out


def machine_wait_ns():
    """Time tasks spent waiting for a CPU, summed over the CPUs (/proc/schedstat), or None."""
    try:
        total = 0
        with open("/proc/schedstat") as f:
            for line in f:
                if line.startswith("cpu"):
                    total += int(line.split()[8])
        return total
    except (OSError, IndexError, ValueError):
        return None


def delta(after, before):
    """Per thread: what changed between two tasks_of() readings (a thread that started in
    between counts from zero)."""
    zero = (0,) * 6
    return {t: tuple(a - b for a, b in zip(after[t], before.get(t, zero))) for t in after}


def socket_count(pid):
    n = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    n += 1
            except OSError:
                pass
    except FileNotFoundError:
        pass
    return n


class WrkWatch:
    """Reads wrk's threads' scheduler figures every 100 ms while it runs (they are gone once it
    exits: the last reading is used)."""

    def __init__(self, pid):
        self.pid = pid
        self.first = None
        self.last = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            t = tasks_of([self.pid])
            if t:
                if self.first is None:
                    self.first = t
                self.last = t
            time.sleep(0.1)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def run_wrk_watched(url, conns, duration, headers, threads, server_pids, spread_of=None):
    """One wrk run with the scheduler's figures of that run: run-queue wait of the server's
    threads and wrk's (ms per second of the run), the whole machine's, and the spread of the
    server's CPU time over its threads (or nginx's connections over its workers)."""
    cmd = ["wrk", f"-t{min(threads, conns)}", f"-c{conns}", f"-d{duration}s", "--latency", "--timeout", "10s"]
    for h in headers:
        cmd += ["-H", h]
    cmd.append(url)
    before = tasks_of(server_pids)
    m0 = machine_wait_ns()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    conns_per_worker = None
    with WrkWatch(proc.pid) as watch:
        if spread_of is not None:
            # nginx: sockets each worker holds in the middle of the run, less those it held
            # before (the listening socket, the master's channel).
            idle = {p: socket_count(p) for p in spread_of}
            time.sleep(duration / 2)
            conns_per_worker = sorted((socket_count(p) - idle[p] for p in spread_of), reverse=True)
        out, err = proc.communicate()
    elapsed = time.monotonic() - t0
    after = tasks_of(server_pids)
    m1 = machine_wait_ns()
    if proc.returncode != 0:
        raise SystemExit(f"wrk failed: {err}")
    res = bench.parse_wrk(out)
    d = delta(after, before)
    busy = sorted((v[3] for v in d.values()), reverse=True)  # CPU ticks per server thread
    srv_wait = sum(v[1] for v in d.values())
    wrk_d = delta(watch.last or {}, watch.first or {})
    wrk_span = max(elapsed - 0.2, 0.1)
    res["sched"] = {
        "server_wait_ms_per_s": srv_wait / 1e6 / elapsed,
        "server_cpu_s": sum(v[0] for v in d.values()) / 1e9,
        "server_max_wait_share": max((v[1] / max(v[0] + v[1], 1) for v in d.values()), default=0),
        "server_involuntary": sum(v[5] for v in d.values()),
        "server_voluntary": sum(v[4] for v in d.values()),
        "server_busy_threads": sum(1 for v in d.values() if v[0] > 0.05 * elapsed * 1e9),
        "server_ticks_per_thread": busy,
        "wrk_wait_ms_per_s": sum(v[1] for v in wrk_d.values()) / 1e6 / wrk_span,
        "wrk_cpu_s_per_s": sum(v[0] for v in wrk_d.values()) / 1e9 / wrk_span,
        "wrk_involuntary": sum(v[5] for v in wrk_d.values()),
        "machine_wait_ms_per_s": None if m0 is None or m1 is None else (m1 - m0) / 1e6 / elapsed,
        "conns_per_worker": conns_per_worker,
    }
    return res


# ---- the run -----------------------------------------------------------------------------------


def fmt(v, digits=2):
    return "–" if v is None else f"{v:,.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True, help="holds corpus/ and static/ (bench/device.sh makes them)")
    ap.add_argument("--out", required=True, help="where results.json and results.md go")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="wheelforge's network threads and nginx's workers")
    ap.add_argument("--conns", default="64,512")
    ap.add_argument("--wrk-threads", type=int, default=8)
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", default="all", help="comma-separated case keys, or all")
    ap.add_argument("--access-log", default="false", help="wheelforge's --access-log (nginx's is off)")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=ARGS: another wheelforge on the same data, with these extra serve "
                         "arguments (or BIN:PATH ARGS for another binary), taking turns with the others")
    ap.add_argument("--perf", default="", help="CASE@CONNS: perf record -g of wheelforge during one "
                    "extra run of that case (perf on PATH), report in the output folder")
    ap.add_argument("--note", default="")
    args = ap.parse_args()

    binary = os.path.abspath(args.bin)
    work = os.path.abspath(args.work)
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    run_dir = os.path.join(work, "run")
    os.makedirs(run_dir, exist_ok=True)
    conns = [int(c) for c in args.conns.split(",")]
    machine = bench.machine_info()
    machine["commit"] = os.environ.get("BENCH_COMMIT") or machine["commit"]
    results = {"machine": machine, "binary": binary, "note": args.note,
               "settings": {"threads": args.threads, "conns": conns, "wrk_threads": args.wrk_threads,
                            "duration_s": args.duration, "rounds": args.rounds, "access_log": args.access_log,
                            "variants": args.variant}}

    def save():
        with open(os.path.join(out_dir, "results.json"), "w") as f:
            json.dump(results, f, indent=1, default=str)

    servers = []
    try:
        bench.log("ingest the large corpus and the variant project")
        data, info = bench.prepare_data(binary, "large", [os.path.join(work, "corpus", "large"),
                                                          os.path.join(work, "corpus", "variant")],
                                        os.path.join(work, "data"), run_dir, True)
        bench.log(f"  {info['summary']} in {info['seconds']:.1f}s")
        results["ingest"] = info
        common = ["--network-threads", str(args.threads), "--access-log", args.access_log]
        wf = bench.Wheelforge(binary, data, os.path.join(run_dir, "wf.log"), common).start()
        servers.append(wf)
        targets = {"wheelforge": wf}
        for spec in args.variant:
            name, _, rest = spec.partition("=")
            vbin, vargs = binary, rest.split()
            if vargs and vargs[0].startswith("BIN:"):
                vbin = os.path.abspath(vargs.pop(0)[4:])
            base_args = common if "--network-threads" not in vargs else common[2:]
            srv = bench.Wheelforge(vbin, data, os.path.join(run_dir, f"{name}.log"),
                                   base_args + vargs).start()
            servers.append(srv)
            targets[name] = srv
        ngx = bench.Nginx(os.path.join(work, "static", "large"), os.path.join(run_dir, "nginx"), args.threads).start()
        servers.append(ngx)
        targets["nginx"] = ngx
        time.sleep(0.5)
        results["rss_idle"] = {n: (bench.proc_status(s.pid).get("VmRSS", 0) if n != "nginx" else bench.tree_rss(s.pid))
                               for n, s in targets.items()}

        with open(os.path.join(work, "static", "large", "manifest.json")) as f:
            manifest = json.load(f)
        small_project = next(n for n in sorted(manifest) if len(manifest[n]) == 10 and n != "flash-attn")
        small_file = min(manifest[small_project], key=lambda x: x["size"])
        bench.check_same_pages(wf.url, ngx.url, ["flash-attn", small_project])
        gz = "Accept-Encoding: gzip"
        accept_json = "Accept: application/vnd.pypi.simple.v1+json"
        all_cases = {
            "root": (f"root list ({len(manifest):,} projects)", "/simple/", [gz]),
            "small": (f"small project page ({small_project}, 10 files)", f"/simple/{small_project}/", [gz]),
            "variant": ("variant project page (flash-attn, 400 files)", "/simple/flash-attn/", [gz]),
            "json": ("variant project JSON", "/simple/flash-attn/", [gz, accept_json]),
            "file": (f"small file ({small_file['size']} B)", small_file["url"], [gz]),
            "metadata": (".metadata file", small_file["url"] + ".metadata", [gz]),
        }
        keys = list(all_cases) if args.cases == "all" else args.cases.split(",")
        names = list(targets)
        pids = {n: ([s.pid] + bench.children_of(s.pid)) if n == "nginx" else [s.pid] for n, s in targets.items()}
        workers = bench.children_of(ngx.pid)
        results["cases"] = []
        bench.log(f"wrk -t{args.wrk_threads}: {len(keys)} cases x {conns} connections x {args.rounds} rounds "
                  f"of {args.duration}s, servers {names}")
        for key in keys:
            label, path, headers = all_cases[key]
            sizes = {}
            for n in names:
                st, hdrs, body = bench.http_get(targets[n].url + path, dict(h.split(": ", 1) for h in headers))
                sizes[n] = {"status": st, "bytes": len(body), "encoding": hdrs.get("Content-Encoding", "")}
                bench.run_wrk(targets[n].url + path, 64, 1, headers, args.wrk_threads)  # warm-up
            entry = {"key": key, "case": label, "path": path, "responses": sizes, "runs": {}}
            for c in conns:
                rounds = {n: [] for n in names}
                for i in range(args.rounds):
                    for n in bench.in_turn(names, i):
                        r = run_wrk_watched(targets[n].url + path, c, args.duration, headers, args.wrk_threads,
                                            pids[n], workers if n == "nginx" else None)
                        rounds[n].append({k: v for k, v in r.items() if k != "raw"})
                        s = r["sched"]
                        bench.log(f"  {key:8} {n:12} c={c:<4} {r['rps']:>10.0f} req/s  p50 {r['p50_ms']:.2f}  "
                                  f"p99 {r['p99_ms']:.2f} ms  wait srv {s['server_wait_ms_per_s']:.0f} "
                                  f"wrk {s['wrk_wait_ms_per_s']:.0f} all {fmt(s['machine_wait_ms_per_s'], 0)} ms/s  "
                                  f"busy thr {s['server_busy_threads']}"
                                  + (f"  conns/worker {s['conns_per_worker']}" if s["conns_per_worker"] else "")
                                  + (f"  non-2xx {r['non2xx']}" if r["non2xx"] else "")
                                  + (f"  socket errors {r['socket_errors']}" if r["socket_errors"] else ""))
                for n in names:
                    summary = bench.summarize_rounds(rounds[n])
                    for k in ("server_wait_ms_per_s", "wrk_wait_ms_per_s", "machine_wait_ms_per_s", "server_busy_threads"):
                        vals = [r["sched"][k] for r in rounds[n] if r["sched"].get(k) is not None]
                        summary[k] = statistics.median(vals) if vals else None
                    entry["runs"][f"{n}@{c}"] = summary
            results["cases"].append(entry)
            save()

        results["rss_after_load"] = {n: (bench.proc_status(s.pid) if n != "nginx" else {"VmRSS": bench.tree_rss(s.pid)})
                                     for n, s in targets.items()}
        save()

        if args.perf:
            key, _, c = args.perf.partition("@")
            label, path, headers = all_cases[key]
            bench.log(f"perf record -g of wheelforge during {key} at {c} connections")
            data_path = os.path.join(run_dir, "perf.data")
            perf = subprocess.Popen(["perf", "record", "-g", "-F", "999", "-o", data_path, "-p", str(wf.pid),
                                     "--", "sleep", str(args.duration)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            time.sleep(0.3)
            bench.run_wrk(wf.url + path, int(c), args.duration, headers, args.wrk_threads)
            perf.communicate()
            for mode, extra in (("flat", ["--no-children"]), ("children", ["--children"])):
                rep = subprocess.run(["perf", "report", "-i", data_path, "--stdio", "--percent-limit", "0.7",
                                      "-g", "none", *extra, "--sort", "dso,sym"], capture_output=True, text=True)
                with open(os.path.join(out_dir, f"perf-{mode}.txt"), "w") as f:
                    # C++ template names run to thousands of characters: cut them.
                    f.write("\n".join(line[:240] for line in (rep.stdout + rep.stderr).splitlines()) + "\n")
    finally:
        for s in servers:
            s.stop()

    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(report(results))
    print(report(results))
    return 0


def report(results):
    m = results["machine"]
    st = results["settings"]
    names = [n for n in ["wheelforge"] + [v.partition("=")[0] for v in st["variants"]] + ["nginx"]]
    lines = [f"{m['date']}, commit {m['commit'][:7]}: nproc {m['nproc']}, {m['cpu']}, {m['mem_gib']} GiB, "
             f"{m['os']}, kernel {m['kernel']}, {m['nginx']}, {m['wrk']}; load at start {m['loadavg_at_start']}.",
             f"{st['threads']} network threads / nginx workers, wrk -t{st['wrk_threads']}, {st['rounds']} rounds of "
             f"{st['duration_s']} s per server, case and connection count, servers taking turns; wheelforge "
             f"--access-log {st['access_log']}, nginx access_log off. {results.get('note', '')}", ""]
    head = "| case | conns | " + " | ".join(f"{n} req/s | p50 | p99 (range)" for n in names) + \
        " | wf/nginx req/s | wf/nginx p99 |"
    lines += [head, "|---|---:|" + "---:|---:|---:|" * len(names) + "---:|---:|"]
    for e in results.get("cases", []):
        for c in st["conns"]:
            runs = [e["runs"].get(f"{n}@{c}", {}) for n in names]
            cells = []
            for r in runs:
                cells += [fmt(r.get("rps"), 0), fmt(r.get("p50_ms")), bench.fmt_p99(r) if r else "–"]
            wf, ngx = runs[0], runs[-1]
            ratio = f"{wf['rps'] / ngx['rps']:.2f}×" if wf.get("rps") and ngx.get("rps") else "–"
            pr = f"{wf['p99_ms'] / ngx['p99_ms']:.2f}" if wf.get("p99_ms") and ngx.get("p99_ms") else "–"
            lines.append(f"| {e['case']} | {c} | " + " | ".join(cells) + f" | {ratio} | {pr} |")
    lines += ["", "Run-queue wait during the runs (median over rounds, ms of waiting per second of the run): "
              "the server's threads / wrk's threads / the whole machine; and the server's threads that used "
              "more than 5 % of a CPU.", "",
              "| case | conns | " + " | ".join(f"{n} srv / wrk / all, busy" for n in names) + " |",
              "|---|---:|" + "---:|" * len(names)]
    for e in results.get("cases", []):
        for c in st["conns"]:
            cells = []
            for n in names:
                r = e["runs"].get(f"{n}@{c}", {})
                cells.append(f"{fmt(r.get('server_wait_ms_per_s'), 0)} / {fmt(r.get('wrk_wait_ms_per_s'), 0)} / "
                             f"{fmt(r.get('machine_wait_ms_per_s'), 0)}, {fmt(r.get('server_busy_threads'), 0)}")
            lines.append(f"| {e['key']} | {c} | " + " | ".join(cells) + " |")
    rss = results.get("rss_after_load", {})
    if rss:
        lines += ["", "RSS after the load runs: " + ", ".join(
            f"{n} {v.get('VmRSS', 0) / MIB:.1f} MiB" + (f" (VmHWM {v['VmHWM'] / MIB:.1f})" if v.get("VmHWM") else "")
            for n, v in rss.items())]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
