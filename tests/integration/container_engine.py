"""Container engines for tests: podman, and docker through a private dockerd, each configured
through its own files (never the host's cgroup mounts, limits, /etc/containers or
/etc/docker), with a local builder image made from Debian's repository, since no registry is
reachable.

What makes a real container run on these machines (docs/containers-testing.md has the whole
story, with what fails otherwise):

- runtime runc with the cgroupfs cgroup manager: the host's cgroup v1 hierarchies are used as
  they are (crun refuses this hybrid layout; podman's `--cgroups=disabled` is for crun only;
  there is no systemd to manage cgroups);
- ulimits no higher than the engine's own: without CAP_SYS_RESOURCE a container cannot get
  the default 1048576 open files and processes, and podman 4.3 lowers its own RLIMIT_NPROC
  to 32768 when it starts;
- no network set-up by default (podman `netns = "none"`, dockerd `bridge: none`, no
  iptables); `--network host` reaches a server on the host's loopback.

The image (`IMAGE`: Debian 12 minbase + g++, python3, python3-venv, made with mmdebstrap) is
built once into `cache_dir()`: the root file system as a tar, and a containers/storage store
holding the imported image, which every podman session mounts read-only as an additional
image store (a session's own storage starts empty and costs nothing); a docker session
imports the tar into its private dockerd (2-3 s). `python3 tests/integration/container_engine.py
build-image` builds the cache ahead (.ci/setup does); otherwise the first session builds it.

Fixture: `container_engine`, once per engine (`[podman]`, `[docker]`), gives a
`ContainerEngine` whose settings are exported in os.environ for the test (CONTAINERS_CONF and
CONTAINERS_STORAGE_CONF for podman, DOCKER_HOST for docker), so a plain `podman run ...` or
`docker run ...` by the test, or by a process it starts (a wheelforge server, a Slurm job),
uses it. An engine that is not installed, or under which no container can start, is skipped
with the reason.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

IMAGE = "localhost/wheelforge-test:bookworm"
SUITE = "bookworm"
PACKAGES = ("g++", "python3", "python3-venv")
IMAGE_FORMAT = 1  # bump when the recipe below changes, so caches rebuild
MIRROR = os.environ.get("WF_TEST_DEBIAN_MIRROR", "http://deb.debian.org/debian")
REPO_ROOT = Path(__file__).resolve().parents[2]
# podman 4.3 sets its own RLIMIT_NPROC to 32768 when it starts (seen with strace); a container
# cannot be given more than the engine has without CAP_SYS_RESOURCE.
PODMAN_NPROC = 32768
CUDA_HOME = Path(os.environ.get("WF_TEST_CUDA_HOME", "/usr/local/cuda"))
LABEL = "org.wheelforge.test"
KINDS = ("podman", "docker")
START_TIMEOUT = 60.0


class EngineError(AssertionError):
    pass


# ---- the image cache --------------------------------------------------------------------------


def cache_dir() -> Path:
    """Where the image is kept between runs: $WF_TEST_CACHE, else build/test-cache."""
    return Path(os.environ.get("WF_TEST_CACHE") or REPO_ROOT / "build" / "test-cache")


def image_store(cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "podman-images"


def image_tar(cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "rootfs.tar"


def recipe() -> dict:
    return {"format": IMAGE_FORMAT, "image": IMAGE, "suite": SUITE, "packages": list(PACKAGES)}


def image_ready(cache: Path | None = None) -> bool:
    stamp = (cache or cache_dir()) / "image.json"
    try:
        ready = json.loads(stamp.read_text())["recipe"] == recipe()
    except (OSError, ValueError, KeyError):
        return False
    return ready and image_tar(cache).is_file() and image_store(cache).is_dir()


def build_image(cache: Path | None = None, log=sys.stderr) -> float:
    """Builds the image into the cache unless it is there; returns the seconds spent (0 when
    cached). A file lock makes a concurrent build wait for this one."""
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "image.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if image_ready(cache):
            return 0.0
        began = time.monotonic()
        store, tar = image_store(cache), image_tar(cache)
        shutil.rmtree(store, ignore_errors=True)
        (cache / "image.json").unlink(missing_ok=True)
        work = Path(tempfile.mkdtemp(prefix="wf-image-", dir=cache))
        # podman refuses a runroot path longer than 50 characters.
        runroot = Path(tempfile.mkdtemp(prefix="wf-run-"))
        try:
            step(
                [
                    "mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar",
                    # dpkg's fsyncs make the build several times slower; a failed build is redone.
                    "--dpkgopt=force-unsafe-io",
                    *(
                        f"--dpkgopt=path-exclude=/usr/share/{d}/*"
                        for d in ("man", "doc", "locale", "info")
                    ),
                    f"--include={','.join(PACKAGES)}",
                    SUITE, str(work / "rootfs.tar"), MIRROR,
                ],
                log,
            )
            os.replace(work / "rootfs.tar", tar)
            env = dict(os.environ, **Podman.write_config(work / "engine", None))
            step(
                [
                    "podman", "--root", str(store), "--runroot", str(runroot),
                    "import", "--change", "WORKDIR=/", str(tar), IMAGE,
                ],
                log,
                env=env,
            )
            seconds = time.monotonic() - began
            (cache / "image.json").write_text(
                json.dumps({"recipe": recipe(), "seconds": round(seconds, 1)}) + "\n"
            )
            return seconds
        finally:
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(runroot, ignore_errors=True)


def step(argv: list[str], log, env=None) -> None:
    print(f"+ {shlex.join(argv)}", file=log, flush=True)
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise EngineError(
            f"{argv[0]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )


def ulimits() -> dict[str, int]:
    """The largest open-file and process limits a container can be given here."""

    def hard(which: int, most: int) -> int:
        value = resource.getrlimit(which)[1]
        return most if value == resource.RLIM_INFINITY else min(value, most)

    return {
        "nofile": hard(resource.RLIMIT_NOFILE, 1 << 20),
        "nproc": hard(resource.RLIMIT_NPROC, PODMAN_NPROC),
    }


def cgroup_dirs(name: str) -> list[Path]:
    """`name` at the top of each cgroup hierarchy (v1 controllers and the v2 tree)."""
    base = Path("/sys/fs/cgroup")
    if not base.is_dir():
        return []
    return [p / name for p in [base, *base.iterdir()] if p.is_dir()]


def mounts_under(root: Path) -> list[str]:
    prefix = f"{root}/"
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    return [p for p in points if p.startswith(prefix)]


def remove_empty_trees(tops: list[Path], wait: float = 5.0) -> None:
    """Removes the cgroup directories under `tops` once their processes have gone (a cgroup
    with a live process in it cannot be removed: conmon or a shim may still be exiting)."""
    deadline = time.monotonic() + wait
    while True:
        for top in tops:
            for dirpath, _dirs, _files in os.walk(top, topdown=False):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass
        if not any(top.exists() for top in tops) or time.monotonic() >= deadline:
            return
        time.sleep(0.2)


# ---- engines ----------------------------------------------------------------------------------


class ContainerEngine:
    """One engine with a private configuration under `root` and the test image."""

    kind = ""
    cli = ""
    image = IMAGE
    programs: tuple[str, ...] = ()

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.env_vars: dict[str, str] = {}
        self.cuda_home = CUDA_HOME.resolve() if CUDA_HOME.exists() else None

    @classmethod
    def missing_programs(cls) -> list[str]:
        return [p for p in (*cls.programs, "mmdebstrap") if shutil.which(p) is None]

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, **self.env_vars)

    def start(self) -> None:
        pass

    def close(self) -> None:
        self.remove_all()

    def cmd(
        self, *args: str, check: bool = False, timeout: float = 120, **kw
    ) -> subprocess.CompletedProcess:
        """Runs the engine's CLI (`podman ARGS` / `docker ARGS`) with this engine's settings, in
        the engine's own directory unless told otherwise (podman's conmon leaves an `oom` file in
        its working directory when the kernel kills a container for memory)."""
        argv = [self.cli, *map(str, args)]
        kw.setdefault("cwd", self.root)
        proc = subprocess.run(
            argv, env=self.env, capture_output=True, text=True, timeout=timeout, **kw
        )
        if check and proc.returncode != 0:
            raise EngineError(
                f"{shlex.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}"
            )
        return proc

    def run_args(self, *, name: str | None = None, mounts=(), memory: str | None = None,
                 cpus: float | None = None, workdir: str | None = None, cuda: bool = False,
                 init: bool = True, network: str | None = None, env=()) -> list[str]:
        """`run` options the way an executor would give them (without the CLI name): a label to
        find the container by, `--init` (a real PID 1 that forwards SIGTERM), bind mounts
        `(host, container, "ro"|"rw")`, limits, the host's CUDA toolkit read-only at
        /usr/local/cuda, a network ("host" reaches a server on the host's loopback; none by
        default) and variables passed from the caller's environment by name."""
        args = ["run", "--rm", "--label", f"{LABEL}=1"]
        if init:
            args.append("--init")
        if name:
            args += ["--name", name]
        if network:
            args += ["--network", network]
        for host, inside, mode in mounts:
            args += ["--volume", f"{host}:{inside}:{mode}"]
        if cuda:
            if self.cuda_home is None:
                raise EngineError(f"no CUDA toolkit at {CUDA_HOME}")
            args += ["--volume", f"{self.cuda_home}:/usr/local/cuda:ro"]
        if memory:
            args += ["--memory", memory, "--memory-swap", memory]
        if cpus:
            args += ["--cpus", str(cpus)]
        if workdir:
            args += ["--workdir", workdir]
        for var in env:
            args += ["--env", var]
        return args

    def status(self, name: str) -> str | None:
        """The container's state ("running", "exited", ...), None when there is no such one."""
        proc = self.cmd("container", "inspect", "--format", "{{.State.Status}}", name)
        return proc.stdout.strip() if proc.returncode == 0 else None

    def oom_killed(self, name: str) -> bool:
        proc = self.cmd("container", "inspect", "--format", "{{.State.OOMKilled}}", name, check=True)
        return proc.stdout.strip() == "true"

    def remove_argv(self, name: str) -> list[str]:
        """The command that ends and removes a container at once."""
        return [self.cli, "rm", "--force", name]

    def remove_all(self) -> None:
        proc = self.cmd("ps", "--all", "--quiet")
        ids = proc.stdout.split() if proc.returncode == 0 else []
        if ids:
            self.cmd("rm", "--force", *ids, timeout=120)

    def probe(self) -> str | None:
        """None when a container runs here, else the engine's error."""
        proc = self.cmd("run", "--rm", self.image, "true", timeout=120)
        if proc.returncode != 0:
            return f"`{self.cli} run {self.image} true` exited {proc.returncode}: {proc.stderr.strip()}"
        return None

    def limits_probe(self) -> str | None:
        """None when --memory and --cpus can be applied here, else the engine's error."""
        proc = self.cmd("run", "--rm", "--memory", "64m", "--cpus", "1", self.image, "true")
        if proc.returncode != 0:
            return f"--memory/--cpus refused (exit {proc.returncode}): {proc.stderr.strip()}"
        return None


class Podman(ContainerEngine):
    """podman with containers.conf and storage.conf under `root`; the image comes from the
    cache's store, mounted read-only as an additional image store."""

    kind = cli = "podman"
    programs = ("podman", "runc")

    def __init__(self, root: Path, store: Path | None = None):
        super().__init__(root)
        self.store = store if store is not None else image_store()
        self.env_vars = self.write_config(self.root, self.store)
        # With the cgroupfs manager podman puts containers and conmon under /libpod_parent in
        # every hierarchy and leaves that directory behind.
        self._cgroup_dirs_created = [p for p in cgroup_dirs("libpod_parent") if not p.exists()]

    @staticmethod
    def write_config(root: Path, store: Path | None) -> dict[str, str]:
        """Writes containers.conf and storage.conf under `root`; returns the variables that
        point podman at them. (No static_dir: set there, every container exit waits 20 s for
        conmon, whose clean-up command is not told where it is.)"""
        root.mkdir(parents=True, exist_ok=True)
        limits = ulimits()
        defaults = ", ".join(f'"{k}={v}:{v}"' for k, v in limits.items())
        (root / "containers.conf").write_text(
            "\n".join(
                [
                    "[containers]",
                    'netns = "none"',
                    'log_driver = "k8s-file"',
                    f"default_ulimits = [{defaults}]",
                    "[engine]",
                    'runtime = "runc"',
                    'cgroup_manager = "cgroupfs"',
                    'events_logger = "file"',
                    f'events_logfile_path = "{root}/events.log"',
                    f'tmp_dir = "{root}/tmp"',
                    f'volume_path = "{root}/volumes"',
                ]
            )
            + "\n"
        )
        storage = [
            "[storage]",
            'driver = "overlay"',
            f'graphroot = "{root}/graph"',
            f'runroot = "{root}/run"',
        ]
        if store is not None:
            storage += ["[storage.options]", f'additionalimagestores = ["{store}"]']
        (root / "storage.conf").write_text("\n".join(storage) + "\n")
        return {
            "CONTAINERS_CONF": str(root / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(root / "storage.conf"),
        }

    def remove_argv(self, name: str) -> list[str]:
        return [self.cli, "rm", "--force", "--time", "0", name]

    def remove_all(self) -> None:
        self.cmd("rm", "--all", "--force", "--time", "0", timeout=120)

    def close(self) -> None:
        super().close()
        remove_empty_trees(self._cgroup_dirs_created)


class Docker(ContainerEngine):
    """A private dockerd (and the containerd it starts) listening on a socket under `root`,
    with its run-time state there too; started by PID, stopped by PID. Its images live in
    `data_root`: by default the cache's docker-data, reused by the next session (so the image
    is imported once), or a directory under `root` while another session holds the cache's
    (one dockerd per data root)."""

    kind = cli = "docker"
    programs = ("docker", "dockerd", "containerd", "runc")

    def __init__(self, root: Path, data_root: Path | None = None):
        super().__init__(root)
        self.data_root = data_root
        self._data_lock = None
        self.socket = self.root / "docker.sock"
        self.env_vars = {"DOCKER_HOST": f"unix://{self.socket}"}
        self.cgroup_parent = f"wf-docker-{self.root.name}"
        self.proc: subprocess.Popen | None = None
        self.start_seconds = 0.0

    def daemon_json(self) -> dict:
        limits = ulimits()
        return {
            "data-root": str(self.data_root),
            "exec-root": str(self.root / "exec"),
            "pidfile": str(self.root / "dockerd.pid"),
            "hosts": [f"unix://{self.socket}"],
            "bridge": "none",
            "iptables": False,
            "ip6tables": False,
            "ip-masq": False,
            "exec-opts": ["native.cgroupdriver=cgroupfs"],
            "cgroup-parent": f"/{self.cgroup_parent}",
            "storage-driver": "overlay2",
            "default-ulimits": {
                k: {"Name": k, "Soft": v, "Hard": v} for k, v in limits.items()
            },
        }

    def start(self) -> None:
        began = time.monotonic()
        if self.data_root is None:
            shared = cache_dir() / "docker-data"
            shared.mkdir(parents=True, exist_ok=True)
            lock = open(cache_dir() / "docker-data.lock", "w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.data_root, self._data_lock = shared, lock
            except OSError:
                lock.close()
                self.data_root = self.root / "data"
        config = self.root / "daemon.json"
        config.write_text(json.dumps(self.daemon_json(), indent=2) + "\n")
        self._cgroup_dirs_created = [p for p in cgroup_dirs(self.cgroup_parent) if not p.exists()]
        with open(self.root / "dockerd.log", "ab") as log:
            self.proc = subprocess.Popen(
                ["dockerd", "--config-file", str(config)], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while self.cmd("version", timeout=30).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise EngineError(f"dockerd did not start: {self.log_tail()}")
            time.sleep(0.2)
        # The image is imported again only when the cache holds another build of it.
        wanted = (cache_dir() / "image.json").read_text()
        stamp = Path(self.data_root) / "wheelforge-image.json"
        have = stamp.read_text() if stamp.exists() else ""
        if have != wanted or self.cmd("image", "inspect", IMAGE).returncode != 0:
            self.cmd("import", str(image_tar()), IMAGE, check=True, timeout=300)
            stamp.write_text(wanted)
        self.start_seconds = time.monotonic() - began

    def log_tail(self, lines: int = 30) -> str:
        path = self.root / "dockerd.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            super().close()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        if self._data_lock is not None:
            self._data_lock.close()
        # dockerd leaves its default network namespace bind-mounted at exec/netns/default.
        for mount in reversed(mounts_under(self.root)):
            subprocess.run(["umount", mount], capture_output=True)
        remove_empty_trees(getattr(self, "_cgroup_dirs_created", []))


ENGINES = {"podman": Podman, "docker": Docker}


# ---- pytest fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session", params=KINDS)
def container_engine_session(request) -> Iterator[ContainerEngine]:
    cls = ENGINES[request.param]
    missing = cls.missing_programs()
    if missing:
        reason = f"{cls.kind} not installed (missing {', '.join(missing)})"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; .ci/setup installs it", pytrace=False)
        pytest.skip(reason)
    seconds = build_image()
    if seconds:
        print(f"\nbuilt the container test image {IMAGE} in {seconds:.0f}s into {cache_dir()}")
    root = Path(tempfile.mkdtemp(prefix=f"wf-{cls.kind}-"))
    engine = cls(root)
    try:
        try:
            engine.start()
        except EngineError as e:
            pytest.skip(f"{cls.kind} cannot start on this machine: {e}")
        error = engine.probe()
        if error:
            pytest.skip(f"no {cls.kind} container can start on this machine: {error}")
        yield engine
    finally:
        engine.close()
        if request.session.testsfailed == 0:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def container_engine(container_engine_session, monkeypatch) -> Iterator[ContainerEngine]:
    """The session's engine (once per kind), its settings exported in os.environ for this
    test; containers the test leaves are removed afterwards."""
    for key, value in container_engine_session.env_vars.items():
        monkeypatch.setenv(key, value)
    yield container_engine_session
    container_engine_session.remove_all()


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def main(argv: list[str]) -> int:
    if argv[:1] != ["build-image"]:
        print("usage: container_engine.py build-image   (into $WF_TEST_CACHE or build/test-cache)")
        return 2
    missing = Podman.missing_programs()
    if missing:
        print(f"missing: {', '.join(missing)}", file=sys.stderr)
        return 1
    seconds = build_image()
    print(f"{IMAGE} in {cache_dir()}: " + (f"built in {seconds:.0f}s" if seconds else "already built"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
