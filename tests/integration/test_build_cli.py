"""`wheelforge build` and the build runner's configuration, end to end: the command talks to
the server the configuration describes, shows each job's log path, a live tail and the elapsed
times, and SIGINT/SIGTERM cancel its jobs' process trees; `config check` validates [build] and
[recipes] and reports every problem; SIGHUP reloads the recipes of a running server.

Builds use the fake compilers and STAND-IN torch wheels of test_runner.py (no nvcc needed).
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sqlite3
import threading
import tomllib
from pathlib import Path

import pytest

import wfbackend
from build_provenance import signed_build_statement
from conftest import Harness
from test_runner import (
    CUDA_HOME,
    FAULT_TIMEOUT,
    STATE_ORDER,
    Admin,
    alive,
    fake_recipe,
    kill_leftovers,
    read_pids,
    require_tools,
    upload_stand_in_torch,
    write_config,
    write_fake_source,
)
from wfhelpers import (JSON_TYPE, SERVER_START_TIMEOUT, Server, catalog_query, clean_env, run,
                       wait_for)

CELL = "py3.11-torch2.8-cu130"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_top_level(config: Path, **settings: str) -> Path:
    """Puts top-level settings in front of a configuration written by write_config()."""
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    config.write_text("\n".join(lines) + "\n" + config.read_text())
    return config


class ConfiguredServer(Server):
    """`wheelforge serve --config FILE` with nothing else: listen and data_dir from the file."""

    def __init__(self, binary: Path, data_dir: Path, log_path: Path, config: Path):
        super().__init__(binary, data_dir, log_path, [])
        self.config = config

    def start(self) -> None:
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                wfbackend.command([self.binary, "serve", "--config", self.config],
                                  data_dir=self.data_dir),
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, env=clean_env(),
            )
        finally:
            log.close()
        line = self._read_first_line(SERVER_START_TIMEOUT)
        match = re.fullmatch(r"listening on (http://127\.0\.0\.1:\d+)", line.strip())
        assert match, f"unexpected first line from `serve`: {line!r}"
        self.url = match.group(1)


def serve_configured(h: Harness, config: Path) -> Server:
    server = ConfiguredServer(h.binary, h.data_dir, h.root / f"server{len(h.servers)}.log", config)
    h.servers.append(server)
    server.start()
    return server


class Command:
    """A `wheelforge build` running in the background, its stdout collected line by line."""

    def __init__(self, h: Harness, *args: str):
        self.proc = subprocess.Popen(
            wfbackend.command([h.binary, "build", *args], cwd=h.root), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, env=clean_env(), cwd=h.root,
        )
        self.lines: list[str] = []
        self.stderr = ""
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._out.start()
        self._err.start()

    def _read_stdout(self) -> None:
        for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def _read_stderr(self) -> None:
        self.stderr = self.proc.stderr.read().decode(errors="replace")

    @property
    def stdout(self) -> str:
        return "".join(line + "\n" for line in self.lines)

    def wait(self, timeout: float) -> int:
        rc = self.proc.wait(timeout)
        self._out.join(10)
        self._err.join(10)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def job_processes(data_dir: Path, job_ids) -> dict[int, int]:
    """pid -> job id of every live process that carries a job's WHEELFORGE_JOB marker."""
    markers = {f"WHEELFORGE_JOB={data_dir.resolve()}/builds#{j}".encode(): j for j in job_ids}
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if state in ("Z", "X"):
            continue
        for variable in environ:
            if variable in markers:
                found[int(entry.name)] = markers[variable]
    return found


def job_lines(stdout: str) -> dict[int, list[str]]:
    """The state lines per job id ("job 7 CELL: STATE ..."), in order; log path lines left out."""
    out: dict[int, list[str]] = {}
    for m in re.finditer(r"^job (\d+) \S+: (\w+)(.*)$", stdout, re.M):
        if m.group(2) != "log":
            out.setdefault(int(m.group(1)), []).append(m.group(2) + m.group(3))
    return out


def builds_in_catalog(data_dir: Path) -> int:
    if wfbackend.active() is None and not (data_dir / "wheelforge.db").exists():
        return 0
    try:
        return int(catalog_query(data_dir, "SELECT count(*) FROM builds")[0][0])
    except sqlite3.OperationalError:  # no catalog yet
        return 0


# ---------------------------------------------------------------------------------------------
# Where `wheelforge build` finds the server


def test_build_talks_to_the_server_the_configuration_describes(harness):
    """listen (a port other than 8080) and data_dir come from the configuration file only; the
    command installs torch from that server, prints the job's log path, a tail of its log and
    the elapsed times; `--no-cache` builds without the compile cache (a request's "cache":
    false)."""
    require_tools(nvcc=False)
    h = harness
    h.token("upload")
    port = free_port()
    config = with_top_level(
        write_config(
            h.root / "wheelforge.toml",
            {"cli": fake_recipe("wf-fake-cli", "{python} fake_wheel.py {out}",
                                local_version_variable="WF_FAKE_LOCAL_VERSION")},
            fake_source=write_fake_source(h.path("src", "fake")),
        ),
        listen=f"127.0.0.1:{port}",
        data_dir=str(h.data_dir),
    )
    server = serve_configured(h, config)
    assert server.url == f"http://127.0.0.1:{port}"
    upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))

    proc = h.cli("build", "--config", str(config), "cli", "1.0.0", timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    out = proc.stdout
    assert not CONTROL.search(out), f"control characters in non-terminal output: {out!r}"
    lines = out.splitlines()
    assert lines[0] == (
        f"build 1: cli 1.0.0, 1 job, torch from http://127.0.0.1:{port}/{{cuda}}/torch{{torch}}/simple/"
    ), lines[0]

    # The log path, printed first, exists and holds what the tail showed.
    path_line = re.fullmatch(rf"job (\d+) {CELL}: log (/\S+/log\.txt)", lines[1])
    assert path_line, lines[1]
    job_id, log_path = int(path_line.group(1)), Path(path_line.group(2))
    assert log_path.is_file(), log_path
    log = log_path.read_text()
    index = f"--index-url http://127.0.0.1:{port}/cu130/torch2.8/simple/"
    assert index in log, log[-3000:]
    tail = [line[2:] for line in lines if line.startswith("  ")]
    assert any(index in line for line in tail), out
    assert "  fake_wheel: wrote wf_fake_cli-1.0.0+cu130torch2.8-py3-none-any.whl" in lines, out
    for line in tail:
        assert line in log, f"tail line not in the log: {line!r}"

    states = [s.split()[0] for s in job_lines(out)[job_id]]
    assert states[-1] == "succeeded", states
    assert states == sorted(states, key=STATE_ORDER.index), f"states out of order: {states}"
    wheel = "wf_fake_cli-1.0.0+cu130torch2.8-py3-none-any.whl"
    assert re.search(rf"^job {job_id} {CELL}: succeeded in \d[\dhms.]*s -> {re.escape(wheel)}$",
                     out, re.M), out
    assert re.search(rf"^job {job_id} {CELL}  succeeded +\d[\dhms.]*s  {re.escape(wheel)}$",
                     out, re.M), out
    assert re.fullmatch(r"1 succeeded, 0 failed in \d[\dhms.]*s", lines[-1]), lines[-1]

    # The wheel is in the index of that server, built against the torch it served.
    assert wheel in h.filenames()

    def listed() -> bool:
        resp = server.get("/cu130/torch2.8/simple/wf-fake-cli/", {"Accept": JSON_TYPE})
        return resp.status == 200 and wheel in {f["filename"] for f in resp.json()["files"]}

    assert wait_for(listed, 5.0), "the server does not list the wheel the command built"

    # It has provenance, signed with the data directory's own key (made on first use, read by
    # the one-off runner too) and verified with the certificate the server publishes.
    statement = signed_build_statement(server, "wf-fake-cli", wheel)
    definition = statement["predicate"]["buildDefinition"]
    assert definition["externalParameters"] == {
        "recipe": "cli", "project": "wf-fake-cli", "version": "1.0.0",
        "cell": {"python": "3.11", "torch": "2.8", "cuda": "13.0"},
        "source": {"kind": "path", "uri": "file://" + str(h.path("src", "fake"))},
    }, definition
    assert definition["internalParameters"]["arch_list"] == "8.0", definition
    assert definition["resolvedDependencies"] == [
        {"uri": "file://" + str(h.path("src", "fake"))}], definition
    run_details = statement["predicate"]["runDetails"]
    assert run_details["builder"]["id"] == server.url, run_details
    assert run_details["builder"]["version"]["torch"] == "2.8.0+cu130", run_details
    assert run_details["builder"]["version"]["python"].startswith("3.11."), run_details
    assert run_details["metadata"]["invocationId"] == f"build 1 job {job_id}", run_details
    key_file = h.data_dir / "keys" / "build-provenance-key.pem"
    assert key_file.stat().st_mode & 0o777 == 0o600, oct(key_file.stat().st_mode)
    assert "==> [ingesting] " + wheel in log and " with signed provenance" in log, log[-2000:]
    assert "Successfully installed torch-2.8.0+cu130" in log, log[-3000:]
    assert 'compile cache off: the build request said "cache": false' not in log, log[-3000:]

    # --no-cache is the request's "cache": false: the forced rebuild compiles without the cache.
    proc = h.cli("build", "--config", str(config), "cli", "1.0.0", "--force", "--no-cache",
                 timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    path_line = re.fullmatch(rf"job (\d+) {CELL}: log (/\S+/log\.txt)", proc.stdout.splitlines()[1])
    assert path_line and int(path_line.group(1)) != job_id, proc.stdout
    rebuilt_log = Path(path_line.group(2)).read_text()
    assert ('==> [building] compile cache off: the build request said "cache": false\n'
            in rebuilt_log), rebuilt_log[-3000:]
    assert re.search(r"^1 succeeded, 0 failed in ", proc.stdout, re.M), proc.stdout


def test_build_refuses_when_no_server_answers(harness):
    require_tools(nvcc=False)
    h = harness
    port = free_port()  # nothing listens there
    source = write_fake_source(h.path("src", "fake"))
    recipes = {"cli": fake_recipe("wf-fake-cli", "{python} fake_wheel.py {out}")}
    config = with_top_level(write_config(h.root / "a.toml", recipes, fake_source=source),
                            listen=f"127.0.0.1:{port}", data_dir=str(h.data_dir))
    proc = h.cli("build", "--config", str(config), "cli", "1.0.0")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"no server answers at http://127.0.0.1:{port}" in proc.stderr, proc.stderr
    assert f"torch is installed from http://127.0.0.1:{port}/{{cuda}}/torch{{torch}}/simple/" in proc.stderr
    assert builds_in_catalog(h.data_dir) == 0, "a build was recorded although nothing could run"

    # A port only known once the server runs cannot be reached: base_url must say where.
    config = with_top_level(write_config(h.root / "b.toml", recipes, fake_source=source),
                            listen="127.0.0.1:0", data_dir=str(h.data_dir))
    proc = h.cli("build", "--config", str(config), "cli", "1.0.0")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "has port 0" in proc.stderr and "base_url" in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------------------
# Cancellation


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_cancels_the_jobs_and_their_process_trees(harness, sig):
    require_tools(nvcc=False)
    h = harness
    h.token("upload")
    admin_token = h.token("admin")
    pids_file = h.root / "pids.txt"
    index = h.serve()  # serves the torch stand-ins; runs no builds
    upload_stand_in_torch(h, index, versions=("2.8.0+cu130",))
    config = with_top_level(
        write_config(
            h.root / "wheelforge.toml",
            {"long": fake_recipe("wf-fake-long", "sh ./hang.sh", timeout="10m",
                                 env={"WF_PIDS_FILE": str(pids_file)},
                                 matrix={"python": ["3.11", "3.12"], "torch": ["2.8"],
                                         "cuda": ["13.0"]})},
            fake_source=write_fake_source(h.path("src", "fake")),
        ),
        base_url=index.url,
        data_dir=str(h.data_dir),
    )
    command = Command(h, "--config", str(config), "long", "1.0.0")
    try:
        # A job builds: its shell started two compilers that never end. (The other job runs
        # too where the host has the cores, else it waits in the queue.)
        building = wait_for(lambda: len(read_pids(pids_file)) >= 3 or command.proc.poll() is not None,
                            FAULT_TIMEOUT, 0.2)
        assert building and command.proc.poll() is None, (
            f"the build did not start (exit {command.proc.poll()}):\n{command.stdout}\n{command.stderr}")
        ids = sorted({int(m) for m in re.findall(r"^job (\d+) ", command.stdout, re.M)})
        assert len(ids) == 2, command.stdout
        before = job_processes(h.data_dir, ids)
        assert set(read_pids(pids_file)) <= set(before), (read_pids(pids_file), before)

        command.proc.send_signal(sig)
        rc = command.wait(60)
    finally:
        command.kill()
        kill_leftovers(read_pids(pids_file), "sleep")
    name = signal.Signals(sig).name
    assert rc == 128 + sig, f"exit {rc}\n{command.stdout}\n{command.stderr}"
    assert f"error: {name}: build 1 was cancelled" in command.stderr, command.stderr
    out = command.stdout
    assert not CONTROL.search(out), repr(out)
    assert f"{name}: cancelling the build's jobs" in out, out

    # Nothing of the jobs is left: not the shells, not the compilers they started.
    left = job_processes(h.data_dir, ids)
    assert not left, f"processes of the cancelled jobs still run: {left}"
    assert not [p for p in read_pids(pids_file) if alive(p, "sleep") or alive(p, "hang.sh")]

    # Several jobs: log lines carry their job's cell.
    assert re.search(r"^py3\.1[12]-torch2\.8-cu130 \| fake build: starting two compilers that hang$",
                     out, re.M), out
    summary = out.split("\n\n")[-1]
    assert re.search(r"^0 succeeded, 0 failed, 2 cancelled in \S+$", summary, re.M), summary
    reasons = {}
    for job_id in ids:
        m = re.search(rf"^job {job_id} py3\.1[12]-torch2\.8-cu130  cancelled +\S+  "
                      r"(cancelled while running|cancelled before it started)$", summary, re.M)
        assert m, summary
        reasons[job_id] = m.group(1)
    assert "cancelled while running" in reasons.values(), reasons

    # Recorded cancelled, as the admin API of a server on the data directory reports.
    index.stop()
    server = h.serve("--config", str(config))
    admin = Admin(server, admin_token)
    for job_id in ids:
        job = admin.job(job_id)
        assert job["state"] == "cancelled" and job["reason"] == reasons[job_id], admin.describe(job)
        if reasons[job_id] == "cancelled while running":
            assert "cancelled: the process tree was killed" in admin.log_text(job_id)


# ---------------------------------------------------------------------------------------------
# config check


def fake_nvcc(home: Path, release: str) -> Path:
    """A CUDA home whose bin/nvcc prints what nvcc --version prints for `release`."""
    nvcc = home / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True, exist_ok=True)
    nvcc.write_text("#!/bin/sh\n"
                    "echo 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                    f"echo 'Cuda compilation tools, release {release}, V{release}.41'\n")
    nvcc.chmod(0o755)
    return home


def fake_toolchain(root: Path) -> tuple[Path, Path]:
    """An executable standing in for an interpreter, a CUDA home with a bin/nvcc of release
    12.8, and the source directory GOOD_RECIPE names (ROOT/src/demo)."""
    python = root / "bin" / "python3.12"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    (root / "src" / "demo").mkdir(parents=True, exist_ok=True)
    return python, fake_nvcc(root / "cuda-12.8", "12.8")


GOOD_RECIPE = """
[recipes.demo]
project = "wf-demo"
source = { path = "ROOT/src/demo" }
build_requires = ["ninja"]
timeout = "1h"
[recipes.demo.matrix]
python = ["3.12"]
torch = ["2.8", "2.9"]
cuda = ["12.8"]
exclude = [{ torch = "2.9" }]
"""


def test_config_check_accepts_a_good_build_configuration(harness):
    python, cuda = fake_toolchain(harness.root)
    config = harness.root / "good.toml"
    config.write_text(
        f'listen = "127.0.0.1:7001"\n[build]\nmemory_reserve = "1G"\n'
        f'[build.python]\n"3.12" = "{python}"\n[build.cuda]\n"12.8" = "{cuda}"\n'
        + GOOD_RECIPE.replace("ROOT", str(harness.root))
    )
    proc = harness.cli("config", "check", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    printed = tomllib.loads(proc.stdout)
    assert printed["listen"] == "127.0.0.1:7001"
    assert "# build runner: 1 recipe(s)" in proc.stdout, proc.stdout
    assert "#   demo: wf-demo, 1 cell(s)" in proc.stdout, proc.stdout


def test_config_check_reports_every_build_problem(harness):
    python, cuda = fake_toolchain(harness.root)
    missing = harness.root / "no-such-python"
    config = harness.root / "bad.toml"
    config.write_text(f"""
worker_threds = 4
[build]
max_concurrent_jobs = "two"
oom_retry = 3
[build.python]
"3.12" = "{python}"
"3.11" = "{missing}"
[build.cuda]
"12.8" = "{cuda}"
"13.0" = "{harness.root}/cuda-13.0"
[recipes.demo]
project = "wf-demo"
timout = "1h"
gb_per_job = 0
[recipes.demo.matrix]
python = ["3.12", "3.13"]
torch = []
cuda = ["12.8", "12.6"]
""")
    proc = harness.cli("config", "check", "--config", str(config))
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout == ""
    problems = proc.stderr.splitlines()
    expected = [
        f"error: unknown setting 'worker_threds' in {config} (did you mean 'worker_threads'?)",
        "error: build.max_concurrent_jobs: expected a whole number from 0 to 256, got 'two'",
        "error: unknown setting 'oom_retry' in [build] (did you mean 'oom_retries'?)",
        "error: unknown setting 'timout' in [recipes.demo] (did you mean 'timeout'?)",
        "error: recipes.demo.gb_per_job: expected a number of GiB above 0, got 0",
        "error: recipes.demo.matrix: the matrix lists no torch series",
        "error: recipes.demo.matrix.python: 3.13 has no interpreter in [build.python] "
        "(configured: 3.11, 3.12)",
        "error: recipes.demo.matrix.cuda: 12.6 has no toolkit in [build.cuda] "
        "(configured: 12.8, 13.0)",
        f"error: build.python.3.11: {missing} does not exist",
        f"error: build.cuda.13.0: {harness.root}/cuda-13.0 does not exist",
    ]
    assert sorted(problems) == sorted(expected), "\n".join(problems)

    # Only the host's problems: still an error for config check ...
    config.write_text(
        f'[build.python]\n"3.12" = "{missing}"\n[build.cuda]\n"12.8" = "{harness.root}"\n'
        + GOOD_RECIPE.replace("ROOT", str(harness.root))
    )
    proc = harness.cli("config", "check", "--config", str(config))
    assert proc.returncode == 2, proc.stdout
    assert sorted(proc.stderr.splitlines()) == sorted([
        f"error: build.python.3.12: {missing} does not exist",
        f"error: build.cuda.12.8: {harness.root} has no executable bin/nvcc",
    ]), proc.stderr
    # ... while the server starts with it and warns (those cells' jobs would fail).
    server = harness.serve("--config", str(config))
    assert wait_for(lambda: f"build.python.3.12: {missing} does not exist" in server.log(), 5.0), (
        server.log_tail())
    assert server.get("/healthz").status == 200


def test_config_check_reports_a_missing_source_and_a_toolkit_of_another_release(harness):
    root = harness.root
    python, cuda = fake_toolchain(root)
    # A toolkit of 13.0 under the key 12.9, and a source directory that is not there.
    mislabelled = fake_nvcc(root / "cuda-13.0", "13.0")
    missing = root / "src" / "gone"
    not_a_dir = root / "src" / "file"
    not_a_dir.write_text("")
    recipes = ""
    for name, where in (("gone", missing), ("file", not_a_dir), ("demo", root / "src" / "demo")):
        recipes += (f'[recipes.{name}]\nproject = "wf-{name}"\nsource = {{ path = "{where}" }}\n'
                    f'[recipes.{name}.matrix]\npython = ["3.12"]\ntorch = ["2.8"]\n'
                    f'cuda = ["12.8", "12.9"]\n')
    config = root / "cuda.toml"
    config.write_text(f'[build.python]\n"3.12" = "{python}"\n[build.cuda]\n"12.8" = "{cuda}"\n'
                      f'"12.9" = "{mislabelled}"\n' + recipes)
    proc = harness.cli("config", "check", "--config", str(config))
    assert proc.returncode == 2, proc.stdout
    assert sorted(proc.stderr.splitlines()) == sorted([
        f"error: recipes.gone.source.path: {missing} does not exist",
        f"error: recipes.file.source.path: {not_a_dir} is not a directory",
        f"error: build.cuda.12.9: {mislabelled}/bin/nvcc reports release 13.0 (V13.0.41), not "
        "12.9: the key must name the toolkit's own release",
    ]), proc.stderr

    # The real toolkit of this host, under a key that contradicts it.
    if not (CUDA_HOME / "bin" / "nvcc").exists():
        return
    real = run([str(CUDA_HOME / "bin" / "nvcc"), "--version"], timeout=60)
    release = re.search(r"release (\d+\.\d+)", real.stdout).group(1)
    wrong = "12.9" if release != "12.9" else "12.8"
    config.write_text(f'[build.python]\n"3.12" = "{python}"\n[build.cuda]\n'
                      f'"{wrong}" = "{CUDA_HOME}"\n'
                      f'[recipes.demo]\nproject = "wf-demo"\n'
                      f'source = {{ path = "{root / "src" / "demo"}" }}\n'
                      f'[recipes.demo.matrix]\npython = ["3.12"]\ntorch = ["2.8"]\n'
                      f'cuda = ["{wrong}"]\n')
    proc = harness.cli("config", "check", "--config", str(config))
    assert proc.returncode == 2, proc.stdout
    assert re.fullmatch(rf"error: build\.cuda\.{re.escape(wrong)}: {re.escape(str(CUDA_HOME))}"
                        rf"/bin/nvcc reports release {re.escape(release)} \(V[\d.]+\), not "
                        rf"{re.escape(wrong)}: the key must name the toolkit's own release\n",
                        proc.stderr), proc.stderr


# ---------------------------------------------------------------------------------------------
# SIGHUP


def reload_and_wait(server: Server, count: int) -> str:
    """Sends SIGHUP and waits for the server's count-th "SIGHUP:" outcome line; returns it."""
    server.proc.send_signal(signal.SIGHUP)

    def outcome():
        found = re.findall(r"SIGHUP: (reloaded.*|reload failed.*)$", server.log(), re.M)
        return found[count - 1] if len(found) >= count else None

    line = wait_for(outcome, 20.0)
    assert line, f"no outcome of SIGHUP #{count}:\n{server.log_tail()}"
    return line


def test_sighup_reloads_recipes_for_the_next_build(harness):
    require_tools(nvcc=False)
    h = harness
    h.token("upload")
    admin_token = h.token("admin")
    source = write_fake_source(h.path("src", "fake"))
    config = h.root / "wheelforge.toml"

    def recipes(version: str, mark: str, **more) -> dict:
        return {
            "hup": fake_recipe(
                "wf-fake-hup", f"echo recipe-{mark} && {{python}} fake_wheel.py {{out}}",
                env={"WF_FAKE_VERSION": version},
                local_version_variable="WF_FAKE_LOCAL_VERSION",
            ),
            **more,
        }

    write_config(config, recipes("1.0.0", "one"), fake_source=source)
    server = h.serve("--config", str(config))
    upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))
    admin = Admin(server, admin_token)
    first = admin.run_one("hup", version="1.0.0")
    assert first["state"] == "succeeded", admin.describe(first)
    assert "recipe-one" in admin.log_text(first["id"])
    assert admin.request("POST", "/admin/builds", {"recipe": "added", "version": "1.0.0"}).status == 400

    # A changed recipe, and a new one: the next builds use them.
    write_config(config, recipes("1.0.1", "two", added=fake_recipe(
        "wf-fake-added", "{python} fake_wheel.py {out}")), fake_source=source)
    outcome = reload_and_wait(server, 1)
    assert outcome.startswith("reloaded") and "build runner: 2 recipe(s)" in outcome, outcome
    second = admin.run_one("hup", version="1.0.1")
    assert second["state"] == "succeeded", admin.describe(second)
    log = admin.log_text(second["id"])
    assert "recipe-two" in log and "recipe-one" not in log, log[-2000:]
    assert second["wheel"] == "wf_fake_hup-1.0.1+cu130torch2.8-py3-none-any.whl", second
    added = admin.run_one("added", version="1.0.0")
    assert added["state"] == "succeeded", admin.describe(added)

    # A broken file that would also change the recipe: every problem is logged and nothing of
    # it applies.
    write_config(config, recipes("1.0.2", "three", added=fake_recipe(
        "wf-fake-added", "{python} fake_wheel.py {out}")), fake_source=source)
    broken = (config.read_text()
              .replace("[recipes.hup]\n", "[recipes.hup]\ncolour = 1\n", 1)
              .replace('timeout = "5m"', 'timeout = "soon"', 1))
    config.write_text(broken + '\n[recipes.third]\nproject = "wf-fake-third"\n')
    outcome = reload_and_wait(server, 2)
    assert outcome.startswith("reload failed, keeping the running configuration: 3 problem(s)"), outcome
    log = server.log()
    for problem in ("SIGHUP: unknown setting 'colour' in [recipes.hup]",
                    "SIGHUP: recipes.hup.timeout: expected a duration such as 90s, 10m or 2h, "
                    "got 'soon'",
                    "SIGHUP: recipes.third.matrix: missing"):
        assert problem in log, f"{problem!r} not logged:\n{server.log_tail()}"
    resp = admin.request("POST", "/admin/builds", {"recipe": "third", "version": "1.0.0"})
    assert resp.status == 400 and "third" in resp.text, resp.text
    # The recipe in effect is still the second one: it builds 1.0.1, so 1.0.2 fails.
    kept = admin.run_one("hup", version="1.0.2")
    assert kept["state"] == "failed" and "1.0.1, not 1.0.2" in kept["reason"], admin.describe(kept)
    log = admin.log_text(kept["id"])
    assert "recipe-two" in log and "recipe-three" not in log, log[-2000:]
    assert server.get("/healthz").status == 200
