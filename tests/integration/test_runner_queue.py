"""Build runners on many hosts (docs/scale.md, "Runners on many hosts"): the job queue lives in
the PostgreSQL catalog; a server that runs no jobs (`[build] run_jobs = false`) accepts the
builds, and two `wheelforge runner` processes, each with a data directory of its own (as on two
hosts) and the files in one S3 store, claim them. Each job runs exactly once; a runner killed
with SIGKILL in the middle of a build has its job taken over by the other once its lease has
passed, started over, and published.

Real PostgreSQL (pg_cluster.py), real Swift with its S3 API (swift_s3.py); the builds are the
runner tests' fake compilers (shell scripts), with the torch stand-in installed from the
server's own index. Each build appends its WHEELFORGE_JOB (BUILDS_DIR#JOB) to a file: that file
counts the runs, and says which runner ran each.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from swift_s3 import swift_s3  # noqa: F401 (a Swift of its own outside WF_TEST_BACKEND=pg-s3)
from test_runner import (
    Admin,
    fake_recipe,
    require_tools,
    upload_stand_in_torch,
    write_config,
    write_fake_source,
)
from wfhelpers import clean_env, wait_for

# How long a job may take before the test gives up on it: each one builds a fresh virtual
# environment, which takes minutes on a machine loaded by other suites running beside this one.
JOB_TIMEOUT = 300.0
# Short, so that a killed runner's job is taken over soon; long enough that a live runner's
# heartbeat (every third of it) renews it on a loaded machine.
LEASE_SECONDS = 4

# Appends the job's WHEELFORGE_JOB to the count file, then builds.
COUNT_SH = """\
echo "$WHEELFORGE_JOB" >> "$WF_COUNT_FILE"
exec "$1" fake_wheel.py "$2"
"""
# Appends, then waits for the release file (bounded: a test that failed leaves no build behind
# for long), then builds.
HOLD_SH = """\
echo "$WHEELFORGE_JOB" >> "$WF_COUNT_FILE"
n=0
while [ ! -e "$WF_RELEASE_FILE" ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done
exec "$1" fake_wheel.py "$2"
"""


@pytest.fixture
def swift(request, wf_backend):
    """The Swift of the pg-s3 backend when the suite runs on it, else the session's own."""
    if wf_backend is not None:
        return wf_backend.swift
    return request.getfixturevalue("swift_s3")


def stores_table(harness, store: dict, prefix: str) -> str:
    secret = harness.root / "s3-secret"
    secret.write_text(store["secret_key"] + "\n")
    return (
        f'blob_store = "s3://{store["bucket"]}/{prefix}"\n'
        'file_serving = "redirect"\n'
        "[s3]\n"
        f'endpoint = "{store["endpoint"]}"\n'
        f'region = "{store["region"]}"\n'
        f'access_key_id = "{store["access_key"]}"\n'
        f'secret_access_key_file = "{secret}"\n'
    )


def config_file(harness, name: str, recipes: dict, source: Path, top: str, stores: str,
                **build) -> Path:
    """write_config's [build] and [recipes], with top-level keys and the stores' tables."""
    path = harness.root / name
    write_config(path, recipes, fake_source=source, **build)
    path.write_text(top + stores.split("[s3]")[0] + path.read_text() + "\n[s3]" +
                    stores.split("[s3]")[1])
    return path


class Runner:
    """One `wheelforge runner` process on its own data directory."""

    def __init__(self, harness, binary: Path, name: str, config: Path, catalog: str):
        self.data_dir = harness.path(f"{name}-data")
        self.builds_dir = self.data_dir / "builds"
        self.log_path = harness.root / f"{name}.log"
        cmd = [str(binary), "runner", "--config", str(config), "--data-dir", str(self.data_dir),
               "--catalog", catalog]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log,
                                         stdin=subprocess.DEVNULL, env=clean_env())
        line = self.proc.stdout.readline().decode().strip()
        assert line.startswith("runner "), f"runner did not start: {line!r}\n{self.log()}"
        self.id = line.removeprefix("runner ")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def runs(count_file: Path) -> list[tuple[str, int]]:
    """(builds dir, job id) of every build that ran, in order."""
    if not count_file.exists():
        return []
    out = []
    for line in count_file.read_text().split():
        builds, _, job = line.rpartition("#")
        out.append((builds, int(job)))
    return out


def test_two_runners_claim_each_job_once_and_take_over_a_killed_ones_job(
        harness, wheelforge_bin, pg_database, swift):
    require_tools(nvcc=False)
    h = harness
    count_file = h.root / "runs.txt"
    release = h.root / "release"
    source = write_fake_source(h.path("src", "fake"))
    (source / "count.sh").write_text(COUNT_SH)
    (source / "hold.sh").write_text(HOLD_SH)
    env = {"WF_COUNT_FILE": str(count_file), "WF_RELEASE_FILE": str(release)}
    never = {**env, "WF_RELEASE_FILE": str(h.root / "never")}
    quick = ["q0", "q1"]
    recipes = {name: fake_recipe(f"wf-queue-{name}", "sh ./count.sh {python} {out}", env=env)
               for name in quick}
    recipes["hold"] = fake_recipe("wf-queue-hold", "sh ./hold.sh {python} {out}", env=env)
    recipes["stuck"] = fake_recipe("wf-queue-stuck", "sh ./hold.sh {python} {out}", env=never)
    stores = stores_table(h, swift, f"queue-{os.getpid()}-{time.monotonic_ns()}")

    # The server accepts builds and serves; it runs none.
    server_config = config_file(h, "server.toml", recipes, source, "", stores, run_jobs=False)
    common = ["--config", str(server_config), "--catalog", pg_database]
    token = h.cli("token", "create", "--data-dir", str(h.data_dir), "--scope", "admin", *common)
    assert token.returncode == 0, token.stderr
    admin_token = token.stdout.split()[-1]
    upload = h.cli("token", "create", "--data-dir", str(h.data_dir), "--scope", "upload", *common)
    assert upload.returncode == 0, upload.stderr
    h._tokens["upload"] = upload.stdout.split()[-1]
    server = h.serve(*common)
    upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))
    admin = Admin(server, admin_token)
    assert "runs no jobs" in server.log()

    # Two runners, each on its own data directory; torch from the server's index.
    runner_config = config_file(h, "runner.toml", recipes, source, f'base_url = "{server.url}"\n',
                                stores, lease=f"{LEASE_SECONDS}s")
    runners = [Runner(h, wheelforge_bin, name, runner_config, pg_database) for name in ("a", "b")]
    try:
        assert runners[0].id != runners[1].id
        # Several jobs at once: each runs exactly once, on one of the runners.
        created = [admin.submit(name)["jobs"][0]["id"] for name in quick]
        jobs = admin.wait_jobs(created, JOB_TIMEOUT)
        for job in jobs.values():
            assert job["state"] == "succeeded", admin.describe(job) + "\n" + runners[0].log() + \
                runners[1].log()
            assert job["runner"] in (runners[0].id, runners[1].id), job
        ran = runs(count_file)
        assert sorted(j for _, j in ran) == sorted(created), ran
        by_dir = {str(r.builds_dir): r.id for r in runners}
        for builds, job_id in ran:
            assert by_dir[builds] == jobs[job_id]["runner"], (builds, jobs[job_id])
        # What the runners published is served by the server, from the one store.
        for job in jobs.values():
            page = f"/simple/wf-queue-{job['recipe']}/"
            assert wait_for(lambda: job["wheel"] in server.get(page).text, timeout=10), job

        # A runner killed with SIGKILL in the middle of a build: the other takes the job over
        # once the lease has passed, starts it over and finishes it.
        held = admin.submit("hold")["jobs"][0]["id"]
        assert wait_for(lambda: any(j == held for _, j in runs(count_file)), timeout=JOB_TIMEOUT), \
            admin.describe(admin.job(held))
        first_dir = next(b for b, j in runs(count_file) if j == held)
        victim = next(r for r in runners if str(r.builds_dir) == first_dir)
        survivor = next(r for r in runners if r is not victim)
        assert admin.job(held)["runner"] == victim.id
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=10)
        # Taken over: the survivor's build of the job starts (the lease is 2 s).
        assert wait_for(lambda: [b for b, j in runs(count_file) if j == held] ==
                        [first_dir, str(survivor.builds_dir)], timeout=30), \
            (runs(count_file), survivor.log())
        release.write_text("go\n")
        job = admin.wait_jobs([held], JOB_TIMEOUT)[held]
        assert job["state"] == "succeeded", admin.describe(job) + "\n" + survivor.log()
        assert job["runner"] == survivor.id, job
        assert [b for b, j in runs(count_file) if j == held] == [first_dir, str(survivor.builds_dir)]
        log = (survivor.builds_dir / f"job-{held}" / "log.txt").read_text()
        assert f"taken over from runner {victim.id}" in log, log
        assert f"started over on runner {survivor.id}" in log, log
        assert wait_for(lambda: job["wheel"] in server.get("/simple/wf-queue-hold/").text,
                        timeout=10), job
        # Nothing ran twice but the job that was taken over.
        ran = [j for _, j in runs(count_file)]
        assert sorted(ran) == sorted(created + [held, held]), ran

        # A job cancelled through the server while the runner builds it: the runner sees the
        # cancellation at its next heartbeat and ends the build.
        stuck = admin.submit("stuck")["jobs"][0]["id"]
        assert wait_for(lambda: any(j == stuck for _, j in runs(count_file)), timeout=JOB_TIMEOUT), \
            admin.describe(admin.job(stuck))
        resp = admin.request("POST", f"/admin/jobs/{stuck}/cancel")
        assert resp.status == 200, resp.text
        assert admin.job(stuck)["state"] == "cancelled"
        stuck_log = survivor.builds_dir / f"job-{stuck}" / "log.txt"
        assert wait_for(lambda: "cancelled: the process tree was killed" in stuck_log.read_text(),
                        timeout=10), stuck_log.read_text() + survivor.log()
        assert admin.job(stuck)["state"] == "cancelled"
    finally:
        release.write_text("go\n")
        for r in runners:
            r.stop()
