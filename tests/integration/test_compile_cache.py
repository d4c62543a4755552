"""The compile cache (docs/runner.md, "The compile cache"): the cells of one torch x CUDA
combination and the rebuilds of a recipe share compiled objects through ccache.

wf-demo-ext (test_runner.py's CUDA package) is built here with a backend that compiles kernel.cu
with `nvcc -c` (through $PYTORCH_NVCC when set, as torch's cpp_extension does) and links it in a
second call (appending the compile's seconds to $WF_DEMO_COMPILE_TIMES when that is set).
kernel.cu includes no Python header, so its object is the same for every Python.
One server and recipe serve three phases: a build of two Pythons of one cell, run one after the
other (the second cell's nvcc compile is a cache hit, and its wheel passes the smoke test); a
forced rebuild after a change to a Python file (nothing is compiled again); a forced rebuild
after a change to kernel.cu (a miss).

The `torch` wheels are STAND-INS (see test_runner.py): tiny packages named torch.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from test_runner import (
    DEMO_BACKEND,
    DEMO_KERNEL,
    MATRIX_BUILD_TIMEOUT,
    PYTHONS,
    Admin,
    require_tools,
    upload_stand_in_torch,
    write_config,
    write_demo_package,
)

PROJECT = "wf-demo-ext"
TORCH = "2.9"

# The demo backend's one-step `nvcc -shared` (a link, which no cache answers) split in a compile
# and a link, both through $PYTORCH_NVCC when the runner sets it (as torch's cpp_extension runs
# its nvcc steps).
ONE_STEP = '''    command += ["-o", library, os.path.join(HERE, "kernel.cu")]
    print("wf_backend: " + " ".join(command), flush=True)
    subprocess.run(command, check=True)
    return library
'''
TWO_STEPS = '''    compiler = os.environ.get("PYTORCH_NVCC") or nvcc
    obj = os.path.join(build_dir, "kernel.o")
    compile_command = [compiler, "-c"] + command[2:] + ["-o", obj, "kernel.cu"]
    print("wf_backend: " + " ".join(compile_command), flush=True)
    import time
    began = time.monotonic()
    subprocess.run(compile_command, check=True, cwd=HERE)
    if os.environ.get("WF_DEMO_COMPILE_TIMES"):
        with open(os.environ["WF_DEMO_COMPILE_TIMES"], "a") as f:
            f.write("%.3f\\n" % (time.monotonic() - began))
    link = [compiler, "-shared"] + [a for a in command if a.startswith("-gencode")] + ["-o", library, obj]
    subprocess.run(link, check=True)
    return library
'''

def write_two_step_backend(source: Path) -> None:
    """Replaces the demo package's backend (write_demo_package) with the two-step one."""
    assert ONE_STEP in DEMO_BACKEND
    (source / "wf_backend.py").write_text(DEMO_BACKEND.replace(ONE_STEP, TWO_STEPS))


PYTHON_CHANGE = "\n# A change to a Python file only.\nPYTHON_ONLY_CHANGE = 1\n"
KERNEL_CHANGE = '\nextern "C" int wf_demo_revision() { return 2; }\n'


def cache_of(admin: Admin, job: dict) -> dict:
    stats = job.get("compile_cache")
    assert stats is not None, f"the job has no compile cache statistics\n{admin.describe(job)}"
    assert stats["state"] == "used", admin.describe(job)
    return stats


def build(admin: Admin, pythons: list[str], force: bool) -> list[dict]:
    created = admin.submit("demo", "1.0.0", {"python": pythons}, force=force)
    ids = [j["id"] for j in created["jobs"]]
    done = admin.wait_jobs(ids, MATRIX_BUILD_TIMEOUT)
    jobs = [done[i] for i in ids]
    failed = [admin.describe(j) for j in jobs if j["state"] != "succeeded"]
    assert not failed, "\n\n".join(failed)
    # In the order they ran.
    return sorted(jobs, key=lambda j: j["started_at"])


def test_cells_and_rebuilds_share_compiled_objects(harness):
    require_tools(nvcc=True)
    if shutil.which("ccache") is None:
        pytest.skip("ccache is not installed")
    h = harness
    h.token("upload")
    source = write_demo_package(h.path("src", PROJECT))
    write_two_step_backend(source)
    pythons = sorted(PYTHONS)[:2]
    config = write_config(
        h.root / "wheelforge.toml",
        {"demo": {
            "project": PROJECT,
            "source": {"path": str(source)},
            "arch_variable": "TORCH_CUDA_ARCH_LIST",
            "arch_value": "8.0",
            "local_version_variable": "WF_DEMO_LOCAL_VERSION",
            "import_check": "import wf_demo_ext; assert wf_demo_ext.check()",
            "gb_per_job": 1.0,
            "timeout": "10m",
            "build_requires": [],
            "matrix": {"python": pythons, "torch": [TORCH], "cuda": ["13.0"]},
        }},
        # One job at a time: the second Python runs after the first, as admission orders the
        # cells of a combination when it cannot run them all at once.
        max_concurrent_jobs=1,
        compile_cache_size="1G",
    )
    server = h.serve("--config", str(config))
    upload_stand_in_torch(h, server, versions=(f"{TORCH}.0+cu130",))
    admin = Admin(server, h.token("admin"))

    # 1. Two Pythons of one cell: the first compiles kernel.cu, the second finds it.
    first, second = build(admin, pythons, force=False)
    one, two = cache_of(admin, first), cache_of(admin, second)
    assert one["cuda_misses"] == 1 and one["cuda_hits"] == 0, admin.describe(first)
    assert two["cuda_hits"] == 1 and two["cuda_misses"] == 0, admin.describe(second)
    assert two["misses"] == 0, admin.describe(second)
    assert two["directory"] == str(h.root / "data" / "builds" / "ccache" / "demo") or \
        two["directory"].endswith("/builds/ccache/demo"), two
    assert 0 < two["size_bytes"] <= two["bound_bytes"] == 1 << 30, two
    log = admin.log_text(second["id"])
    assert re.search(r"==> \[building\] compile cache: \d+ hits?, 0 misses \(CUDA: 1 hit, 0 misses\)",
                     log), log[-3000:]

    # 2. A change to a Python file only: the forced rebuild compiles nothing again.
    init = source / "wf_demo_ext" / "__init__.py"
    init.write_text(init.read_text() + PYTHON_CHANGE)
    (rebuilt,) = build(admin, pythons[:1], force=True)
    stats = cache_of(admin, rebuilt)
    assert stats["misses"] == 0 and stats["cuda_hits"] == 1, admin.describe(rebuilt)

    # 3. A change to kernel.cu: compiled again.
    (source / "kernel.cu").write_text(DEMO_KERNEL + KERNEL_CHANGE)
    (changed,) = build(admin, pythons[:1], force=True)
    stats = cache_of(admin, changed)
    assert stats["cuda_misses"] == 1 and stats["cuda_hits"] == 0, admin.describe(changed)

    # The metrics count what the finished jobs found.
    jobs = [cache_of(admin, admin.job(j["id"])) for j in (first, second, rebuilt, changed)]
    metrics = server.get("/metrics").text
    hits, misses = sum(j["hits"] for j in jobs), sum(j["misses"] for j in jobs)
    assert f"wheelforge_build_compile_cache_hits_total {hits}\n" in metrics, metrics[-2000:]
    assert f"wheelforge_build_compile_cache_misses_total {misses}\n" in metrics, metrics[-2000:]
    assert 'wheelforge_build_compile_cache_bytes{recipe="demo"} ' in metrics, metrics[-2000:]
