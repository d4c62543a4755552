"""pip end to end, for each pip generation we support: a stand-in for PyPI (a static PEP 503
tree served by http.server) holds a dependency, wheelforge is the extra index and holds the
package that needs it. The resolver must use both indexes."""

from __future__ import annotations

import re

import pytest

import wfbackend
from wfhelpers import (
    PIP_PYTHONS,
    clean_env,
    curl_upload,
    make_wheel,
    pip_args,
    run,
    sha256_hex,
    wait_for,
    write_static_index,
)

PIP_TIMEOUT = 120


def pip_python_or_skip(version: str):
    python = PIP_PYTHONS[version]
    if not python.exists():
        pytest.skip(f"{python} (pip {version}) is not installed")
    proc = run([python, "-m", "pip", "--version"], timeout=60)
    if proc.returncode != 0 or not proc.stdout.startswith(f"pip {version} "):
        pytest.skip(f"{python} does not have pip {version}: {proc.stdout or proc.stderr}")
    return python


@pytest.fixture
def two_indexes(harness, server, upload_token, artifacts):
    """(stand-in PyPI URL, wheelforge URL, the app wheel, the dependency wheel)."""
    dep = make_wheel(artifacts / "pypi", "wf-dep-lib", "1.4", value="from the stand-in PyPI")
    write_static_index(harness.path("pypi-root"), [dep])
    pypi = harness.static_index(harness.root / "pypi-root")
    app = make_wheel(
        artifacts / "private",
        "wf-private-app",
        "1.0",
        value="from wheelforge",
        requires_python=">=3.8",
        requires_dist=("wf-dep-lib>=1.0",),
    )
    result = curl_upload(server, harness.root, app.path, token=upload_token)
    assert result.status == 201, f"{result.status}: {result.body}"
    return pypi.url + "/simple/", server.url + "/simple/", app, dep


@pytest.mark.parametrize("pip_version", list(PIP_PYTHONS))
def test_pip_install_and_download(harness, server, two_indexes, pip_version):
    python = pip_python_or_skip(pip_version)
    pypi_url, wf_url, app, dep = two_indexes
    target = harness.path(f"target-{pip_version}")
    neutral = harness.path("neutral-cwd")

    proc = run(
        [python, "-m", "pip", "install", "--target", target, *pip_args(pypi_url, wf_url),
         "wf-private-app"],
        timeout=PIP_TIMEOUT,
        cwd=neutral,
    )
    assert proc.returncode == 0, f"pip {pip_version} install failed:\n{proc.stdout}\n{proc.stderr}"

    check = run(
        [python, "-c",
         "import wf_private_app, wf_dep_lib; "
         "print(wf_private_app.VALUE); print(wf_dep_lib.VALUE); print(wf_private_app.__file__)"],
        timeout=60,
        cwd=neutral,
        env=clean_env(PYTHONPATH=str(target)),
    )
    assert check.returncode == 0, check.stderr
    value, dep_value, location = check.stdout.splitlines()
    assert value == "from wheelforge"
    assert dep_value == "from the stand-in PyPI"
    assert location.startswith(str(target))

    # The server's log is written asynchronously: give it a moment.
    page_get = r"GET /simple/wf-private-app/\S*.*-> 200"
    assert wait_for(lambda: re.search(page_get, server.log())), "pip never read the project page"
    if pip_version != "23.0.1":
        # pip >= 23.2 reads PEP 714 `core-metadata` and fetches the metadata file instead of
        # the wheel to resolve.
        metadata_get = (rf"GET /files/\S+/{re.escape(app.filename)}\.metadata\b.*"
                        rf"-> {wfbackend.FILE_GET_STATUS}")
        assert wait_for(lambda: re.search(metadata_get, server.log()), timeout=3.0), (
            f"pip {pip_version} did not fetch the .metadata file:\n{server.log_tail(40)}"
        )

    downloads = harness.path(f"download-{pip_version}")
    proc = run(
        [python, "-m", "pip", "download", "--no-deps", "--dest", downloads, *pip_args(wf_url),
         "wf-private-app==1.0"],
        timeout=PIP_TIMEOUT,
        cwd=neutral,
    )
    assert proc.returncode == 0, f"pip {pip_version} download failed:\n{proc.stdout}\n{proc.stderr}"
    got = downloads / app.filename
    assert got.exists(), list(downloads.iterdir())
    listed = server.file_entry("wf-private-app", app.filename)["hashes"]["sha256"]
    assert sha256_hex(got.read_bytes()) == listed == app.sha256

