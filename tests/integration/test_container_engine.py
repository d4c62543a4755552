"""The container engine the container executor is tested against (container_engine.py): a real
container from the local test image with read-only and writable bind mounts, nvcc from the
host's CUDA toolkit mounted read-only, exit codes, kill/stop, resource limits, and a Slurm job
whose step runs in a container. docs/containers-testing.md records the same facts.
"""

from __future__ import annotations

import http.server
import shlex
import subprocess
import threading
import time

import pytest

from container_engine import ContainerEngine, unique_name
from slurm_cluster import KILL_WAIT, SlurmCluster

TIMEOUT = 120


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def running(engine: ContainerEngine, name: str) -> bool:
    return engine.status(name) == "running"


def exists(engine: ContainerEngine, name: str) -> bool:
    return engine.status(name) is not None


def sleeper(engine: ContainerEngine, name: str) -> list[str]:
    """The argv of a `run` client whose container sleeps for ten minutes."""
    return [engine.cli, *engine.run_args(name=name), engine.image, "sleep", "600"]


def test_container_sees_only_its_mounts_read_only_and_writable(container_engine, tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    (src / "input.txt").write_text("from the host\n")
    script = (
        "cat /src/input.txt > /out/copied.txt"
        " && (echo x > /src/written.txt) 2> /out/ro-error.txt; echo $? > /out/ro-status.txt"
        f"; test -e {tmp_path} && echo visible > /out/host-path.txt"
        "; test -e /usr/local/cuda && echo visible > /out/cuda.txt"
        "; . /etc/os-release; echo $VERSION_CODENAME > /out/codename.txt"
    )
    args = container_engine.run_args(mounts=[(src, "/src", "ro"), (out, "/out", "rw")])
    proc = container_engine.cmd(*args, container_engine.image, "sh", "-c", script, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr

    assert (out / "copied.txt").read_text() == "from the host\n"
    assert (out / "ro-status.txt").read_text().strip() != "0"
    assert "Read-only file system" in (out / "ro-error.txt").read_text()
    assert not (src / "written.txt").exists()
    # Nothing else of the host: not the test's own directory, not the CUDA toolkit unasked.
    assert not (out / "host-path.txt").exists()
    assert not (out / "cuda.txt").exists()
    assert (out / "codename.txt").read_text().strip() == "bookworm"


def test_only_the_host_network_reaches_a_server_on_the_host_loopback(container_engine):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        fetch = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=10).status)"
        image = container_engine.image
        host_net = container_engine.run_args(network="host")
        host = container_engine.cmd(*host_net, image, "python3", "-c", fetch)
        assert (host.returncode, host.stdout.strip()) == (0, "200"), host.stderr
        # The default (no network namespace set-up) has a loopback of its own.
        isolated = container_engine.cmd(*container_engine.run_args(), image, "python3", "-c", fetch)
        assert isolated.returncode == 1 and "Connection refused" in isolated.stderr, isolated.stderr
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_nvcc_from_the_mounted_toolkit_compiles_inside_the_container(container_engine, tmp_path):
    if container_engine.cuda_home is None:
        pytest.skip("no CUDA toolkit on this host to mount (WF_TEST_CUDA_HOME, /usr/local/cuda)")
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    (src / "kernel.cu").write_text(
        "#include <cstdio>\n"
        "__global__ void add_one(int *a) { a[threadIdx.x] += 1; }\n"
        'int main() { std::printf("kernel built with nvcc %d.%d\\n", __CUDACC_VER_MAJOR__,'
        " __CUDACC_VER_MINOR__); return 0; }\n"
    )
    args = container_engine.run_args(
        mounts=[(src, "/src", "ro"), (out, "/out", "rw")], cuda=True, workdir="/out"
    )
    script = (
        "/usr/local/cuda/bin/nvcc --version | tail -1"
        " && /usr/local/cuda/bin/nvcc -o /out/kernel /src/kernel.cu && /out/kernel"
    )
    proc = container_engine.cmd(*args, container_engine.image, "sh", "-c", script, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    host_nvcc = subprocess.run(
        [str(container_engine.cuda_home / "bin" / "nvcc"), "--version"], capture_output=True, text=True
    )
    assert proc.stdout.splitlines()[0] == host_nvcc.stdout.strip().splitlines()[-1]
    assert proc.stdout.splitlines()[1].startswith("kernel built with nvcc ")
    assert (out / "kernel").is_file()


@pytest.mark.parametrize("init", [True, False], ids=["init", "no-init"])
def test_exit_codes_propagate(container_engine, init):
    image = container_engine.image
    base = container_engine.run_args(init=init)
    assert container_engine.cmd(*base, image, "sh", "-c", "exit 7").returncode == 7
    child_killed = "sleep 60 & kill -9 $!; wait $!"
    assert container_engine.cmd(*base, image, "sh", "-c", child_killed).returncode == 137
    killed = container_engine.cmd(*base, image, "sh", "-c", "kill -9 $$; exit 5")
    missing = container_engine.cmd(*base, image, "/no/such/program")
    if init:
        assert killed.returncode == 137, killed.stderr
        if container_engine.kind == "podman":
            # podman's init (catatonit) reports a program it cannot start as its own failure.
            assert missing.returncode == 1, missing.stderr
            assert "failed to exec pid1: No such file or directory" in missing.stderr
        else:
            assert missing.returncode == 127, missing.stderr  # docker's init is tini
    else:
        # Without --init the command is the namespace's PID 1, which a signal from inside the
        # container cannot kill (nor SIGTERM from `podman stop`, unless it handles it).
        assert killed.returncode == 5, killed.stderr
        assert missing.returncode == 127, missing.stderr


def test_kill_and_stop_end_a_running_container(container_engine):
    for verb, status in (("kill", 137), ("stop", 143)):
        name = unique_name(f"wf-{verb}")
        client = subprocess.Popen(
            sleeper(container_engine, name),
            env=container_engine.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            assert wait_until(lambda: running(container_engine, name), TIMEOUT), client.poll()
            # `stop` sends SIGTERM to the container's init (--init), which forwards it to sleep.
            extra = ["-t", "30"] if verb == "stop" else []
            container_engine.cmd(verb, *extra, name, check=True, timeout=TIMEOUT)
            assert client.wait(TIMEOUT) == status
            assert wait_until(lambda: not exists(container_engine, name), TIMEOUT)
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()


def test_a_killed_client_leaves_its_container_running_until_removed(container_engine):
    """SIGKILL cannot be forwarded: the `run` client dies and the container goes on, so an
    executor must end a container by its name, never by killing the client alone."""
    name = unique_name("wf-orphan")
    client = subprocess.Popen(
        sleeper(container_engine, name),
        env=container_engine.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    assert wait_until(lambda: running(container_engine, name), TIMEOUT)
    client.kill()
    client.wait()
    assert running(container_engine, name)
    removed = subprocess.run(
        container_engine.remove_argv(name), env=container_engine.env, capture_output=True
    )
    assert removed.returncode == 0, removed.stderr
    assert not exists(container_engine, name)


def test_memory_and_cpu_limits_are_applied(container_engine):
    error = container_engine.limits_probe()
    if error:
        pytest.skip(f"resource limits cannot be applied on this machine: {error}")
    image = container_engine.image
    args = container_engine.run_args(memory="64m", cpus=1)
    # cgroup v1 or v2, whichever the container sees.
    script = (
        "if [ -e /sys/fs/cgroup/memory.max ]; then cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max;"
        " else cat /sys/fs/cgroup/memory/memory.limit_in_bytes"
        " /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us; fi"
    )
    proc = container_engine.cmd(*args, image, "sh", "-c", script, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    values = [int(v) for v in proc.stdout.split()]
    assert values[0] == 64 * 1024 * 1024
    assert values[1] == values[2]  # quota == period: one CPU

    hog = "blocks = [bytearray(16 << 20) for _ in range(16)]; print('allocated', flush=True)"
    name = unique_name("wf-hog")
    over_args = [a for a in args if a != "--rm"] + ["--name", name]
    over = container_engine.cmd(*over_args, image, "python3", "-c", hog, timeout=TIMEOUT)
    assert over.returncode == 137, (over.stdout, over.stderr)
    assert "allocated" not in over.stdout
    if container_engine.kind == "docker":
        # containerd sees the kernel's OOM kill; podman's conmon does not see it on these
        # machines' cgroup v1 (State.OOMKilled stays false there: docs/containers-testing.md).
        assert container_engine.oom_killed(name)
    under = container_engine.cmd(*args, image, "python3", "-c", hog.replace("16)", "2)"))
    assert (under.returncode, under.stdout.strip()) == (0, "allocated"), under.stderr


def container_job(engine: ContainerEngine, name: str, command: str, mounts=()) -> str:
    """A batch script that runs `command` in a container and ends the container itself when
    Slurm ends the job. Signal forwarding by the `podman run` client is not enough: Slurm
    signals every process of the job at once (SIGCONT, SIGTERM, later SIGKILL), the `runc kill`
    podman starts to forward a signal included, and the container's processes are not the
    job's (they are children of conmon, or of dockerd's containerd)."""
    # What Slurm granted goes in by name, for the step to size its parallelism by (a
    # container gets no variable of the caller's unless named).
    run = shlex.join(
        [
            engine.cli,
            *engine.run_args(
                name=name, mounts=mounts, env=["SLURM_CPUS_PER_TASK", "SLURM_MEM_PER_NODE"]
            ),
        ]
    )
    return (
        "#!/bin/bash\n"
        # The removal runs detached (a double fork leaves the job's process tree), so that the
        # SIGKILL Slurm sends KillWait seconds later cannot cut it short on a loaded machine.
        f"trap '(setsid {shlex.join(engine.remove_argv(name))} >/dev/null 2>&1 &)' TERM\n"
        f"{run} --sig-proxy=false {engine.image} sh -c {shlex.quote(command)} &\n"
        # `wait` returns early when the trap runs; the second one collects the client.
        "wait $!; status=$?\n"
        "wait $! 2>/dev/null\n"
        "exit $status\n"
    )


def test_a_slurm_job_runs_its_step_in_a_container_and_scancel_ends_it(
    slurm_cluster: SlurmCluster, container_engine, tmp_path
):
    # The job inherits the engine's settings (CONTAINERS_CONF..., DOCKER_HOST) from the
    # submitting environment.
    done_name, cancel_name = unique_name("wf-job"), unique_name("wf-job")
    done = slurm_cluster.sbatch(
        container_job(
            container_engine, done_name,
            "echo cpus=$SLURM_CPUS_PER_TASK mem=$SLURM_MEM_PER_NODE > /out/granted.txt; exit 3",
            mounts=[(tmp_path, "/out", "rw")],
        ),
        "--cpus-per-task=1", "--mem=500", f"--output={tmp_path}/done.out",
    )
    job = slurm_cluster.wait_done(done, TIMEOUT)
    assert (job.state, job.exit_code) == ("FAILED", 3), (job.fields, (tmp_path / "done.out").read_text())
    assert (tmp_path / "granted.txt").read_text() == "cpus=1 mem=500\n"

    cancel = slurm_cluster.sbatch(
        container_job(container_engine, cancel_name, "sleep 600"),
        "--mem=500", f"--output={tmp_path}/cancel.out",
    )
    assert wait_until(lambda: running(container_engine, cancel_name), TIMEOUT)
    slurm_cluster.cmd("scancel", str(cancel))
    assert slurm_cluster.wait_done(cancel, TIMEOUT).state == "CANCELLED"
    gone = wait_until(lambda: not exists(container_engine, cancel_name), KILL_WAIT + 30)
    assert gone, container_engine.cmd("ps", "--all").stdout
