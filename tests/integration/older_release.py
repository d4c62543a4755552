"""An older wheelforge, built from this repository's git history, for the rolling-upgrade test
(test_upgrade.py): the last commit before the newest PostgreSQL migration, so that the test runs
an old and a new version on one database across a migration, as docs/scale.md's "Upgrades"
describes.

The source comes from `git archive` of that commit, from the clone's history (a shallow clone
is deepened from its origin first; without the commit the test fails naming it). It is built
once, without optimisation (with clang++ where there is one) and for the `wheelforge` target
only, into $WF_TEST_CACHE or build/test-cache; a file lock makes a concurrent build wait for
this one. `.ci/setup` builds it beside clang-tidy, so the test finds it ready.

    older_release.py build    builds it (or says it is there) and prints the binary's path
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# The older version: the catalog at PostgreSQL migration 5 (migration 6 added upstream_pages).
COMMIT = "222248f8a0fcc06b610bce625bea3106b8556f60"
SCHEMA = 5
BUILD_TIMEOUT = 3000


def cache_dir() -> Path:
    return Path(os.environ.get("WF_TEST_CACHE") or REPO_ROOT / "build" / "test-cache")


def binary(cache: Path | None = None) -> Path:
    # Named `wheelforge`: the suite's backend wrapper (wfbackend.command) recognises it by name.
    return (cache or cache_dir()) / f"wheelforge-{COMMIT[:12]}" / "wheelforge"


def compiler() -> list[str]:
    """clang++ where there is one (the sanitizer build's compiler): unoptimised, it builds this
    target in 4.6 CPU minutes against g++'s 7.7."""
    clang = shutil.which("clang++")
    return [f"-DCMAKE_CXX_COMPILER={clang}"] if clang else []


def _git(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, timeout=300,
                          **kw)


def build(cache: Path | None = None, log=sys.stderr) -> Path:
    """The older binary, built unless it is there. Raises AssertionError naming what failed."""
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    target = binary(cache)
    with open(cache / "older-release.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file() and os.access(target, os.X_OK):
            return target
        known = _git("cat-file", "-e", f"{COMMIT}^{{commit}}")
        shallow = _git("rev-parse", "--is-shallow-repository").stdout.strip() == b"true"
        if known.returncode != 0 and shallow:
            # A shallow clone: its origin has the history.
            print(f"+ git fetch --unshallow (for {COMMIT[:12]})", file=log, flush=True)
            _git("fetch", "--quiet", "--unshallow")
            known = _git("cat-file", "-e", f"{COMMIT}^{{commit}}")
        if known.returncode != 0:
            raise AssertionError(
                f"commit {COMMIT} is not in this clone's history (a shallow clone?): the "
                "rolling-upgrade test builds that older wheelforge from it; `git fetch "
                "--unshallow` brings it")
        began = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="wf-older-", dir=cache))
        try:
            archive = _git("archive", "--format=tar", COMMIT)
            if archive.returncode != 0:
                raise AssertionError(f"git archive {COMMIT} failed: {archive.stderr.decode()}")
            src = work / "src"
            src.mkdir()
            subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
            out = work / "build"
            for argv in (
                ["cmake", "-S", str(src), "-B", str(out), "-DCMAKE_BUILD_TYPE=Debug",
                 "-DCMAKE_CXX_FLAGS_DEBUG=-O0", "-DCMAKE_UNITY_BUILD=ON", "-DWF_BUILD_TESTS=OFF",
                 *compiler()],
                ["cmake", "--build", str(out), f"-j{os.cpu_count() or 2}", "--target",
                 "wheelforge"],
            ):
                print(f"+ {' '.join(argv)}", file=log, flush=True)
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
                if proc.returncode != 0:
                    raise AssertionError(
                        f"building wheelforge {COMMIT[:12]} failed ({argv[1]} exited "
                        f"{proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            target.parent.mkdir(parents=True, exist_ok=True)
            staged = target.with_name(".wheelforge.tmp")
            shutil.copy2(out / "wheelforge", staged)
            os.replace(staged, target)
            print(f"wheelforge {COMMIT[:12]} built in {time.monotonic() - began:.0f}s", file=log)
            return target
        finally:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> int:
    if argv[:1] != ["build"]:
        print("usage: older_release.py build   (into $WF_TEST_CACHE or build/test-cache)")
        return 2
    try:
        print(build())
    except AssertionError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
