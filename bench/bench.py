#!/usr/bin/env python3
"""Runs the wheelforge benchmark suite against wheelforge and nginx (static tree) and writes
results.json and results.md into the work directory. Called by bench/run.sh, which generates
the corpora and static trees first; see bench/README.md.

Nothing here asserts a threshold: the goals are reported as met or missed, with the numbers.
"""

import argparse
import base64
import datetime
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MB = 1e6  # throughput unit: MB/s = 10^6 bytes per second
MIB = 2**20


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- processes and memory ---------------------------------------------------------------------


def proc_status(pid):
    """VmRSS and VmHWM of a process in bytes."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    k, v = line.split(":", 1)
                    out[k] = int(v.split()[0]) * 1024
    except FileNotFoundError:
        pass
    return out


def children_of(pid):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    kids.append(int(d))
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    return kids


def tree_rss(pid):
    return sum(proc_status(p).get("VmRSS", 0) for p in [pid] + children_of(pid))


class RssSampler:
    """Samples VmRSS of one process every `interval` seconds in a thread; keeps the peak."""

    def __init__(self, pid, interval=0.005):
        self.pid, self.interval = pid, interval
        self.peak = 0
        self.samples = 0
        self.timeline = []  # (monotonic time, VmRSS bytes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            rss = proc_status(self.pid).get("VmRSS", 0)
            self.peak = max(self.peak, rss)
            self.timeline.append((time.monotonic(), rss))
            self.samples += 1
            time.sleep(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def in_turn(names, i):
    """The servers in the order of round i: each round starts with the next one, so that no
    server always runs right after the same neighbour."""
    k = i % len(names)
    return names[k:] + names[:k]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, headers=None, timeout=10):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, dict(r.headers), r.read()


class Wheelforge:
    def __init__(self, binary, data_dir, log_path, extra=()):
        self.binary, self.data_dir, self.log_path, self.extra = binary, data_dir, log_path, list(extra)
        self.proc = None
        self.url = None
        self.startup_s = None

    def start(self):
        t0 = time.monotonic()
        self.log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--data-dir", self.data_dir, "--listen", "127.0.0.1:0", *self.extra],
            stdout=subprocess.PIPE, stderr=self.log_file,
            # wrk opens up to 256 connections from this one address, the default cap per client
            # (a variable rather than a flag: binaries from before the setting ignore it).
            env={**os.environ, "WHEELFORGE_MAX_CONNECTIONS_PER_CLIENT": "1024"})
        line = self.proc.stdout.readline().decode()
        self.startup_s = time.monotonic() - t0
        m = re.search(r"listening on (http://\S+)", line)
        if not m:
            self.stop()
            raise SystemExit(f"wheelforge did not start (stdout: {line!r}); see {self.log_path}")
        self.url = m.group(1).rstrip("/")
        # Drain stdout so that the server never blocks on a full pipe.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        return self

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log_file", None):
            self.log_file.close()


class Nginx:
    def __init__(self, root, prefix, workers):
        self.root, self.prefix, self.workers = root, prefix, workers
        self.proc = None
        self.url = None

    def start(self):
        shutil.rmtree(self.prefix, ignore_errors=True)
        os.makedirs(self.prefix)
        port = free_port()
        with open(os.path.join(HERE, "nginx.conf.in")) as f:
            conf = f.read()
        # Run as root, nginx would drop its workers to `nobody`; keep the invoking user.
        user_line = "user root;" if os.geteuid() == 0 else ""
        for k, v in {"@USER_LINE@": user_line, "@WORKERS@": str(self.workers), "@PREFIX@": self.prefix,
                     "@PORT@": str(port), "@ROOT@": self.root}.items():
            conf = conf.replace(k, v)
        conf_path = os.path.join(self.prefix, "nginx.conf")
        with open(conf_path, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen(["nginx", "-p", self.prefix, "-c", conf_path],
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.prefix, "stderr.log"), "wb"))
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                http_get(self.url + "/simple/", timeout=1)
                return self
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise SystemExit(f"nginx did not start; see {self.prefix}/error.log and stderr.log")

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---- wrk ---------------------------------------------------------------------------------------

UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def to_ms(text):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", text)
    return float(m.group(1)) * UNITS[m.group(2)] if m else None


def run_wrk(url, conns, duration, headers, threads):
    cmd = ["wrk", f"-t{min(threads, conns)}", f"-c{conns}", f"-d{duration}s", "--latency", "--timeout", "10s"]
    for h in headers:
        cmd += ["-H", h]
    cmd.append(url)
    return parse_wrk(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def parse_wrk(out):
    """The figures of one `wrk --latency` report."""
    res = {"raw": out}
    for pct in ("50", "75", "90", "99"):
        m = re.search(rf"^\s+{pct}%\s+(\S+)", out, re.M)
        res[f"p{pct}_ms"] = to_ms(m.group(1)) if m else None
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    res["rps"] = float(m.group(1)) if m else None
    m = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", out)
    if m:
        mult = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}.get(m.group(2), 1)
        res["bytes_per_s"] = float(m.group(1)) * mult
    m = re.search(r"(\d+) requests in", out)
    res["requests"] = int(m.group(1)) if m else None
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    res["non2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    res["socket_errors"] = sum(int(x) for x in m.groups()) if m else 0
    return res


def summarize_rounds(rounds):
    """The median of each figure over the rounds (each figure on its own), the p99 range, the
    errors summed, and the rounds themselves."""
    out = {"rounds": rounds}
    for key in ("rps", "p50_ms", "p75_ms", "p90_ms", "p99_ms", "bytes_per_s"):
        values = [r[key] for r in rounds if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    p99s = [r["p99_ms"] for r in rounds if r.get("p99_ms") is not None]
    out["p99_min_ms"], out["p99_max_ms"] = (min(p99s), max(p99s)) if p99s else (None, None)
    for key in ("requests", "non2xx", "socket_errors"):
        out[key] = sum(r.get(key) or 0 for r in rounds)
    return out


# ---- upload ------------------------------------------------------------------------------------


def raw_put(url, filename, data, token):
    """PUT of `data` as `filename`; returns (status, body, t_start, t_body_sent, t_response)."""
    host, port = url.split("//", 1)[1].split(":")
    size = len(data)
    auth = base64.b64encode(f"__token__:{token}".encode()).decode()
    head = (f"PUT /upload/{filename} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Basic {auth}\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n")
    t0 = time.monotonic()
    with socket.create_connection((host, int(port))) as s:
        s.sendall(head.encode())
        try:
            s.sendall(memoryview(data))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered early (an error); read its answer
        t_sent = time.monotonic()
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        header, _, body = buf.partition(b"\r\n\r\n")
        m = re.search(rb"content-length:\s*(\d+)", header, re.I)
        want = int(m.group(1)) if m else None
        while want is not None and len(body) < want:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        t_resp = time.monotonic()
    status = int(header.split(b" ", 2)[1]) if header else 0
    return status, body.decode(errors="replace"), t0, t_sent, t_resp


# ---- pip ---------------------------------------------------------------------------------------


def pip_env():
    env = dict(os.environ)
    env.update(PIP_CONFIG_FILE="/dev/null", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
               PYTHONDONTWRITEBYTECODE="1")
    for k in list(env):
        if k.startswith("PIP_") and k not in ("PIP_CONFIG_FILE", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_NO_INPUT"):
            del env[k]
    return env


def pip_run(python, base_url, mode, target, work):
    index = base_url + "/simple/"
    common = ["--no-cache-dir", "--index-url", index, "-q", "--progress-bar", "off"]
    if mode == "install":
        report = os.path.join(work, "report.json")
        cmd = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--report", report, *common, target]
    else:
        dest = os.path.join(work, "dl")
        shutil.rmtree(dest, ignore_errors=True)
        cmd = [python, "-m", "pip", "download", "-d", dest, *common, target]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=pip_env())
    elapsed = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"pip failed against {index}:\n{p.stdout}\n{p.stderr}")
    if mode == "install":
        with open(report) as f:
            names = sorted(i["metadata"]["name"] + "==" + i["metadata"]["version"] for i in json.load(f)["install"])
    else:
        names = sorted(os.listdir(dest))
    return elapsed, names


# ---- environment -------------------------------------------------------------------------------


def git_commit():
    """The checked-out commit, read from .git without running git."""
    gitdir = os.path.join(ROOT, ".git")
    if os.path.isfile(gitdir):
        with open(gitdir) as f:
            gitdir = os.path.join(ROOT, f.read().split(":", 1)[1].strip())
    try:
        with open(os.path.join(gitdir, "HEAD")) as f:
            head = f.read().strip()
    except OSError:
        return "unknown"
    if not head.startswith("ref:"):
        return head
    ref = head.split(None, 1)[1]
    # A worktree's branches live in the main repository's directory (its `commondir`).
    try:
        with open(os.path.join(gitdir, "commondir")) as f:
            gitdir = os.path.join(gitdir, f.read().strip())
    except OSError:
        pass
    try:
        with open(os.path.join(gitdir, ref)) as f:
            return f.read().strip()
    except OSError:
        pass
    try:
        with open(os.path.join(gitdir, "packed-refs")) as f:
            for line in f:
                if line.strip().endswith(" " + ref):
                    return line.split()[0]
    except OSError:
        pass
    return "unknown"


def build_type(binary):
    """CMAKE_BUILD_TYPE from the CMakeCache.txt next to the binary, when there is one."""
    try:
        with open(os.path.join(os.path.dirname(binary), "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_BUILD_TYPE:"):
                    return line.split("=", 1)[1].strip() or "(none)"
    except OSError:
        pass
    return "unknown"


def machine_info():
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    os_name = "unknown"
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass

    def version_of(cmd):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True)
            return (p.stdout + p.stderr).strip().splitlines()[0]
        except (OSError, IndexError):
            return "unknown"

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "mem_gib": round(mem_kb / 2**20, 1),
        "os": os_name,
        "kernel": platform.release(),
        "loadavg_at_start": " ".join(load),
        "nginx": version_of(["nginx", "-v"]),
        "wrk": version_of(["wrk", "-v"]),
    }


# ---- the suite ---------------------------------------------------------------------------------


def ingest(binary, data_dir, inputs, log_path):
    shutil.rmtree(data_dir, ignore_errors=True)
    t0 = time.monotonic()
    with open(log_path, "wb") as lf:
        p = subprocess.run([binary, "ingest", "--data-dir", data_dir, *inputs], stdout=lf, stderr=subprocess.STDOUT)
    elapsed = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"wheelforge ingest failed; see {log_path}")
    with open(log_path) as f:
        tail = f.read().strip().splitlines()[-1]
    return {"seconds": elapsed, "summary": tail}


def prepare_data(binary, name, inputs, cache_root, run_dir, reuse):
    """An ingested data directory for this run. The ingest goes into cache_root/name; with
    `reuse`, an earlier ingest by the same binary of the same inputs is kept. The run gets a
    copy (blobs hard-linked: they are immutable), so that uploads never touch the cache."""
    cache = os.path.join(cache_root, name)
    stamp_path = os.path.join(cache_root, name + ".stamp.json")
    st = os.stat(binary)
    ident = {"binary": binary, "size": st.st_size, "mtime": st.st_mtime, "inputs": inputs}
    info = None
    if reuse and os.path.exists(stamp_path):
        with open(stamp_path) as f:
            stamp = json.load(f)
        if stamp.get("ident") == ident and os.path.isdir(cache):
            info = dict(stamp["ingest"], reused=True)
    if info is None:
        if os.path.exists(stamp_path):
            os.remove(stamp_path)
        info = ingest(binary, cache, inputs, os.path.join(run_dir, f"ingest-{name}.log"))
        with open(stamp_path, "w") as f:
            json.dump({"ident": ident, "ingest": info}, f)
    dest = os.path.join(run_dir, "data-" + name)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    subprocess.run(["cp", "-al", os.path.join(cache, "blobs"), dest], check=True)
    for entry in os.listdir(cache):
        if entry not in ("blobs", "tmp") and os.path.isfile(os.path.join(cache, entry)):
            shutil.copy2(os.path.join(cache, entry), dest)
    return dest, info


def measure_startup(binary, data_dir, log_path, runs):
    """Median time to the 'listening on' line, first-page latency and idle RSS (after 1 s)."""
    startups, idle = [], []
    for _ in range(runs):
        wf = Wheelforge(binary, data_dir, log_path).start()
        time.sleep(1.0)
        idle.append(proc_status(wf.pid).get("VmRSS", 0))
        startups.append(wf.startup_s)
        wf.stop()
    return {"startup_s": statistics.median(startups), "startup_all_s": startups,
            "idle_rss": statistics.median(idle), "idle_rss_all": idle}


def disk_reference(directory, size):
    """MB/s of writing `size` bytes to a file in `directory` and fsyncing it: the ceiling for an
    upload that must be on disk before it is acknowledged."""
    path = os.path.join(directory, "disk-reference.tmp")
    chunk = os.urandom(8 * MIB)
    t0 = time.monotonic()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        left = size
        while left > 0:
            left -= os.write(fd, chunk[:min(left, len(chunk))])
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.monotonic() - t0
    os.remove(path)
    return {"bytes": size, "seconds": elapsed, "mb_per_s": size / elapsed / MB}


def measure_upload(binary, wf, big, keep, servers):
    """PUT of the big wheel into a fresh server on wf's data directory: throughput, RSS and the
    time until the project page lists it. Returns (results, status); the server keeps running
    (in `servers`) when `keep`."""
    # The token first: a running server notices new tokens only at its next catalog poll.
    token = subprocess.run([binary, "token", "create", "--data-dir", wf.data_dir, "--scope", "upload"],
                           capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    wf.start()
    servers.append(wf)
    size = os.path.getsize(big)
    time.sleep(0.5)
    rss_before = proc_status(wf.pid)
    log(f"upload of {size / MIB:.0f} MiB by PUT into {os.path.basename(wf.data_dir)} "
        f"(server RSS before: {rss_before.get('VmRSS', 0) / MIB:.1f} MiB)")
    # The client sends from memory, so that it never waits for the disk while the server is
    # measured: this machine's page cache does not reliably keep a 1 GiB file, and parts of it
    # were read from disk again during uploads, at 5 to 60 MB/s.
    with open(big, "rb") as f:
        data = f.read()
    os.sync()  # no writeback of earlier steps runs during the upload
    with RssSampler(wf.pid) as sampler:
        status, body, t0, t_sent, t_resp = raw_put(wf.url, os.path.basename(big), data, token)
    hwm_after = proc_status(wf.pid).get("VmHWM", 0)
    # Visible: the first GET of the project page after the answer that lists the file.
    polls = 0
    t_visible = None
    while time.monotonic() - t_resp < 10:
        polls += 1
        page = get_or_empty(wf.url + "/simple/bench-big/")
        if os.path.basename(big).encode() in page:
            t_visible = time.monotonic()
            break
        time.sleep(0.001)
    del data
    u = {
        "status": status, "body": body[:500], "bytes": size,
        "seconds": t_resp - t0, "mb_per_s": size / (t_resp - t0) / MB,
        "body_sent_s": t_sent - t0, "after_last_byte_s": t_resp - t_sent,
        "peak_rss_sampled": sampler.peak, "rss_samples": sampler.samples, "rss_before": rss_before.get("VmRSS", 0),
        "peak_rss_while_body_sent": max((r for t, r in sampler.timeline if t <= t_sent), default=0),
        "peak_rss_after_last_byte": max((r for t, r in sampler.timeline if t > t_sent), default=0),
        "vmhwm_after": hwm_after,
        "visible_after_ms": (t_visible - t_resp) * 1000 if t_visible else None, "visible_polls": polls,
    }
    vis = "never" if t_visible is None else f"{u['visible_after_ms']:.1f} ms"
    log(f"  status {status}: {u['mb_per_s']:.0f} MB/s ({u['seconds']:.2f}s, {u['after_last_byte_s']:.2f}s after the last byte), "
        f"peak RSS {u['peak_rss_sampled'] / MIB:.1f} MiB (while streaming {u['peak_rss_while_body_sent'] / MIB:.1f} MiB), "
        f"listed {vis} after the answer")
    if not keep:
        wf.stop()
        servers.remove(wf)
    return u, status


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "wheelforge"))
    ap.add_argument("--work", default=os.path.join(HERE, ".work"))
    ap.add_argument("--micro", help="wf_micro_bench executable (skipped when absent)")
    ap.add_argument("--duration", type=int, default=4, help="seconds per wrk run")
    ap.add_argument("--rounds", type=int, default=3,
                    help="wrk runs per server, case and connection count (the report shows medians)")
    ap.add_argument("--conns", default="32,256")
    ap.add_argument("--wrk-threads", type=int, default=2)
    ap.add_argument("--pip-python", default="/root/.pyenv/versions/3.12.1/bin/python")
    ap.add_argument("--pip-runs", type=int, default=11)
    ap.add_argument("--download-runs", type=int, default=7)
    ap.add_argument("--micro-min-time", type=float, default=0.3,
                    help="--benchmark_min_time of the micro-benchmarks, in seconds")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when anything failed: a response that is not 200, errors under load, "
                         "an upload refused or never listed, pip resolving differently on the two "
                         "servers (no timing is checked)")
    ap.add_argument("--note", default="", help="free text recorded with the results")
    ap.add_argument("--fresh-data", action="store_true",
                    help="ingest the large corpus again even when an earlier run of the same binary did")
    ap.add_argument("--baseline", help="another wheelforge binary (an earlier build) served from the same "
                    "data as wheelforge-base, taking turns with the others in the load runs and downloads, "
                    "for a before/after table")
    args = ap.parse_args()

    binary = os.path.abspath(args.bin)
    work = os.path.abspath(args.work)
    corpus = os.path.join(work, "corpus")
    static = os.path.join(work, "static")
    run_dir = os.path.join(work, "run")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    conns = [int(c) for c in args.conns.split(",")]
    results = {"machine": machine_info(), "binary": binary, "build_type": build_type(binary),
               "binary_built": datetime.datetime.fromtimestamp(os.path.getmtime(binary), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "note": args.note,
               "settings": {"duration_s": args.duration, "rounds": args.rounds, "conns": conns,
                            "wrk_threads": args.wrk_threads}}
    t_suite = time.monotonic()
    servers = []
    if results["build_type"] != "Release":
        log(f"WARNING: {binary} is a {results['build_type']} build; the numbers will not be representative")

    def save():
        with open(os.path.join(work, "results.json"), "w") as f:
            json.dump(results, f, indent=1, default=str)

    try:
        # -- ingest ------------------------------------------------------------------------------
        cache_root = os.path.join(work, "data")
        os.makedirs(cache_root, exist_ok=True)
        log("ingest the small corpus")
        data_small, s_info = prepare_data(binary, "small", [os.path.join(corpus, "small")], cache_root, run_dir, False)
        log(f"  {s_info['summary']} in {s_info['seconds']:.1f}s{' (earlier run)' if s_info.get('reused') else ''}")
        log("ingest the large corpus and the variant project" + ("" if args.fresh_data else " (kept from an earlier run of the same binary, if any)"))
        data_large, l_info = prepare_data(binary, "large", [os.path.join(corpus, "large"), os.path.join(corpus, "variant")],
                                          cache_root, run_dir, not args.fresh_data)
        log(f"  {l_info['summary']} in {l_info['seconds']:.1f}s{' (earlier run)' if l_info.get('reused') else ''}")
        results["ingest"] = {"small": s_info, "large": l_info}

        # -- startup and idle RSS ---------------------------------------------------------------
        log("startup time and idle RSS (median of 3 starts each)")
        results["startup"] = {
            "small": measure_startup(binary, data_small, os.path.join(run_dir, "wf-startup.log"), 3),
            "large": measure_startup(binary, data_large, os.path.join(run_dir, "wf-startup.log"), 3),
        }
        for k, v in results["startup"].items():
            log(f"  {k}: {v['startup_s'] * 1000:.0f} ms, idle RSS {v['idle_rss'] / MIB:.1f} MiB")
        save()

        # -- uploads: into the small index (the upload's own cost) and into the large one ----------
        big = os.path.join(corpus, "big", "bench_big-1.0.0-py3-none-any.whl")
        big_size = os.path.getsize(big)
        results["big_wheel_bytes"] = big_size
        # Nothing written by the steps before (the ingest of the large corpus, when it ran) is
        # still on its way to the disk while the disk and the uploads are measured.
        os.sync()
        results["disk"] = disk_reference(run_dir, big_size)
        log(f"disk reference: {results['disk']['mb_per_s']:.0f} MB/s for {big_size / MIB:.0f} MiB written and fsynced")
        results["upload"] = {}
        wf_up = Wheelforge(binary, data_small, os.path.join(run_dir, "wf-small-upload.log"), ["--max-upload-size", "8G"])
        results["upload"]["small"], _ = measure_upload(binary, wf_up, big, keep=False, servers=servers)
        save()
        if args.baseline:
            # The same upload into the small index by both binaries, taking turns, each into a
            # fresh copy of an index its own binary ingested.
            baseline = os.path.abspath(args.baseline)
            speeds = {"wheelforge": [], "wheelforge-base": []}
            for i in range(3):
                for n in in_turn(list(speeds), i):
                    b, name = (binary, "small") if n == "wheelforge" else (baseline, "small-base")
                    d, _ = prepare_data(b, name, [os.path.join(corpus, "small")], cache_root, run_dir, True)
                    srv = Wheelforge(b, d, os.path.join(run_dir, f"wf-{name}-upload.log"), ["--max-upload-size", "8G"])
                    u, st = measure_upload(b, srv, big, keep=False, servers=servers)
                    if st not in (200, 201):
                        raise SystemExit(f"upload into {n} failed: {st}")
                    speeds[n].append(u["mb_per_s"])
            results["upload_before_after"] = {n: {"mb_per_s": statistics.median(v), "all": v} for n, v in speeds.items()}
            save()
        wf = Wheelforge(binary, data_large, os.path.join(run_dir, "wf-large.log"), ["--max-upload-size", "8G"])
        results["upload"]["large"], status = measure_upload(binary, wf, big, keep=True, servers=servers)
        if status not in (200, 201):
            log("  upload failed; ingesting the big wheel offline so that downloads can still be measured")
            subprocess.run([binary, "ingest", "--data-dir", data_large, big], check=True, capture_output=True)
            time.sleep(1.5)
        save()

        # -- nginx -------------------------------------------------------------------------------
        ngx1 = Nginx(os.path.join(static, "large"), os.path.join(run_dir, "nginx-1w"), 1).start()
        servers.append(ngx1)
        ngx2 = Nginx(os.path.join(static, "large"), os.path.join(run_dir, "nginx-2w"), 2).start()
        servers.append(ngx2)
        # The same data served by a second wheelforge with one network thread: like for like
        # with nginx's single worker (the first one runs one network thread per core).
        wf1 = Wheelforge(binary, data_large, os.path.join(run_dir, "wf-large-1t.log"),
                         ["--network-threads", "1"]).start()
        servers.append(wf1)
        targets = {"wheelforge": wf, "wheelforge-1t": wf1, "nginx-1w": ngx1, "nginx-2w": ngx2}
        if args.baseline:
            baseline = os.path.abspath(args.baseline)
            results["baseline"] = {"binary": baseline, "build_type": build_type(baseline),
                                   "binary_built": datetime.datetime.fromtimestamp(
                                       os.path.getmtime(baseline), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
            wfb = Wheelforge(baseline, data_large, os.path.join(run_dir, "wf-large-base.log")).start()
            servers.append(wfb)
            targets["wheelforge-base"] = wfb

        with open(os.path.join(static, "large", "manifest.json")) as f:
            manifest = json.load(f)
        small_project = next(n for n in sorted(manifest) if len(manifest[n]) == 10 and n != "flash-attn")
        small_file = min(manifest[small_project], key=lambda x: x["size"])
        big_entry = manifest["bench-big"][0]
        check_same_pages(wf.url, ngx1.url, ["flash-attn", small_project, "bench-big"])

        accept_json = "Accept: application/vnd.pypi.simple.v1+json"
        gz = "Accept-Encoding: gzip"
        cases = [
            (f"root list ({len(manifest):,} projects)", "/simple/", [gz], True),
            (f"small project page ({small_project}, 10 files)", f"/simple/{small_project}/", [gz], True),
            ("variant project page (flash-attn, 400 files)", "/simple/flash-attn/", [gz], True),
            ("variant project JSON", "/simple/flash-attn/", [gz, accept_json], True),
            ("view page /cu128/torch2.8/simple/flash-attn/", "/cu128/torch2.8/simple/flash-attn/", [gz], False),
            (f"small file ({small_file['size']} B)", small_file["url"], [gz], True),
            (".metadata file", small_file["url"] + ".metadata", [gz], True),
        ]
        results["cases"] = []
        log(f"wrk: {len(cases)} cases x {conns} connections, {args.duration}s each")
        for name, path, headers, on_nginx in cases:
            names = ["wheelforge", "wheelforge-1t"] + (["wheelforge-base"] if args.baseline else []) + \
                (["nginx-1w", "nginx-2w"] if on_nginx else [])
            sizes = {}
            for n in names:
                st, hdrs, b = http_get(targets[n].url + path, dict(h.split(": ", 1) for h in headers))
                sizes[n] = {"status": st, "bytes": len(b), "encoding": hdrs.get("Content-Encoding", "")}
                run_wrk(targets[n].url + path, 16, 1, headers, args.wrk_threads)  # warm-up
            entry = {"case": name, "path": path, "responses": sizes, "runs": {}}
            for c in conns:
                rounds = {n: [] for n in names}
                for i in range(args.rounds):
                    for n in in_turn(names, i):
                        r = run_wrk(targets[n].url + path, c, args.duration, headers, args.wrk_threads)
                        rounds[n].append({k: v for k, v in r.items() if k != "raw"})
                        log(f"  {name[:40]:40} {n:13} c={c:<4} {r['rps']:>10.0f} req/s  p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms"
                            + (f"  non-2xx {r['non2xx']}" if r["non2xx"] else "") + (f"  socket errors {r['socket_errors']}" if r["socket_errors"] else ""))
                for n in names:
                    entry["runs"][f"{n}@{c}"] = summarize_rounds(rounds[n])
            results["cases"].append(entry)
            save()

        # -- big file download -------------------------------------------------------------------
        log(f"download of the {big_size / MIB:.0f} MiB wheel (median of {args.download_runs}, curl to /dev/null, "
            "the servers taking turns)")
        dl_targets = {n: srv for n, srv in targets.items() if n != "wheelforge-1t"}
        speeds = {n: [] for n in dl_targets}
        # One untimed download first, so that every server reads its copy from the page cache.
        for srv in dl_targets.values():
            subprocess.run(["curl", "-s", "-o", "/dev/null", srv.url + big_entry["url"]], check=True)
        for i in range(args.download_runs):
            for n in in_turn(list(dl_targets), i):
                out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{size_download} %{time_total}",
                                      dl_targets[n].url + big_entry["url"]], capture_output=True, text=True, check=True).stdout.split()
                if out[0] != "200" or int(out[1]) != big_size:
                    raise SystemExit(f"download from {n} failed: {out}")
                speeds[n].append(big_size / float(out[2]) / MB)
        results["download"] = {n: {"mb_per_s": statistics.median(v), "all": v} for n, v in speeds.items()}
        for n, v in speeds.items():
            log(f"  {n:10} {statistics.median(v):.0f} MB/s  ({', '.join(f'{s:.0f}' for s in v)})")

        results["rss_after_load"] = {"wheelforge": proc_status(wf.pid),
                                     "nginx-1w": tree_rss(ngx1.pid), "nginx-2w": tree_rss(ngx2.pid)}
        log(f"  wheelforge RSS after the load runs: {results['rss_after_load']['wheelforge'].get('VmRSS', 0) / MIB:.1f} MiB "
            f"(VmHWM {results['rss_after_load']['wheelforge'].get('VmHWM', 0) / MIB:.1f} MiB)")
        try:
            with open(os.path.join(run_dir, "wf-large.log"), "rb") as f:
                results["wheelforge_log"] = {"bytes": os.fstat(f.fileno()).st_size, "lines": sum(1 for _ in f)}
        except OSError:
            pass
        save()
        for s in servers:
            s.stop()
        servers.clear()

        # -- pip ---------------------------------------------------------------------------------
        if os.path.exists(args.pip_python):
            python = args.pip_python
        else:
            venv = os.path.join(work, "venv")
            if not os.path.exists(os.path.join(venv, "bin", "python")):
                subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True)
            python = os.path.join(venv, "bin", "python")
        pip_version = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True, env=pip_env()).stdout.split()[1]
        wf_s = Wheelforge(binary, data_small, os.path.join(run_dir, "wf-small.log")).start()
        servers.append(wf_s)
        ngx_s = Nginx(os.path.join(static, "small"), os.path.join(run_dir, "nginx-small"), 1).start()
        servers.append(ngx_s)
        pip_targets = {"wheelforge": wf_s, "nginx-1w": ngx_s}
        results["pip"] = {"python": python, "pip": pip_version, "target": "bench-app"}
        pip_work = os.path.join(run_dir, "pip")
        os.makedirs(pip_work, exist_ok=True)
        for mode in ("install", "download"):
            times = {n: [] for n in pip_targets}
            resolved = {}
            for n, srv in pip_targets.items():  # warm-up (pip's own imports, page cache)
                _, resolved[n] = pip_run(python, srv.url, mode, "bench-app", pip_work)
            for i in range(args.pip_runs):
                for n in in_turn(list(pip_targets), i):
                    t, _ = pip_run(python, pip_targets[n].url, mode, "bench-app", pip_work)
                    times[n].append(t)
            results["pip"][mode] = {n: {"median_s": statistics.median(ts), "all_s": ts, "packages": len(resolved[n])}
                                    for n, ts in times.items()}
            results["pip"][mode]["same_result"] = resolved["wheelforge"] == resolved["nginx-1w"]
            log(f"pip {mode}: " + ", ".join(f"{n} {statistics.median(ts):.2f}s" for n, ts in times.items())
                + f" ({len(resolved['wheelforge'])} packages, same result on both: {results['pip'][mode]['same_result']})")
        save()
        for s in servers:
            s.stop()
        servers.clear()

        # -- micro-benchmarks --------------------------------------------------------------------
        if args.micro and os.path.exists(args.micro):
            log("micro-benchmarks")
            p = subprocess.run([args.micro, "--benchmark_format=json", f"--benchmark_min_time={args.micro_min_time}"],
                               capture_output=True, text=True, check=True)
            doc = json.loads(p.stdout)
            scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
            results["micro"] = [{"name": b["name"], "ns": b["real_time"] * scale[b["time_unit"]],
                                 "cpu_ns": b["cpu_time"] * scale[b["time_unit"]],
                                 "counters": {k: b[k] for k in ("page_bytes", "gzip_bytes") if k in b}}
                                for b in doc["benchmarks"]]
        results["suite_seconds"] = time.monotonic() - t_suite
        save()
    finally:
        for s in servers:
            s.stop()

    md = render_markdown(results)
    with open(os.path.join(work, "results.md"), "w") as f:
        f.write(md)
    print(md)
    if args.strict:
        found = failures(results, want_micro=bool(args.micro))
        for f in found:
            log(f"FAILED: {f}")
        if found:
            return 1
        log("every step answered as it should (--strict)")
    return 0


def get_or_empty(url):
    """The body of a GET, or b"" when the server answers with an error status."""
    try:
        return http_get(url, {"Accept": "application/vnd.pypi.simple.v1+json"})[2]
    except urllib.error.HTTPError:
        return b""


def check_same_pages(wf_url, ngx_url, projects):
    """The two servers list the same files with the same hashes and URLs (JSON pages)."""
    hdr = {"Accept": "application/vnd.pypi.simple.v1+json"}
    for p in projects:
        a = json.loads(http_get(f"{wf_url}/simple/{p}/", hdr)[2])
        b = json.loads(http_get(f"{ngx_url}/simple/{p}/", hdr)[2])
        fa = sorted((f["filename"], f["url"], f["hashes"]["sha256"], f.get("core-metadata", {}).get("sha256")) for f in a["files"])
        fb = sorted((f["filename"], f["url"], f["hashes"]["sha256"], f.get("core-metadata", {}).get("sha256")) for f in b["files"])
        if fa != fb:
            raise SystemExit(f"wheelforge and the static tree disagree about {p}")


# ---- report ------------------------------------------------------------------------------------


def fmt_ms(v):
    return "–" if v is None else (f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}")


def fmt_p99(run):
    """The median p99 and, over several rounds, its range."""
    text = fmt_ms(run.get("p99_ms"))
    if len(run.get("rounds", [])) > 1 and run.get("p99_min_ms") is not None:
        text += f" ({run['p99_min_ms']:.2f}–{run['p99_max_ms']:.2f})"
    return text


def fmt_rps(v):
    return "–" if v is None else f"{v:,.0f}"


def failures(r, want_micro):
    """What went wrong in a run, as sentences; timings are never judged here."""
    out = []
    for case in r.get("cases", []):
        for n, resp in case["responses"].items():
            if resp["status"] != 200:
                out.append(f"{case['case']}: {n} answered {resp['status']}")
        for key, run in case["runs"].items():
            if run["non2xx"] or run["socket_errors"]:
                out.append(f"{case['case']}: {key} had {run['non2xx']} non-2xx answers and "
                           f"{run['socket_errors']} socket errors under load")
    if not r.get("cases"):
        out.append("no load case ran")
    for k in ("small", "large"):
        u = r.get("upload", {}).get(k)
        if u is None:
            out.append(f"no upload into the {k} index")
        elif u["status"] not in (200, 201) or u["visible_after_ms"] is None:
            out.append(f"upload into the {k} index: status {u['status']}, listed: {u['visible_after_ms'] is not None}")
    if "download" not in r:
        out.append("no download was measured")
    for mode in ("install", "download"):
        p = r.get("pip", {}).get(mode)
        if p is None:
            out.append(f"pip {mode} did not run")
        elif not p["same_result"] or p["wheelforge"]["packages"] == 0:
            out.append(f"pip {mode}: {p['wheelforge']['packages']} packages from wheelforge, "
                       f"{p['nginx-1w']['packages']} from the static tree, same result: {p['same_result']}")
    if want_micro and not r.get("micro"):
        out.append("the micro-benchmarks did not run")
    return out


def big_label(r):
    """The big wheel's size as the report names it: "1 GiB" for the real suite."""
    size = r.get("big_wheel_bytes", 2**30)
    return f"{size / 2**30:.0f} GiB" if size >= 2**30 else f"{size / MIB:.0f} MiB"


def verdict(ok):
    return "met" if ok else "**missed**"


def before_after(r):
    """The table of wheelforge against the baseline binary (--baseline): both from the same data
    in the same rounds; the range of each is its run-to-run spread, the noise to read a ratio
    against."""
    b = r["baseline"]
    lines = ["### Before and after: this binary against the baseline", "",
             f"`wheelforge` is `{os.path.relpath(r['binary'], ROOT)}`, `wheelforge-base` is "
             f"`{os.path.relpath(b['binary'], ROOT)}` ({b.get('build_type', 'unknown')} build, linked "
             f"{b.get('binary_built', '?')}), both with their defaults on the same data, taking turns with the "
             "other servers. Requests/s and p99: the median over the rounds, then the lowest and highest round.", "",
             "| case | conns | wheelforge req/s | (range) | wheelforge-base req/s | (range) | after/before | p99 after | p99 before |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def rps_range(run):
        values = [x["rps"] for x in run.get("rounds", []) if x.get("rps")]
        return f"{min(values):,.0f}–{max(values):,.0f}" if values else "–"

    for case in r["cases"]:
        for c in r["settings"]["conns"]:
            w = case["runs"].get(f"wheelforge@{c}", {})
            base = case["runs"].get(f"wheelforge-base@{c}", {})
            if not w or not base:
                continue
            ratio = f"{w['rps'] / base['rps']:.2f}×" if base.get("rps") else "–"
            lines.append(f"| {case['case']} | {c} | {fmt_rps(w.get('rps'))} | {rps_range(w)} | {fmt_rps(base.get('rps'))} | "
                         f"{rps_range(base)} | {ratio} | {fmt_p99(w)} | {fmt_p99(base)} |")
    if "upload_before_after" in r:
        u = r["upload_before_after"]
        lines += ["", f"PUT of the big wheel into the small index, MB/s, median (range) of {len(u['wheelforge']['all'])} "
                  f"taking turns: wheelforge {u['wheelforge']['mb_per_s']:,.0f} ({min(u['wheelforge']['all']):,.0f}–"
                  f"{max(u['wheelforge']['all']):,.0f}), wheelforge-base {u['wheelforge-base']['mb_per_s']:,.0f} "
                  f"({min(u['wheelforge-base']['all']):,.0f}–{max(u['wheelforge-base']['all']):,.0f})."]
    if "download" in r and "wheelforge-base" in r["download"]:
        d = r["download"]
        lines += ["", f"Download of the big wheel, MB/s, median (range): wheelforge {d['wheelforge']['mb_per_s']:,.0f} "
                  f"({min(d['wheelforge']['all']):,.0f}–{max(d['wheelforge']['all']):,.0f}), wheelforge-base "
                  f"{d['wheelforge-base']['mb_per_s']:,.0f} ({min(d['wheelforge-base']['all']):,.0f}–"
                  f"{max(d['wheelforge-base']['all']):,.0f})."]
    lines.append("")
    return lines


def render_markdown(r):
    m = r["machine"]
    lines = [
        f"Run: {m['date']}, commit `{m['commit'][:12]}`, {m['nproc']} cores ({m['cpu']}), {m['mem_gib']} GiB RAM, "
        f"{m['os']}, kernel {m['kernel']}; load average at start {m['loadavg_at_start']}; {m['nginx']}; {m['wrk']}.",
        f"wrk: {r['settings']['wrk_threads']} threads, {r['settings'].get('rounds', 1)} runs of {r['settings']['duration_s']} s per server, "
        "case and connection count (the servers take turns, each round starting with another one); the tables show the "
        "median of each figure over the runs, and the lowest and highest p99 in parentheses. "
        "`Accept-Encoding: gzip` on every request; the client runs on the same cores as the server.",
        f"Server: `{os.path.relpath(r['binary'], ROOT)}` ({r.get('build_type', 'unknown')} build, linked {r.get('binary_built', '?')})"
        + ("" if r.get("build_type") == "Release" else " — **not a Release build: not representative**") + ".",
    ]
    if r.get("note"):
        lines.append(f"Note: {r['note']}")
    lines.append("")
    if "cases" in r:
        lines += ["### Load (requests/s, latency in ms)", "",
                  "| case | conns | wheelforge req/s | p50 | p99 | nginx 1w req/s | p50 | p99 | nginx 2w req/s | p50 | p99 | wf/ngx1 req/s | wf/ngx2 req/s | wf p99 / ngx1 p99 |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for case in r["cases"]:
            for c in r["settings"]["conns"]:
                w = case["runs"].get(f"wheelforge@{c}", {})
                n1 = case["runs"].get(f"nginx-1w@{c}", {})
                n2 = case["runs"].get(f"nginx-2w@{c}", {})
                ratio1 = f"{w['rps'] / n1['rps']:.2f}×" if n1 else "–"
                ratio2 = f"{w['rps'] / n2['rps']:.2f}×" if n2 else "–"
                p99r = f"{w['p99_ms'] / n1['p99_ms']:.2f}" if n1 else "–"
                lines.append(f"| {case['case']} | {c} | {fmt_rps(w.get('rps'))} | {fmt_ms(w.get('p50_ms'))} | {fmt_p99(w)} | "
                             f"{fmt_rps(n1.get('rps'))} | {fmt_ms(n1.get('p50_ms'))} | {fmt_p99(n1)} | "
                             f"{fmt_rps(n2.get('rps'))} | {fmt_ms(n2.get('p50_ms'))} | {fmt_p99(n2)} | {ratio1} | {ratio2} | {p99r} |")
        errs = [(case["case"], k, v["non2xx"], v["socket_errors"]) for case in r["cases"] for k, v in case["runs"].items()
                if v["non2xx"] or v["socket_errors"]]
        if errs:
            lines.append("")
            lines.append("Errors during load: " + "; ".join(f"{c} {k}: {a} non-2xx, {b} socket errors" for c, k, a, b in errs))
        sizes = []
        for case in r["cases"]:
            resp = case["responses"]
            sizes.append(f"{case['case']}: " + ", ".join(f"{n} {v['bytes']:,} B{' gzip' if v['encoding'] == 'gzip' else ''}" for n, v in resp.items()))
        lines += ["", "Response sizes: " + "; ".join(sizes) + "."]
        lines.append("")
        if any(f"wheelforge-1t@{c}" in case["runs"] for case in r["cases"] for c in r["settings"]["conns"]):
            lines += ["### Like for like: one network thread against one nginx worker", "",
                      "The same data served by a second wheelforge started with `--network-threads 1`.", "",
                      "| case | conns | wheelforge 1 thread req/s | p50 | p99 | nginx 1w req/s | p50 | p99 | req/s ratio | p99 ratio |",
                      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for case in r["cases"]:
                for c in r["settings"]["conns"]:
                    w = case["runs"].get(f"wheelforge-1t@{c}", {})
                    n1 = case["runs"].get(f"nginx-1w@{c}", {})
                    if not w:
                        continue
                    ratio = f"{w['rps'] / n1['rps']:.2f}×" if n1 else "–"
                    p99r = f"{w['p99_ms'] / n1['p99_ms']:.2f}" if n1 else "–"
                    lines.append(f"| {case['case']} | {c} | {fmt_rps(w.get('rps'))} | {fmt_ms(w.get('p50_ms'))} | {fmt_p99(w)} | "
                                 f"{fmt_rps(n1.get('rps'))} | {fmt_ms(n1.get('p50_ms'))} | {fmt_p99(n1)} | {ratio} | {p99r} |")
            lines.append("")
    if "cases" in r and "baseline" in r:
        lines += before_after(r)
    other = ["### Downloads, upload, memory, startup, pip", "", "| measurement | wheelforge | nginx 1w | nginx 2w |", "|---|---:|---:|---:|"]
    if "download" in r:
        d = r["download"]
        def dl(n):
            return f"{d[n]['mb_per_s']:,.0f} ({min(d[n]['all']):,.0f}–{max(d[n]['all']):,.0f})"
        other.append(f"| download of the {big_label(r)} wheel, MB/s, median of {len(d['wheelforge']['all'])} (range) | "
                     f"{dl('wheelforge')} | {dl('nginx-1w')} | {dl('nginx-2w')} |")
    if "disk" in r:
        other.append(f"| reference: write + fsync of {big_label(r)} to the same disk (no server) | {r['disk']['mb_per_s']:.0f} MB/s | – | – |")
    for k, label in (("small", "small index (2,000 files)"), ("large", "large index (50,400 files)")):
        u = r.get("upload", {}).get(k)
        if not u:
            continue
        other.append(f"| PUT of the {big_label(r)} wheel into the {label}: status, MB/s (time) | {u['status']}, {u['mb_per_s']:.0f} MB/s "
                     f"({u['seconds']:.2f} s, {u['after_last_byte_s']:.2f} s of it after the last byte) | – | – |")
        other.append(f"| … server RSS before / peak while the body streamed / peak after the last byte (sampled every 5 ms) | "
                     f"{u['rss_before'] / MIB:.1f} / {u['peak_rss_while_body_sent'] / MIB:.1f} / {u['peak_rss_after_last_byte'] / MIB:.1f} MiB | – | – |")
        vis = "not seen" if u["visible_after_ms"] is None else f"{u['visible_after_ms']:.1f} ms (first poll)" if u["visible_polls"] == 1 \
            else f"{u['visible_after_ms']:.1f} ms (poll #{u['visible_polls']})"
        other.append(f"| … from the upload's answer to the file on its project page | {vis} | – | – |")
    if "startup" in r:
        for k in ("small", "large"):
            s = r["startup"][k]
            other.append(f"| startup to `listening`, {k} corpus (median of 3) | {s['startup_s'] * 1000:.0f} ms | – | – |")
            other.append(f"| idle RSS, {k} corpus | {s['idle_rss'] / MIB:.1f} MiB | – | – |")
    if "rss_after_load" in r:
        ra = r["rss_after_load"]
        other.append(f"| RSS after the load runs (VmHWM) | {ra['wheelforge'].get('VmRSS', 0) / MIB:.1f} MiB ({ra['wheelforge'].get('VmHWM', 0) / MIB:.1f} MiB) | "
                     f"{ra['nginx-1w'] / MIB:.1f} MiB (all processes) | {ra['nginx-2w'] / MIB:.1f} MiB (all processes) |")
    if "wheelforge_log" in r:
        lg = r["wheelforge_log"]
        other.append(f"| server log written during the large-index runs (one line per request) | {lg['bytes'] / MIB:,.0f} MiB, {lg['lines']:,} lines | "
                     "access log off | access log off |")
    if "ingest" in r:
        for k in ("small", "large"):
            i = r["ingest"][k]
            m_added = re.match(r"(\d+) added", i["summary"])
            rate = f", {int(m_added.group(1)) / i['seconds']:.0f} files/s" if m_added else ""
            other.append(f"| `wheelforge ingest`, {k} corpus | {i['seconds']:.1f} s ({i['summary']}{rate}){' (earlier run of the same binary)' if i.get('reused') else ''} | – | – |")
    if "pip" in r:
        p = r["pip"]
        for mode, label in (("install", "pip install --dry-run --report"), ("download", "pip download")):
            if mode in p:
                def cell(m):
                    return f"{m['median_s']:.2f} s ({min(m['all_s']):.2f}–{max(m['all_s']):.2f})"

                other.append(f"| {label} bench-app ({p[mode]['wheelforge']['packages']} packages), median of {len(p[mode]['wheelforge']['all_s'])} (range) | "
                             f"{cell(p[mode]['wheelforge'])} | {cell(p[mode]['nginx-1w'])} | – |")
    lines += other + [""]
    if "pip" in r:
        lines.append(f"pip {r['pip']['pip']} ({r['pip']['python']}), `--no-cache-dir`, `PIP_CONFIG_FILE=/dev/null`; the small index (200 projects, 2,000 files).")
        lines.append("")
    if r.get("micro"):
        lines += ["### Micro-benchmarks (Google Benchmark)", "",
                  "| benchmark | wall time per iteration | CPU time per iteration |", "|---|---:|---:|"]

        def t(ns):
            return f"{ns:.0f} ns" if ns < 1e4 else f"{ns / 1e3:.1f} µs" if ns < 1e7 else f"{ns / 1e6:.1f} ms"

        for b in r["micro"]:
            extra = ", ".join(f"{k} {int(v):,}" for k, v in b["counters"].items())
            lines.append(f"| {b['name']}{' (' + extra + ')' if extra else ''} | {t(b['ns'])} | {t(b['cpu_ns'])} |")
        lines.append("")
    lines += goals(r)
    return "\n".join(lines) + "\n"


def goals(r):
    out = ["### Goals", "", "| goal | result | |", "|---|---|---|"]
    if "cases" in r:
        # The goal is worded for page cases; the file cases are held to the same bar in rows
        # of their own.
        def is_file(case):
            return case["case"].split(" (")[0].endswith(" file")

        for who, ref, kind in (("wheelforge", "nginx-1w", "page"), ("wheelforge", "nginx-1w", "file"),
                               ("wheelforge", "nginx-2w", "page"), ("wheelforge", "nginx-2w", "file"),
                               ("wheelforge-1t", "nginx-1w", "page"), ("wheelforge-1t", "nginx-1w", "file")):
            worst_rps, worst_p99, fails, pairs = None, None, [], 0
            for case in r["cases"]:
                if is_file(case) != (kind == "file"):
                    continue
                for c in r["settings"]["conns"]:
                    w, n = case["runs"].get(f"{who}@{c}"), case["runs"].get(f"{ref}@{c}")
                    if not n or not w:
                        continue
                    pairs += 1
                    rr, pr = w["rps"] / n["rps"], w["p99_ms"] / n["p99_ms"]
                    worst_rps = rr if worst_rps is None else min(worst_rps, rr)
                    worst_p99 = pr if worst_p99 is None else max(worst_p99, pr)
                    if rr < 1.0 or pr > 1.0:
                        fails.append(f"{case['case'].split(' (')[0]} @{c}")
            if worst_rps is None:
                continue
            subject = "" if who == "wheelforge" else " (wheelforge with 1 network thread)"
            what = "every page case" if kind == "page" else "every file case (small file, .metadata; not in the goal's wording)"
            out.append(f"| {what} ≥ 1.0× {ref} req/s and p99 ≤ {ref}'s (32 and 256 conns){subject} | lowest req/s ratio {worst_rps:.2f}×, "
                       f"highest p99 ratio {worst_p99:.2f}; {len(fails)} of {pairs} case/conns pairs miss{': ' + ', '.join(fails) if fails else ''} | {verdict(not fails)} |")
    if "download" in r:
        d = r["download"]
        for ref in ("nginx-1w", "nginx-2w"):
            ratio = d["wheelforge"]["mb_per_s"] / d[ref]["mb_per_s"]
            out.append(f"| download ≥ 0.9× {ref} throughput | {ratio:.2f}× | {verdict(ratio >= 0.9)} |")
    for k in ("small", "large"):
        u = r.get("upload", {}).get(k)
        if not u:
            continue
        idx = f"{k} index"
        out.append(f"| {big_label(r)} upload ≥ 200 MB/s ({idx}) | {u['mb_per_s']:.0f} MB/s | {verdict(u['status'] in (200, 201) and u['mb_per_s'] >= 200)} |")
        out.append(f"| peak server RSS during the upload < 64 MiB ({idx}) | {u['peak_rss_sampled'] / MIB:.1f} MiB "
                   f"({u['peak_rss_while_body_sent'] / MIB:.1f} MiB while streaming) | {verdict(u['peak_rss_sampled'] < 64 * MIB)} |")
        vis = u["visible_after_ms"]
        out.append(f"| listed within 100 ms of the upload's answer ({idx}) | {'not seen' if vis is None else f'{vis:.1f} ms'} | "
                   f"{verdict(vis is not None and vis < 100)} |")
    if "startup" in r:
        s = r["startup"]["large"]
        out.append(f"| large-corpus startup < 1 s | {s['startup_s'] * 1000:.0f} ms | {verdict(s['startup_s'] < 1)} |")
        out.append(f"| large-corpus idle RSS < 100 MiB | {s['idle_rss'] / MIB:.1f} MiB | {verdict(s['idle_rss'] < 100 * MIB)} |")
    if "pip" in r and "install" in r["pip"]:
        p = r["pip"]["install"]
        ok = p["wheelforge"]["median_s"] < p["nginx-1w"]["median_s"]
        out.append(f"| pip install --dry-run faster against wheelforge than against the static tree | {p['wheelforge']['median_s']:.3f} s vs "
                   f"{p['nginx-1w']['median_s']:.3f} s | {verdict(ok)} |")
    out.append("")
    return out


if __name__ == "__main__":
    sys.exit(main())
