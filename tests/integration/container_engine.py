"""A container engine for tests: podman, configured through its own files (never the host's
cgroup mounts, limits or /etc/containers), with a local builder image made from Debian's
repository, since no registry is reachable.

What makes a real container run on these machines (docs/containers-testing.md has the whole
story, with what fails otherwise):

- runtime runc with cgroup_manager cgroupfs: the host's cgroup v1 hierarchies are used as
  they are (crun refuses this hybrid layout; `--cgroups=disabled` is for crun only);
- ulimits no higher than podman's own: without CAP_SYS_RESOURCE a container cannot get the
  default 1048576 open files and processes; podman 4.3 lowers its own RLIMIT_NPROC to 32768;
- no network namespace setup (`netns = "none"`); builds are offline.

The image (`IMAGE`: Debian 12 minbase + g++, python3, python3-venv, made with mmdebstrap) is
built once into `cache_dir()/podman-images`, a containers/storage store that every session
mounts read-only as an additional image store, so a session's own storage starts empty and
costs nothing. `python3 tests/integration/container_engine.py build-image` builds it ahead
(.ci/setup does); otherwise the first session builds it.

Fixture: `container_engine` gives a `ContainerEngine` whose config is exported through
CONTAINERS_CONF / CONTAINERS_STORAGE_CONF in os.environ for the test, so a plain
`podman run ...` by the test or by a process it starts (a wheelforge server) uses it. It skips,
with the engine's own error, where no container can start.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import shlex
import shutil
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
# podman 4.3 sets its own RLIMIT_NPROC to 32768 when it starts; a container's limits cannot
# exceed podman's without CAP_SYS_RESOURCE.
PODMAN_NPROC = 32768
CUDA_HOME = Path(os.environ.get("WF_TEST_CUDA_HOME", "/usr/local/cuda"))
LABEL = "org.wheelforge.test"


class EngineError(AssertionError):
    pass


def cache_dir() -> Path:
    """Where the image store is kept between runs: $WF_TEST_CACHE, else build/test-cache."""
    return Path(os.environ.get("WF_TEST_CACHE") or REPO_ROOT / "build" / "test-cache")


def image_store(cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "podman-images"


def recipe() -> dict:
    return {"format": IMAGE_FORMAT, "image": IMAGE, "suite": SUITE, "packages": list(PACKAGES)}


def image_ready(store: Path) -> bool:
    stamp = store / "wheelforge-image.json"
    try:
        return json.loads(stamp.read_text())["recipe"] == recipe()
    except (OSError, ValueError, KeyError):
        return False


def ulimits() -> list[str]:
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    cap = lambda v, most: most if v == resource.RLIM_INFINITY else min(v, most)  # noqa: E731
    return [f"nofile={cap(nofile, 1 << 20)}:{cap(nofile, 1 << 20)}",
            f"nproc={cap(nproc, PODMAN_NPROC)}:{cap(nproc, PODMAN_NPROC)}"]


def containers_conf(root: Path) -> str:
    limits = ", ".join(f'"{u}"' for u in ulimits())
    return "\n".join(
        [
            "[containers]",
            'netns = "none"',
            'log_driver = "k8s-file"',
            f"default_ulimits = [{limits}]",
            "[engine]",
            'runtime = "runc"',
            'cgroup_manager = "cgroupfs"',
            'events_logger = "file"',
            f'events_logfile_path = "{root}/events.log"',
            f'tmp_dir = "{root}/tmp"',
            f'volume_path = "{root}/volumes"',
        ]
    ) + "\n"


def storage_conf(root: Path, store: Path | None) -> str:
    lines = [
        "[storage]",
        'driver = "overlay"',
        f'graphroot = "{root}/graph"',
        f'runroot = "{root}/run"',
    ]
    if store is not None:
        lines += ["[storage.options]", f'additionalimagestores = ["{store}"]']
    return "\n".join(lines) + "\n"


def write_config(root: Path, store: Path | None) -> dict[str, str]:
    """Writes containers.conf and storage.conf under `root`; returns the variables that point
    podman at them."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "containers.conf").write_text(containers_conf(root))
    (root / "storage.conf").write_text(storage_conf(root, store))
    return {
        "CONTAINERS_CONF": str(root / "containers.conf"),
        "CONTAINERS_STORAGE_CONF": str(root / "storage.conf"),
    }


def missing_programs() -> list[str]:
    return [p for p in ("podman", "runc", "mmdebstrap") if shutil.which(p) is None]


def build_image(cache: Path | None = None, log=sys.stderr) -> float:
    """Builds the test image into the cache's image store unless it is there; returns the
    seconds spent (0 when it was cached). Safe against a concurrent build (file lock)."""
    store = image_store(cache)
    store.parent.mkdir(parents=True, exist_ok=True)
    with open(store.parent / "podman-images.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if image_ready(store):
            return 0.0
        began = time.monotonic()
        shutil.rmtree(store, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix="wf-image-", dir=store.parent))
        # podman refuses a runroot path longer than 50 characters.
        runroot = Path(tempfile.mkdtemp(prefix="wf-run-"))
        try:
            tar = work / "rootfs.tar"
            step(
                [
                    "mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar",
                    # dpkg's fsyncs make the build several times slower; a failed build is redone.
                    "--dpkgopt=force-unsafe-io",
                    *(f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("man", "doc", "locale", "info")),
                    f"--include={','.join(PACKAGES)}",
                    SUITE, str(tar), MIRROR,
                ],
                log,
            )
            env = dict(os.environ, **write_config(work / "engine", None))
            step(
                [
                    "podman", "--root", str(store), "--runroot", str(runroot),
                    "import", "--change", "WORKDIR=/", str(tar), IMAGE,
                ],
                log,
                env=env,
            )
            seconds = time.monotonic() - began
            (store / "wheelforge-image.json").write_text(
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
        raise EngineError(f"{argv[0]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


class ContainerEngine:
    """podman with a private configuration and storage under `root`, and the test image."""

    cli = "podman"
    image = IMAGE

    def __init__(self, root: Path, store: Path | None = None):
        self.root = Path(root)
        self.store = store
        self.env_vars = write_config(self.root, store)
        self.cuda_home = CUDA_HOME.resolve() if CUDA_HOME.exists() else None
        self._cgroup_dirs_created = [p for p in self._cgroup_parents() if not p.exists()]

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, **self.env_vars)

    def podman(self, *args: str, check: bool = False, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        """Runs `podman ARGS` with this engine's configuration."""
        proc = subprocess.run(
            [self.cli, *map(str, args)], env=self.env, capture_output=True, text=True, timeout=timeout, **kw
        )
        if check and proc.returncode != 0:
            raise EngineError(f"podman {shlex.join(map(str, args))} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def run_args(self, *, name: str | None = None, mounts=(), memory: str | None = None,
                 cpus: float | None = None, workdir: str | None = None, cuda: bool = False,
                 init: bool = True, network: str | None = None) -> list[str]:
        """`run` options the way an executor would give them: a label to find the container by,
        `--init` (a real PID 1 that forwards SIGTERM), bind mounts `(host, container, "ro"|"rw")`,
        limits, the host's CUDA toolkit read-only at /usr/local/cuda, and a network ("host" to
        reach a server on the host's loopback; none by default)."""
        args = ["run", "--rm", "--label", f"{LABEL}=1"]
        if init:
            args.append("--init")
        if network:
            args += ["--network", network]
        if name:
            args += ["--name", name]
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
        return args

    def probe(self) -> str | None:
        """None when a container runs here, else podman's error."""
        proc = self.podman("run", "--rm", self.image, "true", timeout=120)
        if proc.returncode != 0:
            return f"`podman run {self.image} true` exited {proc.returncode}: {proc.stderr.strip()}"
        return None

    def limits_probe(self) -> str | None:
        """None when --memory and --cpus can be applied here, else podman's error."""
        proc = self.podman("run", "--rm", "--memory", "64m", "--cpus", "1", self.image, "true")
        if proc.returncode != 0:
            return f"--memory/--cpus refused (exit {proc.returncode}): {proc.stderr.strip()}"
        return None

    def remove_all(self) -> None:
        """Removes every container of this engine's private storage (running ones killed)."""
        self.podman("rm", "--all", "--force", "--time", "0", timeout=120)

    def close(self) -> None:
        self.remove_all()
        # Empty ones only: a directory with a live process in it cannot be removed.
        for top in self._cgroup_dirs_created:
            for dirpath, _dirs, _files in os.walk(top, topdown=False):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass

    def _cgroup_parents(self) -> list[Path]:
        # With cgroup_manager cgroupfs, podman puts containers under /libpod_parent in each
        # hierarchy and leaves that directory behind.
        base = Path("/sys/fs/cgroup")
        if not base.is_dir():
            return []
        return [p / "libpod_parent" for p in [base, *base.iterdir()] if p.is_dir()]


# ---- pytest fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def container_engine_session(request) -> Iterator[ContainerEngine]:
    missing = missing_programs()
    if missing:
        reason = f"container tools not installed (missing {', '.join(missing)}; apt: podman runc mmdebstrap)"
        if os.environ.get("CI"):
            pytest.fail(reason + " — .ci/setup installs them", pytrace=False)
        pytest.skip(reason)
    seconds = build_image()
    if seconds:
        print(f"\nbuilt the container test image {IMAGE} in {seconds:.0f}s into {image_store()}")
    root = Path(tempfile.mkdtemp(prefix="wf-podman-"))
    engine = ContainerEngine(root, image_store())
    try:
        error = engine.probe()
        if error:
            pytest.skip(f"no container can start on this machine: {error}")
        yield engine
    finally:
        engine.close()
        if request.session.testsfailed == 0:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def container_engine(container_engine_session, monkeypatch) -> Iterator[ContainerEngine]:
    """The session's podman, its configuration exported in os.environ for this test; containers
    the test leaves are removed afterwards."""
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
    missing = missing_programs()
    if missing:
        print(f"missing: {', '.join(missing)}", file=sys.stderr)
        return 1
    seconds = build_image()
    where = image_store()
    print(f"{IMAGE} in {where}: " + (f"built in {seconds:.0f}s" if seconds else "already built"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
