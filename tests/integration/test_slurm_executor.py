"""The Slurm executor against a real single-node cluster (tests/integration/slurm_cluster.py):
a job's commands run in batch jobs the server submits, with the recipe's CPUs and memory, and
the server follows them through the shared builds directory and scontrol.

Each test starts a wheelforge server whose [build.executor] is kind = "slurm" on the session's
cluster (SLURM_CONF is in the environment it inherits), and builds fake packages (shell
scripts and tests/integration/test_runner.py's fake_wheel.py, with the stand-in torch): a
2-cell matrix that only succeeds when both cells build at the same time, a cancelled build
whose processes must all be gone, a build killed for memory by the cgroup cluster and retried
smaller, a server killed with SIGKILL mid-build that re-attaches to the batch job after a
restart instead of building again, jobs sized to the partition's nodes (a default lowered, a
recipe's own demand no node holds refused at once, and `config check` probing with that size
from the default relative data directory), and a batch job pending for a reason that never
passes (a partition's time limit below the recipe's timeout) cancelled and its job failed.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

import test_runner as tr
from wfhelpers import wait_for

FAKE_SCRIPTS = {
    # Each cell waits until the other one builds too: the matrix only succeeds when its cells
    # run at the same time.
    "together.sh": """\
echo "fake build: MAX_JOBS=$MAX_JOBS NVCC_THREADS=$NVCC_THREADS"
touch "$WF_MARKERS/$$"
waited=0
while [ "$(ls "$WF_MARKERS" | wc -l)" -lt 2 ]; do
  sleep 0.5
  waited=$((waited + 1))
  if [ "$waited" -ge 240 ]; then
    echo "the other cell did not build at the same time" >&2
    exit 1
  fi
done
exec "$1" fake_wheel.py "$2"
""",
    # Allocates (and touches) 300 MiB per compile job.
    "memory.sh": """\
echo "fake build: MAX_JOBS=$MAX_JOBS NVCC_THREADS=$NVCC_THREADS"
"$1" -c 'import os; x = b"x" * (int(os.environ["MAX_JOBS"]) * 300 * 1024 * 1024); print("fake build: held", len(x) >> 20, "MiB")' || exit $?
exec "$1" fake_wheel.py "$2"
""",
    # A slow build that counts its runs.
    "counted.sh": """\
echo "run $$" >> "$WF_RUNS"
echo "fake build: compiling slowly"
sleep 8
exec "$1" fake_wheel.py "$2"
""",
}

TIMEOUT = 240.0


def slurm_bed(h, cluster, recipes: dict, torch=("2.8.0+cu130",), **executor) -> tuple:
    """A server on `h` whose executor is the cluster, with the stand-in torch uploaded."""
    tr.require_tools(nvcc=False)
    source = tr.write_fake_source(h.path("src", "fake"))
    for name, text in FAKE_SCRIPTS.items():
        (source / name).write_text(text)
    config = tr.write_config(
        h.root / "wheelforge.toml",
        recipes,
        fake_source=source,
        executor={"kind": "slurm", "partition": cluster.partition, "idle_timeout": "2m",
                  **executor},
    )
    h.token("upload")
    server = h.serve("--config", str(config))
    tr.upload_stand_in_torch(h, server, versions=torch)
    return server, tr.Admin(server, h.token("admin")), config


def batch_jobs(cluster, h, job_id: int) -> dict[str, list[int]]:
    """The batch jobs of wheelforge job `job_id` of `h`'s data directory that Slurm knows, by
    placement (build, test), in submission order."""
    proc = cluster.cmd("squeue", "-h", "-t", "all", "-o", "%i %j %Z")
    work_dir = h.data_dir / "builds" / f"job-{job_id}"
    found: dict[str, list[int]] = {}
    for line in proc.stdout.splitlines():
        slurm_id, name, directory = line.split(maxsplit=2)
        match = re.fullmatch(rf"wheelforge-job{job_id}-(build|test)", name)
        if match and Path(directory).is_relative_to(work_dir):
            found.setdefault(match.group(1), []).append(int(slurm_id))
    return {k: sorted(v) for k, v in found.items()}


def test_two_cells_build_at_the_same_time_on_the_cluster(slurm_cluster, harness):
    cluster = slurm_cluster
    markers = harness.path("markers")
    server, admin, _ = slurm_bed(harness, cluster, {
        "pair": tr.fake_recipe(
            "wf-fake-pair", "sh ./together.sh {python} {out}",
            env={"WF_MARKERS": str(markers)}, cpus=1,
            local_version_variable="WF_FAKE_LOCAL_VERSION",
            matrix={"python": ["3.11"], "torch": ["2.8", "2.9"], "cuda": ["13.0"]}),
    }, torch=tr.TORCH_STAND_INS)
    created = admin.submit("pair")
    ids = [j["id"] for j in created["jobs"]]
    assert len(ids) == 2, created
    jobs = admin.wait_jobs(ids, TIMEOUT)
    for job in jobs.values():
        assert job["state"] == "succeeded", admin.describe(job)
    assert len(list(markers.iterdir())) == 2

    for job in jobs.values():
        placed = batch_jobs(cluster, harness, job["id"])
        assert len(placed.get("build", [])) == 1 and len(placed.get("test", [])) == 1, placed
        build = cluster.job(placed["build"][0])
        # The recipe's CPUs, and gb_per_job (0.25) for each.
        assert build.fields["NumCPUs"] == "1", build.fields
        assert "mem=256M" in build.fields["TRES"], build.fields
        assert build.state == "COMPLETED", build.fields
        # MAX_JOBS as computed in the batch job from its grant, and what the build saw.
        log = admin.log_text(job["id"])
        assert re.search(rf"==> \[building\] batch job {placed['build'][0]} on \S+ was granted 1 "
                         r"CPU\(s\) and 256 MiB: MAX_JOBS=1 NVCC_THREADS=1", log), log[-3000:]
        assert "fake build: MAX_JOBS=1 NVCC_THREADS=1" in log, log[-3000:]
        assert f"[slurm] test commands run in batch job {placed['test'][0]}" in log, log[-3000:]
        assert job["executor_job"] == str(placed["test"][0]), job
    for job in jobs.values():
        label = f"cu130torch{job['torch']}"
        assert job["wheel"] == f"wf_fake_pair-1.0.0+{label}-py3-none-any.whl", job
        assert job["wheel"] in tr.view_files(server, f"cu130/torch{job['torch']}", "wf-fake-pair")


def test_cancel_reaches_scancel_and_ends_every_process(slurm_cluster, harness):
    cluster = slurm_cluster
    pids = harness.root / "pids.txt"
    _server, admin, _ = slurm_bed(harness, cluster, {
        "hang": tr.fake_recipe("wf-fake-hang", "sh ./hang.sh", timeout="10m", cpus=1,
                               env={"WF_PIDS_FILE": str(pids)}),
    })
    job_id = admin.submit("hang")["jobs"][0]["id"]
    try:
        building = wait_for(
            lambda: len(tr.read_pids(pids)) == 3 and admin.job(job_id)["state"] == "building",
            TIMEOUT, 0.2)
        assert building, admin.describe(admin.job(job_id))
        slurm_id = int(admin.job(job_id)["executor_job"])
        assert cluster.job(slurm_id).state == "RUNNING"
        resp = admin.request("POST", f"/admin/jobs/{job_id}/cancel")
        assert resp.status == 200, resp.text
        job = admin.wait_jobs([job_id], 60)[job_id]
        assert job["state"] == "cancelled", admin.describe(job)
        assert cluster.job(slurm_id).state == "CANCELLED", cluster.job(slurm_id).fields
        left = [p for p in tr.read_pids(pids) if tr.alive(p, "sleep") or tr.alive(p, "hang.sh")]
        assert not left, f"processes of the cancelled build still run: {left}"
    finally:
        tr.kill_leftovers(tr.read_pids(pids), "sleep")


def test_build_killed_for_memory_is_retried_smaller(slurm_cgroup_cluster, harness):
    cluster = slurm_cgroup_cluster
    _server, admin, _ = slurm_bed(harness, cluster, {
        # 2 CPUs and 2 x 0.25 GiB: MAX_JOBS=2 at first, 600 MiB in a 512 MiB job.
        "memory": tr.fake_recipe("wf-fake-memory", "sh ./memory.sh {python} {out}", cpus=2),
    })
    job = admin.run_one("memory", timeout=TIMEOUT)
    assert job["state"] == "succeeded", admin.describe(job)
    assert job["attempts"] == 2 and job["max_jobs"] == 1, job
    log = admin.log_text(job["id"])
    assert "out of memory" in log and "retrying with half the parallelism" in log, log[-4000:]
    placed = batch_jobs(cluster, harness, job["id"])
    # The retry ran in a batch job of its own, sized from its grant (one halving).
    assert len(placed["build"]) == 2, placed
    first, second = (cluster.job(i) for i in placed["build"])
    assert "mem=512M" in first.fields["TRES"], first.fields
    assert first.state == "OUT_OF_MEMORY", first.fields
    assert second.state == "COMPLETED", second.fields
    assert re.search(rf"batch job {placed['build'][0]} on \S+ was granted 2 CPU\(s\) and 512 MiB: "
                     r"MAX_JOBS=2 NVCC_THREADS=1", log), log[-4000:]
    assert re.search(rf"batch job {placed['build'][1]} on \S+ was granted 2 CPU\(s\) and 512 MiB: "
                     r"MAX_JOBS=1 NVCC_THREADS=1", log), log[-4000:]
    assert "fake build: held 300 MiB" in log, log[-4000:]


@pytest.mark.parametrize("restart", ["while-it-builds", "after-it-ended"])
def test_server_killed_mid_build_reattaches_after_restart(slurm_cluster, harness, restart):
    cluster = slurm_cluster
    h = harness
    runs = h.root / "runs.txt"
    first, admin, config = slurm_bed(h, cluster, {
        "counted": tr.fake_recipe("wf-fake-counted", "sh ./counted.sh {python} {out}", cpus=1,
                                  env={"WF_RUNS": str(runs)}),
    })
    job_id = admin.submit("counted")["jobs"][0]["id"]
    building = wait_for(lambda: runs.exists() and admin.job(job_id)["state"] == "building",
                        TIMEOUT, 0.2)
    assert building, admin.describe(admin.job(job_id))
    slurm_id = int(admin.job(job_id)["executor_job"])

    first.stopped_by_us = True
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(10)
    session = h.data_dir / "builds" / f"job-{job_id}" / "slurm" / "1-build"
    if restart == "after-it-ended":
        # The build's batch job finishes its command while no server watches.
        def ended() -> bool:
            scripts = list(session.glob("cmd-*.sh"))
            return bool(scripts) and all(p.with_suffix(".exit").exists() for p in scripts)
        assert wait_for(ended, 60, 0.2), sorted(p.name for p in session.iterdir())
    else:
        assert cluster.job(slurm_id).state == "RUNNING"

    second = h.serve("--config", str(config))
    admin = tr.Admin(second, h.token("admin"))
    job = admin.wait_jobs([job_id], TIMEOUT)[job_id]
    assert job["state"] == "succeeded", admin.describe(job)
    log = admin.log_text(job_id)
    assert "requeued" not in log, log[-4000:]
    assert f"re-attached to attempt 1 (batch job {slurm_id})" in log, log[-4000:]
    # The build ran once, in the batch job it started in.
    assert len(runs.read_text().splitlines()) == 1, runs.read_text()
    assert job["attempts"] == 1, job
    placed = batch_jobs(cluster, h, job_id)
    assert placed["build"] == [slurm_id], placed
    assert job["wheel"] in tr.view_files(second, "cu130/torch2.8", "wf-fake-counted")


def test_jobs_are_sized_to_the_partitions_nodes_or_fail_at_once(slurm_cluster, harness):
    cluster, h = slurm_cluster, harness
    pids = h.root / "pids.txt"
    too_many = cluster.cpus + 62
    _server, admin, config = slurm_bed(h, cluster, {
        # Asks for more CPUs than any node has: no batch job could ever start.
        "greedy": tr.fake_recipe("wf-fake-greedy", "sh ./counted.sh {python} {out}",
                                 cpus=too_many),
        # Names no cpus: the executor's default, more than the node has, is lowered to fit.
        "plain": tr.fake_recipe("wf-fake-plain", "sh ./hang.sh", timeout="10m",
                                env={"WF_PIDS_FILE": str(pids)}),
    }, cpus=cluster.cpus + 2)
    greedy = admin.submit("greedy")["jobs"][0]["id"]
    plain = admin.submit("plain")["jobs"][0]["id"]
    try:
        job = admin.wait_jobs([greedy], 30)[greedy]
        assert job["state"] == "failed", admin.describe(job)
        asked = too_many * 256
        assert job["reason"] == (
            f"the recipe's build jobs ask for {too_many} CPU(s) and {asked} MiB (cpus x "
            f"gb_per_job), more than any node of partition {cluster.partition} holds: the "
            f"largest node is {cluster.node_name} with {cluster.cpus} CPU(s) and "
            f"{cluster.real_memory_mb} MiB"), job
        assert "build" not in batch_jobs(cluster, h, greedy), "a batch job was submitted"

        # The default request, lowered to the node's CPUs, with gb_per_job (0.25) for each.
        fits = cluster.cpus * 256
        line = wait_for(lambda: re.search(r"\[slurm\] build commands run in batch job (\d+) "
                                          rf"\({cluster.cpus} CPU\(s\), {fits} MiB",
                                          admin.log_text(plain)), 60, 0.2)
        assert line, admin.log_text(plain)[-3000:]
        log = admin.log_text(plain)
        assert (f"[slurm] the default request of {cluster.cpus + 2} CPU(s) and "
                f"{(cluster.cpus + 2) * 256} MiB is more than any node of partition "
                f"{cluster.partition} holds") in log, log[-3000:]
        batch = cluster.wait_state(int(line.group(1)), ["RUNNING"], 60)
        assert batch.fields["NumCPUs"] == str(cluster.cpus), batch.fields
        assert f"mem={fits}M" in batch.fields["TRES"], batch.fields
        assert admin.request("POST", f"/admin/jobs/{plain}/cancel").status == 200
        assert admin.wait_jobs([plain], 60)[plain]["state"] == "cancelled"
    finally:
        tr.kill_leftovers(tr.read_pids(pids), "sleep")

    # config check: from the directory of the default (relative) data directory, a probe of
    # the size of a build job; the greedy recipe is a problem.
    proc = h.cli("config", "check", "--config", str(config), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"error: recipes.greedy.cpus: the recipe's build jobs ask for {too_many} CPU(s)" in (
        proc.stderr), proc.stderr
    probe = re.search(rf"#   executor check: batch job (\d+) \({cluster.cpus} CPU\(s\), {fits} "
                      rf"MiB\) on \S+ read a file the server wrote into (\S+)", proc.stdout)
    assert probe, proc.stdout + proc.stderr
    assert probe.group(2) == str(h.data_dir / "builds"), probe.group(0)
    assert "recipe plain: the default request" in proc.stdout, proc.stdout


def test_a_batch_job_that_can_never_start_fails_its_job(slurm_cluster, harness):
    cluster, h = slurm_cluster, harness
    # A partition whose time limit is below the recipe's timeout: its batch jobs would pend
    # for PartitionTimeLimit for ever.
    partition = "wfshort" + str(os.getpid())
    cluster.cmd("scontrol", "create", f"PartitionName={partition}", f"Nodes={cluster.node_name}",
                "MaxTime=1", "State=UP")
    try:
        _server, admin, _ = slurm_bed(h, cluster, {
            "long": tr.fake_recipe("wf-fake-long", "sh ./counted.sh {python} {out}", cpus=1,
                                   timeout="10m"),
        }, partition=partition)
        job_id = admin.submit("long")["jobs"][0]["id"]
        job = admin.wait_jobs([job_id], 60)[job_id]
        assert job["state"] == "failed", admin.describe(job)
        slurm_id = job["executor_job"]
        assert slurm_id, job
        # Slurm names the partition's limits PartitionTimeLimit, or PartitionConfig when it
        # judged them at submission.
        assert re.search(rf"Slurm batch job {slurm_id} can never start: it is pending for "
                         r"Partition(TimeLimit|Config) \(it asked for 1 CPU\(s\) and 256 MiB",
                         job["reason"]), job
        assert wait_for(lambda: cluster.job(int(slurm_id)).state == "CANCELLED", 30, 0.2), (
            cluster.job(int(slurm_id)))
    finally:
        cluster.cmd("scontrol", "delete", f"PartitionName={partition}", check=False)
