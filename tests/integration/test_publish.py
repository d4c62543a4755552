"""Publishing: the twine-compatible upload API (`POST /legacy/`) driven by the real twine, poetry
and pdm and by hand-built forms; PEP 592 yanking (CLI and admin API, seen by pip); deletion with
the name reserved afterwards.

Every client runs with HOME, XDG and tool configuration inside the test's temporary directory,
no keyring and no proxies; everything talks to 127.0.0.1 only.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import http.client
import json
import re
import subprocess
import urllib.parse
from pathlib import Path

import pytest

from wfhelpers import (
    PIP_PYTHONS,
    Artifact,
    Server,
    clean_env,
    make_sdist,
    make_wheel,
    normalize,
    parse_html,
    path_of,
    pip_args,
    run,
    sha256_hex,
    wait_for,
    write_static_index,
)

TWINE = Path("/usr/bin/twine")
POETRY = Path("/usr/bin/poetry")
PDM = Path("/usr/bin/pdm")
CLIENT_TIMEOUT = 120
PIP_VERSION = "23.2.1"
# A running server notices CLI changes to the catalog by polling (about once a second).
CLI_VISIBLE_WITHIN = 5.0
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture
def admin_token(harness, tokens) -> str:
    return harness.token("admin")


@pytest.fixture
def server(harness, tokens, admin_token) -> Server:
    """Every token (upload, read, admin) exists before the server starts."""
    return harness.serve()


# ---------------------------------------------------------------------------------------------
# Hand-built twine forms


def basic(token: str) -> str:
    return "Basic " + base64.b64encode(f"__token__:{token}".encode()).decode()


@dataclasses.dataclass
class Answer:
    status: int
    reason: str
    headers: http.client.HTTPMessage
    body: str

    def describe(self) -> str:
        return f"{self.status} {self.reason!r}; body {self.body[:400]!r}"


def post(server: Server, target: str, body: bytes, headers: dict[str, str]) -> Answer:
    """One POST on a fresh connection; keeps the reason phrase (twine prints it)."""
    host, port = server.host.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=15)
    try:
        conn.request("POST", target, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return Answer(resp.status, resp.reason, resp.msg, data.decode("utf-8", errors="replace"))
    finally:
        conn.close()


def twine_fields(artifact: Artifact, **overrides: str | None) -> list[tuple[str, str]]:
    """The fields twine 4.0.2 sends before `content`, in its order; metadata it does not know is
    sent as an empty part. `overrides` replace a value, or drop the field when None."""
    data = artifact.data
    is_wheel = artifact.filename.endswith(".whl")
    fields: dict[str, str | None] = {
        "name": artifact.name,
        "version": artifact.version,
        "filetype": "bdist_wheel" if is_wheel else "sdist",
        "pyversion": "py3" if is_wheel else "source",
        "metadata_version": "2.1",
        "summary": "wheelforge integration test package",
        "home_page": "",
        "author": "",
        "author_email": "",
        "maintainer": "",
        "maintainer_email": "",
        "license": "",
        "description": "",
        "keywords": "",
        "platform": "",
        "download_url": "",
        "supported_platform": "",
        "comment": "",
        "md5_digest": hashlib.md5(data).hexdigest(),
        "sha256_digest": sha256_hex(data),
        "blake2_256_digest": hashlib.blake2b(data, digest_size=32).hexdigest(),
        "provides": "",
        "requires": "",
        "obsoletes": "",
        "project_urls": "",
        "provides_dist": "",
        "obsoletes_dist": "",
        "requires_dist": "",
        "requires_external": "",
        "requires_python": "",
        "provides_extras": "",
        "description_content_type": "",
        ":action": "file_upload",
        "protocol_version": "1",
    }
    fields.update(overrides)
    return [(k, v) for k, v in fields.items() if v is not None]


BOUNDARY = "wfTestBoundary7c1f0e9a4d2b"


def multipart(fields: list[tuple[str, str]], content: tuple[str, bytes] | None) -> bytes:
    """multipart/form-data as requests-toolbelt writes it (what twine, poetry and pdm use)."""
    out = bytearray()
    for name, value in fields:
        out += f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        out += value.encode() + b"\r\n"
    if content is not None:
        filename, data = content
        out += (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="content"; '
            f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        out += data + b"\r\n"
    out += f"--{BOUNDARY}--\r\n".encode()
    return bytes(out)


def post_form(
    server: Server,
    artifact: Artifact,
    token: str | None,
    *,
    target: str = "/legacy/",
    with_content: bool = True,
    **overrides: str | None,
) -> Answer:
    body = multipart(
        twine_fields(artifact, **overrides),
        (artifact.filename, artifact.data) if with_content else None,
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    if token is not None:
        headers["Authorization"] = basic(token)
    return post(server, target, body, headers)


def assert_nothing_left(harness, before, what: str) -> None:
    """No new blob, temp file or catalog row since `before` (polled briefly: a temp file may be
    removed just after the answer was sent)."""
    if not wait_for(lambda: harness.state() == before, timeout=3.0):
        now = harness.state()
        raise AssertionError(
            f"{what} left something behind:\n"
            f"  new blobs: {sorted(now.blobs - before.blobs)}\n"
            f"  new tmp: {sorted(now.tmp - before.tmp)}\n"
            f"  rows before: {before.rows}\n  rows after: {now.rows}"
        )


def listed_files(server: Server, project: str) -> dict[str, dict]:
    """filename -> JSON entry on /simple/<project>/ (empty when the project is unknown)."""
    resp = server.get(f"/simple/{project}/", {"Accept": "application/vnd.pypi.simple.v1+json"})
    if resp.status == 404:
        return {}
    assert resp.status == 200, f"GET /simple/{project}/ -> {resp.status}: {resp.text[:300]}"
    return {entry["filename"]: entry for entry in resp.json()["files"]}


def html_anchors(server: Server, project: str) -> dict[str, dict]:
    """anchor text (the file name) -> attributes on the HTML /simple/<project>/ page."""
    resp = server.get(f"/simple/{project}/", {"Accept": "text/html"})
    if resp.status == 404:
        return {}
    assert resp.status == 200, f"GET /simple/{project}/ (HTML) -> {resp.status}"
    return {(a["#text"] or "").strip(): a for a in parse_html(resp.text).anchors}


def assert_listed(server: Server, artifact: Artifact) -> dict:
    files = listed_files(server, normalize(artifact.name))
    assert artifact.filename in files, f"{artifact.filename} not listed: {sorted(files)}"
    entry = files[artifact.filename]
    assert entry["hashes"] == {"sha256": artifact.sha256}, entry
    return entry


# ---------------------------------------------------------------------------------------------
# The real clients


def client_env(harness, **extra: str) -> dict[str, str]:
    """An environment that keeps twine/poetry/pdm away from the real home, keyring and proxies,
    and makes rich print long lines without colour."""
    home = harness.path("client-home")
    env = {
        k: v
        for k, v in clean_env().items()
        if not k.startswith(("TWINE_", "POETRY_", "PDM_", "XDG_"))
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        TMPDIR=str(harness.path("client-tmp")),
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        COLUMNS="1000",
        NO_COLOR="1",
        TERM="dumb",
    )
    env.update(extra)
    return env


def output_of(proc: subprocess.CompletedProcess) -> str:
    """stdout and stderr without colour codes and with runs of whitespace joined (rich wraps)."""
    return re.sub(r"\s+", " ", ANSI.sub("", f"{proc.stdout}\n{proc.stderr}"))


_client_versions: dict[Path, str] = {}


def client_or_skip(exe: Path, expected: str) -> str:
    """The client's version line; skips when it is not installed."""
    if exe not in _client_versions:
        if not exe.exists():
            pytest.skip(f"{exe} is not installed (Debian package needed for this test)")
        proc = run([exe, "--version"], timeout=60, env=clean_env(HOME="/nonexistent"))
        assert proc.returncode == 0, f"{exe} --version failed: {proc.stdout}{proc.stderr}"
        _client_versions[exe] = output_of(proc).strip()
    version = _client_versions[exe]
    if expected not in version:
        # The expectations below were checked against `expected`; say so if they fail.
        print(f"note: {exe} is {version!r}, these tests were written for {expected}")
    return version


def twine(harness, url: str, token: str, files: list[Path], *extra: str):
    client_or_skip(TWINE, "4.0.2")
    return run(
        [TWINE, "upload", "--non-interactive", "--disable-progress-bar", "--repository-url", url,
         "-u", "__token__", "-p", token, *extra, *files],
        timeout=CLIENT_TIMEOUT,
        cwd=harness.path("client-cwd"),
        env=client_env(harness),
    )


# ---------------------------------------------------------------------------------------------
# twine


def test_twine_upload_repeat_and_skip_existing(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "wf-twine-pkg", "1.0", requires_python=">=3.8")
    sdist = make_sdist(artifacts, "wf-twine-pkg", "1.0")
    url = server.url + "/legacy/"

    first = twine(harness, url, upload_token, [wheel.path, sdist.path])
    assert first.returncode == 0, f"twine upload failed:\n{output_of(first)}"
    for artifact in (wheel, sdist):
        assert_listed(server, artifact)
    assert sorted(harness.filenames()) == sorted([wheel.filename, sdist.filename])
    stored = harness.state()

    again = twine(harness, url, upload_token, [wheel.path])
    text = output_of(again)
    assert again.returncode != 0, f"a repeated twine upload succeeded:\n{text}"
    assert "409" in text and "File already exists" in text and wheel.filename in text, text
    assert_nothing_left(harness, stored, "a repeated twine upload")

    skipped = twine(harness, url, upload_token, [wheel.path, sdist.path], "--skip-existing")
    text = output_of(skipped)
    assert skipped.returncode == 0, f"--skip-existing did not skip:\n{text}"
    assert re.search(rf"Skipping {re.escape(wheel.filename)}", text), text
    assert re.search(rf"Skipping {re.escape(sdist.filename)}", text), text
    assert_nothing_left(harness, stored, "twine --skip-existing")


def test_twine_repository_url_without_slash(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "wf-noslash", "0.1")
    proc = twine(harness, server.url + "/legacy", upload_token, [wheel.path])
    assert proc.returncode == 0, f"twine upload to /legacy failed:\n{output_of(proc)}"
    assert_listed(server, wheel)


def test_twine_wrong_password_stores_nothing(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "wf-wrongpw", "1.0")
    before = harness.state()
    wrong = upload_token[:-4] + ("AAAA" if not upload_token.endswith("AAAA") else "BBBB")
    proc = twine(harness, server.url + "/legacy/", wrong, [wheel.path])
    text = output_of(proc)
    assert proc.returncode != 0, f"twine succeeded with a wrong password:\n{text}"
    assert "401" in text, text
    assert_nothing_left(harness, before, "twine with a wrong password")
    assert listed_files(server, "wf-wrongpw") == {}


MISMATCH = r"match|disagree|differ|inconsistent"


@pytest.mark.parametrize(
    "build, words",
    [
        # twine takes name and version from METADATA, so the form disagrees with the file name.
        pytest.param(
            lambda d: make_wheel(d, "wf-broken", "1.0", metadata_version="2.0"),
            # The reason names the form's problem and, with it, the file's own (METADATA).
            [r"version\W{1,3}2\.0\b", MISMATCH, r"(?-i:METADATA) Version"],
            id="metadata-version-differs",
        ),
        pytest.param(
            lambda d: make_wheel(d, "wf-broken", "1.0", omit=("WHEEL",)),
            [r"(?-i:WHEEL)", r"missing|not found|absent|without"],
            id="no-WHEEL-file",
        ),
    ],
)
def test_twine_broken_wheel_reason_visible(harness, server, upload_token, artifacts, build, words):
    wheel = build(artifacts)
    before = harness.state()
    proc = twine(harness, server.url + "/legacy/", upload_token, [wheel.path], "--verbose")
    text = output_of(proc)
    assert proc.returncode != 0, f"twine uploaded a broken wheel:\n{text}"
    assert "400" in text, text
    for word in words:
        assert re.search(word, text, re.IGNORECASE), (
            f"reason /{word}/ not in twine's output:\n{text}"
        )
    assert_nothing_left(harness, before, "twine upload of a broken wheel")


# ---------------------------------------------------------------------------------------------
# poetry and pdm


POETRY_PYPROJECT = """\
[tool.poetry]
name = "wf-poetry-demo"
version = "0.3.1"
description = "wheelforge publish test"
authors = ["Wheelforge Tests <tests@example.invalid>"]
packages = [{include = "wf_poetry_demo"}]

[tool.poetry.dependencies]
python = ">=3.8"

[build-system]
requires = ["poetry-core"]
build-backend = "poetry.core.masonry.api"
"""


def test_poetry_publish_then_repeat_fails(harness, server, upload_token):
    client_or_skip(POETRY, "1.3.2")
    project = harness.path("poetry-project")
    (project / "pyproject.toml").write_text(POETRY_PYPROJECT)
    (project / "wf_poetry_demo").mkdir()
    (project / "wf_poetry_demo" / "__init__.py").write_text("VALUE = 'poetry'\n")
    state = harness.path("poetry-state")
    env = client_env(
        harness,
        POETRY_HOME=str(state / "home"),
        POETRY_CONFIG_DIR=str(state / "config"),
        POETRY_CACHE_DIR=str(state / "cache"),
        POETRY_VIRTUALENVS_PATH=str(state / "venvs"),
    )

    def poetry(*args: str):
        return run([POETRY, "--no-interaction", *args], timeout=CLIENT_TIMEOUT, cwd=project,
                   env=env)

    # poetry-core ships with Debian's poetry: the build needs no network.
    built = poetry("build")
    assert built.returncode == 0, f"poetry build failed:\n{output_of(built)}"
    dist = sorted((project / "dist").iterdir())
    assert [p.name for p in dist] == [
        "wf_poetry_demo-0.3.1-py3-none-any.whl",
        "wf_poetry_demo-0.3.1.tar.gz",
    ], dist

    configured = poetry("config", "repositories.wf", server.url + "/legacy/")
    assert configured.returncode == 0, output_of(configured)
    assert (state / "config" / "config.toml").exists(), "poetry wrote its config elsewhere"

    published = poetry("publish", "-r", "wf", "-u", "__token__", "-p", upload_token)
    assert published.returncode == 0, f"poetry publish failed:\n{output_of(published)}"
    files = listed_files(server, "wf-poetry-demo")
    for path in dist:
        assert path.name in files, f"{path.name} not listed after poetry publish: {sorted(files)}"
        assert files[path.name]["hashes"] == {"sha256": sha256_hex(path.read_bytes())}
    stored = harness.state()

    repeat = poetry("publish", "-r", "wf", "-u", "__token__", "-p", upload_token)
    text = output_of(repeat)
    assert repeat.returncode != 0, f"a repeated poetry publish succeeded:\n{text}"
    assert "409" in text and "File already exists" in text, text
    assert_nothing_left(harness, stored, "a repeated poetry publish")


def test_pdm_publish_lists_files(harness, server, upload_token):
    client_or_skip(PDM, "2.2.1")
    project = harness.path("pdm-project")
    (project / "pyproject.toml").write_text(
        '[project]\nname = "wf-pdm-demo"\nversion = "0.2.0"\n'
        'description = "wheelforge publish test"\nrequires-python = ">=3.8"\n'
    )
    # `--no-build`: pdm uploads whatever is in dist/.
    wheel = make_wheel(project / "dist", "wf-pdm-demo", "0.2.0")
    sdist = make_sdist(project / "dist", "wf-pdm-demo", "0.2.0")
    env = client_env(harness, PDM_CHECK_UPDATE="false")

    def pdm_publish():
        return run(
            [PDM, "publish", "--no-build", "-r", server.url + "/legacy/",
             "-u", "__token__", "-P", upload_token],
            timeout=CLIENT_TIMEOUT, cwd=project, env=env,
        )

    published = pdm_publish()
    assert published.returncode == 0, f"pdm publish failed:\n{output_of(published)}"
    # pdm 2.2.1 counts any 3xx as success: only the listing proves the files arrived.
    for artifact in (wheel, sdist):
        assert_listed(server, artifact)
    stored = harness.state()

    repeat = pdm_publish()
    text = output_of(repeat)
    assert repeat.returncode != 0, f"a repeated pdm publish succeeded:\n{text}"
    assert "409" in text and "File already exists" in text, text
    assert_nothing_left(harness, stored, "a repeated pdm publish")


# ---------------------------------------------------------------------------------------------
# Hand-built forms


def test_hand_built_form_is_stored(harness, server, upload_token, artifacts):
    """The form used by the negative cases below is accepted when nothing is wrong with it."""
    wheel = make_wheel(artifacts, "wf-form", "1.0")
    answer = post_form(server, wheel, upload_token)
    assert answer.status == 201, answer.describe()
    body = json.loads(answer.body)
    assert body["filename"] == wheel.filename, body
    assert body["sha256"] == wheel.sha256, body
    assert_listed(server, wheel)
    sdist = make_sdist(artifacts, "wf-form", "1.0")
    answer = post_form(server, sdist, upload_token, target="/legacy")
    assert answer.status == 201, f"POST /legacy (no slash): {answer.describe()}"
    assert_listed(server, sdist)


BAD_DIGEST = "0" * 64


@pytest.mark.parametrize(
    "overrides, words",
    [
        pytest.param({"sha256_digest": BAD_DIGEST}, [r"sha256"], id="sha256-mismatch"),
        pytest.param({"md5_digest": "0" * 32}, [r"md5"], id="md5-mismatch"),
        pytest.param({"blake2_256_digest": BAD_DIGEST}, [r"blake2"], id="blake2-mismatch"),
        pytest.param({"name": "wf-other-name"}, [r"name", r"wf-other-name"], id="name-differs"),
        pytest.param({"version": "9.9"}, [r"version", r"9\.9"], id="version-differs"),
        pytest.param({"filetype": "sdist", "pyversion": "source"}, [r"filetype"],
                     id="filetype-differs"),
        pytest.param({"protocol_version": "2"}, [r"protocol_version|protocol"],
                     id="protocol-version"),
        pytest.param({":action": "frobnicate"}, [r"action", r"frobnicate"], id="unknown-action"),
        pytest.param({"sha256_digest": BAD_DIGEST, "version": "9.9"},
                     [r"sha256", r"version"], id="two-problems-both-named"),
    ],
)
def test_form_400(harness, server, upload_token, artifacts, overrides, words):
    wheel = make_wheel(artifacts, "wf-form", "1.0")
    before = harness.state()
    answer = post_form(server, wheel, upload_token, **overrides)
    assert answer.status == 400, answer.describe()
    for word in words:
        assert re.search(word, answer.body, re.IGNORECASE), (
            f"body lacks /{word}/: {answer.describe()}"
        )
        assert re.search(word, answer.reason, re.IGNORECASE), (
            f"reason phrase lacks /{word}/ (twine prints only the reason): {answer.describe()}"
        )
    assert_nothing_left(harness, before, f"form with {overrides}")


def test_form_400_metadata_disagrees_with_file_name(harness, server, upload_token, artifacts):
    """The form matches the file name, the archive's METADATA does not: the archive checks of
    PUT uploads apply to twine uploads too."""
    wheel = make_wheel(artifacts, "wf-form", "1.0", metadata_version="2.0")
    before = harness.state()
    answer = post_form(server, wheel, upload_token)
    assert answer.status == 400, answer.describe()
    for word in (r"version", r"2\.0"):
        assert re.search(word, answer.body, re.IGNORECASE), answer.describe()
        assert re.search(word, answer.reason, re.IGNORECASE), answer.describe()
    assert_nothing_left(harness, before, "form with a wheel whose METADATA disagrees")


def test_form_400_missing_content(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "wf-form", "1.0")
    before = harness.state()
    answer = post_form(server, wheel, upload_token, with_content=False)
    assert answer.status == 400, answer.describe()
    assert re.search(r"content", answer.body, re.IGNORECASE), answer.describe()
    assert re.search(r"content", answer.reason, re.IGNORECASE), answer.describe()
    assert_nothing_left(harness, before, "form without content")


def test_form_400_not_multipart(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "wf-form", "1.0")
    before = harness.state()
    body = urllib.parse.urlencode(twine_fields(wheel)).encode()
    answer = post(server, "/legacy/", body, {
        "Content-Type": "application/x-www-form-urlencoded",
        "Authorization": basic(upload_token),
    })
    assert answer.status == 400, answer.describe()
    assert "multipart/form-data" in answer.body, answer.describe()
    assert "multipart/form-data" in answer.reason, answer.describe()
    assert_nothing_left(harness, before, "urlencoded form")


@pytest.mark.parametrize("cut", ["in-content", "before-closing-boundary"])
def test_form_400_truncated(harness, server, upload_token, artifacts, cut):
    wheel = make_wheel(artifacts, "wf-form", "1.0", padding=8 * 1024)
    before = harness.state()
    full = multipart(twine_fields(wheel), (wheel.filename, wheel.data))
    if cut == "in-content":
        body = full[: len(full) - len(wheel.data) // 2]
    else:
        body = full[: full.rindex(f"--{BOUNDARY}--".encode())]
    answer = post(server, "/legacy/", body, {
        "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
        "Authorization": basic(upload_token),
    })
    assert answer.status == 400, answer.describe()
    assert re.search(r"truncated", answer.body, re.IGNORECASE), answer.describe()
    assert re.search(r"truncated", answer.reason, re.IGNORECASE), answer.describe()
    assert_nothing_left(harness, before, f"truncated form ({cut})")


def test_form_submit_410(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "wf-form", "1.0")
    before = harness.state()
    answer = post_form(server, wheel, upload_token, **{":action": "submit"})
    assert answer.status == 410, answer.describe()
    assert_nothing_left(harness, before, ":action=submit")


def test_form_auth(harness, server, tokens, artifacts):
    wheel = make_wheel(artifacts, "wf-form", "1.0")
    before = harness.state()
    for what, token in [("no credentials", None), ("wrong token", "wf_not_a_real_token")]:
        answer = post_form(server, wheel, token)
        assert answer.status == 401, f"{what}: {answer.describe()}"
        assert (answer.headers.get("WWW-Authenticate") or "").startswith("Basic"), (
            f"{what}: no WWW-Authenticate: Basic: {dict(answer.headers)}"
        )
    answer = post_form(server, wheel, tokens["read"])
    assert answer.status == 403, f"read token: {answer.describe()}"
    assert_nothing_left(harness, before, "unauthorized forms")


# ---------------------------------------------------------------------------------------------
# Yank


def yank_state(server: Server, project: str) -> dict[str, object]:
    """filename -> JSON `yanked` value (False when absent)."""
    return {f: e.get("yanked", False) for f, e in listed_files(server, project).items()}


def put_all(server: Server, token: str, *artifacts: Artifact) -> None:
    for artifact in artifacts:
        resp = server.put_file(artifact, token)
        assert resp.status == 201, f"PUT {artifact.filename}: {resp.status} {resp.text}"


def pip_python_or_skip():
    python = PIP_PYTHONS[PIP_VERSION]
    if not python.exists():
        pytest.skip(f"{python} (pip {PIP_VERSION}) is not installed")
    return python


def installed_version(target: Path, dist: str) -> list[str]:
    return sorted(p.name for p in target.glob(f"{dist}-*.dist-info"))


def test_pip_skips_yanked_unless_pinned(harness, server, upload_token, artifacts):
    python = pip_python_or_skip()
    old = make_wheel(artifacts, "wf-yank-pip", "1.0")
    new = make_wheel(artifacts, "wf-yank-pip", "2.0")
    put_all(server, upload_token, old, new)
    # A stand-in PyPI as --index-url, wheelforge as the extra index (as in the pip tests).
    unrelated = make_wheel(artifacts / "pypi", "wf-unrelated", "1.0")
    write_static_index(harness.path("pypi-root"), [unrelated])
    pypi = harness.static_index(harness.root / "pypi-root")
    neutral = harness.path("neutral-cwd")
    reason = "miscompiled kernels"

    def pip_install(spec: str, target: Path):
        proc = run(
            [python, "-m", "pip", "install", "--no-deps", "--target", target,
             *pip_args(pypi.url + "/simple/", server.url + "/simple/"), spec],
            timeout=CLIENT_TIMEOUT, cwd=neutral,
        )
        assert proc.returncode == 0, f"pip install {spec} failed:\n{proc.stdout}\n{proc.stderr}"
        return proc

    proc = harness.cli("yank", "--data-dir", str(harness.data_dir), "wf-yank-pip", "2.0",
                       "--reason", reason)
    assert proc.returncode == 0, f"yank failed: {proc.stdout}{proc.stderr}"
    assert wait_for(lambda: yank_state(server, "wf-yank-pip")[new.filename] == reason,
                    timeout=CLI_VISIBLE_WITHIN), yank_state(server, "wf-yank-pip")

    unpinned = harness.path("t-unpinned")
    pip_install("wf-yank-pip", unpinned)
    assert installed_version(unpinned, "wf_yank_pip") == ["wf_yank_pip-1.0.dist-info"]

    pinned = harness.path("t-pinned")
    proc = pip_install("wf-yank-pip==2.0", pinned)
    assert installed_version(pinned, "wf_yank_pip") == ["wf_yank_pip-2.0.dist-info"]
    assert "yanked" in proc.stderr and reason in proc.stderr, (
        f"pip printed no yank warning with the reason:\n{proc.stderr}"
    )

    proc = harness.cli("yank", "--data-dir", str(harness.data_dir), "wf-yank-pip", "2.0", "--undo")
    assert proc.returncode == 0, f"unyank failed: {proc.stdout}{proc.stderr}"
    assert wait_for(lambda: yank_state(server, "wf-yank-pip")[new.filename] is False,
                    timeout=CLI_VISIBLE_WITHIN), yank_state(server, "wf-yank-pip")
    restored = harness.path("t-restored")
    proc = pip_install("wf-yank-pip", restored)
    assert installed_version(restored, "wf_yank_pip") == ["wf_yank_pip-2.0.dist-info"]
    assert "yanked" not in proc.stderr, proc.stderr


def test_cli_yank_version_and_file_while_serving(harness, server, upload_token, artifacts):
    project = "wf-yank-cli"
    old = make_wheel(artifacts, project, "1.0")
    new_any = make_wheel(artifacts, project, "2.0")
    new_cp = make_wheel(artifacts, project, "2.0", tag="cp311-cp311-manylinux_2_17_x86_64")
    new_sdist = make_sdist(artifacts, project, "2.0")
    put_all(server, upload_token, old, new_any, new_cp, new_sdist)
    version_2 = {new_any.filename, new_cp.filename, new_sdist.filename}
    data_dir = str(harness.data_dir)
    reason = "wrong CUDA runtime"

    proc = harness.cli("yank", "--data-dir", data_dir, project, "2.0", "--reason", reason)
    assert proc.returncode == 0, f"yank failed: {proc.stdout}{proc.stderr}"
    expected = {old.filename: False, **{f: reason for f in version_2}}
    assert wait_for(lambda: yank_state(server, project) == expected, timeout=CLI_VISIBLE_WITHIN), (
        f"pages after a CLI yank of 2.0: {yank_state(server, project)}"
    )
    anchors = html_anchors(server, project)
    for filename in version_2:
        assert anchors[filename].get("data-yanked") == reason, anchors[filename]
    assert "data-yanked" not in anchors[old.filename], anchors[old.filename]
    # Yanked files stay downloadable.
    entry = listed_files(server, project)[new_cp.filename]
    resp = server.get_file(path_of(urllib.parse.urljoin(f"/simple/{project}/", entry["url"])))
    assert resp.status == 200 and resp.body == new_cp.data, (
        f"download of a yanked file: {resp.status}"
    )

    proc = harness.cli("yank", "--data-dir", data_dir, project, "2.0", "--undo")
    assert proc.returncode == 0, f"unyank failed: {proc.stdout}{proc.stderr}"
    none_yanked = {f: False for f in [old.filename, *version_2]}
    assert wait_for(lambda: yank_state(server, project) == none_yanked,
                    timeout=CLI_VISIBLE_WITHIN), (
        f"pages after unyanking 2.0: {yank_state(server, project)}"
    )
    assert all("data-yanked" not in a for a in html_anchors(server, project).values())

    # One file, no reason: JSON `true`, HTML an empty data-yanked (a bare attribute would not
    # count for pip).
    proc = harness.cli("yank", "--data-dir", data_dir, project, "--file", new_cp.filename)
    assert proc.returncode == 0, f"file yank failed: {proc.stdout}{proc.stderr}"
    expected = {**none_yanked, new_cp.filename: True}
    assert wait_for(lambda: yank_state(server, project) == expected, timeout=CLI_VISIBLE_WITHIN), (
        f"pages after yanking one file: {yank_state(server, project)}"
    )
    resp = server.get(f"/simple/{project}/", {"Accept": "text/html"})
    anchor_html = next(line for line in resp.text.splitlines() if new_cp.filename + "<" in line)
    assert 'data-yanked=""' in anchor_html, anchor_html


def admin_post(server: Server, path: str, token: str | None, form: dict | None = None) -> Answer:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if token is not None:
        headers["Authorization"] = basic(token)
    body = urllib.parse.urlencode(form or {}).encode()
    return post(server, path, body, headers)


def test_admin_api_yank_and_unyank(harness, server, tokens, admin_token, artifacts):
    project = "wf-yank-api"
    old = make_wheel(artifacts, project, "1.0")
    new = make_wheel(artifacts, project, "2.0")
    new_sdist = make_sdist(artifacts, project, "2.0")
    put_all(server, tokens["upload"], old, new, new_sdist)
    # The reason goes into an HTML attribute: it must come back escaped there, intact in JSON.
    reason = 'bad build: use >=2.1 & "fixed" <soon>'
    form = {"project": project, "version": "2.0", "reason": reason}

    answer = admin_post(server, "/admin/yank", None, form)
    assert answer.status == 401, answer.describe()
    assert (answer.headers.get("WWW-Authenticate") or "").startswith("Basic"), dict(answer.headers)
    # Another uploader's token and a read token may not yank (the uploader's own token may:
    # test_tokens.py).
    made = harness.cli("token", "create", "--data-dir", str(harness.data_dir), "--scope", "upload")
    assert made.returncode == 0, made.stderr
    other = made.stdout.strip().splitlines()[-1]
    for who, token in (("another upload", other), ("read", tokens["read"])):
        answer = admin_post(server, "/admin/yank", token, form)
        assert answer.status == 403, f"{who} token: {answer.describe()}"
    assert set(yank_state(server, project).values()) == {False}, "refused yank changed a page"

    answer = admin_post(server, "/admin/yank", admin_token, form)
    assert answer.status == 200, answer.describe()
    assert sorted(json.loads(answer.body)["yanked"]) == sorted(
        [new.filename, new_sdist.filename]
    ), answer.body
    # The API changes pages at once: no polling.
    assert yank_state(server, project) == {
        old.filename: False, new.filename: reason, new_sdist.filename: reason
    }
    assert html_anchors(server, project)[new.filename].get("data-yanked") == reason
    assert "<soon>" not in server.get(f"/simple/{project}/", {"Accept": "text/html"}).text

    # Query parameters, one file.
    query = urllib.parse.urlencode({"project": project, "filename": new.filename})
    answer = admin_post(server, f"/admin/unyank?{query}", other)
    assert answer.status == 403, f"another upload token: {answer.describe()}"
    answer = admin_post(server, f"/admin/unyank?{query}", admin_token)
    assert answer.status == 200, answer.describe()
    assert json.loads(answer.body) == {"unyanked": [new.filename]}, answer.body
    assert yank_state(server, project) == {
        old.filename: False, new.filename: False, new_sdist.filename: reason
    }


# ---------------------------------------------------------------------------------------------
# Delete


def delete_request(server: Server, filename: str, token: str | None) -> Answer:
    host, port = server.host.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=15)
    headers = {"Authorization": basic(token)} if token else {}
    try:
        conn.request("DELETE", "/admin/files/" + urllib.parse.quote(filename, safe=""),
                     headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return Answer(resp.status, resp.reason, resp.msg, data.decode("utf-8", errors="replace"))
    finally:
        conn.close()


RESERVED = r"deleted|reserved"


def assert_gone_and_reserved(harness, server, upload_token, deleted: Artifact, file_url: str):
    project = normalize(deleted.name)
    assert deleted.filename not in listed_files(server, project)
    assert deleted.filename not in html_anchors(server, project)
    for suffix in ("", ".metadata"):
        status = server.get(file_url + suffix).status
        assert status == 404, f"GET {file_url}{suffix} after delete -> {status}"
    before = harness.state()

    resp = server.put_file(deleted, upload_token)
    assert resp.status == 409, f"PUT of a deleted name: {resp.status} {resp.text}"
    assert re.search(RESERVED, resp.text, re.IGNORECASE), resp.text

    tag = "-".join(deleted.filename[: -len(".whl")].split("-")[-3:])
    other = make_wheel(deleted.path.parent / "rebuilt", deleted.name, deleted.version, tag=tag,
                       value="rebuilt")
    assert other.filename == deleted.filename
    resp = server.put_file(other, upload_token)
    assert resp.status == 409, f"PUT of other bytes under a deleted name: {resp.status} {resp.text}"

    proc = twine(harness, server.url + "/legacy/", upload_token, [deleted.path])
    text = output_of(proc)
    assert proc.returncode != 0, f"twine re-uploaded a deleted name:\n{text}"
    assert "409" in text and re.search(RESERVED, text, re.IGNORECASE), text
    assert_nothing_left(harness, before, "re-upload of a deleted name")
    assert deleted.filename not in listed_files(server, project)


def test_delete_via_admin_api(harness, server, tokens, admin_token, artifacts):
    keep = make_wheel(artifacts, "wf-delete-api", "1.0")
    gone = make_wheel(artifacts, "wf-delete-api", "1.1")
    put_all(server, tokens["upload"], keep, gone)
    file_url = path_of(urllib.parse.urljoin(
        "/simple/wf-delete-api/", listed_files(server, "wf-delete-api")[gone.filename]["url"]))

    answer = delete_request(server, gone.filename, None)
    assert answer.status == 401, answer.describe()
    answer = delete_request(server, gone.filename, tokens["upload"])
    assert answer.status == 403, answer.describe()
    assert gone.filename in listed_files(server, "wf-delete-api"), "refused delete removed the file"

    answer = delete_request(server, gone.filename, admin_token)
    assert 200 <= answer.status < 300, answer.describe()
    assert_gone_and_reserved(harness, server, tokens["upload"], gone, file_url)
    assert_listed(server, keep)


def test_delete_via_cli_while_serving(harness, server, upload_token, artifacts):
    keep = make_wheel(artifacts, "wf-delete-cli", "1.0")
    gone = make_wheel(artifacts, "wf-delete-cli", "1.0", tag="cp311-cp311-linux_x86_64")
    put_all(server, upload_token, keep, gone)
    file_url = path_of(urllib.parse.urljoin(
        "/simple/wf-delete-cli/", listed_files(server, "wf-delete-cli")[gone.filename]["url"]))

    proc = harness.cli("delete", "--data-dir", str(harness.data_dir), gone.filename)
    assert proc.returncode == 0, f"delete failed: {proc.stdout}{proc.stderr}"
    assert wait_for(lambda: gone.filename not in listed_files(server, "wf-delete-cli"),
                    timeout=CLI_VISIBLE_WITHIN), "a CLI delete did not reach the running server"
    assert_gone_and_reserved(harness, server, upload_token, gone, file_url)
    assert_listed(server, keep)
