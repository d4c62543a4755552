"""The first build of docs/runner.md ("A first build, step by step"), run as the page writes it,
so that the documentation cannot drift from what works: its files written as given,
its commands run in order from a fresh directory and data directory, on the first try.

Substituted, and only these: the directory (/srv/first-build), the server's port, the Python
3.11 interpreter (this host's pyenv one), the `wheelforge` command (the binary under test); and
the two `pip download` lines, which need internet access: the test puts into wheelhouse/ what
they would fetch, a STAND-IN torch 2.9.0+cu130 (a tiny package named torch, see
test_runner.py) and upstream setuptools and wheel wheels (ninja is on this host's PATH, so the
runner does not install it). The server is started with the page's `serve` line and waited
for, as a user starting it in a terminal of its own would.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from test_build_cli import free_port, serve_configured
from test_runner import BUILD_TOOL_WHEELS, MATRIX_BUILD_TIMEOUT, stand_in_torch
from wfhelpers import PYENV, clean_env, run

RUNNER_DOC = Path(__file__).resolve().parents[2] / "docs" / "runner.md"
SECTION = "## A first build, step by step"
PLACE = "/srv/first-build"
PYTHON311 = PYENV / "3.11.7" / "bin" / "python3.11"
EXAMPLE_CUDA = Path("/usr/local/cuda-13.0")


def documented_example() -> tuple[dict[str, str], list[str]]:
    """The example's files (relative path -> text) and the lines of its shell block."""
    text = RUNNER_DOC.read_text()
    assert SECTION in text, f"docs/runner.md has no '{SECTION}'"
    start = text.index(SECTION)
    following = re.compile(r"\n#{2,4} ").search(text, start + len(SECTION))
    section = text[start: following.start() if following else len(text)]
    files = {
        m.group(1): m.group(2) + "\n"
        for m in re.finditer(r"^File `([^`]+)`[^\n]*:\n\n```[a-z]*\n(.*?)\n```", section, re.S | re.M)
    }
    scripts = re.findall(r"^```sh\n(.*?)\n```", section, re.S | re.M)
    assert len(scripts) == 1, f"expected one sh block in '{SECTION}', found {len(scripts)}"
    return files, scripts[0].splitlines()


@pytest.mark.default_backend_only(
    reason="runs the documented commands as written, on what a fresh machine has: SQLite + files")
def test_the_documented_first_build_succeeds_from_a_fresh_data_directory(harness):
    for tool in (EXAMPLE_CUDA / "bin" / "nvcc", PYTHON311, *BUILD_TOOL_WHEELS):
        if not Path(tool).exists():
            pytest.skip(f"{tool} is not on this host")
    if shutil.which("ninja", path=f"{EXAMPLE_CUDA}/bin:/usr/local/bin:/usr/bin:/bin") is None:
        pytest.skip("no ninja on the build's PATH, and no ninja wheel here")
    h = harness
    place = h.root / "first-build"
    place.mkdir()
    port = free_port()

    def local(text: str) -> str:
        return (text.replace(PLACE, str(place))
                .replace("127.0.0.1:8080", f"127.0.0.1:{port}")
                .replace("/usr/bin/python3.11", str(PYTHON311)))

    files, lines = documented_example()
    assert set(files) == {"my-ext/setup.py", "my-ext/my_ext/kernels.cu", "my-ext/my_ext/__init__.py",
                          "wheelforge.toml"}, sorted(files)
    for name, content in files.items():
        (place / name).parent.mkdir(parents=True, exist_ok=True)
        (place / name).write_text(local(content))
    assert not (place / "data").exists()

    commands = []
    serve_line = None
    downloads = 0
    for line in lines:
        if line.startswith("pip download "):
            downloads += 1
            continue
        if line.startswith("wheelforge serve "):
            serve_line = line
            continue
        line = re.sub(r"^wheelforge ", shlex.quote(str(h.binary)) + " ", line)
        line = re.sub(r"^python3\.11 ", shlex.quote(str(PYTHON311)) + " ", line)
        commands.append(local(line))
    assert downloads == 2, lines
    assert serve_line is not None and shlex.split(serve_line.split("&")[0]) == [
        "wheelforge", "serve", "--config", "wheelforge.toml"], serve_line

    # What the two pip download lines would fetch.
    wheelhouse = place / "wheelhouse"
    stand_in_torch(wheelhouse, "2.9.0+cu130")
    for wheel in BUILD_TOOL_WHEELS:
        shutil.copy(wheel, wheelhouse)

    server = serve_configured(h, place / "wheelforge.toml")
    assert server.url == f"http://127.0.0.1:{port}", server.url
    script = "set -euo pipefail\n" + "\n".join(commands) + "\n"
    proc = run(["bash", "-c", script], timeout=MATRIX_BUILD_TIMEOUT, cwd=place, env=clean_env())
    assert proc.returncode == 0, (f"the documented commands failed:\n{script}\n{proc.stdout}\n"
                                  f"{proc.stderr}")
    out = proc.stdout
    assert "1 succeeded, 0 failed" in out, out
    assert re.search(r"my_ext-1\.0\.0\+cu130torch2\.9-cp311-cp311-manylinux_2_\d+_x86_64"
                     r"(\.manylinux2014_x86_64)?\.whl", out), out
    assert out.rstrip().splitlines()[-1] == "42", out
    assert (place / "data" / "wheelforge.db").exists()
