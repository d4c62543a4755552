"""Git sources of the build runner, with real git repositories made here: a superproject whose
build reads files from a submodule and from that submodule's own submodule, served from this
host's filesystem and by a loopback HTTP server that asks for credentials (git's dumb HTTP
protocol: Python's http.server with HTTP Basic in front of the bare repositories). The fake
compiler of test_runner.py writes the wheel; the torch wheels are its stand-ins.

What must hold: submodules are fetched recursively unless the recipe says otherwise; a private
repository builds with the recipe's credentials only (a credential-store file, or a token in
the URL); and the token shows nowhere: not in job logs (on disk and through the admin API and
the web UI), not in job JSON, not in the server's log.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from build_provenance import signed_build_statement
from test_runner import (
    FAULT_TIMEOUT,
    Admin,
    attach,
    fake_recipe,
    require_tools,
    shared_harness,
    upload_stand_in_torch,
    view_files,
    write_config,
    write_fake_source,
)

USER = "wf-builder"
TOKEN = "glpat-wfTESTtoken0123456789abcdef"
WRONG_TOKEN = "glpat-wfWRONGtoken9876543210fedcba"
# The build reads a file of the submodule and one of the submodule's submodule.
READS_SUBMODULES = "cat vendor/sub/sub.txt vendor/sub/deep/deep.txt && {python} fake_wheel.py {out}"
# The same reads, then a stop before the wheel: what the fetch brought is in the log, and the
# job ends without the (slow) smoke test. ECHO: what else the build prints first.
def READS_THEN_STOPS(echo: str = "") -> str:  # noqa: N802 - a constant's shape
    return f"cat vendor/sub/sub.txt vendor/sub/deep/deep.txt && {echo}exit 3"


def git(*args: str, cwd: Path, home: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "wheelforge test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "wheelforge test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
    }
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stdout}{proc.stderr}"


def make_repositories(root: Path) -> Path:
    """Bare repositories super.git -> vendor/sub (sub.git) -> deep (deep.git), each submodule
    named by a relative URL (resolved against where its superproject was cloned from). Returns
    the directory that holds them."""
    repos = root / "repos"
    work = root / "work"
    home = root / "git-home"
    home.mkdir(parents=True)
    repos.mkdir()
    allow_file = ["-c", "protocol.file.allow=always"]

    def publish(name: str, tree: Path) -> None:
        git("init", "--quiet", "--bare", str(repos / f"{name}.git"), cwd=root, home=home)
        git("push", "--quiet", str(repos / f"{name}.git"), "HEAD:refs/heads/main", cwd=tree,
            home=home)
        git("symbolic-ref", "HEAD", "refs/heads/main", cwd=repos / f"{name}.git", home=home)
        # The dumb HTTP protocol reads these.
        git("update-server-info", cwd=repos / f"{name}.git", home=home)

    def new_tree(name: str) -> Path:
        tree = work / name
        tree.mkdir(parents=True)
        git("init", "--quiet", "-b", "main", cwd=tree, home=home)
        git("remote", "add", "origin", str(repos / f"{name}.git"), cwd=tree, home=home)
        return tree

    deep = new_tree("deep")
    (deep / "deep.txt").write_text("from the submodule's submodule\n")
    git("add", ".", cwd=deep, home=home)
    git("commit", "--quiet", "-m", "deep", cwd=deep, home=home)
    publish("deep", deep)

    sub = new_tree("sub")
    (sub / "sub.txt").write_text("from the submodule\n")
    git(*allow_file, "submodule", "--quiet", "add", "../deep.git", "deep", cwd=sub, home=home)
    git("add", ".", cwd=sub, home=home)
    git("commit", "--quiet", "-m", "sub", cwd=sub, home=home)
    publish("sub", sub)

    top = new_tree("super")
    write_fake_source(top)
    git(*allow_file, "submodule", "--quiet", "add", "../sub.git", "vendor/sub", cwd=top, home=home)
    git("add", ".", cwd=top, home=home)
    git("commit", "--quiet", "-m", "super", cwd=top, home=home)
    git("tag", "v1.0.0", cwd=top, home=home)
    publish("super", top)
    git("push", "--quiet", str(repos / "super.git"), "v1.0.0", cwd=top, home=home)
    git("update-server-info", cwd=repos / "super.git", home=home)
    return repos


class GitHttpServer:
    """The bare repositories over git's dumb HTTP protocol on loopback, every request needing
    HTTP Basic with USER:TOKEN (401 with WWW-Authenticate otherwise). Records the paths it
    served to authenticated clients."""

    def __init__(self, repos: Path):
        self.served: list[str] = []
        self.refused = 0
        outer = self
        expected = "Basic " + base64.b64encode(f"{USER}:{TOKEN}".encode()).decode()

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(repos), **kwargs)

            def do_GET(self):  # noqa: N802 - http.server's name
                if self.headers.get("Authorization") != expected:
                    outer.refused += 1
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="git"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                outer.served.append(self.path.split("?", 1)[0])
                super().do_GET()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class GitBed:
    def __init__(self, h, server, admin, repos, http_server, credentials, jobs):
        self.h = h
        self.server = server
        self.admin = admin
        self.repos = repos
        self.http = http_server
        self.credentials = credentials
        self.jobs = jobs  # recipe name -> the job as it ended


@pytest.fixture(scope="module")
def _git_bed(request, wheelforge_bin):
    require_tools(nvcc=False)
    with shared_harness(request, wheelforge_bin, "wf-it-git-") as h:
        h.token("upload")
        admin_token = h.token("admin")
        repos = make_repositories(h.root)
        http_server = GitHttpServer(repos)
        try:
            credentials = h.root / "git-credentials"
            credentials.write_text(f"http://{USER}:{TOKEN}@127.0.0.1:{http_server.url.rsplit(':', 1)[1]}\n")
            credentials.chmod(0o600)
            wrong = h.root / "wrong-credentials"
            wrong.write_text(
                f"http://{USER}:{WRONG_TOKEN}@127.0.0.1:{http_server.url.rsplit(':', 1)[1]}\n")
            private = f"{http_server.url}/super.git"
            with_token = private.replace("http://", f"http://{USER}:{TOKEN}@")
            recipes = {
                "local": fake_recipe("wf-git-local", READS_THEN_STOPS(),
                                     source={"git": f"file://{repos / 'super.git'}", "ref": "v1.0.0"}),
                "nosub": fake_recipe("wf-git-nosub", READS_SUBMODULES,
                                     source={"git": str(repos / "super.git"), "submodules": False}),
                "credfile": fake_recipe("wf-git-credfile", READS_SUBMODULES,
                                        source={"git": private, "credentials": str(credentials)}),
                # The build prints the URL with its token, and the token in an error line,
                # last (which the failure's reason quotes).
                "urltoken": fake_recipe("wf-git-urltoken",
                                        READS_THEN_STOPS(f"echo 'remote: {with_token}' && "
                                                         f"echo 'error: refused token {TOKEN}' && "),
                                        source={"git": with_token}),
                # Built and published from a URL with a token: its provenance names the URL
                # without it.
                "urltokenok": fake_recipe("wf-git-urltokenok", READS_SUBMODULES,
                                          source={"git": with_token}),
                "wrong": fake_recipe("wf-git-wrong", READS_SUBMODULES,
                                     source={"git": private, "credentials": str(wrong)}),
            }
            config = write_config(h.root / "wheelforge.toml", recipes, max_concurrent_jobs=3)
            server = h.serve("--config", str(config))
            admin = Admin(server, admin_token)
            upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))
            ids = {name: admin.submit(name)["jobs"][0]["id"] for name in recipes}
            ended = admin.wait_jobs(list(ids.values()), FAULT_TIMEOUT)
            jobs = {name: ended[job_id] for name, job_id in ids.items()}
            yield GitBed(h, server, admin, repos, http_server, credentials, jobs)
        finally:
            http_server.close()


@pytest.fixture
def git_bed(request, _git_bed):
    yield from attach(request, _git_bed)


def fetched_both_submodules(bed, name: str) -> str:
    """The job `name`'s log through the API, once its build read both submodules' files."""
    log = bed.admin.log_text(bed.jobs[name]["id"])
    assert "from the submodule\nfrom the submodule's submodule\n" in log, log[-3000:]
    assert "submodule update --init --recursive" in log, log[-3000:]
    return log


def test_submodules_are_fetched_recursively(git_bed):
    bed = git_bed
    # A repository on this host (file://, at a tag): its build reads both submodules, then
    # stops on purpose.
    job = bed.jobs["local"]
    assert job["state"] == "failed" and "build failed (exit 3)" in job["reason"], (
        bed.admin.describe(job))
    fetched_both_submodules(bed, "local")


def test_submodules_false_leaves_them_out(git_bed):
    bed = git_bed
    job = bed.jobs["nosub"]
    assert job["state"] == "failed", bed.admin.describe(job)
    log = bed.admin.log_text(job["id"])
    assert "vendor/sub/sub.txt: No such file or directory" in log, log[-3000:]
    assert "submodule update" not in log, log[-3000:]


def test_private_repository_builds_with_the_recipes_credentials(git_bed):
    bed = git_bed
    # A credential-store file: built and published.
    job = bed.jobs["credfile"]
    assert job["state"] == "succeeded", bed.admin.describe(job)
    assert job["wheel"] in view_files(bed.server, "cu130/torch2.8", "wf-git-credfile")
    fetched_both_submodules(bed, "credfile")
    # A token in the URL: fetched (the build then stops on purpose).
    job = bed.jobs["urltoken"]
    assert job["state"] == "failed" and "build failed (exit 3)" in job["reason"], (
        bed.admin.describe(job))
    fetched_both_submodules(bed, "urltoken")
    # The superproject and both submodules came from the server that asked for credentials.
    for repo in ("/super.git/", "/sub.git/", "/deep.git/"):
        assert any(path.startswith(repo) for path in bed.http.served), bed.http.served
    assert bed.http.refused > 0  # git asked without credentials first, as it does


def head_commit(bed) -> str:
    return subprocess.run(["git", "-C", str(bed.repos / "super.git"), "rev-parse", "HEAD"],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_provenance_names_the_commit_and_the_url_without_credentials(git_bed):
    bed = git_bed
    commit = head_commit(bed)
    assert len(commit) == 40, commit
    for name in ("credfile", "urltokenok"):
        job = bed.jobs[name]
        assert job["state"] == "succeeded", bed.admin.describe(job)
        statement = signed_build_statement(bed.server, f"wf-git-{name}", job["wheel"])
        definition = statement["predicate"]["buildDefinition"]
        assert definition["externalParameters"]["source"] == {
            "kind": "git", "uri": f"git+{bed.http.url}/super.git"}, definition
        assert definition["resolvedDependencies"][0] == {
            "uri": f"git+{bed.http.url}/super.git", "digest": {"gitCommit": commit}}, definition
        assert f"==> [preparing] source at commit {commit}" in bed.admin.log_text(job["id"])


def test_refused_credentials_fail_the_fetch_and_leave_the_file_alone(git_bed):
    bed = git_bed
    job = bed.jobs["wrong"]
    assert job["state"] == "failed", bed.admin.describe(job)
    assert "fetch source failed" in job["reason"], job["reason"]
    # git's own store helper would erase the refused line; the recipe's file is only read.
    port = bed.http.url.rsplit(":", 1)[1]
    assert (bed.h.root / "wrong-credentials").read_text() == (
        f"http://{USER}:{WRONG_TOKEN}@127.0.0.1:{port}\n")


def test_tokens_show_nowhere(git_bed):
    """A token in a git URL (which the build also prints) and the password of a credentials
    file show nowhere: job logs as the API and the web UI read them, job JSON (the reason
    quotes the build's last line), the runner's own lines on disk, git's output, the clone's
    configuration, the server's log."""
    bed = git_bed
    basic = "Basic " + base64.b64encode(f"__token__:{bed.admin.token}".encode()).decode()
    places: dict[str, str] = {}
    for name, job in bed.jobs.items():
        job_id = job["id"]
        places[f"job {job_id} ({name}) log through the API"] = bed.admin.log_text(job_id)
        places[f"job {job_id} ({name}) JSON"] = json.dumps(bed.admin.job(job_id))
        disk = (bed.h.data_dir / "builds" / f"job-{job_id}" / "log.txt").read_text(
            errors="replace")
        if name == "urltoken":
            # What the build printed is on disk as it printed it; the runner's lines are not.
            disk = "\n".join(line for line in disk.splitlines() if line.startswith("==>"))
        places[f"job {job_id} ({name}) log on disk"] = disk
        for page in (f"/jobs/{job_id}", f"/jobs/{job_id}/log"):
            resp = bed.server.get(page, {"Authorization": basic})
            assert resp.status == 200, (page, resp.status)
            places[f"web UI {page}"] = resp.text
    # What a failed job keeps of its work directory: the clone's configuration holds no token.
    configs = list((bed.h.data_dir / "builds").glob("job-*/src/.git/config"))
    assert configs
    for config in configs:
        places[str(config)] = config.read_text(errors="replace")
    places["server log"] = bed.server.log_path.read_text(errors="replace")
    for name in ("credfile", "urltokenok"):
        wheel = bed.jobs[name]["wheel"]
        places[f"provenance of {wheel}"] = json.dumps(
            signed_build_statement(bed.server, f"wf-git-{name}", wheel))
    for where, text in places.items():
        for secret in (TOKEN, WRONG_TOKEN, f"{USER}:"):
            assert secret not in text, f"{secret!r} shows in the {where}"
    # What the build printed is there, masked.
    job = bed.admin.job(bed.jobs["urltoken"]["id"])
    assert job["reason"].endswith("refused token " + "*" * len(TOKEN)), job["reason"]
    masked = bed.admin.log_text(job["id"])
    port = bed.http.url.rsplit(":", 1)[1]
    userinfo = "*" * len(f"{USER}:{TOKEN}")
    assert f"remote: http://{userinfo}@127.0.0.1:{port}/super.git\n" in masked, masked[-3000:]
