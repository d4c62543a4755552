#!/usr/bin/env python3
"""Wall time of one build matrix on the local executor and on a single-node Slurm cluster, in
the same run: the CUDA test package of tests/integration/test_runner.py (a .cu file compiled
by nvcc, an in-tree PEP 517 backend) over 2 Pythons x 2 torch series (stand-in torch wheels) on
CUDA 13.0, 4 cells, each recipe build limited to one CPU (`cpus = 1`) so that on a 2-core
machine both executors run two cells at a time.

Each executor gets a fresh data directory and server (so each prepares its own build
environments), the cluster is the private one of tests/integration/slurm_cluster.py (munged,
slurmctld and slurmd from Debian's packages, started and stopped by PID). Prints one line per
executor with the wall time from submission to the last job's end, and each job's time; judges
no timing, and fails (exit 1) when a job does not succeed. See bench/README.md, "Build runner:
local and Slurm". `--smoke` (CI) builds one cell (Python 3.12, torch 2.8) on each executor
instead of four: that the benchmark still runs, not what it measures.

`--compile-cache` compares the compile cache instead of the executors: the matrix on the local
executor twice, with `[build] compile_cache = "off"` and with the cache (a fresh one), the
package's backend compiling kernel.cu in its own `nvcc -c` call (test_compile_cache.py's) that
writes down how long it took; prints the matrix's total compile time (the sum of those calls) and each
job's cache hits and misses. With `--smoke`, two cells (Pythons 3.11 and 3.12, torch 2.8).

    WHEELFORGE_BIN=build/wheelforge /usr/bin/python3 bench/runner_matrix.py [--smoke] [--keep]
        [--compile-cache]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

import test_compile_cache as tcc  # noqa: E402
import test_runner as tr  # noqa: E402
from conftest import Harness  # noqa: E402
from slurm_cluster import SlurmCluster, missing_programs  # noqa: E402

TIMEOUT = 1800.0


def iso_seconds(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


FULL_MATRIX = {"python": ["3.11", "3.12"], "torch": ["2.8", "2.9"], "cuda": ["13.0"]}
SMOKE_MATRIX = {"python": ["3.12"], "torch": ["2.8"], "cuda": ["13.0"]}
CACHE_SMOKE_MATRIX = {"python": ["3.11", "3.12"], "torch": ["2.8"], "cuda": ["13.0"]}


def run_matrix(binary: Path, root: Path, executor: dict | None, matrix: dict,
               compile_cache: str | None = None) -> dict:
    """With `compile_cache` ("off", or "on" for the default cache), the two-step backend."""
    root.mkdir(parents=True)
    h = Harness(binary, root)
    try:
        source = tr.write_demo_package(h.path("src", "wf-demo-ext"))
        times = h.root / "compile-times.txt"
        if compile_cache is not None:
            tcc.write_two_step_backend(source)
        recipe = {
            "project": "wf-demo-ext",
            "source": {"path": str(source)},
            "command": "{python} -m pip wheel --no-build-isolation --no-deps -w {out} {src}",
            "arch_variable": "TORCH_CUDA_ARCH_LIST",
            "arch_value": "8.0",
            "local_version_variable": "WF_DEMO_LOCAL_VERSION",
            "import_check": "import wf_demo_ext; assert wf_demo_ext.check()",
            "gb_per_job": 1.0,
            "timeout": "20m",
            "build_requires": [],
            "cpus": 1,
            "matrix": matrix,
        }
        if compile_cache is not None:
            recipe["env"] = {"WF_DEMO_COMPILE_TIMES": str(times)}
        build = {"max_concurrent_jobs": 4}
        if executor:
            build["executor"] = executor
        if compile_cache == "off":
            build["compile_cache"] = "off"
        config = tr.write_config(h.root / "wheelforge.toml", {"demo": recipe}, **build)
        h.token("upload")
        server = h.serve("--config", str(config))
        admin = tr.Admin(server, h.token("admin"))
        tr.upload_stand_in_torch(h, server)
        began = time.monotonic()
        created = admin.submit("demo")
        ids = [j["id"] for j in created["jobs"]]
        jobs = admin.wait_jobs(ids, TIMEOUT)
        wall = time.monotonic() - began
        failed = [admin.describe(j, 1500) for j in jobs.values() if j["state"] != "succeeded"]
        per_job = {
            f"py{j['python']}-torch{j['torch']}": iso_seconds(j["finished_at"]) - iso_seconds(j["started_at"])
            for j in jobs.values() if j["finished_at"] and j["started_at"]
        }
        compile_seconds = 0.0
        caches = {}
        if compile_cache is not None:
            if times.exists():
                compile_seconds = sum(float(t) for t in times.read_text().split())
            for j in jobs.values():
                c = j.get("compile_cache") or {}
                caches[f"py{j['python']}-torch{j['torch']}"] = (c.get("hits", 0), c.get("misses", 0))
        return {"wall": wall, "jobs": per_job, "failed": failed, "compile": compile_seconds,
                "caches": caches}
    finally:
        h.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--smoke", action="store_true",
                        help="one cell per executor instead of four (CI: the benchmark runs)")
    parser.add_argument("--compile-cache", action="store_true",
                        help="the local executor without and with the compile cache")
    args = parser.parse_args()
    binary = Path(os.environ.get("WHEELFORGE_BIN", ROOT / "build" / "wheelforge")).resolve()
    if not binary.is_file():
        print(f"no wheelforge binary at {binary} (set WHEELFORGE_BIN)", file=sys.stderr)
        return 2
    if args.compile_cache:
        return compare_compile_cache(binary, args)
    missing = missing_programs()
    if missing or not tr.NVCC.exists() or not all(p.exists() for p in tr.PYTHONS.values()):
        print(f"needs Slurm ({', '.join(missing) or 'ok'}), nvcc at {tr.NVCC} and the pyenv "
              f"Pythons {', '.join(map(str, tr.PYTHONS.values()))}", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="wf-bench-matrix-"))
    os.chmod(root, 0o755)
    cluster = SlurmCluster(root / "cluster")
    cluster.start()
    os.environ["SLURM_CONF"] = str(cluster.conf_path)
    results = {}
    try:
        matrix = SMOKE_MATRIX if args.smoke else FULL_MATRIX
        results["local"] = run_matrix(binary, root / "local", None, matrix)
        results["slurm"] = run_matrix(binary, root / "slurm",
                                      {"kind": "slurm", "partition": cluster.partition}, matrix)
    finally:
        cluster.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    cells = "1-cell (smoke)" if args.smoke else "4-cell"
    print(f"# {cells} matrix of the CUDA test package, cells 1 CPU each; {platform.node()}, "
          f"{os.cpu_count()} CPUs, {platform.platform()}; cluster node {cluster.node_line}")
    print("| executor | wall time | per job (start to end) |")
    print("|---|---|---|")
    for name, r in results.items():
        jobs = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(r["jobs"].items()))
        print(f"| {name} | {r['wall']:.1f}s | {jobs} |")
    for name, r in results.items():
        for f in r["failed"]:
            print(f"\n{name}: a job did not succeed:\n{f}")
    return 1 if any(r["failed"] for r in results.values()) else 0


def compare_compile_cache(binary: Path, args) -> int:
    if not tr.NVCC.exists() or not all(p.exists() for p in tr.PYTHONS.values()) or \
            shutil.which("ccache") is None:
        print(f"needs ccache, nvcc at {tr.NVCC} and the pyenv Pythons "
              f"{', '.join(map(str, tr.PYTHONS.values()))}", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="wf-bench-ccache-"))
    matrix = CACHE_SMOKE_MATRIX if args.smoke else FULL_MATRIX
    results = {}
    try:
        for mode in ("off", "on"):
            results[mode] = run_matrix(binary, root / mode, None, matrix, compile_cache=mode)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    cells = len(matrix["python"]) * len(matrix["torch"]) * len(matrix["cuda"])
    print(f"# {cells}-cell matrix of the CUDA test package on the local executor, cells 1 CPU "
          f"each; {platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}")
    print("| compile cache | total compile time | wall time | per job: cache hits/misses |")
    print("|---|---|---|---|")
    for mode, r in results.items():
        caches = ", ".join(f"{k} {h}/{m}" for k, (h, m) in sorted(r["caches"].items()))
        print(f"| {mode} | {r['compile']:.1f}s | {r['wall']:.1f}s | {caches} |")
    for mode, r in results.items():
        for f in r["failed"]:
            print(f"\ncompile cache {mode}: a job did not succeed:\n{f}")
    return 1 if any(r["failed"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
