"""A private single-node Slurm cluster for tests: munged, slurmctld and slurmd from Debian's
`munge` and `slurm-wlm` packages, started by PID on this host and stopped by PID at the end.

Everything the cluster uses lives in one temporary directory: its slurm.conf (and cgroup.conf),
its own munge key and munged socket, the controller's state, slurmd's spool, the logs and the
job completion file. Ports are chosen at run time, so the cluster never talks to a Slurm or a
munged the host may run: clients reach it only through the `SLURM_CONF` that `cluster.env`
(and the `slurm_cluster` fixture, in `os.environ`) points at its slurm.conf.

Two flavours (docs/slurm-testing.md records what each can and cannot do on these machines):

- `SlurmCluster(root)`: proctrack/linuxproc, task/none, jobacct_gather/none. Slurm accounts
  CPUs and memory when it schedules but enforces no memory limit; a job whose process is killed
  (an out-of-memory kill included) ends FAILED with its exit status, never OUT_OF_MEMORY.
- `SlurmCluster(root, cgroups=True)`: proctrack/cgroup, task/cgroup with ConstrainRAMSpace,
  jobacct_gather/cgroup. `--mem` is a hard limit and a job in which the kernel's OOM killer
  fired ends OUT_OF_MEMORY. The job cgroups are created under `slurm_<node>` in the host's
  cgroup hierarchies (no mount is changed); the directories it leaves are removed at stop.

How a job's end state is read back (there is no slurmdbd, so `sacct` has no data):
`cluster.job(id)` asks `scontrol show job -o`, which knows a finished job for MinJobAge seconds
(300) after its end; `cluster.completion(id)` reads the job completion file
(JobCompType=jobcomp/filetxt), which keeps one line per finished job for the cluster's life.

Fixtures: `slurm_cluster` and `slurm_cgroup_cluster` (one cluster each per test session, started
on first use; the test gets `SLURM_CONF` in its environment and its jobs are cancelled when it
ends). Run this file directly to keep a cluster up for manual work:
`python3 tests/integration/slurm_cluster.py [--cgroups]`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Sequence

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "scancel", "scontrol", "squeue", "sinfo")
PARTITION = "wftest"

# Job states after which a job will not run again (squeue/scontrol spelling).
FINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)

START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
# Seconds between SIGTERM and SIGKILL when Slurm ends a job (cancel, time limit). Slurm's default
# is 30; a short one keeps tests of stubborn processes short.
KILL_WAIT = 5


class SlurmError(AssertionError):
    pass


def missing_programs() -> list[str]:
    return [p for p in (*DAEMONS, *CLIENTS) if shutil.which(p) is None]


def client_env(conf: Path | None = None) -> dict[str, str]:
    """This process's environment without anything that points a Slurm client elsewhere (an
    enclosing Slurm job's SLURM_* variables, SBATCH_/SQUEUE_/... defaults), plus SLURM_CONF."""
    prefixes = ("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_", "SCANCEL_", "SACCT_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    if conf is not None:
        env["SLURM_CONF"] = str(conf)
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_fields(line: str) -> dict[str, str]:
    """`Key=Value Key=Value ...` as printed by `scontrol show -o` and jobcomp/filetxt. Values
    never contain a space followed by `Word=`, so splitting there is exact."""
    fields: dict[str, str] = {}
    for match in re.finditer(r"(\w+)=(.*?)(?=\s+\w+=|\s*$)", line.strip()):
        fields[match.group(1)] = match.group(2)
    return fields


@dataclasses.dataclass
class Job:
    """One job as Slurm reports it. `exit_code`/`signal` split Slurm's `ExitCode=N:S`: the batch
    script's exit status, or the signal that ended it (exit_code 0 then)."""

    id: int
    state: str
    reason: str
    exit_code: int
    signal: int
    fields: dict[str, str]

    @classmethod
    def from_fields(cls, fields: dict[str, str]) -> "Job":
        code, _, sig = fields.get("ExitCode", "0:0").partition(":")
        return cls(
            id=int(fields["JobId"]),
            state=fields.get("JobState", ""),
            reason=fields.get("Reason", ""),
            exit_code=int(code or 0),
            signal=int(sig or 0),
            fields=fields,
        )

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


class SlurmCluster:
    """munged + slurmctld + slurmd with all their files under `root` (see the module doc)."""

    def __init__(
        self,
        root: Path,
        *,
        cgroups: bool = False,
        extra_conf: Sequence[str] = (),
        cluster_name: str = "wftest",
    ):
        self.root = Path(root)
        self.cgroups = cgroups
        self.extra_conf = list(extra_conf)
        self.cluster_name = cluster_name
        self.etc = self.root / "etc"
        self.conf_path = self.etc / "slurm.conf"
        self.log_dir = self.root / "log"
        self.jobcomp_path = self.log_dir / "jobcomp.txt"
        self.munge_socket = self.root / "munge" / "munged.sock"
        self.partition = PARTITION
        self.node_name = ""
        self.cpus = 0
        self.real_memory_mb = 0
        self.ctld_port = 0
        self.slurmd_port = 0
        self.procs: dict[str, subprocess.Popen] = {}
        self.start_seconds = 0.0
        self._cgroup_dirs_created: list[Path] = []

    @property
    def env(self) -> dict[str, str]:
        """The environment for a Slurm client: this process's (as it is now: a job submitted
        with it inherits it) with SLURM_CONF pointing at this cluster."""
        return client_env(self.conf_path)

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT) -> None:
        began = time.monotonic()
        for sub in ("etc", "munge", "munge-key", "state", "spool", "log", "run"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # munged wants its key readable by its user only, and every directory above its socket
        # searchable by all.
        os.chmod(self.root, 0o755)
        os.chmod(self.root / "munge-key", 0o700)
        os.chmod(self.root / "munge", 0o755)
        self._probe_node()
        self._write_conf()
        self._remember_cgroup_dirs()
        try:
            self._start_munged(timeout)
            self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf_path)])
            self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf_path)])
            self._wait_idle(began + timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began

    def stop(self) -> None:
        """Cancels every job, then stops slurmd, slurmctld and munged by PID (SIGTERM, then
        SIGKILL), and removes the cgroup directories the cluster left."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            self.cancel_all(wait=STOP_TIMEOUT + KILL_WAIT)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT)
        self._remove_cgroup_dirs()

    def __enter__(self) -> "SlurmCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def dead_daemons(self) -> list[str]:
        """Daemons that ended on their own, with their status."""
        return [f"{n} (status {p.returncode})" for n, p in self.procs.items() if p.poll() is not None]

    # ---- clients ---------------------------------------------------------------------------

    def cmd(
        self, *args: str, check: bool = True, timeout: float = 30, **kw
    ) -> subprocess.CompletedProcess:
        """Runs a Slurm client (`sbatch`, `scontrol`, ...) against this cluster."""
        proc = subprocess.run(
            [str(a) for a in args], env=self.env, capture_output=True, text=True, timeout=timeout, **kw
        )
        if check and proc.returncode != 0:
            raise SlurmError(
                f"{shlex.join(map(str, args))} exited {proc.returncode}: {proc.stderr.strip()}"
            )
        return proc

    def sbatch(self, script: str | Path, *options: str, cwd: Path | None = None) -> int:
        """Submits a batch script (a path, or the text of one) and returns the job id."""
        if isinstance(script, str) and not os.path.exists(script):
            fd, name = tempfile.mkstemp(prefix="job-", suffix=".sh", dir=self.root / "run")
            os.close(fd)
            path = Path(name)
            path.write_text(script)
            script = path
        proc = self.cmd("sbatch", "--parsable", *options, str(script), cwd=cwd or self.root)
        return int(proc.stdout.strip().split(";")[0])

    def job(self, job_id: int) -> Job | None:
        """The job as slurmctld knows it (pending, running, or finished less than MinJobAge
        seconds ago); None once slurmctld has forgotten it."""
        proc = self.cmd("scontrol", "show", "job", "-o", str(job_id), check=False)
        if proc.returncode != 0:
            if "Invalid job id" in proc.stderr:
                return None
            raise SlurmError(f"scontrol show job {job_id} exited {proc.returncode}: {proc.stderr}")
        return Job.from_fields(parse_fields(proc.stdout.splitlines()[0]))

    def completion(self, job_id: int) -> Job | None:
        """The job's line in the job completion file (written when the job has ended)."""
        if not self.jobcomp_path.exists():
            return None
        found = None
        for line in self.jobcomp_path.read_text(errors="replace").splitlines():
            fields = parse_fields(line)
            if fields.get("JobId") == str(job_id):
                found = Job.from_fields(fields)
        return found

    def wait_state(self, job_id: int, states: Sequence[str], timeout: float) -> Job:
        """Polls `scontrol` until the job is in one of `states`; fails with the job otherwise."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            last = self.job(job_id)
            if last is not None and last.state in states:
                return last
            if last is not None and last.final:
                raise SlurmError(
                    f"job {job_id} ended {last.state}, waited for {list(states)}: {last.fields}"
                )
            if time.monotonic() >= deadline:
                raise SlurmError(f"job {job_id} not {list(states)} within {timeout:.0f}s: {last}")
            time.sleep(0.2)

    def wait_done(self, job_id: int, timeout: float) -> Job:
        """Polls until the job has ended and slurmctld has recorded it in the completion file;
        returns what `scontrol` reports."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job is not None and job.final and self.completion(job_id) is not None:
                return job
            if time.monotonic() >= deadline:
                raise SlurmError(f"job {job_id} did not end within {timeout:.0f}s: {job}")
            time.sleep(0.2)

    def active_jobs(self) -> list[int]:
        proc = self.cmd("squeue", "-h", "-o", "%i", check=False)
        return [int(x) for x in proc.stdout.split()] if proc.returncode == 0 else []

    def cancel_all(self, wait: float = 30) -> None:
        """Cancels every pending or running job and waits until none is left."""
        jobs = self.active_jobs()
        if not jobs:
            return
        self.cmd("scancel", *map(str, jobs), check=False)
        deadline = time.monotonic() + wait
        while self.active_jobs() and time.monotonic() < deadline:
            time.sleep(0.2)

    def log_tail(self, lines: int = 40) -> str:
        out = []
        for path in sorted(self.log_dir.iterdir()):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path}\n" + "\n".join(text))
        return "\n".join(out)

    # ---- internals -------------------------------------------------------------------------

    def _probe_node(self) -> None:
        # `slurmd -C` prints the node line slurmd will register with: the short host name it
        # requires as NodeName, and the CPUs and memory it finds.
        proc = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise SlurmError(f"slurmd -C exited {proc.returncode}: {proc.stderr}")
        fields = parse_fields(proc.stdout.splitlines()[0])
        self.node_name = fields["NodeName"]
        self.cpus = int(fields["CPUs"])
        self.real_memory_mb = int(fields["RealMemory"])
        self.node_line = " ".join(
            f"{k}={fields[k]}"
            for k in ("NodeName", "CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket",
                      "ThreadsPerCore", "RealMemory")
            if k in fields
        )

    def _write_conf(self) -> None:
        self.ctld_port = free_port()
        self.slurmd_port = free_port()
        while self.slurmd_port == self.ctld_port:
            self.slurmd_port = free_port()
        r = self.root
        if self.cgroups:
            plugins = [
                "ProctrackType=proctrack/cgroup",
                "TaskPlugin=task/cgroup",
                "JobAcctGatherType=jobacct_gather/cgroup",
            ]
        else:
            plugins = [
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "JobAcctGatherType=jobacct_gather/none",
            ]
        lines = [
            f"ClusterName={self.cluster_name}",
            f"SlurmctldHost={self.node_name}(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={r}/state",
            f"SlurmdSpoolDir={r}/spool",
            f"SlurmctldPidFile={r}/run/slurmctld.pid",
            f"SlurmdPidFile={r}/run/slurmd.pid",
            f"SlurmctldLogFile={self.log_dir}/slurmctld.log",
            f"SlurmdLogFile={self.log_dir}/slurmd.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "MailProg=/bin/true",
            "MpiDefault=none",
            *plugins,
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU_Memory",
            "SchedulerType=sched/backfill",
            # Start a submitted batch job at once (Slurm batches submissions for up to 3 s).
            "SchedulerParameters=batch_sched_delay=0",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={self.jobcomp_path}",
            "ReturnToService=2",
            f"KillWait={KILL_WAIT}",
            "MinJobAge=300",
            # A job that asks for no memory gets one CPU's share, not the whole node.
            f"DefMemPerCPU={self.real_memory_mb // self.cpus}",
            f"{self.node_line} NodeAddr=127.0.0.1 State=UNKNOWN",
            f"PartitionName={self.partition} Nodes={self.node_name} Default=YES MaxTime=INFINITE"
            " State=UP",
        ]
        # A key in extra_conf replaces the line above (Slurm would log every duplicate).
        overridden = {line.split("=", 1)[0] for line in self.extra_conf}
        lines = [line for line in lines if line.split("=", 1)[0] not in overridden]
        lines += self.extra_conf
        self.conf_path.write_text("\n".join(lines) + "\n")
        if self.cgroups:
            (self.etc / "cgroup.conf").write_text(
                "\n".join(
                    [
                        "CgroupPlugin=autodetect",
                        "CgroupMountpoint=/sys/fs/cgroup",
                        "ConstrainCores=no",
                        "ConstrainDevices=no",
                        "ConstrainRAMSpace=yes",
                        "ConstrainSwapSpace=no",
                    ]
                )
                + "\n"
            )

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.log_dir / f"{name}.out", "ab") as out:
            self.procs[name] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=self.env, cwd=self.root, start_new_session=True,
            )

    def _start_munged(self, timeout: float) -> None:
        key = self.root / "munge-key" / "munge.key"
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self._spawn(
            "munged",
            [
                "munged", "--foreground",
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={self.root}/munge/munged.pid",
                f"--log-file={self.log_dir}/munged.log",
                f"--seed-file={self.root}/munge-key/munged.seed",
            ],
        )
        deadline = time.monotonic() + timeout
        while not self.munge_socket.exists():
            if self.procs["munged"].poll() is not None or time.monotonic() > deadline:
                raise SlurmError(f"munged did not start:\n{self.log_tail()}")
            time.sleep(0.05)

    def _wait_idle(self, deadline: float) -> None:
        while True:
            dead = self.dead_daemons()
            if dead:
                raise SlurmError(f"{', '.join(dead)} ended during start:\n{self.log_tail()}")
            proc = self.cmd("sinfo", "-h", "-n", self.node_name, "-o", "%t", check=False, timeout=10)
            if proc.returncode == 0 and proc.stdout.strip() == "idle":
                return
            if time.monotonic() > deadline:
                raise SlurmError(
                    f"node {self.node_name} not idle: {proc.stdout}{proc.stderr}\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def _cgroup_roots(self) -> list[Path]:
        # cgroup v1 hierarchies (one per controller) and the v2 tree, where Slurm puts
        # slurm_<node> (v1) or its own scope under its parent (v2).
        base = Path("/sys/fs/cgroup")
        if not base.is_dir():
            return []
        return [p / f"slurm_{self.node_name}" for p in [base, *base.iterdir()] if p.is_dir()]

    def _remember_cgroup_dirs(self) -> None:
        if self.cgroups:
            self._cgroup_dirs_created = [p for p in self._cgroup_roots() if not p.exists()]

    def _remove_cgroup_dirs(self) -> None:
        for top in self._cgroup_dirs_created:
            if not top.is_dir():
                continue
            for dirpath, _dirs, _files in os.walk(top, topdown=False):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass


# ---- pytest fixtures ---------------------------------------------------------------------------


def _session_cluster(request, cgroups: bool) -> Iterator[SlurmCluster]:
    missing = missing_programs()
    if missing:
        reason = f"Slurm/munge not installed (missing {', '.join(missing)}; apt: slurm-wlm munge)"
        if os.environ.get("CI"):
            pytest.fail(reason + " — .ci/setup installs them", pytrace=False)
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="wf-slurm-"))
    cluster = SlurmCluster(root, cgroups=cgroups)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
        if request.session.testsfailed == 0:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_cluster_session(request) -> Iterator[SlurmCluster]:
    yield from _session_cluster(request, cgroups=False)


@pytest.fixture(scope="session")
def slurm_cgroup_cluster_session(request) -> Iterator[SlurmCluster]:
    yield from _session_cluster(request, cgroups=True)


def _per_test(cluster: SlurmCluster, monkeypatch, request) -> Iterator[SlurmCluster]:
    dead = cluster.dead_daemons()
    if dead:
        pytest.fail(f"Slurm daemons died before this test: {dead}\n{cluster.log_tail()}", pytrace=False)
    # Processes the test starts (wheelforge servers, clients) find the cluster through
    # SLURM_CONF; SLURM_* left by an enclosing job would point them elsewhere.
    for key in list(os.environ):
        if key.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "SCANCEL_", "SACCT_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf_path))
    yield cluster
    cluster.cancel_all()
    if getattr(request.node, "wf_failed", False):
        print(f"Slurm cluster {cluster.root} logs:\n{cluster.log_tail()}")


@pytest.fixture
def slurm_cluster(slurm_cluster_session, monkeypatch, request) -> Iterator[SlurmCluster]:
    """The session's Slurm cluster (proctrack/linuxproc, no memory enforcement); SLURM_CONF is
    set in os.environ for the test and its leftover jobs are cancelled afterwards."""
    yield from _per_test(slurm_cluster_session, monkeypatch, request)


@pytest.fixture
def slurm_cgroup_cluster(slurm_cgroup_cluster_session, monkeypatch, request) -> Iterator[SlurmCluster]:
    """The session's Slurm cluster with task/cgroup: `--mem` is enforced and OOM-killed jobs end
    OUT_OF_MEMORY. Same per-test behaviour as `slurm_cluster`."""
    yield from _per_test(slurm_cgroup_cluster_session, monkeypatch, request)


def main(argv: list[str]) -> int:
    cgroups = "--cgroups" in argv
    root = Path(tempfile.mkdtemp(prefix="wf-slurm-"))
    cluster = SlurmCluster(root, cgroups=cgroups)
    cluster.start()
    print(f"cluster up in {cluster.start_seconds:.1f}s; node {cluster.node_line}")
    print(f"export SLURM_CONF={cluster.conf_path}", flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    while not stop and not cluster.dead_daemons():
        time.sleep(0.5)
    cluster.stop()
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
