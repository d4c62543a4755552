#!/usr/bin/env python3
"""The upstream proxy benchmarks (bench/README.md, "Upstream proxy"), run by bench/run.sh after
bench.py, or alone once run.sh has generated the small corpus's static tree:

  /usr/bin/python3 bench/upstream.py --bin build/wheelforge --work bench/.work [--smoke]

1. Merged page: nginx serves the small corpus's static tree (bench/static_tree.py) as an
   upstream; wheelforge holds one local wheel of a project of that tree and lets the upstream
   serve the name too (`serve_local`), so `/simple/<name>/` merges the local file with the
   upstream's. wrk against it and against nginx serving the same tree's page, same run, servers
   taking turns. The page cache is warmed first: this measures the cached path (a page younger
   than `metadata_ttl`), not a fetch from the upstream.
2. Cached upstream file: one wheel of that page downloaded once through
   `/upstream/<upstream>/<sha256>/<filename>` (fetched, verified, stored), then wrk of GETs of
   it against nginx serving the same file.
3. Memory: a second nginx answers a different page for every name under /many/simple/ (one
   `location`, the name in each file name); wheelforge, with that upstream (`projects = "all"`)
   and a small `upstream_page_cache`, is asked for N distinct names (50,000; 2,000 with
   --smoke) by a pool of keep-alive clients. Prints VmRSS/VmHWM before and after, the bound and
   the `wheelforge_upstream_page_cache_bytes` gauge, and the pages' disk copies (bounded by
   `upstream_page_disk_cache`, 32M here). It fails (exit 1) only when a request is
   not answered 200 with the name's files, the gauge exceeds the bound, the disk copies exceed
   theirs, or VmHWM grew by more
   than 4 times the bound plus 32 MiB over the RSS before: a memory bound (generous: allocator
   arenas, thread stacks, the catalog and the log take their share), never a timing.

Timings are reported, never judged. Writes upstream.md and upstream.json into the work
directory.
"""

import argparse
import hashlib
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench  # noqa: E402  (the suite's process, wrk and nginx helpers)
from bench import MIB, Nginx, Wheelforge, http_get, in_turn, log, proc_status, run_wrk, summarize_rounds  # noqa: E402
from gen_corpus import make_wheel_bytes, payload_for  # noqa: E402

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
PROJECT = "bench-small-001"  # 10 wheels in the small corpus
LOCAL_VERSION = "2.0.0"
GROWTH_FACTOR, GROWTH_SLACK = 4, 32 * MIB

# nginx answering one page per name: each page lists 10 wheels whose file names carry the name,
# so no two pages are alike; the hashes are never checked (nothing is downloaded).
MANY_CONF = """\
@USER_LINE@
worker_processes 1;
daemon off;
pid @PREFIX@/nginx.pid;
error_log @PREFIX@/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path @PREFIX@/client_body;
    proxy_temp_path @PREFIX@/proxy;
    fastcgi_temp_path @PREFIX@/fastcgi;
    uwsgi_temp_path @PREFIX@/uwsgi;
    scgi_temp_path @PREFIX@/scgi;
    server {
        listen 127.0.0.1:@PORT@;
        location = /many/simple/ { default_type text/html; return 200 "<html><body></body></html>\\n"; }
        location ~ ^/many/simple/([a-z0-9]+)/$ {
            default_type text/html;
            return 200 '<!DOCTYPE html>\\n<html><body>\\n@LINKS@</body></html>\\n';
        }
    }
}
"""


def many_links():
    out = []
    for v in range(10):
        sha = hashlib.sha256(f"many-{v}".encode()).hexdigest()
        fn = f"$1-1.{v}.0-py3-none-any.whl"
        out.append(f'<a href="/many/files/{fn}#sha256={sha}" data-requires-python="&gt;=3.8">{fn}</a>\\n')
    return "".join(out)


class ManyNginx:
    def __init__(self, prefix):
        self.prefix = prefix
        self.proc = None

    def start(self):
        shutil.rmtree(self.prefix, ignore_errors=True)
        os.makedirs(self.prefix)
        port = bench.free_port()
        conf = MANY_CONF
        for k, v in {"@USER_LINE@": "user root;" if os.geteuid() == 0 else "", "@PREFIX@": self.prefix,
                     "@PORT@": str(port), "@LINKS@": many_links()}.items():
            conf = conf.replace(k, v)
        path = os.path.join(self.prefix, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen(["nginx", "-p", self.prefix, "-c", path], stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(self.prefix, "stderr.log"), "wb"))
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                http_get(self.url + "/many/simple/", timeout=1)
                return self
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise SystemExit(f"nginx did not start; see {self.prefix}/error.log")

    def stop(self):
        Nginx.stop(self)


def write_config(path, upstreams, page_cache=None, page_disk_cache=None):
    lines = [f'upstream_page_cache = "{page_cache}"'] if page_cache else []
    if page_disk_cache:
        lines.append(f'upstream_page_disk_cache = "{page_disk_cache}"')
    for u in upstreams:
        lines.append("[[upstream]]")
        for k, v in u.items():
            lines.append(f"{k} = " + (json.dumps(v) if isinstance(v, list) else f'"{v}"'))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def metric(url, name):
    _, _, body = http_get(url + "/metrics")
    m = re.search(rf"^{name} (\S+)$", body.decode(), re.M)
    return float(m.group(1)) if m else None


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    return int(m.group(1)) * {"": 1, "K": 1024, "M": MIB, "G": 1024 * MIB}[m.group(2)]


# ---- 1 and 2: the merged page and the cached upstream file ----------------------------------------


def proxy_cases(args, run_dir, problems):
    tree = os.path.join(args.work, "static", "small")
    if not os.path.exists(os.path.join(tree, ".done")):
        raise SystemExit(f"{tree} is missing: run bench/run.sh (it generates the static trees)")
    servers = {"nginx 1w": Nginx(tree, os.path.join(run_dir, "nginx1"), 1).start(),
               "nginx 2w": Nginx(tree, os.path.join(run_dir, "nginx2"), 2).start()}
    # The local wheel: a newer release of a project the upstream also has.
    local_dir = os.path.join(run_dir, "local")
    os.makedirs(local_dir)
    fn = f"{PROJECT.replace('-', '_')}-{LOCAL_VERSION}-py3-none-any.whl"
    with open(os.path.join(local_dir, fn), "wb") as f:
        f.write(make_wheel_bytes(PROJECT, LOCAL_VERSION, "py3-none-any", payload_for(fn, 600)))
    data = os.path.join(run_dir, "data")
    bench.ingest(args.bin, data, [local_dir], os.path.join(run_dir, "ingest.log"))
    config = os.path.join(run_dir, "wheelforge.toml")
    write_config(config, [{"name": "static", "url": servers["nginx 1w"].url + "/simple/",
                           "projects": "all", "metadata_ttl": "1h", "serve_local": [PROJECT]}])
    wf = Wheelforge(args.bin, data, os.path.join(run_dir, "wheelforge.log"), ["--config", config]).start()
    servers = {"wheelforge": wf, **servers}
    result = {}
    try:
        # Warm the page cache (and check the merge): the local file and the upstream's 10.
        _, _, body = http_get(f"{wf.url}/simple/{PROJECT}/", {"Accept": JSON_TYPE})
        page = json.loads(body)
        names = [f["filename"] for f in page["files"]]
        with open(os.path.join(tree, "manifest.json")) as f:
            upstream_files = json.load(f)[PROJECT]
        want = sorted([fn] + [u["filename"] for u in upstream_files])
        if sorted(names) != want:
            problems.append(f"merged page lists {sorted(names)}, expected {want}")
        http_get(f"{wf.url}/simple/{PROJECT}/", {"Accept-Encoding": "gzip"})
        # One upstream file downloaded through wheelforge: fetched, verified and stored.
        up = next(f for f in page["files"] if f["filename"] != fn)
        link = up["url"] if up["url"].startswith("/") else "/" + up["url"].split("/", 3)[3]
        t0 = time.monotonic()
        status, _, blob = http_get(wf.url + link)
        first_ms = (time.monotonic() - t0) * 1e3
        if status != 200 or hashlib.sha256(blob).hexdigest() != up["hashes"]["sha256"]:
            problems.append(f"{link}: status {status}, sha256 of the answer differs from the page's")
        ngx_link = f"/files/{up['hashes']['sha256']}/{up['filename']}"
        result["file"] = {"filename": up["filename"], "size": len(blob), "first_download_ms": first_ms,
                          "wheelforge_url": link, "nginx_url": ngx_link}
        result["page"] = {"project": PROJECT, "files": len(names), "upstream_files": len(upstream_files)}
        cases = [("merged page", f"/simple/{PROJECT}/", f"/simple/{PROJECT}/"),
                 ("cached upstream file", link, ngx_link)]
        headers = ["Accept-Encoding: gzip"]
        result["cases"] = []
        for label, wf_path, ngx_path in cases:
            paths = {"wheelforge": wf_path, "nginx 1w": ngx_path, "nginx 2w": ngx_path}
            for name, s in servers.items():  # 1 s warm-up each
                run_wrk(s.url + paths[name], args.conns, 1, headers, args.wrk_threads)
            rounds = {name: [] for name in servers}
            for i in range(args.rounds):
                for name in in_turn(list(servers), i):
                    rounds[name].append(run_wrk(servers[name].url + paths[name], args.conns, args.duration,
                                                headers, args.wrk_threads))
            summary = {name: summarize_rounds(r) for name, r in rounds.items()}
            for name, s in summary.items():
                for r in s["rounds"]:
                    r.pop("raw", None)
                if s["non2xx"] or s["socket_errors"] or not s["requests"]:
                    problems.append(f"{label} on {name}: {s['non2xx']} non-2xx answers, "
                                    f"{s['socket_errors']} socket errors, {s['requests']} requests")
            result["cases"].append({"case": label, "conns": args.conns, "servers": summary})
            log(f"{label}: " + ", ".join(f"{n} {s['rps']:,.0f} req/s" for n, s in summary.items() if s["rps"]))
        result["rss"] = {name: bench.tree_rss(s.pid) for name, s in servers.items()}
        result["upstream_misses"] = metric(wf.url, 'wheelforge_upstream_misses_total{upstream="static"}')
    finally:
        for s in servers.values():
            s.stop()
    return result


# ---- 3: memory after many distinct upstream projects ----------------------------------------------


def ask_many(url, names, threads, problems):
    host, port = url.split("//", 1)[1].split(":")
    lock = threading.Lock()
    bad = []

    def worker(chunk):
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        for name in chunk:
            conn.request("GET", f"/simple/{name}/", headers={"Accept": JSON_TYPE})
            r = conn.getresponse()
            body = r.read()
            if r.status != 200 or f"{name}-1.9.0-py3-none-any.whl".encode() not in body:
                with lock:
                    bad.append(f"/simple/{name}/: {r.status} {body[:200]!r}")
        conn.close()

    chunks = [names[i::threads] for i in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, chunks))
    if bad:
        problems.append(f"{len(bad)} of {len(names)} distinct names not answered with their page, "
                        f"first: {bad[0]}")


def memory_case(args, run_dir, problems):
    ngx = ManyNginx(os.path.join(run_dir, "nginx-many")).start()
    data = os.path.join(run_dir, "data-many")
    os.makedirs(data)
    config = os.path.join(run_dir, "wheelforge-many.toml")
    write_config(config, [{"name": "many", "url": ngx.url + "/many/simple/", "projects": "all"}],
                 page_cache=args.page_cache, page_disk_cache=args.page_disk_cache)
    wf = Wheelforge(args.bin, data, os.path.join(run_dir, "wheelforge-many.log"), ["--config", config]).start()
    bound = parse_size(args.page_cache)
    disk_bound = parse_size(args.page_disk_cache)
    try:
        names = [f"probe{i:06d}" for i in range(args.names)]
        ask_many(wf.url, names[:100], args.client_threads, problems)  # threads and connections up
        before = proc_status(wf.pid)
        gauge_before = metric(wf.url, "wheelforge_upstream_page_cache_bytes")
        t0 = time.monotonic()
        with bench.RssSampler(wf.pid, interval=0.1) as sampler:
            ask_many(wf.url, names[100:], args.client_threads, problems)
        elapsed = time.monotonic() - t0
        after = proc_status(wf.pid)
        gauge = metric(wf.url, "wheelforge_upstream_page_cache_bytes")
        misses = metric(wf.url, 'wheelforge_upstream_misses_total{upstream="many"}')
        pages_on_disk = 0
        disk_bytes = 0  # as `du` counts: the blocks allocated
        file_bytes = 0
        for top, _, files in os.walk(os.path.join(data, "upstream", "pages")):
            pages_on_disk += len(files)
            for f in files:
                st = os.stat(os.path.join(top, f))
                disk_bytes += st.st_blocks * 512
                file_bytes += st.st_size
    finally:
        wf.stop()
        ngx.stop()
    growth = after["VmHWM"] - before["VmRSS"]
    limit = GROWTH_FACTOR * bound + GROWTH_SLACK
    if gauge is None or gauge > bound:
        problems.append(f"page cache gauge {gauge} above the bound {bound}")
    if disk_bytes > disk_bound:
        problems.append(f"disk copies of upstream pages take {disk_bytes} bytes, above the bound {disk_bound}")
    if growth > limit:
        problems.append(f"RSS grew by {growth / MIB:.1f} MiB (VmHWM after against VmRSS before) asking for "
                        f"{args.names} names: more than {GROWTH_FACTOR} x the {bound / MIB:.0f} MiB bound "
                        f"+ {GROWTH_SLACK / MIB:.0f} MiB")
    res = {"names": args.names, "bound": bound, "client_threads": args.client_threads,
           "rss_before": before["VmRSS"], "hwm_before": before["VmHWM"], "rss_after": after["VmRSS"],
           "hwm_after": after["VmHWM"], "peak_sampled": sampler.peak, "gauge_before": gauge_before,
           "gauge_after": gauge, "misses": misses, "pages_on_disk": pages_on_disk, "disk_bytes": disk_bytes, "file_bytes": file_bytes,
           "disk_bound": disk_bound, "seconds": elapsed,
           "growth": growth, "growth_limit": limit}
    log(f"memory: {args.names} names in {elapsed:.1f} s; VmRSS {before['VmRSS'] / MIB:.1f} -> "
        f"{after['VmRSS'] / MIB:.1f} MiB, VmHWM {after['VmHWM'] / MIB:.1f} MiB, gauge {gauge / MIB:.2f} MiB "
        f"of {bound / MIB:.0f} MiB")
    return res


# ---- report ------------------------------------------------------------------------------------------


def render(r):
    out = [f"## Upstream proxy ({r['date']}, {r['machine']})", ""]
    if r.get("note"):
        out += [r["note"], ""]
    p = r.get("proxy")
    out += [] if p is None else [f"Merged page: `/simple/{p['page']['project']}/` ({p['page']['files']} files: 1 local, "
            f"{p['page']['upstream_files']} from the upstream), page cache warm. Cached upstream file: "
            f"`{p['file']['filename']}` ({p['file']['size']:,} B; first download through wheelforge, "
            f"fetched and stored: {p['file']['first_download_ms']:.1f} ms). wrk -t{r['wrk_threads']}, "
            f"{r['rounds']} rounds of {r['duration']} s, servers taking turns, `Accept-Encoding: gzip`; "
            "median, p99 range in parentheses.", "",
            "| case | conns | wheelforge req/s | p50 | p99 | nginx 1w req/s | p50 | p99 | nginx 2w req/s | p50 | p99 "
            "| wf/ngx1 req/s | wf/ngx2 req/s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in p["cases"] if p else []:
        s = c["servers"]
        cells = []
        for name in ("wheelforge", "nginx 1w", "nginx 2w"):
            x = s[name]
            cells += [bench.fmt_rps(x["rps"]), bench.fmt_ms(x["p50_ms"]), bench.fmt_p99(x)]
        ratio = [f"{s['wheelforge']['rps'] / s[n]['rps']:.2f}×" if s[n]["rps"] and s["wheelforge"]["rps"] else "-"
                 for n in ("nginx 1w", "nginx 2w")]
        out.append(f"| {c['case']} | {c['conns']} | " + " | ".join(cells + ratio) + " |")
    if p:
        out += ["", "RSS after the load runs: " + ", ".join(f"{n} {v / MIB:.1f} MiB" for n, v in p["rss"].items()),
                ""]
    m = r["memory"]
    out += [f"Memory: {m['names']:,} distinct upstream projects asked for once each ({m['client_threads']} "
            f"keep-alive clients, {m['seconds']:.1f} s, {m['misses']:.0f} upstream fetches, "
            f"{m['pages_on_disk']:,} pages on disk, {m['file_bytes'] / MIB:.1f} MiB in {m['disk_bytes'] / MIB:.1f} MiB "
            "of blocks), `upstream_page_cache` = "
            f"{m['bound'] / MIB:.0f} MiB, `upstream_page_disk_cache` = {m['disk_bound'] / MIB:.0f} MiB:", "",
            "| | VmRSS | VmHWM | page cache gauge |", "|---|---:|---:|---:|",
            f"| before (after 100 names) | {m['rss_before'] / MIB:.1f} MiB | {m['hwm_before'] / MIB:.1f} MiB | "
            f"{m['gauge_before'] / MIB:.2f} MiB |",
            f"| after | {m['rss_after'] / MIB:.1f} MiB | {m['hwm_after'] / MIB:.1f} MiB | "
            f"{m['gauge_after'] / MIB:.2f} MiB |", "",
            f"Growth (VmHWM after − VmRSS before): {m['growth'] / MIB:.1f} MiB; the limit checked: "
            f"{GROWTH_FACTOR} × bound + {GROWTH_SLACK // MIB} MiB = {m['growth_limit'] / MIB:.0f} MiB."]
    if r["problems"]:
        out += ["", "Problems:"] + [f"- {x}" for x in r["problems"]]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(bench.ROOT, "build", "wheelforge"))
    ap.add_argument("--work", default=os.path.join(HERE, ".work"))
    ap.add_argument("--smoke", action="store_true", help="1 round of 1 s per case, 2,000 names")
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--wrk-threads", type=int, default=2)
    ap.add_argument("--names", type=int, default=50000)
    ap.add_argument("--client-threads", type=int, default=8)
    ap.add_argument("--page-cache", default="8M", help="upstream_page_cache of the memory case (K/M/G)")
    ap.add_argument("--page-disk-cache", default="32M",
                    help="upstream_page_disk_cache of the memory case (K/M/G)")
    ap.add_argument("--memory-only", action="store_true", help="only the memory case (step 3)")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    if args.smoke:
        args.duration, args.rounds, args.names = 1, 1, min(args.names, 2000)
    args.bin = os.path.abspath(args.bin)
    args.work = os.path.abspath(args.work)
    run_dir = os.path.join(args.work, "run", "upstream")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    problems = []
    info = bench.machine_info()
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "machine": f"nproc {info.get('nproc')}, {info.get('cpu')}, load average at the start "
                         f"{info.get('loadavg_at_start')}, {info.get('nginx')}, {info.get('wrk')}",
              "commit": info.get("commit"), "note": args.note,
              "wrk_threads": args.wrk_threads, "rounds": args.rounds, "duration": args.duration}
    if not args.memory_only:
        log("upstream proxy: merged page and cached upstream file")
        result["proxy"] = proxy_cases(args, run_dir, problems)
    log(f"upstream proxy: memory after {args.names:,} distinct upstream projects")
    result["memory"] = memory_case(args, run_dir, problems)
    result["problems"] = problems
    md = render(result)
    with open(os.path.join(args.work, "upstream.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(args.work, "upstream.md"), "w") as f:
        f.write(md)
    print(md)
    if problems:
        print("upstream benchmarks: " + "; ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
