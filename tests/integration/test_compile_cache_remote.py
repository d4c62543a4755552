"""The compile cache where the builds run elsewhere (docs/runner.md, "The compile cache"): in
containers the recipe's cache directory is mounted into the build's container, on Slurm the
nodes see it (here under the shared builds directory); the compiler wrappers there find ccache
and the compilers where the build runs. A forced rebuild of a cell finds its C compile in the
cache (a hit in the job's statistics); where ccache is missing, the build goes on without the
cache and the log and the job's JSON say why.

The builds are test_runner.py's fake ones, with one C file compiled by `cc` in front (no nvcc:
a C compile through ccache proves where the cache lives as well as a CUDA one would).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import test_runner as tr
from test_container_executor import start_server, write_container_config

TIMEOUT = 240.0
HELLO = "int wf_hello(void) { return 42; }\n"
HIREDIS = Path("/usr/lib/x86_64-linux-gnu/libhiredis.so.0.14")


def compile_command() -> str:
    """The compile the cache answers the second time (hello.c of fake_source()), then the fake
    wheel."""
    return "cc -O2 -c hello.c -o hello.o && {python} fake_wheel.py {out}"


def fake_source(h) -> Path:
    source = tr.write_fake_source(h.path("src", "fake"))
    (source / "hello.c").write_text(HELLO)
    return source


def require_ccache() -> Path:
    found = shutil.which("ccache")
    if found is None:
        pytest.skip("ccache is not installed")
    return Path(found)


def cache_stats(admin: tr.Admin, job_id: int) -> dict:
    job = admin.job(job_id)
    assert job["state"] == "succeeded", admin.describe(job)
    stats = job.get("compile_cache")
    assert stats is not None, admin.describe(job)
    return stats


def build_twice(admin: tr.Admin, recipe: str) -> tuple[int, int]:
    first = admin.submit(recipe)["jobs"][0]["id"]
    admin.wait_jobs([first], TIMEOUT)
    second = admin.submit(recipe, force=True)["jobs"][0]["id"]
    admin.wait_jobs([second], TIMEOUT)
    return first, second


# One engine: podman and docker take the same mounts from the same code (container.cpp), and
# each engine's session costs the group a daemon and an image.
@pytest.mark.parametrize("container_engine_session", ["podman"], indirect=True)
def test_containers_mount_the_cache_and_a_rebuild_hits_it(container_engine, harness):
    """The image gets ccache from the host (bind mounts of the Debian binary and the one library
    the image lacks): the cache directory is mounted, the rebuild's compile is a hit. A recipe
    whose PATH has no ccache builds without the cache and says why."""
    ccache = require_ccache()
    if not HIREDIS.exists():
        pytest.skip(f"{HIREDIS} (ccache's) is not here to mount")
    engine, h = container_engine, harness
    source = fake_source(h)
    config = h.root / "wheelforge.toml"
    write_container_config(config, engine, {
        "cached": tr.fake_recipe("wf-fake-cached", compile_command(),
                                 local_version_variable="WF_FAKE_LOCAL_VERSION"),
        # /usr/local/bin (where ccache is mounted) is not on this recipe's PATH.
        "bare": tr.fake_recipe("wf-fake-bare", compile_command(),
                               env={"PATH": "/usr/bin:/bin"}),
    }, source, mounts=[f"{engine.cuda_home}:/usr/local/cuda", f"{ccache}:/usr/local/bin/ccache",
                       f"{HIREDIS}:{HIREDIS}"])
    _server, admin = start_server(h, config)

    first, second = build_twice(admin, "cached")
    one, two = cache_stats(admin, first), cache_stats(admin, second)
    directory = h.data_dir / "builds" / "ccache" / "cached"
    assert one["state"] == "used" and one["directory"] == str(directory), one
    assert one["misses"] == 1 and one["hits"] == 0, one
    assert two["state"] == "used" and two["hits"] == 1 and two["misses"] == 0, two
    log = admin.log_text(second)
    assert f"==> [building] compile cache {directory} (ccache where the {engine.kind} build runs" in log, log[-3000:]
    assert "==> [building] compile cache: 1 hit, 0 misses" in log, log[-3000:]
    # Written in the container, through the mount: the server's directory holds the result.
    assert any(p.is_file() for p in directory.rglob("*R")), sorted(directory.rglob("*"))[:20]

    bare = admin.submit("bare")["jobs"][0]["id"]
    admin.wait_jobs([bare], TIMEOUT)
    stats = cache_stats(admin, bare)
    reason = f"ccache is not installed where the {engine.kind} build runs (not on its PATH)"
    assert stats["state"] == "unavailable" and stats["reason"] == reason, stats
    assert (f"==> [building] compile cache unavailable, built without it: {reason}\n"
            in admin.log_text(bare)), admin.log_text(bare)[-3000:]


def test_slurm_nodes_use_the_shared_cache_and_a_rebuild_hits_it(slurm_cluster, harness):
    """The cache lives in a configured shared directory (`[build] compile_cache`) the node
    sees; the rebuild's compile, in another batch job, is a hit."""
    require_ccache()
    tr.require_tools(nvcc=False)
    h = harness
    shared = h.path("shared-ccache")
    shared.mkdir(parents=True, exist_ok=True)
    config = tr.write_config(
        h.root / "wheelforge.toml",
        {"cached": tr.fake_recipe("wf-fake-slurm-cached", compile_command(), cpus=1,
                                  local_version_variable="WF_FAKE_LOCAL_VERSION")},
        fake_source=fake_source(h),
        executor={"kind": "slurm", "partition": slurm_cluster.partition, "idle_timeout": "2m"},
        compile_cache=str(shared),
    )
    h.token("upload")
    server = h.serve("--config", str(config))
    tr.upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))
    admin = tr.Admin(server, h.token("admin"))
    first, second = build_twice(admin, "cached")
    one, two = cache_stats(admin, first), cache_stats(admin, second)
    assert one["state"] == "used" and one["directory"] == str(shared / "cached"), one
    assert one["misses"] == 1 and one["hits"] == 0, one
    assert two["state"] == "used" and two["hits"] == 1 and two["misses"] == 0, two
    log = admin.log_text(second)
    assert "ccache where the slurm build runs" in log and "batch job" in log, log[-3000:]
