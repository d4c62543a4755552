"""The container executor against the real engines (container_engine.py: podman, and docker
through a private dockerd, each on the local Debian 12 test image), and Slurm + containers on
the single-node cluster (slurm_cluster.py).

A wheelforge server whose [build.executor] is kind = "podman" or "docker" builds the CUDA test
package of tests/integration/test_runner.py (a .cu file compiled by nvcc, against the stand-in
torch from the server's own view) in the image, with the host's CUDA toolkit mounted
read-only as its only other host path: the interpreter is the image's Python 3.11, the wheel
is smoke-tested in the image and then installed by pip on the host and run. The build reports
what it sees (its limits, the host's paths), a running build names its image, digest and
engine command line (log, job JSON, job page), a cancelled build's container must be gone, and a
Slurm job's commands run in containers too.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
from pathlib import Path

import pytest

import test_runner as tr
from test_ui import basic
from wfhelpers import PIP_PYTHONS, clean_env, pip_args, run, wait_for

TIMEOUT = 400.0
IMAGE_PYTHON = "/usr/bin/python3"  # Python 3.11 in the Debian 12 test image
IMAGE_CUDA = "/usr/local/cuda"

# Printed by the build before it runs: its limits and what it sees of the host.
PROBE = (
    'echo "probe: memory=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)'
    ' quota=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) period=$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)'
    ' container=$(test -e /run/.containerenv -o -e /.dockerenv && echo yes || echo no)'
    ' host_config=$(test -e {config} && echo visible || echo absent)'
    ' host_blobs=$(test -e {blobs} && echo visible || echo absent)'
    ' canary=[$WF_IT_SERVER_ONLY_CANARY]"'
)


def write_container_config(path: Path, engine, recipes: dict, source: Path | None = None,
                           **executor) -> Path:
    """[build] with the image's Python and the host's CUDA toolkit mounted at /usr/local/cuda,
    [build.executor] for `engine`, [build.images], then the recipes."""
    v = tr._toml_value
    lines = ["[build]", 'memory_reserve = "1G"', "max_concurrent_jobs = 2", "oom_retries = 1",
             "", "[build.python]", f'"3.11" = {v(IMAGE_PYTHON)}',
             "", "[build.cuda]", f'"13.0" = {v(IMAGE_CUDA)}', "", "[build.executor]"]
    settings = {"kind": engine.kind, "mounts": [f"{engine.cuda_home}:{IMAGE_CUDA}"],
                "gpus": "none", **executor}
    lines += [f"{k} = {v(val)}" for k, val in settings.items()]
    lines += ["", "[build.images]", f'"13.0" = {v(engine.image)}']
    for name, recipe in recipes.items():
        lines += ["", f"[recipes.{name}]"]
        for key, value in recipe.items():
            if key == "matrix":
                continue
            if key == "source" and value == {"path": "<fake>"}:
                value = {"path": str(source)}
            lines.append(f"{tr._toml_key(key)} = {v(value)}")
        lines += ["", f"[recipes.{name}.matrix]"]
        lines += [f"{k} = {v(val)}" for k, val in recipe["matrix"].items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def job_label(h, job_id: int) -> str:
    """The label the executor gives every container of a job (from its WHEELFORGE_JOB tag)."""
    tag = f"{h.data_dir}/builds#{job_id}"
    return "org.wheelforge.job=" + hashlib.sha256(tag.encode()).hexdigest()[:16]


def containers_of(engine, h, job_id: int) -> list[str]:
    proc = engine.cmd("ps", "--all", "--quiet", "--filter", f"label={job_label(h, job_id)}")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def require_cuda(engine) -> None:
    if engine.cuda_home is None or not (engine.cuda_home / "bin" / "nvcc").exists():
        pytest.skip(f"no CUDA toolkit at {tr.CUDA_HOME} to mount into the container")


def start_server(h, config: Path):
    h.token("upload")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(tr.SERVER_CANARY, "1")
        server = h.serve("--config", str(config))
    tr.upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))
    return server, tr.Admin(server, h.token("admin"))


def test_cuda_package_is_built_and_smoke_tested_in_the_image(container_engine, harness):
    engine, h = container_engine, harness
    require_cuda(engine)
    source = tr.write_demo_package(h.path("src", "wf-demo-ext"))
    config = h.root / "wheelforge.toml"
    probe = PROBE.format(config=config, blobs=h.data_dir / "blobs")
    write_container_config(config, engine, {
        "demo": {
            "project": "wf-demo-ext",
            "source": {"path": str(source)},
            "command": probe + "; {python} -m pip wheel --no-build-isolation --no-deps -w {out} {src}",
            "arch_variable": "TORCH_CUDA_ARCH_LIST",
            "arch_value": "8.0",
            "local_version_variable": "WF_DEMO_LOCAL_VERSION",
            "import_check": "import wf_demo_ext; assert wf_demo_ext.check()",
            "gb_per_job": 1.0,
            "timeout": "10m",
            "build_requires": [],
            "matrix": {"python": ["3.11"], "torch": ["2.8"], "cuda": ["13.0"]},
        },
    })
    server, admin = start_server(h, config)
    job = admin.run_one("demo", timeout=TIMEOUT)
    assert job["state"] == "succeeded", admin.describe(job)
    # Built in the image, analyzed on the server: the manylinux tag of the image's glibc floor.
    tag = re.fullmatch(r"wf_demo_ext-1\.0\.0\+cu130torch2\.8-cp311-cp311-manylinux_2_(\d+)_x86_64"
                       r"(\.manylinux2014_x86_64)?\.whl", job["wheel"])
    assert tag, job
    floor = re.fullmatch(r"2\.(\d+)", job["glibc_floor"] or "")
    assert floor and int(tag.group(1)) == max(17, int(floor.group(1))), job
    # The image's interpreter and the mounted toolkit, as the verification found them.
    assert job["toolchain"]["python"]["path"] == IMAGE_PYTHON, job
    assert job["toolchain"]["python"]["version"].startswith("3.11."), job
    assert job["toolchain"]["nvcc"]["path"] == f"{IMAGE_CUDA}/bin/nvcc", job

    log = admin.log_text(job["id"])
    probe_line = re.search(r"^probe: (.*)$", log, re.M)
    assert probe_line, log[-4000:]
    seen = dict(item.split("=", 1) for item in probe_line.group(1).split())
    assert seen["container"] == "yes", seen
    assert seen["host_config"] == "absent" and seen["host_blobs"] == "absent", seen
    assert seen["canary"] == "[]", seen
    # The limits are the job's grant: its memory, and a CPU per compile job and thread (at
    # most the host's).
    grant_mib = job["max_jobs"] * job["nvcc_threads"] * 1024
    assert int(seen["memory"]) == grant_mib * 1024 * 1024, (seen, job)
    cpus = min(job["max_jobs"] * job["nvcc_threads"], len(os.sched_getaffinity(0)))
    assert int(seen["quota"]) == cpus * int(seen["period"]), (seen, job)

    # The wheel from the image works on the host: pip installs it from the view, it runs.
    python = PIP_PYTHONS["23.2.1"]
    target, neutral = h.path("pip-target"), h.path("neutral-cwd")
    proc = run([python, "-m", "pip", "install", "--target", target,
                *pip_args(f"{server.url}/cu130/torch2.8/simple/"), "wf-demo-ext==1.0.0"],
               timeout=tr.PIP_TIMEOUT, cwd=neutral)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check = run([python, "-c", "import json, wf_demo_ext; print(json.dumps([wf_demo_ext.check(), "
                 "wf_demo_ext.BUILD_INFO['cuda_home']]))"],
                timeout=60, cwd=neutral, env=clean_env(PYTHONPATH=str(target)))
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout) == [True, IMAGE_CUDA]
    assert not containers_of(engine, h, job["id"]), "a container of the finished job is left"


def check_provenance(engine, admin, job_id: int) -> None:
    """The job names what runs its build: the image, its digest as the engine reports it, and
    the engine's command line, in its log, its JSON and its page."""
    inspected = engine.cmd("image", "inspect", "--format",
                           "{{.Id}} {{range .RepoDigests}}{{.}} {{end}}", engine.image)
    assert inspected.returncode == 0, inspected.stderr
    words = inspected.stdout.split()
    digest = words[1].split("@", 1)[1] if len(words) > 1 else words[0]
    if not digest.startswith("sha256:"):
        digest = "sha256:" + digest
    container = admin.job(job_id)["container"]
    assert container is not None, admin.job(job_id)
    assert container["image"] == engine.image and container["digest"] == digest, container
    command = container["command"]
    assert command.startswith(f"{engine.cli} ") and " run --rm --init " in command, command
    # The recipe's command, after the compile cache's check of the container (docs/runner.md).
    assert f" {engine.image} /bin/sh -c '" in command, command
    assert command.endswith("unset PYTORCH_NVCC; fi\nsh ./hang.sh'"), command
    # A variable that looks like a secret is masked; the others are as the build gets them.
    assert "WF_FAKE_API_TOKEN=***" in command and "s3cr3t" not in command, command
    assert "WF_FAKE_PROJECT=wf-fake-hang" in command, command
    log = admin.log_text(job_id)
    assert f"==> [{engine.kind}] image {engine.image} ({digest}): {command}\n" in log, log[-3000:]
    page = admin.server.get(f"/jobs/{job_id}", basic(admin.token))
    assert page.status == 200, page.status
    assert f"<dt>Image</dt><dd class=\"filename\">{engine.image} ({digest})</dd>" in page.text, (
        page.text[:3000])
    assert "<dt>Container command</dt>" in page.text and "WF_FAKE_API_TOKEN=***" in page.text


def test_cancel_removes_the_container(container_engine, harness):
    engine, h = container_engine, harness
    source = tr.write_fake_source(h.path("src", "fake"))
    config = write_container_config(h.root / "wheelforge.toml", engine, {
        "hang": tr.fake_recipe("wf-fake-hang", "sh ./hang.sh", timeout="10m",
                               env={"WF_PIDS_FILE": "/tmp/pids.txt",
                                    "WF_FAKE_API_TOKEN": "s3cr3t"}),
    }, source)
    _server, admin = start_server(h, config)
    job_id = admin.submit("hang")["jobs"][0]["id"]
    building = wait_for(lambda: admin.job(job_id)["state"] == "building"
                        and "fake build: starting two compilers" in admin.log_text(job_id),
                        TIMEOUT, 0.3)
    assert building, admin.describe(admin.job(job_id))
    running = containers_of(engine, h, job_id)
    assert len(running) == 1, running
    assert engine.cmd("container", "inspect", "--format", "{{.State.Status}}",
                      running[0]).stdout.strip() == "running"
    check_provenance(engine, admin, job_id)
    resp = admin.request("POST", f"/admin/jobs/{job_id}/cancel")
    assert resp.status == 200, resp.text
    job = admin.wait_jobs([job_id], 60)[job_id]
    assert job["state"] == "cancelled", admin.describe(job)
    assert not containers_of(engine, h, job_id), "the cancelled build's container is left"


def test_restart_mid_build_reattaches_to_the_container(container_engine, harness):
    """A server stopped (SIGTERM: a restart) while a job builds in a container: the container
    goes on, the next server re-attaches to it, and the build runs once. The build waits for a
    file the test writes once the second server is up (bounded: 60 s)."""
    engine, h = container_engine, harness
    source = tr.write_fake_source(h.path("src", "fake"))
    wait = ('echo "fake build: waiting"; i=0; '
            'while [ ! -e release ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; '
            '{python} fake_wheel.py {out}')
    config = write_container_config(h.root / "wheelforge.toml", engine, {
        "wait": tr.fake_recipe("wf-fake-wait", wait,
                               local_version_variable="WF_FAKE_LOCAL_VERSION"),
    }, source)
    first, admin = start_server(h, config)
    job_id = admin.submit("wait")["jobs"][0]["id"]
    # The build's own output line, not the logged engine command that contains its script.
    building = wait_for(lambda: admin.job(job_id)["state"] == "building"
                        and "fake build: waiting" in admin.log_text(job_id).splitlines(),
                        TIMEOUT, 0.2)
    assert building, admin.describe(admin.job(job_id))
    running = containers_of(engine, h, job_id)
    assert len(running) == 1, running

    first.stopped_by_us = True
    first.proc.send_signal(signal.SIGTERM)
    assert first.proc.wait(30) == 0, first.log_tail()
    assert containers_of(engine, h, job_id) == running, "the stop ended the build's container"

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(tr.SERVER_CANARY, "1")
        second = h.serve("--config", str(config))
    admin = tr.Admin(second, admin.token)
    assert wait_for(lambda: "re-attached to attempt 1" in admin.log_text(job_id), 30, 0.2), (
        admin.describe(admin.job(job_id)))
    (h.data_dir / "builds" / f"job-{job_id}" / "src" / "release").touch()
    job = admin.wait_jobs([job_id], TIMEOUT)[job_id]
    assert job["state"] == "succeeded", admin.describe(job)
    assert job["attempts"] == 1, job
    log = admin.log_text(job_id)
    assert log.splitlines().count("fake build: waiting") == 1, log[-3000:]
    assert job["wheel"] in tr.view_files(second, "cu130/torch2.8", "wf-fake-wait")
    assert not containers_of(engine, h, job_id), "the finished build's container is left"


def test_slurm_job_runs_its_commands_in_containers(slurm_cluster, container_engine, harness):
    cluster, engine, h = slurm_cluster, container_engine, harness
    source = tr.write_fake_source(h.path("src", "fake"))
    config = h.root / "wheelforge.toml"
    probe = PROBE.format(config=config, blobs=h.data_dir / "blobs")
    write_container_config(config, engine, {
        "fake": tr.fake_recipe("wf-fake-boxed", probe + "; {python} fake_wheel.py {out}", cpus=1,
                               local_version_variable="WF_FAKE_LOCAL_VERSION"),
        "hang": tr.fake_recipe("wf-fake-hang", "sh ./hang.sh", timeout="10m", cpus=1,
                               env={"WF_PIDS_FILE": "/tmp/pids.txt"}),
    }, source, kind="slurm", container=engine.kind, partition=cluster.partition)
    _server, admin = start_server(h, config)
    built = admin.submit("fake")["jobs"][0]["id"]
    hung = admin.submit("hang")["jobs"][0]["id"]

    job = admin.wait_jobs([built], TIMEOUT)[built]
    assert job["state"] == "succeeded", admin.describe(job)
    log = admin.log_text(built)
    probe_line = re.search(r"^probe: (.*)$", log, re.M)
    assert probe_line, log[-4000:]
    seen = dict(item.split("=", 1) for item in probe_line.group(1).split())
    assert seen["container"] == "yes" and seen["host_config"] == "absent", seen
    # The container's memory is the batch job's: 1 CPU x gb_per_job (0.25 GiB).
    assert int(seen["memory"]) == 256 * 1024 * 1024, seen
    assert int(seen["quota"]) == int(seen["period"]), seen
    assert re.search(r"\[slurm\] build commands run in batch job \d+", log), log[-4000:]
    assert re.search(r"was granted 1 CPU\(s\) and 256 MiB: MAX_JOBS=1 NVCC_THREADS=1", log), log

    # A cancelled job's batch job ends, and its container with it.
    building = wait_for(lambda: admin.job(hung)["state"] == "building"
                        and "fake build: starting two compilers" in admin.log_text(hung),
                        TIMEOUT, 0.3)
    assert building, admin.describe(admin.job(hung))
    assert len(containers_of(engine, h, hung)) == 1
    slurm_id = int(admin.job(hung)["executor_job"])
    assert admin.request("POST", f"/admin/jobs/{hung}/cancel").status == 200
    job = admin.wait_jobs([hung], 60)[hung]
    assert job["state"] == "cancelled", admin.describe(job)
    assert cluster.wait_done(slurm_id, 60).state == "CANCELLED"
    assert wait_for(lambda: not containers_of(engine, h, hung), 30, 0.5), (
        "the cancelled batch job's container is left")
