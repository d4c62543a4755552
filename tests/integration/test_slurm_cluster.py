"""The single-node Slurm cluster the Slurm executor is tested against (slurm_cluster.py): what a
batch job is granted, concurrency, cancel, time limit, and the end states and exit codes Slurm
reports, read back after the job has ended. docs/slurm-testing.md records the same facts.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from slurm_cluster import KILL_WAIT, SlurmCluster

JOB_TIMEOUT = 60


def alive(pid: int, marker: str) -> bool:
    """True while `pid` runs with `marker` as its argv[0] (so not a reused pid)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] == marker.encode()
    except OSError:
        return False


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def test_job_sees_the_cpus_and_memory_it_was_granted(slurm_cluster: SlurmCluster, tmp_path):
    out = tmp_path / "out"
    job_id = slurm_cluster.sbatch(
        "#!/bin/bash\n"
        'echo "cpus=$SLURM_CPUS_PER_TASK mem=$SLURM_MEM_PER_NODE conf=$SLURM_CONF"\n',
        "--cpus-per-task=2",
        "--mem=700",
        f"--output={out}",
    )
    job = slurm_cluster.wait_done(job_id, JOB_TIMEOUT)
    assert job.state == "COMPLETED", job.fields
    assert out.read_text().split() == [
        "cpus=2",
        "mem=700",
        f"conf={slurm_cluster.conf_path}",
    ]
    assert job.fields["NumCPUs"] == "2"
    assert "mem=700M" in job.fields["TRES"]


def test_two_one_cpu_jobs_run_at_the_same_time(slurm_cluster: SlurmCluster, tmp_path):
    # Each job announces itself, then waits for the other: both complete only if both ran at once.
    script = (
        "#!/bin/bash\n"
        f"touch {tmp_path}/started.$SLURM_JOB_ID\n"
        f"for i in $(seq 1 {JOB_TIMEOUT * 10}); do\n"
        f'  [ "$(ls {tmp_path} | grep -c ^started)" -ge 2 ] && exit 0\n'
        "  sleep 0.1\n"
        "done\n"
        "exit 1\n"
    )
    jobs = [
        slurm_cluster.sbatch(script, "--cpus-per-task=1", "--mem=100", f"--output={tmp_path}/%j.out")
        for _ in range(2)
    ]
    ended = [slurm_cluster.wait_done(j, JOB_TIMEOUT * 2) for j in jobs]
    assert [j.state for j in ended] == ["COMPLETED", "COMPLETED"], [j.fields for j in ended]
    assert all(j.fields["NumCPUs"] == "1" for j in ended)


def test_scancel_ends_a_running_job_and_its_process_tree(slurm_cluster: SlurmCluster, tmp_path):
    marker = f"wf-cancel-{os.getpid()}-{time.monotonic_ns()}"
    script_pid = tmp_path / "script.pid"
    job_id = slurm_cluster.sbatch(
        # A child and a grandchild of the batch script, both named by the marker.
        "#!/bin/bash\n"
        f"echo $$ > {script_pid}\n"
        f"bash -c 'exec -a {marker} sleep 600' &\n"
        f"bash -c 'bash -c \"exec -a {marker} sleep 601\" & wait' &\n"
        "wait\n",
        "--mem=100",
        f"--output={tmp_path}/out",
    )
    slurm_cluster.wait_state(job_id, ["RUNNING"], JOB_TIMEOUT)
    assert wait_until(lambda: len(marked_pids(marker)) == 2, JOB_TIMEOUT), marked_pids(marker)
    tree = marked_pids(marker) + [int(script_pid.read_text())]

    slurm_cluster.cmd("scancel", str(job_id))
    job = slurm_cluster.wait_done(job_id, JOB_TIMEOUT)
    assert job.state == "CANCELLED", job.fields
    assert slurm_cluster.completion(job_id).state == "CANCELLED"
    gone = wait_until(lambda: not any(Path(f"/proc/{p}").exists() for p in tree), KILL_WAIT + 10)
    assert gone, [p for p in tree if Path(f"/proc/{p}").exists()]


def marked_pids(marker: str) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and alive(int(p), marker)]


def test_exit_code_and_state_are_read_back_after_the_job_ended(slurm_cluster: SlurmCluster, tmp_path):
    ok = slurm_cluster.sbatch("#!/bin/bash\nexit 0\n", "--mem=50", f"--output={tmp_path}/ok")
    bad = slurm_cluster.sbatch("#!/bin/bash\nexit 3\n", "--mem=50", f"--output={tmp_path}/bad")
    for job_id in (ok, bad):
        slurm_cluster.wait_done(job_id, JOB_TIMEOUT)

    # From slurmctld (kept MinJobAge seconds after the end) and from the job completion file.
    for read in (slurm_cluster.job, slurm_cluster.completion):
        done, failed = read(ok), read(bad)
        assert (done.state, done.exit_code, done.signal) == ("COMPLETED", 0, 0), done.fields
        assert (failed.state, failed.exit_code, failed.signal) == ("FAILED", 3, 0), failed.fields
    assert slurm_cluster.job(bad).reason == "NonZeroExitCode"
    # squeue lists only pending and running jobs by default; the ended ones are gone from it.
    assert ok not in slurm_cluster.active_jobs() and bad not in slurm_cluster.active_jobs()


def test_killed_jobs_end_failed_with_their_signal_or_status(slurm_cluster: SlurmCluster, tmp_path):
    """Without task/cgroup Slurm cannot see an out-of-memory kill: a batch script killed by
    SIGKILL, or one that exits 137 as a shell does after its child was killed, ends FAILED."""
    killed = slurm_cluster.sbatch("#!/bin/bash\nkill -9 $$\n", "--mem=50", f"--output={tmp_path}/k")
    status = slurm_cluster.sbatch(
        "#!/bin/bash\nbash -c 'kill -9 $$'\nexit $?\n", "--mem=50", f"--output={tmp_path}/s"
    )
    by_signal = slurm_cluster.wait_done(killed, JOB_TIMEOUT)
    by_status = slurm_cluster.wait_done(status, JOB_TIMEOUT)
    assert (by_signal.state, by_signal.exit_code, by_signal.signal) == ("FAILED", 0, 9), by_signal
    assert (by_status.state, by_status.exit_code, by_status.signal) == ("FAILED", 137, 0), by_status
    assert slurm_cluster.completion(killed).state == "FAILED"


def test_memory_above_the_request_is_not_enforced_without_cgroups(slurm_cluster: SlurmCluster, tmp_path):
    out = tmp_path / "out"
    job_id = slurm_cluster.sbatch(hog_script(300), "--mem=100", f"--output={out}")
    job = slurm_cluster.wait_done(job_id, JOB_TIMEOUT)
    assert job.state == "COMPLETED", (job.fields, out.read_text())
    assert "allocated 300 MiB" in out.read_text().splitlines()


def test_time_limit_ends_a_job_as_timeout(slurm_cluster: SlurmCluster, tmp_path):
    # --time counts in whole minutes (1 is the least); slurmctld checks limits every 30 s.
    job_id = slurm_cluster.sbatch(
        "#!/bin/bash\nsleep 600\n", "--time=1", "--mem=50", f"--output={tmp_path}/out"
    )
    job = slurm_cluster.wait_done(job_id, 60 + 30 + KILL_WAIT + JOB_TIMEOUT)
    assert (job.state, job.reason) == ("TIMEOUT", "TimeLimit"), job.fields
    assert slurm_cluster.completion(job_id).state == "TIMEOUT"
    assert "DUE TO TIME LIMIT" in (tmp_path / "out").read_text()


def hog_script(mib: int) -> str:
    """A batch script whose Python child allocates and touches `mib` MiB, then says so."""
    return (
        "#!/bin/bash\n"
        "python3 -c '\n"
        "blocks = []\n"
        f"for _ in range({mib // 10}):\n"
        "    blocks.append(bytearray(10 * 1024 * 1024))\n"
        f'print("allocated {mib} MiB", flush=True)\n'
        "'\n"
        'echo "python exit $?"\n'
    )


def test_cgroup_cluster_ends_a_job_over_its_memory_as_out_of_memory(
    slurm_cgroup_cluster: SlurmCluster, tmp_path
):
    out = tmp_path / "out"
    job_id = slurm_cgroup_cluster.sbatch(hog_script(300), "--mem=100", f"--output={out}")
    job = slurm_cgroup_cluster.wait_done(job_id, JOB_TIMEOUT)
    log = out.read_text()
    # The kernel killed the child; the script went on and exited 0, and Slurm still says OOM.
    assert (job.state, job.reason) == ("OUT_OF_MEMORY", "OutOfMemory"), (job.fields, log)
    assert slurm_cgroup_cluster.completion(job_id).state == "OUT_OF_MEMORY"
    assert "python exit 137" in log.splitlines() and "allocated 300 MiB" not in log.splitlines()
    assert "oom-kill" in log


def test_cgroup_cluster_cancel_reaches_processes_that_left_the_tree(
    slurm_cgroup_cluster: SlurmCluster, tmp_path
):
    marker = f"wf-escape-{os.getpid()}-{time.monotonic_ns()}"
    job_id = slurm_cgroup_cluster.sbatch(
        # setsid + a parent that exits: the sleep is re-parented away from the job's tree.
        f"#!/bin/bash\n(setsid bash -c 'exec -a {marker} sleep 600' &)\nsleep 600\n",
        "--mem=100",
        f"--output={tmp_path}/out",
    )
    slurm_cgroup_cluster.wait_state(job_id, ["RUNNING"], JOB_TIMEOUT)
    assert wait_until(lambda: len(marked_pids(marker)) == 1, JOB_TIMEOUT)
    escaped = marked_pids(marker)[0]

    slurm_cgroup_cluster.cmd("scancel", str(job_id))
    assert slurm_cgroup_cluster.wait_done(job_id, JOB_TIMEOUT).state == "CANCELLED"
    assert wait_until(lambda: not alive(escaped, marker), KILL_WAIT + 10)
