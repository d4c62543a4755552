"""The bundled build runner, end to end: recipes from a configuration file, builds submitted
through the admin API (and the `wheelforge build` command), wheels compiled, labelled, smoke-tested
and served from the variant views.

The main test builds a small real CUDA package (generated here: an in-tree PEP 517 backend that
compiles kernel.cu with nvcc into a shared library) for 2 Pythons x 2 torch series on CUDA 13.0
and installs the result with pip. The fault tests use fake compilers (shell scripts) that hang,
get OOM-killed, fail to compile, or run while the server is killed.

The `torch` wheels uploaded here are STAND-INS, not PyTorch: tiny pure-Python packages named
torch (torch-2.8.0+cu130, torch-2.9.0+cu130) that expose only `__version__`, `version.cuda` and
`_C._GLIBCXX_USE_CXX11_ABI`. They give the torch axis of the matrix something to install from
the server's own index without network access.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.parse
import zipfile
from pathlib import Path

import pytest

from conftest import Harness
from wfhelpers import (
    JSON_TYPE,
    PIP_PYTHONS,
    PYENV,
    Artifact,
    Response,
    Server,
    clean_env,
    path_of,
    pip_args,
    record_line,
    run,
    sha256_hex,
    wait_for,
    write_static_index,
    write_zip,
)

PYTHONS = {"3.11": PYENV / "3.11.7" / "bin" / "python", "3.12": PYENV / "3.12.1" / "bin" / "python"}
CUDA_HOME = Path("/usr/local/cuda")
NVCC = CUDA_HOME / "bin" / "nvcc"
TORCH_STAND_INS = ("2.8.0+cu130", "2.9.0+cu130")
TERMINAL = {"succeeded", "failed", "cancelled"}
STATE_ORDER = ["queued", "preparing", "building", "retagging", "testing", "ingesting", "succeeded"]
MATRIX_BUILD_TIMEOUT = 600.0  # 5 nvcc builds, 4 environments, on a small shared host
FAULT_TIMEOUT = 180.0
PIP_TIMEOUT = 120
# Variables a shell adds to the environment it passes on, and Python's locale coercion (only
# when LANG is missing, which is checked separately): not the runner's doing.
SHELL_VARIABLES = {"PWD", "OLDPWD", "SHLVL", "_", "LC_CTYPE"}
# Set in the server's own environment: no build may see it.
SERVER_CANARY = "WF_IT_SERVER_ONLY_CANARY"


# ---------------------------------------------------------------------------------------------
# Wheels written here: the torch stand-ins


def write_wheel(
    directory: Path, dist: str, version: str, tag: str, metadata: str, files: dict[str, bytes]
) -> Artifact:
    """A wheel of `files` plus its .dist-info (METADATA, WHEEL, RECORD, written last)."""
    directory.mkdir(parents=True, exist_ok=True)
    distinfo = f"{dist}-{version}.dist-info"
    wheel_meta = (
        "Wheel-Version: 1.0\nGenerator: wheelforge-tests\n"
        f"Root-Is-Purelib: {'true' if tag.endswith('-any') else 'false'}\nTag: {tag}\n"
    )
    members = list(files.items()) + [
        (f"{distinfo}/METADATA", metadata.encode()),
        (f"{distinfo}/WHEEL", wheel_meta.encode()),
    ]
    record = "".join(record_line(p, d) + "\n" for p, d in members) + f"{distinfo}/RECORD,,\n"
    members.append((f"{distinfo}/RECORD", record.encode()))
    path = directory / f"{dist}-{version}-{tag}.whl"
    write_zip(path, members)
    return Artifact(path, dist, version, metadata.encode())


def stand_in_torch(directory: Path, version: str, platform: str = "any") -> Artifact:
    """torch-<version>-py3-none-<platform>.whl: a STAND-IN for PyTorch (see the module
    docstring); a manylinux `platform` tags it as PyTorch's own wheels are tagged."""
    local = version.partition("+")[2]
    cuda = f"{local[2:-1]}.{local[-1]}" if local.startswith("cu") else None
    note = '"""STAND-IN for PyTorch made by wheelforge\'s runner tests. This is not PyTorch."""\n'
    files = {
        "torch/__init__.py": (
            f"{note}__version__ = {version!r}\nSTAND_IN = True\nfrom . import _C, version\n"
        ).encode(),
        "torch/version.py": (
            f"{note}__version__ = {version!r}\ncuda = {cuda!r}\ngit_version = 'stand-in'\n"
        ).encode(),
        "torch/_C.py": f"{note}_GLIBCXX_USE_CXX11_ABI = True\n".encode(),
    }
    metadata = (
        "Metadata-Version: 2.1\nName: torch\n"
        f"Version: {version}\n"
        "Summary: STAND-IN for PyTorch used by wheelforge's runner tests (not PyTorch)\n"
        "Requires-Python: >=3.9\n"
    )
    return write_wheel(directory, "torch", version, f"py3-none-{platform}", metadata, files)


def verify_wheel(data: bytes) -> dict[str, bytes]:
    """Checks that a wheel's RECORD lists every member with its right hash and size (RECORD
    itself without); returns the members by name."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    records = [n for n in members if n.endswith(".dist-info/RECORD")]
    assert len(records) == 1, f"expected one RECORD, found {records}"
    lines = [line for line in members[records[0]].decode().splitlines() if line]
    listed = {}
    for line in lines:
        path, digest, size = line.rsplit(",", 2)
        listed[path] = (digest, size)
    assert set(listed) == set(members), (
        f"RECORD lists {sorted(set(listed) ^ set(members))} differently from the archive"
    )
    for path, (digest, size) in listed.items():
        if path == records[0]:
            assert (digest, size) == ("", ""), f"RECORD's own line: {digest},{size}"
            continue
        expected = record_line(path, members[path]).split(",", 1)[1]
        assert f"{digest},{size}" == expected, f"RECORD line of {path}: {digest},{size} != {expected}"
    return members


def objdump_versions(library: bytes, scratch: Path) -> dict[str, tuple[int, ...]]:
    """The highest symbol version of each prefix (GLIBC, GLIBCXX, CXXABI, GCC) that `objdump -T`
    lists for a shared library, as numbers."""
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / "library.so"
    path.write_bytes(library)
    proc = run(["objdump", "-T", str(path)], timeout=60)
    assert proc.returncode == 0, proc.stderr
    highest: dict[str, tuple[int, ...]] = {}
    for prefix, version in re.findall(r"\b(GLIBC|GLIBCXX|CXXABI|GCC)_(\d+(?:\.\d+)*)\b", proc.stdout):
        numbers = tuple(int(n) for n in version.split("."))
        highest[prefix] = max(highest.get(prefix, ()), numbers)
    return highest


def expected_manylinux(library: bytes, scratch: Path, arch: str = "x86_64") -> tuple[str, str]:
    """(glibc floor, platform tag) for a wheel whose one binary is `library`, from objdump: the
    floor is its highest GLIBC_ version, and the tag the lowest manylinux policy allowing it,
    manylinux_2_17 (with its legacy alias) at the least. The C++ runtime versions objdump lists
    must be ones every policy allows (libstdc++ of CentOS 7: GLIBCXX 3.4.19, CXXABI 1.3.7,
    GCC 4.8.0), so that the glibc floor alone decides the tag."""
    versions = objdump_versions(library, scratch)
    assert "GLIBC" in versions, f"objdump lists no GLIBC version: {versions}"
    for prefix, ceiling in (("GLIBCXX", (3, 4, 19)), ("CXXABI", (1, 3, 7)), ("GCC", (4, 8, 0))):
        assert versions.get(prefix, ()) <= ceiling, (
            f"{prefix} {versions[prefix]} would raise the tag above the glibc floor's")
    floor = versions["GLIBC"]
    minor = max(17, floor[1])
    tag = f"manylinux_2_{minor}_{arch}" + (f".manylinux2014_{arch}" if minor == 17 else "")
    return ".".join(str(n) for n in floor), tag


# ---------------------------------------------------------------------------------------------
# The CUDA test package: built by the runner with `pip wheel --no-build-isolation`

DEMO_PYPROJECT = """\
[build-system]
requires = []
build-backend = "wf_backend"
backend-path = ["."]
"""

DEMO_BACKEND = '''\
"""In-tree PEP 517 backend of wf-demo-ext, the test package of wheelforge's build runner tests.

It compiles kernel.cu with nvcc ($CUDA_HOME/bin/nvcc, for the archs in TORCH_CUDA_ARCH_LIST,
with NVCC_THREADS threads) into a shared library inside the package wf_demo_ext, pins the torch
series it was built against (read from the installed torch, as real extensions must) and records
the parallelism it was given (MAX_JOBS, NVCC_THREADS) in wf_demo_ext/_build_info.json.
The version is $WF_DEMO_VERSION (default 1.0.0), plus "+$WF_DEMO_LOCAL_VERSION" when that is set.
"""

import base64
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

PROJECT = "wf-demo-ext"
PACKAGE = "wf_demo_ext"
HERE = os.path.dirname(os.path.abspath(__file__))


def _version():
    version = os.environ.get("WF_DEMO_VERSION", "1.0.0")
    local = os.environ.get("WF_DEMO_LOCAL_VERSION", "")
    return version + "+" + local if local else version


def _torch_version():
    import torch

    return torch.__version__


def _torch_series(version):
    return ".".join(version.split("+")[0].split(".")[:2])


def _tag():
    python = "cp%d%d" % sys.version_info[:2]
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (python, python, platform)


def _dist_info():
    return "%s-%s.dist-info" % (PACKAGE, _version())


def _metadata():
    return (
        "Metadata-Version: 2.1\\n"
        "Name: %s\\n"
        "Version: %s\\n"
        "Summary: test package of wheelforge's build runner (a CUDA kernel built with nvcc)\\n"
        "Requires-Python: >=3.9\\n"
        "Requires-Dist: torch==%s.*\\n" % (PROJECT, _version(), _torch_series(_torch_version()))
    ).encode()


def _wheel_file():
    return (
        "Wheel-Version: 1.0\\nGenerator: wf_backend\\nRoot-Is-Purelib: false\\nTag: %s\\n" % _tag()
    ).encode()


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    path = os.path.join(metadata_directory, _dist_info())
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "METADATA"), "wb") as f:
        f.write(_metadata())
    with open(os.path.join(path, "WHEEL"), "wb") as f:
        f.write(_wheel_file())
    return _dist_info()


def _archs():
    archs = []
    listed = os.environ.get("TORCH_CUDA_ARCH_LIST") or "8.0"
    for entry in listed.replace(",", ";").replace(" ", ";").split(";"):
        entry = entry.strip().replace("+PTX", "")
        if entry:
            archs.append(entry.replace(".", ""))
    return archs


def _compile(build_dir):
    if not os.environ.get("CUDA_HOME"):
        raise RuntimeError("CUDA_HOME is not set")
    nvcc = os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc")
    library = os.path.join(build_dir, "_kernel" + sysconfig.get_config_var("EXT_SUFFIX"))
    command = [nvcc, "-shared", "-Xcompiler", "-fPIC", "-O2"]
    command += ["--threads", os.environ.get("NVCC_THREADS", "1")]
    command += ["-gencode=arch=compute_%s,code=sm_%s" % (a, a) for a in _archs()]
    if os.environ.get("WF_DEMO_LINK_MISSING"):
        # A stub of libwfmissing.so exists while building only, as a library of the build host
        # would: the wheel needs it, and neither the wheel, torch, CUDA nor a policy has it.
        stub = os.path.join(build_dir, "wfmissing.c")
        with open(stub, "w") as f:
            f.write("int wf_missing(void) { return 1; }\\n")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", os.path.join(build_dir, "libwfmissing.so"),
                        stub], check=True)
        command += ["-DWF_DEMO_MISSING", "-L" + build_dir, "-lwfmissing"]
    command += ["-o", library, os.path.join(HERE, "kernel.cu")]
    print("wf_backend: " + " ".join(command), flush=True)
    subprocess.run(command, check=True)
    return library


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    build_info = {
        "torch": _torch_version(),
        "max_jobs": os.environ.get("MAX_JOBS"),
        "nvcc_threads": os.environ.get("NVCC_THREADS"),
        "arch_list": os.environ.get("TORCH_CUDA_ARCH_LIST"),
        "local_version": os.environ.get("WF_DEMO_LOCAL_VERSION"),
        "cuda_home": os.environ.get("CUDA_HOME"),
    }
    with tempfile.TemporaryDirectory() as build_dir:
        library = _compile(build_dir)
        with open(library, "rb") as f:
            library_data = f.read()
    with open(os.path.join(HERE, PACKAGE, "__init__.py"), "rb") as f:
        init = f.read()
    dist_info = _dist_info()
    members = [
        (PACKAGE + "/__init__.py", init),
        (PACKAGE + "/" + os.path.basename(library), library_data),
        (PACKAGE + "/_build_info.json", json.dumps(build_info, indent=1).encode()),
        (dist_info + "/METADATA", _metadata()),
        (dist_info + "/WHEEL", _wheel_file()),
    ]
    record = ""
    for name, data in members:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += "%s,sha256=%s,%d\\n" % (name, digest, len(data))
    record += dist_info + "/RECORD,,\\n"
    members.append((dist_info + "/RECORD", record.encode()))
    filename = "%s-%s-%s.whl" % (PACKAGE, _version(), _tag())
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            zf.writestr(info, data)
    return filename
'''

DEMO_KERNEL = """\
// wf-demo-ext's CUDA code: a kernel (compiled into the fatbinary for the requested archs) and
// host functions that the package calls through ctypes; none of them needs a GPU.
#include <cuda_runtime.h>

__global__ void wf_demo_scale(float* x, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

extern "C" int wf_demo_answer() { return 42; }

extern "C" int wf_demo_runtime_version() {
  int version = 0;
  if (cudaRuntimeGetVersion(&version) != cudaSuccess) return -1;
  return version;
}

#ifdef WF_DEMO_MISSING
// Built with -DWF_DEMO_MISSING -lwfmissing: needs a library no wheel and no system provides.
extern "C" int wf_missing(void);
extern "C" int wf_demo_missing() { return wf_missing(); }
#endif
"""

DEMO_INIT = '''\
"""wf_demo_ext: test package of wheelforge's build runner tests. A shared library compiled by
nvcc from kernel.cu; check() loads it with ctypes."""

import ctypes
import json
import pathlib

import torch

_HERE = pathlib.Path(__file__).resolve().parent
BUILD_INFO = json.loads((_HERE / "_build_info.json").read_text())
BUILT_WITH_TORCH = BUILD_INFO["torch"]


def _series(version):
    return ".".join(version.split("+")[0].split(".")[:2])


# Like a real torch extension, a build works only with the torch series it was built against.
if _series(torch.__version__) != _series(BUILT_WITH_TORCH):
    raise ImportError(
        "wf_demo_ext was built against torch %s, but torch %s is installed"
        % (BUILT_WITH_TORCH, torch.__version__)
    )


def _library():
    return ctypes.CDLL(str(next(_HERE.glob("_kernel*.so"))))


def cuda_runtime_version():
    return _library().wf_demo_runtime_version()


def check():
    library = _library()
    return library.wf_demo_answer() == 42 and library.wf_demo_runtime_version() > 0
'''


def write_demo_package(dest: Path) -> Path:
    """The source tree of wf-demo-ext (see DEMO_BACKEND)."""
    (dest / "wf_demo_ext").mkdir(parents=True, exist_ok=True)
    (dest / "pyproject.toml").write_text(DEMO_PYPROJECT)
    (dest / "wf_backend.py").write_text(DEMO_BACKEND)
    (dest / "kernel.cu").write_text(DEMO_KERNEL)
    (dest / "wf_demo_ext" / "__init__.py").write_text(DEMO_INIT)
    return dest


# ---------------------------------------------------------------------------------------------
# Fake compilers: a pure-Python wheel written by hand, and shell scripts that misbehave

FAKE_WHEEL = '''\
"""Stands in for a compiler in wheelforge's build runner tests: writes a pure-Python wheel of
$WF_FAKE_PROJECT $WF_FAKE_VERSION (+$WF_FAKE_LOCAL_VERSION when set) into argv[1], recording the
environment the build ran in, the torch it could import and the version of wf_build_dep (a
build requirement some tests give it)."""

import base64
import hashlib
import json
import os
import sys
import zipfile

out = sys.argv[1]
project = os.environ["WF_FAKE_PROJECT"]
version = os.environ["WF_FAKE_VERSION"]
if os.environ.get("WF_FAKE_LOCAL_VERSION"):
    version += "+" + os.environ["WF_FAKE_LOCAL_VERSION"]
try:
    import torch

    torch_version = torch.__version__
except ImportError:
    torch_version = None
try:
    import wf_build_dep

    build_dep = wf_build_dep.VERSION
except ImportError:
    build_dep = None
package = project.replace("-", "_")
dist_info = "%s-%s.dist-info" % (package, version)
build_env = {"environ": dict(os.environ), "executable": sys.executable, "torch": torch_version,
             "build_dep": build_dep}
members = [
    (package + "/__init__.py", (
        "import json, pathlib\\n"
        "BUILD_ENV = json.loads((pathlib.Path(__file__).parent / 'build_env.json').read_text())\\n"
        "def check():\\n    return True\\n").encode()),
    (package + "/build_env.json", json.dumps(build_env, indent=1, sort_keys=True).encode()),
    (dist_info + "/METADATA",
     ("Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n" % (project, version)).encode()),
    (dist_info + "/WHEEL",
     b"Wheel-Version: 1.0\\nGenerator: fake_wheel\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"),
]
record = ""
for name, data in members:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += "%s,sha256=%s,%d\\n" % (name, digest, len(data))
members.append((dist_info + "/RECORD", (record + dist_info + "/RECORD,,\\n").encode()))
filename = "%s-%s-py3-none-any.whl" % (package, version)
with zipfile.ZipFile(os.path.join(out, filename), "w") as zf:
    for name, data in members:
        info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        zf.writestr(info, data)
print("fake_wheel: wrote " + filename)
'''

# A tiny C extension compiled with this host's gcc into a py3-none-linux_<arch> wheel of
# $WF_FAKE_PROJECT 1.0.0: its library calls pthread_create, which glibc 2.34 and later version
# GLIBC_2.34 (libpthread moved into libc), so the wheel needs manylinux_2_34 when built here.
CEXT_WHEEL = '''\
import base64
import hashlib
import os
import platform
import subprocess
import sys
import zipfile

out = sys.argv[1]
project = os.environ["WF_FAKE_PROJECT"]
package = project.replace("-", "_")
with open("cext.c", "w") as f:
    f.write("#include <pthread.h>\\n"
            "static void* run(void* arg) { return arg; }\\n"
            "int wf_answer(void) { pthread_t t; if (pthread_create(&t, 0, run, 0)) return 0;"
            " pthread_join(t, 0); return 42; }\\n")
subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-pthread", "-o", "_C.so", "cext.c"], check=True)
with open("_C.so", "rb") as f:
    library = f.read()
dist_info = "%s-1.0.0.dist-info" % package
tag = "py3-none-linux_" + platform.machine()
members = [
    (package + "/__init__.py", b"import ctypes, pathlib\\n"
     b"def check():\\n    return ctypes.CDLL(str(pathlib.Path(__file__).parent / '_C.so')).wf_answer() == 42\\n"),
    (package + "/_C.so", library),
    (dist_info + "/METADATA", ("Metadata-Version: 2.1\\nName: %s\\nVersion: 1.0.0\\n" % project).encode()),
    (dist_info + "/WHEEL", ("Wheel-Version: 1.0\\nGenerator: cext_wheel\\nRoot-Is-Purelib: false\\n"
                            "Tag: %s\\n" % tag).encode()),
]
record = ""
for name, data in members:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += "%s,sha256=%s,%d\\n" % (name, digest, len(data))
members.append((dist_info + "/RECORD", (record + dist_info + "/RECORD,,\\n").encode()))
filename = "%s-1.0.0-%s.whl" % (package, tag)
with zipfile.ZipFile(os.path.join(out, filename), "w") as zf:
    for name, data in members:
        zf.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)), data)
print("cext_wheel: wrote " + filename)
'''

FAKE_SCRIPTS = {
    "cext_wheel.py": CEXT_WHEEL,
    # A build that never finishes: two compilers that hang and the shell waiting for them.
    "hang.sh": """\
echo "fake build: starting two compilers that hang"
sleep 300 &
echo $! >> "$WF_PIDS_FILE"
sleep 300 &
echo $! >> "$WF_PIDS_FILE"
echo $$ >> "$WF_PIDS_FILE"
wait
""",
    # The OOM killer strikes whenever more than one compile job runs at a time.
    "oom.sh": """\
echo "fake build: MAX_JOBS=$MAX_JOBS NVCC_THREADS=$NVCC_THREADS"
if [ "$MAX_JOBS" -gt 1 ]; then
  echo "Killed signal terminated program cicc" >&2
  exit 137
fi
exec "$1" fake_wheel.py "$2"
""",
    # A plain compile error: retrying cannot help.
    "broken.sh": """\
echo "kernel.cu(12): error: expected ';'" >&2
echo "1 error detected in the compilation of \\"kernel.cu\\"." >&2
exit 1
""",
    # A build slow enough to kill the server under it.
    "slow.sh": """\
echo $$ >> "$WF_PIDS_FILE"
echo "fake build: compiling slowly"
sleep 4
exec "$1" fake_wheel.py "$2"
""",
}


def write_fake_source(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "fake_wheel.py").write_text(FAKE_WHEEL)
    for name, text in FAKE_SCRIPTS.items():
        (dest / name).write_text(text)
    return dest


def fake_recipe(project: str, command: str, **extra) -> dict:
    """A one-cell (3.11, torch 2.8, CUDA 13.0) recipe building `project` 1.0.0 with `command`
    run in the fake source tree."""
    env = {"WF_FAKE_PROJECT": project, "WF_FAKE_VERSION": "1.0.0", **extra.pop("env", {})}
    recipe = {
        "project": project,
        "source": {"path": "<fake>"},
        "command": command,
        "env": env,
        "arch_variable": "TORCH_CUDA_ARCH_LIST",
        "arch_value": "8.0",
        "import_check": f"import {project.replace('-', '_')} as m; assert m.check()",
        "gb_per_job": 0.25,
        "timeout": "5m",
        # The fake builds need no setuptools, wheel or ninja (the default requirements).
        "build_requires": [],
        "matrix": {"python": ["3.11"], "torch": ["2.8"], "cuda": ["13.0"]},
    }
    recipe.update(extra)
    return recipe


# ---------------------------------------------------------------------------------------------
# Configuration


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def write_config(path: Path, recipes: dict[str, dict], fake_source: Path | None = None,
                 cuda_homes: dict[str, Path] | None = None, pythons: dict[str, Path] | None = None,
                 **build) -> Path:
    """[build] with this host's Pythons (or `pythons`) and CUDA (or `cuda_homes`), then one
    [recipes.NAME] per recipe; a source of {"path": "<fake>"} means `fake_source`."""
    settings = {"memory_reserve": "1G", "max_concurrent_jobs": 2, "oom_retries": 2, **build}
    lines = ["[build]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in settings.items()]
    lines += ["", "[build.python]"]
    lines += [f"{_toml_key(v)} = {_toml_value(str(p))}" for v, p in (pythons or PYTHONS).items()]
    lines += ["", "[build.cuda]"]
    for version, home in (cuda_homes or {"13.0": CUDA_HOME}).items():
        lines.append(f"{_toml_key(version)} = {_toml_value(str(home))}")
    for name, recipe in recipes.items():
        lines += ["", f"[recipes.{name}]"]
        for key, value in recipe.items():
            if key == "matrix":
                continue
            if key == "source" and value == {"path": "<fake>"}:
                value = {"path": str(fake_source)}
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
        lines += ["", f"[recipes.{name}.matrix]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in recipe["matrix"].items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def require_tools(*, nvcc: bool) -> None:
    for version, python in PYTHONS.items():
        if not python.exists():
            pytest.skip(f"Python {version} ({python}) is not installed")
    if nvcc and not NVCC.exists():
        pytest.skip(f"nvcc is not installed at {NVCC}")


# ---------------------------------------------------------------------------------------------
# The admin API


class Admin:
    """The admin API of one server, with an admin token."""

    def __init__(self, server: Server, token: str):
        self.server = server
        self.token = token

    def request(self, method: str, target: str, body=None, token: str | None = None) -> Response:
        headers = {"Authorization": f"Bearer {self.token if token is None else token}"}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        return self.server.request(method, target, headers, data)

    def submit(self, recipe: str, version: str = "1.0.0", matrix: dict | None = None, force=False,
               **fields):
        body = {"recipe": recipe, "version": version, "force": force, **fields}
        if matrix is not None:
            body["matrix"] = matrix
        resp = self.request("POST", "/admin/builds", body)
        assert resp.status == 202, f"POST /admin/builds {body} -> {resp.status}: {resp.text[:1000]}"
        return resp.json()

    def job(self, job_id: int) -> dict:
        resp = self.request("GET", f"/admin/jobs/{job_id}")
        assert resp.status == 200, f"GET /admin/jobs/{job_id} -> {resp.status}: {resp.text[:500]}"
        return resp.json()

    def build(self, build_id: int) -> dict:
        resp = self.request("GET", f"/admin/builds/{build_id}")
        assert resp.status == 200, f"GET /admin/builds/{build_id} -> {resp.status}: {resp.text[:500]}"
        return resp.json()

    def log(self, job_id: int, offset: int | None = None) -> Response:
        target = f"/admin/jobs/{job_id}/log" + ("" if offset is None else f"?offset={offset}")
        return self.request("GET", target)

    def log_text(self, job_id: int) -> str:
        resp = self.log(job_id)
        return resp.text if resp.status == 200 else f"(log: {resp.status} {resp.text[:300]})"

    def describe(self, job: dict, tail: int = 4000) -> str:
        """A job and the end of its log, for assertion messages."""
        return f"job {json.dumps(job)}\n--- log tail ---\n{self.log_text(job['id'])[-tail:]}"

    def wait_jobs(self, job_ids, timeout: float, until=lambda job: job["state"] in TERMINAL):
        """Polls the jobs until each satisfies `until`; returns the last seen {id: job}."""
        deadline = time.monotonic() + timeout
        seen: dict[int, dict] = {}
        while True:
            for job_id in job_ids:
                seen[job_id] = self.job(job_id)
            if all(until(job) for job in seen.values()) or time.monotonic() > deadline:
                return seen
            time.sleep(0.5)

    def run_one(self, recipe: str, timeout: float = FAULT_TIMEOUT, **kwargs) -> dict:
        """Submits a one-job build and waits for the job to end; returns it."""
        created = self.submit(recipe, **kwargs)
        assert len(created["jobs"]) == 1, f"expected one job: {created}"
        job = self.wait_jobs([created["jobs"][0]["id"]], timeout)[created["jobs"][0]["id"]]
        assert job["state"] in TERMINAL, f"job did not end within {timeout:.0f}s\n{self.describe(job)}"
        return job


class LogFollower(threading.Thread):
    """GET /admin/jobs/<id>/log?follow=1, read as it arrives: the chunks and when each came."""

    def __init__(self, admin: Admin, job_id: int, timeout: float):
        super().__init__(daemon=True)
        self.admin = admin
        self.job_id = job_id
        self.timeout = timeout
        self.status = 0
        self.headers: dict[str, str] = {}
        self.chunks: list[tuple[float, bytes, str]] = []  # (time, data, job state then)
        self.ended = False
        self.error: str | None = None

    def run(self) -> None:
        parts = urllib.parse.urlsplit(self.admin.server.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.timeout)
        try:
            conn.request(
                "GET",
                f"/admin/jobs/{self.job_id}/log?follow=1",
                headers={"Authorization": f"Bearer {self.admin.token}"},
            )
            resp = conn.getresponse()
            self.status = resp.status
            self.headers = {k.lower(): v for k, v in resp.getheaders()}
            while True:
                data = resp.read1(65536)
                if not data:
                    break
                try:
                    state = self.admin.job(self.job_id)["state"]
                except Exception as exc:  # noqa: BLE001 - recorded, not fatal
                    state = f"unknown ({exc})"
                self.chunks.append((time.monotonic(), data, state))
            self.ended = True
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()

    @property
    def text(self) -> str:
        return b"".join(c[1] for c in self.chunks).decode(errors="replace")


# ---------------------------------------------------------------------------------------------
# Shared test beds: one data directory and server per module part, because preparing a
# (python, torch, CUDA) environment costs seconds and the tests can share them.


@contextlib.contextmanager
def shared_harness(request, binary: Path, prefix: str):
    """Like the `harness` fixture, for a module-scoped bed: kept when a test using it failed."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    h = Harness(binary, root)
    h.failed_tests: list[str] = []
    crashed: list[str] = []
    try:
        yield h
    finally:
        crashed = h.close()
        if not h.failed_tests and not crashed:
            shutil.rmtree(root, ignore_errors=True)
    if crashed:
        pytest.fail(f"{'; '.join(crashed)} (temp dir kept: {root})", pytrace=False)


def attach(request, bed):
    """Yields the shared `bed`; a failing test reports the bed's server logs and keeps its
    directory."""
    request.node.wf_harness = bed.h
    yield bed
    if getattr(request.node, "wf_failed", False):
        bed.h.failed_tests.append(request.node.name)


def upload_stand_in_torch(h: Harness, server: Server, versions=TORCH_STAND_INS) -> None:
    for version in versions:
        wheel = stand_in_torch(h.path("torch-stand-ins"), version)
        resp = server.put_file(wheel, h.token("upload"))
        assert resp.status in (200, 201), f"PUT {wheel.filename} -> {resp.status}: {resp.text[:300]}"


def fetch_wheel(server: Server, filename: str, project: str) -> tuple[dict, bytes]:
    """The /simple/ JSON entry of a file and its bytes (checked against the listed sha256)."""
    entry = server.file_entry(project, filename)
    resp = server.get(path_of(urllib.parse.urljoin(f"{server.url}/simple/{project}/", entry["url"])))
    assert resp.status == 200, f"download {filename} -> {resp.status}"
    assert sha256_hex(resp.body) == entry["hashes"]["sha256"], f"{filename}: hash differs from listing"
    return entry, resp.body


def view_files(server: Server, view: str, project: str) -> set[str]:
    resp = server.get(f"/{view}/simple/{project}/", {"Accept": JSON_TYPE})
    assert resp.status == 200, f"/{view}/simple/{project}/ -> {resp.status}: {resp.text[:300]}"
    return {f["filename"] for f in resp.json()["files"]}


def read_pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def alive(pid: int, name: str) -> bool:
    """True when `pid` is a live (not zombie) process whose command line mentions `name`."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X") and name in cmdline


def kill_leftovers(pids: list[int], name: str) -> list[int]:
    """Kills (and returns) those of our fake compilers' pids that still run."""
    left = [p for p in pids if alive(p, name)]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


# ---------------------------------------------------------------------------------------------
# Part 1: a real CUDA package over 2 Pythons x 2 torch series, through the admin API


class MatrixBed:
    def __init__(self, h: Harness, server: Server, admin: Admin):
        self.h = h
        self.server = server
        self.admin = admin
        self.build: dict = {}
        self.plain_build: dict = {}
        self.missing_build: dict = {}
        self.jobs: dict[int, dict] = {}
        self.follower: LogFollower | None = None


@pytest.fixture(scope="module")
def _matrix_bed(request, wheelforge_bin):
    require_tools(nvcc=True)
    with shared_harness(request, wheelforge_bin, "wf-it-runner-matrix-") as h:
        h.token("upload")
        admin_token = h.token("admin")
        source = write_demo_package(h.path("src", "wf-demo-ext"))
        common = {
            "project": "wf-demo-ext",
            "source": {"path": str(source)},
            "command": "{python} -m pip wheel --no-build-isolation --no-deps -w {out} {src}",
            "arch_variable": "TORCH_CUDA_ARCH_LIST",
            "arch_value": "8.0",
            "import_check": "import wf_demo_ext; assert wf_demo_ext.check()",
            "gb_per_job": 1.0,
            "timeout": "10m",
            "build_requires": [],
        }
        config = write_config(
            h.root / "wheelforge.toml",
            {
                "demo": {
                    **common,
                    "local_version_variable": "WF_DEMO_LOCAL_VERSION",
                    "matrix": {"python": ["3.11", "3.12"], "torch": ["2.8", "2.9"],
                               "cuda": ["13.0"], "exclude": []},
                },
                # No local version variable: the wheel comes out as plain 1.0.1 and the runner
                # must label it itself.
                "plain": {
                    **common,
                    "env": {"WF_DEMO_VERSION": "1.0.1"},
                    "matrix": {"python": ["3.11"], "torch": ["2.8"], "cuda": ["13.0"]},
                },
                # Links a library that only the build host has.
                "missing": {
                    **common,
                    "env": {"WF_DEMO_VERSION": "1.0.2", "WF_DEMO_LINK_MISSING": "1"},
                    "matrix": {"python": ["3.11"], "torch": ["2.8"], "cuda": ["13.0"]},
                },
            },
        )
        server = h.serve("--config", str(config))
        bed = MatrixBed(h, server, Admin(server, admin_token))
        upload_stand_in_torch(h, server)

        # The cuda axis is left out: all of the recipe's CUDA versions.
        bed.build = bed.admin.submit("demo", "1.0.0", {"python": ["3.11", "3.12"], "torch": ["2.8", "2.9"]})
        bed.follower = LogFollower(bed.admin, bed.build["jobs"][0]["id"], MATRIX_BUILD_TIMEOUT)
        bed.follower.start()
        bed.plain_build = bed.admin.submit("plain", "1.0.1")
        bed.missing_build = bed.admin.submit("missing", "1.0.2")
        ids = [j["id"] for j in bed.build["jobs"] + bed.plain_build["jobs"] + bed.missing_build["jobs"]]
        bed.jobs = bed.admin.wait_jobs(ids, MATRIX_BUILD_TIMEOUT)
        bed.follower.join(30)
        yield bed


@pytest.fixture
def matrix_bed(request, _matrix_bed):
    yield from attach(request, _matrix_bed)


def demo_jobs(bed: MatrixBed) -> list[dict]:
    return [bed.jobs[j["id"]] for j in bed.build["jobs"]]


def require_succeeded(bed, job: dict) -> None:
    if job["state"] != "succeeded":
        pytest.fail(f"job {job['id']} did not succeed:\n{bed.admin.describe(job)}", pytrace=False)


def test_matrix_build_through_admin_api(matrix_bed):
    bed = matrix_bed
    created = bed.build
    assert created["build"]["recipe"] == "demo" and created["build"]["version"] == "1.0.0", created
    cells = sorted((j["python"], j["torch"], j["cuda"]) for j in created["jobs"])
    assert cells == [("3.11", "2.8", "13.0"), ("3.11", "2.9", "13.0"),
                     ("3.12", "2.8", "13.0"), ("3.12", "2.9", "13.0")], created["jobs"]
    for job in created["jobs"]:
        assert job["build_id"] == created["build"]["id"] and job["recipe"] == "demo", job
        assert job["state"] == "queued", job

    failed = [bed.admin.describe(j) for j in demo_jobs(bed) if j["state"] != "succeeded"]
    assert not failed, "\n\n".join(failed)

    for job in demo_jobs(bed):
        label = f"cu130torch{job['torch']}"
        py = "cp" + job["python"].replace(".", "")
        assert job["label"] == label, job
        assert job["attempts"] == 1, job
        assert job["max_jobs"] >= 1 and job["nvcc_threads"] >= 1, job
        assert re.fullmatch(rf"wf_demo_ext-1\.0\.0\+{label}-{py}-{py}-manylinux_2_\d+_x86_64"
                            rf"(\.manylinux2014_x86_64)?\.whl", job["wheel"]), job
        assert job["build_number"] == 0, job
        assert re.fullmatch(r"2\.\d+", job["glibc_floor"] or ""), job
        assert job["created_at"] and job["started_at"] and job["finished_at"], job
        assert job["reason"] in ("", None), job

    listing = bed.admin.request("GET", "/admin/builds")
    assert listing.status == 200, listing.text
    assert created["build"]["id"] in {b["id"] for b in listing.json()["builds"]}
    again = bed.admin.build(created["build"]["id"])
    assert again["build"]["id"] == created["build"]["id"]
    assert {j["id"]: j["state"] for j in again["jobs"]} == {j["id"]: "succeeded" for j in demo_jobs(bed)}


def test_matrix_wheels_carry_their_label_inside_and_out(matrix_bed):
    bed = matrix_bed
    jobs = demo_jobs(bed)
    for job in jobs:
        require_succeeded(bed, job)
    listed = {f["filename"] for f in bed.server.project_json("wf-demo-ext")["files"]}
    assert {j["wheel"] for j in jobs} <= listed, listed
    for job in jobs:
        label = f"cu130torch{job['torch']}"
        entry, data = fetch_wheel(bed.server, job["wheel"], "wf-demo-ext")
        assert entry.get("core-metadata"), f"no core-metadata for {job['wheel']}: {entry}"
        metadata_url = urllib.parse.urljoin(f"{bed.server.url}/simple/wf-demo-ext/", entry["url"])
        resp = bed.server.get(path_of(metadata_url) + ".metadata")
        assert resp.status == 200, f"{job['wheel']}.metadata -> {resp.status}"
        metadata = resp.text
        assert f"\nVersion: 1.0.0+{label}\n" in metadata, metadata
        assert f"\nRequires-Dist: torch=={job['torch']}.*\n" in metadata, metadata

        members = verify_wheel(data)
        distinfo = f"wf_demo_ext-1.0.0+{label}.dist-info"
        assert members[f"{distinfo}/METADATA"] == resp.body, ".metadata differs from the wheel's"
        py = "cp" + job["python"].replace(".", "")
        libraries = [n for n in members if re.fullmatch(r"wf_demo_ext/_kernel.*\.so", n)]
        assert len(libraries) == 1 and members[libraries[0]][:4] == b"\x7fELF", sorted(members)
        # The platform tag the analysis gave it, in WHEEL as in the file name.
        tags = job["wheel"][: -len(".whl")].split("-")[-1].split(".")
        wheel_file = members[f"{distinfo}/WHEEL"].decode()
        assert [line[len("Tag: "):] for line in wheel_file.splitlines() if line.startswith("Tag: ")] == [
            f"{py}-{py}-{tag}" for tag in tags], wheel_file
        info = json.loads(members["wf_demo_ext/_build_info.json"])
        assert info["torch"].startswith(job["torch"] + "."), info
        assert info["local_version"] == label, info
        assert info["arch_list"] == "8.0", info
        assert info["cuda_home"] == str(CUDA_HOME), info
        assert (info["max_jobs"], info["nvcc_threads"]) == (str(job["max_jobs"]), str(job["nvcc_threads"])), (
            f"the build saw MAX_JOBS={info['max_jobs']} NVCC_THREADS={info['nvcc_threads']}, "
            f"the job records {job['max_jobs']} / {job['nvcc_threads']}"
        )


def test_matrix_wheels_are_manylinux_as_their_binaries_need(matrix_bed):
    """The analysis step reads the wheel's .so: a linux_x86_64 wheel is retagged to the lowest
    manylinux tag its binaries allow, and the job's glibc floor is the highest GLIBC_ version
    that `objdump -T` lists for the .so."""
    bed = matrix_bed
    coverage = bed.server.get("/api/projects/wf-demo-ext/variants").json()
    covered = {f["filename"]: f for v in coverage["versions"] for f in v["files"]}
    for job in demo_jobs(bed):
        require_succeeded(bed, job)
        _entry, data = fetch_wheel(bed.server, job["wheel"], "wf-demo-ext")
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            [library] = [n for n in zf.namelist() if n.endswith(".so")]
            binary = zf.read(library)
        floor, tag = expected_manylinux(binary, bed.h.path(f"objdump-{job['id']}"))
        py = "cp" + job["python"].replace(".", "")
        assert job["glibc_floor"] == floor, job
        assert job["wheel"] == f"wf_demo_ext-1.0.0+cu130torch{job['torch']}-{py}-{py}-{tag}.whl", job
        log = bed.admin.log_text(job["id"])
        # Each binary's NEEDED and floor, the chosen tag, and one rewrite (label set at build
        # time here: the rewrite changes the platform tag only).
        assert re.search(rf"^==> \[retagging\] {re.escape(library)} \(x86_64\): NEEDED .*libc\.so\.6.*; "
                         rf"glibc floor {re.escape(floor)}", log, re.M), log[-3000:]
        assert f"==> [retagging] manylinux: {tag.split('.')[0]} (glibc floor {floor}" in log, log[-3000:]
        assert f"-linux_x86_64.whl -> {job['wheel']}" in log, log[-3000:]
        # The coverage API shows the floor the tag promises, and the build number.
        assert covered[job["wheel"]]["glibc"] == f"2.{max(17, int(floor.split('.')[1]))}", (
            covered[job["wheel"]])
        assert covered[job["wheel"]]["build"] == 0
        assert covered[job["wheel"]]["superseded_by"] is None


def test_matrix_variant_views(matrix_bed):
    bed = matrix_bed
    for job in demo_jobs(bed) + [bed.jobs[j["id"]] for j in bed.plain_build["jobs"]]:
        require_succeeded(bed, job)
    by_torch: dict[str, set[str]] = {"2.8": set(), "2.9": set()}
    for job in demo_jobs(bed) + [bed.jobs[j["id"]] for j in bed.plain_build["jobs"]]:
        by_torch[job["torch"]].add(job["wheel"])
    for torch, wheels in by_torch.items():
        view = f"cu130/torch{torch}"
        assert view_files(bed.server, view, "wf-demo-ext") == wheels
        assert view_files(bed.server, view, "torch") == {f"torch-{torch}.0+cu130-py3-none-any.whl"}


@pytest.mark.parametrize("torch", ["2.8", "2.9"])
def test_pip_installs_matrix_build_from_variant_view(matrix_bed, torch):
    bed = matrix_bed
    python = PIP_PYTHONS["23.2.1"]
    for job in demo_jobs(bed):
        require_succeeded(bed, job)
    target = bed.h.path(f"pip-target-torch{torch}")
    neutral = bed.h.path("neutral-cwd")
    proc = run(
        [python, "-m", "pip", "install", "--target", target,
         *pip_args(f"{bed.server.url}/cu130/torch{torch}/simple/"), "wf-demo-ext==1.0.0"],
        timeout=PIP_TIMEOUT,
        cwd=neutral,
    )
    assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"
    installed = sorted(p.name for p in target.glob("*.dist-info"))
    assert installed == [f"torch-{torch}.0+cu130.dist-info",
                         f"wf_demo_ext-1.0.0+cu130torch{torch}.dist-info"], installed
    check = run(
        [python, "-c",
         "import json, torch, wf_demo_ext; print(json.dumps([wf_demo_ext.check(), "
         "wf_demo_ext.BUILT_WITH_TORCH, torch.__version__, wf_demo_ext.cuda_runtime_version()]))"],
        timeout=60,
        cwd=neutral,
        env=clean_env(PYTHONPATH=str(target)),
    )
    assert check.returncode == 0, check.stderr
    ok, built_with, torch_version, runtime = json.loads(check.stdout)
    assert ok is True
    assert built_with == torch_version == f"{torch}.0+cu130"
    assert runtime // 1000 == 13, runtime


def test_runner_retags_a_wheel_built_without_label(matrix_bed):
    bed = matrix_bed
    job = bed.jobs[bed.plain_build["jobs"][0]["id"]]
    require_succeeded(bed, job)
    wheel = job["wheel"]
    assert re.fullmatch(r"wf_demo_ext-1\.0\.1\+cu130torch2\.8-cp311-cp311-manylinux_2_\d+_x86_64"
                        r"(\.manylinux2014_x86_64)?\.whl", wheel), job
    log = bed.admin.log_text(job["id"])
    # The label and the manylinux tag are written in one rewrite.
    assert re.search(
        r"^==> \[retagging\] wf_demo_ext-1\.0\.1-cp311-cp311-linux_x86_64\.whl -> " + re.escape(wheel),
        log, re.MULTILINE), log[-3000:]
    assert len(re.findall(r"^==> \[retagging\] .* -> ", log, re.M)) == 1, log[-3000:]

    _entry, data = fetch_wheel(bed.server, wheel, "wf-demo-ext")
    members = verify_wheel(data)
    distinfos = {n.split("/")[0] for n in members if ".dist-info/" in n}
    assert distinfos == {"wf_demo_ext-1.0.1+cu130torch2.8.dist-info"}, distinfos
    metadata = members["wf_demo_ext-1.0.1+cu130torch2.8.dist-info/METADATA"].decode()
    assert "\nVersion: 1.0.1+cu130torch2.8\n" in metadata, metadata
    names = list(members)
    first_meta = min(i for i, n in enumerate(names) if ".dist-info/" in n)
    assert all(".dist-info/" in n for n in names[first_meta:]), f".dist-info is not last: {names}"
    info = json.loads(members["wf_demo_ext/_build_info.json"])
    assert info["local_version"] is None, info

    python = PIP_PYTHONS["23.2.1"]
    target = bed.h.path("pip-target-plain")
    neutral = bed.h.path("neutral-cwd")
    proc = run(
        [python, "-m", "pip", "install", "--target", target,
         *pip_args(f"{bed.server.url}/cu130/torch2.8/simple/"), "wf-demo-ext==1.0.1"],
        timeout=PIP_TIMEOUT,
        cwd=neutral,
    )
    assert proc.returncode == 0, f"pip install of the retagged wheel failed:\n{proc.stdout}\n{proc.stderr}"
    check = run([python, "-c", "import wf_demo_ext; assert wf_demo_ext.check(); print('ok')"],
                timeout=60, cwd=neutral, env=clean_env(PYTHONPATH=str(target)))
    assert check.returncode == 0 and check.stdout.strip() == "ok", check.stderr


def test_needed_library_nothing_provides_fails_the_job(matrix_bed):
    """The test package links libwfmissing.so, a library of the build host that neither the
    wheel, torch, CUDA nor the manylinux policy provides: the job fails after the build, naming
    the library and the binary, and nothing is published."""
    bed = matrix_bed
    job = bed.jobs[bed.missing_build["jobs"][0]["id"]]
    assert job["state"] == "failed", bed.admin.describe(job)
    assert re.fullmatch(
        r"analyze binaries: not manylinux: wf_demo_ext/_kernel\.cpython-311-x86_64-linux-gnu\.so needs "
        r"libwfmissing\.so, which neither the wheel, torch, CUDA nor any manylinux policy provides",
        job["reason"]), job["reason"]
    assert job["wheel"] == "" and job["build_number"] is None, job
    log = bed.admin.log_text(job["id"])
    assert re.search(r"^==> \[retagging\] wf_demo_ext/_kernel.*: NEEDED .*libwfmissing\.so", log, re.M), (
        log[-3000:])
    assert "step: smoke test" not in log
    files = {f["filename"] for f in bed.server.project_json("wf-demo-ext")["files"]}
    assert not any("1.0.2" in f for f in files), files


def test_job_log_endpoint(matrix_bed):
    bed = matrix_bed
    job = demo_jobs(bed)[0]
    require_succeeded(bed, job)
    resp = bed.admin.log(job["id"])
    assert resp.status == 200, resp.text
    assert (resp.header("Content-Type") or "").startswith("text/plain"), resp.header("Content-Type")
    assert resp.header("X-Job-State") == "succeeded"
    full = resp.body
    assert resp.header("X-Log-Next-Offset") == str(len(full))
    on_disk = (bed.h.data_dir / "builds" / f"job-{job['id']}" / "log.txt").read_bytes()
    assert full == on_disk, "the log endpoint differs from DATA/builds/job-<id>/log.txt"
    text = full.decode()
    assert re.search(r"^==> \[building\] attempt 1 with MAX_JOBS=\d+ NVCC_THREADS=\d+$", text, re.M), text
    # The build command's own output (pip wheel, running our backend).
    assert "Successfully built wf-demo-ext" in text, text[-3000:]
    assert re.search(r"^==> succeeded$", text, re.M), text[-2000:]

    middle = len(full) // 2
    part = bed.admin.log(job["id"], middle)
    assert part.status == 200
    assert part.body == full[middle:]
    assert part.header("X-Log-Next-Offset") == str(len(full))
    end = bed.admin.log(job["id"], len(full))
    assert end.status == 200 and end.body == b"", (end.status, end.body[:200])
    assert end.header("X-Log-Next-Offset") == str(len(full))

    assert bed.admin.request("GET", f"/admin/jobs/{job['id']}/log", token="").status == 401


def test_job_log_follow_streams_until_the_job_ends(matrix_bed):
    bed = matrix_bed
    follower = bed.follower
    job = bed.jobs[follower.job_id]
    require_succeeded(bed, job)
    assert follower.error is None, follower.error
    assert follower.status == 200, follower.status
    assert follower.ended, "the follow=1 response did not end after the job ended"
    assert follower.headers.get("transfer-encoding", "").lower() == "chunked", follower.headers
    final = bed.admin.log(job["id"]).text
    chunks = [(state, data.decode(errors="replace")) for _t, data, state in follower.chunks]
    assert len(chunks) > 1, f"one chunk only: {chunks}"
    # Streamed as it grew: data arrived while the job was still running.
    assert chunks[0][0] not in TERMINAL, [c[0] for c in chunks]
    assert follower.text == final, (
        f"streamed {len(follower.text)} bytes, the log has {len(final)}; "
        f"streamed tail:\n{follower.text[-800:]}\nlog tail:\n{final[-800:]}"
    )


# ---------------------------------------------------------------------------------------------
# Part 2: faults, with fake compilers


class FaultBed:
    def __init__(self, h: Harness, server: Server, admin: Admin, config: Path):
        self.h = h
        self.server = server
        self.admin = admin
        self.config = config
        self.warm: dict = {}


@pytest.fixture(scope="module")
def _fault_bed(request, wheelforge_bin):
    require_tools(nvcc=False)
    with shared_harness(request, wheelforge_bin, "wf-it-runner-faults-") as h:
        h.token("upload")
        admin_token = h.token("admin")
        source = write_fake_source(h.path("src", "fake"))
        config = write_config(
            h.root / "wheelforge.toml",
            {
                "warm": fake_recipe(
                    "wf-fake-warm",
                    "{python} fake_wheel.py {out}",
                    env={"WF_RECIPE_SETTING": "from-the-recipe"},
                    local_version_variable="WF_FAKE_LOCAL_VERSION",
                ),
                "hang": fake_recipe("wf-fake-hang", "sh ./hang.sh", timeout="3s",
                                    env={"WF_PIDS_FILE": str(h.root / "pids-hang.txt")}),
                "cancel": fake_recipe("wf-fake-cancel", "sh ./hang.sh", timeout="10m",
                                      env={"WF_PIDS_FILE": str(h.root / "pids-cancel.txt")}),
                "oom": fake_recipe("wf-fake-oom", "sh ./oom.sh {python} {out}"),
                "broken": fake_recipe("wf-fake-broken", "sh ./broken.sh"),
                "ceiling": fake_recipe("wf-fake-ceiling", "{python} cext_wheel.py {out}",
                                       manylinux="2_28"),
                # No ceiling of its own: its torch 2.9 stand-in is tagged manylinux_2_28.
                "torch-ceiling": fake_recipe("wf-fake-torch-ceiling", "{python} cext_wheel.py {out}",
                                             matrix={"python": ["3.11"], "torch": ["2.9"],
                                                     "cuda": ["13.0"]}),
            },
            fake_source=source,
        )
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(SERVER_CANARY, "1")
            server = h.serve("--config", str(config))
        bed = FaultBed(h, server, Admin(server, admin_token), config)
        upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))
        # Prepares the (3.11, torch 2.8, CUDA 13.0) environment the fault recipes share, so that
        # their short timeouts apply to their builds only.
        bed.warm = bed.admin.run_one("warm")
        yield bed
        for name in ("pids-hang.txt", "pids-cancel.txt"):
            kill_leftovers(read_pids(h.root / name), "sleep")


@pytest.fixture
def fault_bed(request, _fault_bed):
    yield from attach(request, _fault_bed)


def test_build_environment_is_minimal(fault_bed):
    bed = fault_bed
    job = bed.warm
    require_succeeded(bed, job)
    assert job["wheel"] == "wf_fake_warm-1.0.0+cu130torch2.8-py3-none-any.whl", job
    _entry, data = fetch_wheel(bed.server, job["wheel"], "wf-fake-warm")
    seen = json.loads(verify_wheel(data)["wf_fake_warm/build_env.json"])
    env = {k: v for k, v in seen["environ"].items() if k not in SHELL_VARIABLES}
    data_dir = bed.h.data_dir.resolve()
    # The environment's directory is the cell and a hash of what makes the environment.
    envs = sorted((data_dir / "builds" / "envs").glob("py3.11-torch2.8-cu130-*/"))
    assert len(envs) == 1 and re.fullmatch(r"py3\.11-torch2\.8-cu130-[0-9a-f]{12}", envs[0].name), envs
    venv_bin = envs[0] / "bin"
    path = env.get("PATH", "")
    if shutil.which("ccache"):
        # The compile cache's compiler wrappers come first (docs/runner.md, "The compile cache").
        wrappers, _, path = path.partition(":")
        assert re.fullmatch(rf"{re.escape(str(data_dir))}/builds/compilers/[0-9a-f]{{16}}",
                            wrappers), env
        assert env["PYTORCH_NVCC"] == f"{wrappers}/nvcc", env
        assert env["CCACHE_DIR"] == str(data_dir / "builds" / "ccache" / "warm"), env
        assert env["CCACHE_BASEDIR"] == str(data_dir / "builds"), env
        # nvcc's compiles are cacheable only without --generate-dependencies-with-compile.
        assert env["TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES"] == "1", env
        for name in ("PYTORCH_NVCC", "CCACHE_DIR", "CCACHE_BASEDIR", "CCACHE_MAXSIZE",
                     "CCACHE_NOHASHDIR", "CCACHE_STATSLOG", "TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES"):
            env.pop(name)
    env["PATH"] = path
    expected = {
        "PATH": f"{venv_bin}:{CUDA_HOME}/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(data_dir / "builds" / f"job-{job['id']}"),
        "CUDA_HOME": str(CUDA_HOME),
        "MAX_JOBS": str(job["max_jobs"]),
        "NVCC_THREADS": str(job["nvcc_threads"]),
        "TORCH_CUDA_ARCH_LIST": "8.0",
        "WF_FAKE_LOCAL_VERSION": "cu130torch2.8",
        "PIP_NO_INDEX": "1",
        "PIP_CONFIG_FILE": "/dev/null",
        "WF_FAKE_PROJECT": "wf-fake-warm",
        "WF_FAKE_VERSION": "1.0.0",
        "WF_RECIPE_SETTING": "from-the-recipe",
    }
    # pip's own quiet-and-offline knobs are harmless extras.
    # WHEELFORGE_JOB tags every process of the job, so that a restarted server can end what a
    # killed one left running.
    allowed_extra = {"LANG", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_NO_CACHE_DIR", "PIP_NO_INPUT",
                     "WHEELFORGE_JOB"}
    assert SERVER_CANARY not in env, "the server's environment leaked into the build"
    unexpected = set(env) - set(expected) - allowed_extra
    assert not unexpected, f"unexpected variables in the build: { {k: env[k] for k in unexpected} }"
    assert "LANG" in env, env
    assert {k: env.get(k) for k in expected} == expected
    assert seen["executable"].startswith(str(venv_bin)), seen["executable"]
    assert seen["torch"] == "2.8.0+cu130", "the build environment's torch is not the 2.8 stand-in"


def test_installs_share_the_pip_cache(fault_bed):
    """The build environment's install downloads torch into DATA_DIR/builds/pip-cache; the
    smoke test's install of the same torch, into a fresh environment, takes it from there
    instead of downloading it again."""
    bed = fault_bed
    job = bed.warm
    require_succeeded(bed, job)
    log = bed.admin.log_text(job["id"])
    wheel = r"torch-2\.8\.0(\+|%2B)cu130-py3-none-any\.whl"
    prepare = log[log.index("step: prepare environment"):log.index("step: verify torch")]
    smoke = log[log.index("step: smoke test"):]
    assert not re.search("Using cached \\S*" + wheel, prepare), prepare[-3000:]
    assert re.search("Using cached \\S*" + wheel, smoke), smoke[-3000:]
    cache = bed.h.data_dir / "builds" / "pip-cache"
    assert any(p.is_file() for p in cache.rglob("*")), f"nothing in {cache}"


def test_admin_api_rejects_bad_requests(fault_bed):
    bed = fault_bed
    admin = bed.admin
    upload = bed.h.token("upload")
    body = {"recipe": "warm", "version": "2.0.0"}
    assert admin.request("POST", "/admin/builds", body, token="").status == 401
    assert admin.request("POST", "/admin/builds", body, token=upload).status == 403
    assert admin.request("GET", "/admin/builds", token="").status == 401
    assert admin.request("GET", "/admin/builds", token=upload).status == 403
    assert admin.request("POST", f"/admin/jobs/{bed.warm['id']}/retry", token=upload).status == 403

    def rejected(body, *words):
        resp = admin.request("POST", "/admin/builds", body)
        assert resp.status == 400, f"{body} -> {resp.status}: {resp.text[:500]}"
        for word in words:
            assert word in resp.text, f"{body}: the reason does not name {word!r}: {resp.text[:500]}"

    rejected({"recipe": "no-such-recipe", "version": "1.0.0"}, "no-such-recipe")
    rejected({"recipe": "warm", "version": "not a version"}, "version")
    rejected({"recipe": "warm", "version": "1.0.0+cu130torch2.8"}, "version")
    rejected({"recipe": "warm", "version": "1.0.0", "matrix": {"python": ["3.12"]}}, "3.12")
    rejected({"recipe": "warm", "version": "1.0.0", "matrix": {"torch": ["2.7"]}}, "2.7")
    rejected({"recipe": "warm", "version": "1.0.0", "matrix": {"cuda": ["12.8"]}}, "12.8")
    resp = admin.request("POST", "/admin/builds", b'{"recipe": "warm", ')
    assert resp.status == 400, f"malformed JSON -> {resp.status}: {resp.text[:300]}"

    assert admin.request("GET", "/admin/jobs/987654").status == 404
    assert admin.request("GET", "/admin/builds/987654").status == 404
    assert admin.request("POST", "/admin/jobs/987654/cancel").status == 404

    # Nothing left to build for a built cell unless forced: refused, and no build is created.
    builds_before = admin.request("GET", "/admin/builds").json()
    resp = admin.request("POST", "/admin/builds", {"recipe": "warm", "version": "1.0.0"})
    assert resp.status == 409, f"a build with nothing to do -> {resp.status}: {resp.text[:300]}"
    assert "all cells built; use force to rebuild" in resp.text, resp.text
    assert admin.request("GET", "/admin/builds").json() == builds_before
    # A succeeded job can be neither cancelled nor retried.
    for action in ("cancel", "retry"):
        resp = admin.request("POST", f"/admin/jobs/{bed.warm['id']}/{action}")
        assert resp.status == 409, f"{action} of a succeeded job -> {resp.status}: {resp.text[:300]}"
    assert admin.job(bed.warm["id"])["state"] == "succeeded"


def test_build_timeout_kills_the_process_tree(fault_bed):
    bed = fault_bed
    pids_file = bed.h.root / "pids-hang.txt"
    started = time.monotonic()
    job = bed.admin.run_one("hang", timeout=120)
    took = time.monotonic() - started
    assert job["state"] == "failed", bed.admin.describe(job)
    assert re.search(r"tim(ed|e)[ -]?out", job["reason"], re.IGNORECASE), job["reason"]
    assert job["attempts"] == 1, job
    log = bed.admin.log_text(job["id"])
    assert "fake build: starting two compilers that hang" in log, log[-2000:]
    pids = read_pids(pids_file)
    assert len(pids) == 3, f"the fake build recorded pids {pids}"
    left = wait_for(lambda: not [p for p in pids if alive(p, "sleep") or alive(p, "hang.sh")], 2.0)
    assert left, f"still running after the timeout: {[p for p in pids if alive(p, 'sleep')]}"
    assert took < 60, f"a 3s build timeout took {took:.0f}s to end the job"


def test_cancel_kills_the_process_tree(fault_bed):
    bed = fault_bed
    pids_file = bed.h.root / "pids-cancel.txt"
    created = bed.admin.submit("cancel")
    job_id = created["jobs"][0]["id"]
    running = wait_for(
        lambda: len(read_pids(pids_file)) == 3 and bed.admin.job(job_id)["state"] == "building", 120, 0.2
    )
    assert running, f"the build did not start:\n{bed.admin.describe(bed.admin.job(job_id))}"
    pids = read_pids(pids_file)
    resp = bed.admin.request("POST", f"/admin/jobs/{job_id}/cancel")
    assert resp.status == 200, f"cancel -> {resp.status}: {resp.text[:300]}"
    assert resp.json()["id"] == job_id
    job = bed.admin.wait_jobs([job_id], 30)[job_id]
    assert job["state"] == "cancelled", bed.admin.describe(job)
    gone = wait_for(lambda: not [p for p in pids if alive(p, "sleep") or alive(p, "hang.sh")], 2.0)
    assert gone, f"still running after cancel: {[p for p in pids if alive(p, 'sleep')]}"
    again = bed.admin.request("POST", f"/admin/jobs/{job_id}/cancel")
    assert again.status == 409, f"cancel of a cancelled job -> {again.status}: {again.text[:300]}"


def test_oom_is_retried_with_half_the_parallelism(fault_bed):
    bed = fault_bed
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: MAX_JOBS cannot start above 1")
    job = bed.admin.run_one("oom")
    assert job["state"] == "succeeded", bed.admin.describe(job)
    log = bed.admin.log_text(job["id"])
    first = re.search(r"^==> \[building\] attempt 1 with MAX_JOBS=(\d+) NVCC_THREADS=(\d+)$", log, re.M)
    assert first and int(first.group(1)) >= 2, f"MAX_JOBS did not start above 1:\n{log[-3000:]}"
    assert "Killed signal terminated program cicc" in log
    halved = max(1, int(first.group(1)) // 2)
    assert re.search(
        r"^==> \[building\] out of memory \(.*\); retrying with half the parallelism: "
        rf"MAX_JOBS={halved} NVCC_THREADS=\d+$", log, re.M), log[-3000:]
    assert job["attempts"] >= 2 and job["max_jobs"] == 1, job
    # The pure wheel came out unlabelled and was retagged.
    assert job["wheel"] == "wf_fake_oom-1.0.0+cu130torch2.8-py3-none-any.whl", job
    _entry, data = fetch_wheel(bed.server, job["wheel"], "wf-fake-oom")
    env = json.loads(verify_wheel(data)["wf_fake_oom/build_env.json"])["environ"]
    assert env["MAX_JOBS"] == "1", env


def test_compile_error_fails_without_retry(fault_bed):
    bed = fault_bed
    job = bed.admin.run_one("broken")
    assert job["state"] == "failed", bed.admin.describe(job)
    assert job["attempts"] == 1, job
    assert "memory" not in job["reason"].lower(), job["reason"]
    assert re.search(r"exit(ed| status| code)? 1\b", job["reason"]), job["reason"]
    # The reason names the cause: the compiler's first error line.
    assert job["reason"] == "build failed (exit 1): kernel.cu(12): error: expected ';'", job["reason"]
    log = bed.admin.log_text(job["id"])
    assert "kernel.cu(12): error: expected ';'" in log, log[-2000:]
    assert "retrying" not in log and "attempt 2" not in log, log[-2000:]

    # Retry queues it again; it fails the same way.
    resp = bed.admin.request("POST", f"/admin/jobs/{job['id']}/retry")
    assert resp.status == 200, f"retry -> {resp.status}: {resp.text[:300]}"
    assert resp.json()["state"] == "queued", resp.json()
    again = bed.admin.wait_jobs([job["id"]], FAULT_TIMEOUT)[job["id"]]
    assert again["state"] == "failed", bed.admin.describe(again)
    # The compiler's own line, once per run (the runner's "failed: ..." notes quote it too).
    lines = bed.admin.log_text(job["id"]).splitlines()
    assert lines.count("kernel.cu(12): error: expected ';'") == 2, lines[-40:]


def host_glibc_minor() -> int:
    version = os.confstr("CS_GNU_LIBC_VERSION") or ""  # "glibc 2.36"
    m = re.fullmatch(r"glibc 2\.(\d+)", version)
    return int(m.group(1)) if m else 0


def require_glibc_2_34() -> None:
    if host_glibc_minor() < 34:
        pytest.skip("pthread_create is GLIBC_2.34 only on glibc 2.34 and later")


def test_a_wheel_above_the_recipes_manylinux_ceiling_fails_and_is_not_published(fault_bed):
    require_glibc_2_34()
    bed = fault_bed
    arch = os.uname().machine
    job = bed.admin.run_one("ceiling")
    assert job["state"] == "failed", bed.admin.describe(job)
    assert job["reason"].startswith(
        f"analyze binaries: the wheel needs manylinux_2_34_{arch}, above the ceiling manylinux_2_28 "
        '(the recipe\'s manylinux = "2_28"): GLIBC_2.34 (libc.so.6: pthread_create'), job["reason"]
    assert "needed by wf_fake_ceiling/_C.so" in job["reason"], job["reason"]
    log = bed.admin.log_text(job["id"])
    assert "cext_wheel: wrote wf_fake_ceiling-1.0.0-py3-none-linux_" in log, log[-2000:]
    assert "[testing]" not in log, "no smoke test after the analysis failed"
    assert not [f for f in bed.h.filenames() if f.startswith("wf_fake_ceiling")], bed.h.filenames()
    assert bed.server.get("/simple/wf-fake-ceiling/").status == 404


def test_the_default_manylinux_ceiling_is_the_tag_of_the_environments_torch(fault_bed):
    """The build environment's torch is a stand-in tagged manylinux_2_28 (as PyPI's torch 2.8
    and later are): without a `manylinux` key, its tag is the recipe's ceiling."""
    require_glibc_2_34()
    bed = fault_bed
    arch = os.uname().machine
    torch = stand_in_torch(bed.h.path("torch-manylinux"), "2.9.0+cu130", f"manylinux_2_28_{arch}")
    assert bed.server.put_file(torch, bed.h.token("upload")).status == 201
    job = bed.admin.run_one("torch-ceiling")
    assert job["state"] == "failed", bed.admin.describe(job)
    assert (f"above the ceiling manylinux_2_28 (the platform tag of torch 2.9.0+cu130 in the build "
            f"environment (manylinux_2_28_{arch})): GLIBC_2.34 (libc.so.6: pthread_create"
            ) in job["reason"], job["reason"]
    log = bed.admin.log_text(job["id"])
    assert f"==> [preparing] probe: torch_wheel_tags=py3-none-manylinux_2_28_{arch}" in log, log[-3000:]
    assert not [f for f in bed.h.filenames() if f.startswith("wf_fake_torch_ceiling")]


# ---------------------------------------------------------------------------------------------
# Part 3: a server killed mid-build, and the command-line runner (each on its own data dir)


def slow_build_config(h: Harness, pids_file: Path, **extra_env) -> Path:
    """Recipes `slow` and `slow2`: builds that take 4 s and append their shell's pid to
    `pids_file` (one line per run of the build command)."""
    env = {"WF_PIDS_FILE": str(pids_file), **extra_env}
    return write_config(
        h.root / "wheelforge.toml",
        {name: fake_recipe(f"wf-fake-{name}", "sh ./slow.sh {python} {out}", env=env,
                           local_version_variable="WF_FAKE_LOCAL_VERSION")
         for name in ("slow", "slow2")},
        fake_source=write_fake_source(h.path("src", "fake")),
        max_concurrent_jobs=1,
    )


def start_slow_build(h: Harness, config: Path, pids_file: Path, admin_token: str, recipe="slow"):
    """A server with the stand-in torch, and the job of `recipe`, building (returned)."""
    server = h.serve("--config", str(config))
    upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))
    admin = Admin(server, admin_token)
    job_id = admin.submit(recipe)["jobs"][0]["id"]
    building = wait_for(lambda: read_pids(pids_file) and admin.job(job_id)["state"] == "building",
                        FAULT_TIMEOUT, 0.1)
    assert building, f"the build did not start:\n{admin.describe(admin.job(job_id))}"
    return server, admin, job_id


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_restart_mid_build_reattaches_to_the_build(harness, sig):
    """A server stopped (SIGTERM: a restart) or killed while a job builds: the build goes on,
    and the next server on the same data directory re-attaches to it. The build command runs
    once, and its wheel is published once."""
    require_tools(nvcc=False)
    h = harness
    h.token("upload")
    admin_token = h.token("admin")
    pids_file = h.root / "pids-slow.txt"
    config = slow_build_config(h, pids_file)
    first, admin, job_id = start_slow_build(h, config, pids_file, admin_token)
    try:
        first.stopped_by_us = True
        first.proc.send_signal(sig)
        status = first.proc.wait(30)
        if sig == signal.SIGTERM:
            assert status == 0, first.log_tail()
        builder = read_pids(pids_file)[0]

        second = h.serve("--config", str(config))
        admin = Admin(second, admin_token)
        job = admin.wait_jobs([job_id], FAULT_TIMEOUT)[job_id]
        assert job["state"] == "succeeded", admin.describe(job)
        assert job["wheel"] == "wf_fake_slow-1.0.0+cu130torch2.8-py3-none-any.whl", job
        assert job["reason"] == "", job
        assert job["attempts"] == 1, job
        log = admin.log_text(job_id)
        assert read_pids(pids_file) == [builder], f"the build ran again:\n{log[-3000:]}"
        assert log.count("fake build: compiling slowly") == 1, log[-3000:]
        assert "re-attached to attempt 1" in log, log[-3000:]
        assert "requeued" not in log, log[-3000:]
        if sig == signal.SIGTERM:
            assert "its commands go on, and the next start re-attaches" in log, log[-3000:]
        assert job["wheel"] in view_files(second, "cu130/torch2.8", "wf-fake-slow")
        assert h.filenames().count(job["wheel"]) == 1
    finally:
        kill_leftovers(read_pids(pids_file), "slow.sh")


def test_restart_with_another_build_command_ends_the_old_build_tree(harness):
    """A restart that changed the build (here the recipe's environment) cannot re-attach to
    the build that runs: it runs the build again, and must not let the old compilers run on
    beside it (they hold memory the scheduler believes free)."""
    require_tools(nvcc=False)
    h = harness
    h.token("upload")
    admin_token = h.token("admin")
    pids_file = h.root / "pids-hang.txt"
    source = write_fake_source(h.path("src", "fake"))

    def config(setting: str) -> Path:
        return write_config(
            h.root / "wheelforge.toml",
            {"long": fake_recipe("wf-fake-long", "sh ./hang.sh", timeout="10m",
                                 env={"WF_PIDS_FILE": str(pids_file), "WF_SETTING": setting})},
            fake_source=source,
        )

    first = h.serve("--config", str(config("before")))
    upload_stand_in_torch(h, first, versions=("2.8.0+cu130",))
    admin = Admin(first, admin_token)
    job_id = admin.submit("long")["jobs"][0]["id"]
    try:
        building = wait_for(
            lambda: len(read_pids(pids_file)) == 3 and admin.job(job_id)["state"] == "building",
            FAULT_TIMEOUT, 0.2)
        assert building, f"the build did not start:\n{admin.describe(admin.job(job_id))}"
        old_tree = read_pids(pids_file)
        first.stopped_by_us = True
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)

        second = h.serve("--config", str(config("after")))
        admin = Admin(second, admin_token)
        rerun = wait_for(lambda: len(read_pids(pids_file)) == 6, FAULT_TIMEOUT, 0.2)
        assert rerun, f"the build did not run again:\n{admin.describe(admin.job(job_id))}"
        assert "cannot be re-attached to" in admin.log_text(job_id)

        def old_alive() -> list[int]:
            return [p for p in old_tree if alive(p, "sleep") or alive(p, "hang.sh")]

        assert wait_for(lambda: not old_alive(), 5.0), (
            f"the killed server's build processes {old_alive()} still run beside the new "
            f"attempt (pids of both attempts: {read_pids(pids_file)})"
        )
    finally:
        with contextlib.suppress(Exception):
            admin.request("POST", f"/admin/jobs/{job_id}/cancel")
            wait_for(lambda: admin.job(job_id)["state"] in TERMINAL, 20)
        kill_leftovers(read_pids(pids_file), "sleep")
        kill_leftovers(read_pids(pids_file), "hang.sh")


def test_sigusr2_drains_the_running_builds_then_stops(harness):
    """SIGUSR2: the running build finishes and publishes, no queued job starts, then the server
    exits 0 by itself; the next start runs the queued job."""
    require_tools(nvcc=False)
    h = harness
    h.token("upload")
    admin_token = h.token("admin")
    pids_file = h.root / "pids-slow.txt"
    config = slow_build_config(h, pids_file)
    first, admin, job_id = start_slow_build(h, config, pids_file, admin_token)
    try:
        queued_id = admin.submit("slow2")["jobs"][0]["id"]
        first.stopped_by_us = True
        first.proc.send_signal(signal.SIGUSR2)
        assert first.proc.wait(FAULT_TIMEOUT) == 0, first.log_tail()
        assert "received SIGUSR2, draining" in first.log(), first.log_tail()
        assert len(read_pids(pids_file)) == 1, "the queued job started during the drain"

        second = h.serve("--config", str(config))
        admin = Admin(second, admin_token)
        job = admin.job(job_id)
        assert job["state"] == "succeeded", admin.describe(job)
        assert "re-attached" not in admin.log_text(job_id)
        assert job["wheel"] in view_files(second, "cu130/torch2.8", "wf-fake-slow")
        # The queued job is this server's to run; it is not needed here.
        assert admin.request("POST", f"/admin/jobs/{queued_id}/cancel").status == 200
        queued = admin.wait_jobs([queued_id], FAULT_TIMEOUT)[queued_id]
        assert queued["state"] == "cancelled", admin.describe(queued)
    finally:
        kill_leftovers(read_pids(pids_file), "slow.sh")


def test_cli_build_runs_one_cell_in_process(harness):
    require_tools(nvcc=False)
    h = harness
    h.token("upload")
    config = write_config(
        h.root / "wheelforge.toml",
        # The sleep keeps the build step long enough for the command's polling to report it.
        {"cli": fake_recipe(
            "wf-fake-cli",
            "sleep 1 && {python} fake_wheel.py {out}",
            local_version_variable="WF_FAKE_LOCAL_VERSION",
            matrix={"python": ["3.11", "3.12"], "torch": ["2.8", "2.9"], "cuda": ["13.0"]},
        )},
        fake_source=write_fake_source(h.path("src", "fake")),
    )
    # An index-only server on the same data directory (no --config: it runs no builds), to
    # install torch from.
    server = h.serve()
    upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))
    common = ["build", "--config", str(config), "--data-dir", str(h.data_dir),
              "--server-url", server.url]

    bad = h.cli(*common, "cli", "1.0.0", "--python", "3.10")
    assert bad.returncode != 0, bad.stdout
    assert "3.10" in bad.stderr, bad.stderr

    proc = h.cli(*common, "cli", "1.0.0", "--python", "3.11", "--torch", "2.8", "--cuda", "13.0",
                 timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    lines = proc.stdout.splitlines()
    assert re.fullmatch(rf"build \d+: cli 1\.0\.0, 1 job, torch from {server.url}/\S+", lines[0]), lines
    # State lines ("job ID CELL: STATE ..."); the log's tail is indented, the summary follows
    # an empty line.
    progress = [re.fullmatch(r"job \d+ (\S+): (\w+)(?: .*)?", line)
                for line in lines[1:lines.index("")] if not line.startswith("  ")]
    assert all(progress), f"unexpected progress lines:\n{proc.stdout}"
    assert {m.group(1) for m in progress} == {"py3.11-torch2.8-cu130"}, proc.stdout
    states = [m.group(2) for m in progress if m.group(2) != "log"]
    assert "building" in states and states[-1] == "succeeded", states
    assert states == sorted(states, key=STATE_ORDER.index), f"states out of order: {states}"
    assert re.fullmatch(r"1 succeeded, 0 failed in \S+", lines[-1]), lines

    wheel = "wf_fake_cli-1.0.0+cu130torch2.8-py3-none-any.whl"
    assert wheel in proc.stdout, proc.stdout
    assert wheel in h.filenames()
    # The server notices another process's catalog change on its next poll (twice a second);
    # until then the project is unknown to it (404).
    def listed() -> bool:
        resp = server.get("/cu130/torch2.8/simple/wf-fake-cli/", {"Accept": JSON_TYPE})
        return resp.status == 200 and wheel in {f["filename"] for f in resp.json()["files"]}

    assert wait_for(listed, 5.0), "the running server does not list the wheel the command built"


def test_cli_build_beside_a_building_server_shares_its_budget(harness):
    """`wheelforge build --server-url` names a server on the same data directory; when that
    server runs builds itself, the command must neither requeue nor take over the server's
    running job, and both share one admission budget (the host's memory and cores): the
    command's job waits while the server's build holds the host, says so in its log, and runs
    in the command's own process once the server's job has ended."""
    require_tools(nvcc=False)
    h = harness
    h.token("upload")
    admin_token = h.token("admin")
    pids_file = h.root / "pids-server-job.txt"
    config = write_config(
        h.root / "wheelforge.toml",
        {
            "long": fake_recipe("wf-fake-long", "sh ./hang.sh", timeout="10m",
                                env={"WF_PIDS_FILE": str(pids_file)}),
            "quick": fake_recipe("wf-fake-quick", "{python} fake_wheel.py {out}"),
        },
        fake_source=write_fake_source(h.path("src", "fake")),
    )
    server = h.serve("--config", str(config))
    upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))
    admin = Admin(server, admin_token)
    job_id = admin.submit("long")["jobs"][0]["id"]
    cli = None
    try:
        building = wait_for(
            lambda: len(read_pids(pids_file)) == 3 and admin.job(job_id)["state"] == "building",
            FAULT_TIMEOUT, 0.2)
        assert building, f"the server's build did not start:\n{admin.describe(admin.job(job_id))}"
        cli = subprocess.Popen(
            [str(h.binary), "build", "--config", str(config), "--data-dir", str(h.data_dir),
             "--server-url", server.url, "quick", "1.0.0"],
            cwd=h.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def cli_job() -> dict | None:
            builds = admin.request("GET", "/admin/builds").json()["builds"]
            quick = [b for b in builds if b["recipe"] == "quick"]
            return admin.build(quick[0]["id"])["jobs"][0] if quick else None

        def waiting() -> bool:
            job = cli_job()
            return job is not None and "waiting for the build budget" in admin.log_text(job["id"])

        assert wait_for(waiting, 60, 0.2), (
            f"the command's job does not wait for the server's build (job: {cli_job()})\n"
            f"{admin.describe(admin.job(job_id))}")
        queued = cli_job()
        assert queued["state"] == "queued", admin.describe(queued)
        assert cli.poll() is None, "the command ended while its job waited"
        job = admin.job(job_id)
        log = admin.log_text(job_id)
        assert "requeued" not in log and job["state"] == "building" and job["attempts"] == 1, (
            f"the command disturbed the server's running job:\n{admin.describe(job)}")
        assert len(read_pids(pids_file)) == 3, f"the server's build was started again: {read_pids(pids_file)}"

        # The server's build ends; the command's job runs, in the command.
        assert admin.request("POST", f"/admin/jobs/{job_id}/cancel").status == 200
        ended = admin.wait_jobs([job_id], 30)[job_id]
        assert ended["state"] == "cancelled", admin.describe(ended)
        stdout, stderr = cli.communicate(timeout=FAULT_TIMEOUT)
        assert cli.returncode == 0, f"exit {cli.returncode}\n{stdout}\n{stderr[-2000:]}"
        assert re.fullmatch(r"1 succeeded, 0 failed in \S+", stdout.splitlines()[-1]), stdout
        # Its live tail showed why it waited.
        assert "==> waiting for the build budget: 1 job(s) of this data directory hold" in stdout, stdout
        done = admin.job(queued["id"])
        assert done["state"] == "succeeded", admin.describe(done)
        assert done["started_at"] >= ended["finished_at"], (done["started_at"], ended["finished_at"])
        assert done["wheel"] in h.filenames()
    finally:
        if cli is not None and cli.poll() is None:
            cli.kill()
            cli.wait()
        admin.request("POST", f"/admin/jobs/{job_id}/cancel")
        wait_for(lambda: admin.job(job_id)["state"] in TERMINAL, 20)
        kill_leftovers(read_pids(pids_file), "sleep")


# ---------------------------------------------------------------------------------------------
# Part 4: the toolchain a cell claims is verified before building; build environments are
# keyed by what makes them; a plain setuptools project builds with the default requirements.

# This host has CUDA 13.0 only. A cu128 cell needs a CUDA 12.8 home to get past the toolkit
# check and reach the torch check, so one test points it at a directory whose bin/nvcc is this
# STAND-IN: it answers `--version` as nvcc 12.8 does, and nothing else (no build reaches it).
FAKE_NVCC_12_8 = """\
#!/bin/sh
# STAND-IN for nvcc of CUDA 12.8 made by wheelforge's runner tests: --version only.
if [ "$1" = "--version" ]; then
  echo "nvcc: NVIDIA (R) Cuda compiler driver"
  echo "Cuda compilation tools, release 12.8, V12.8.93"
  exit 0
fi
echo "stand-in nvcc 12.8: only --version is supported" >&2
exit 2
"""


def python_version(python: Path) -> str:
    proc = run([python, "-c", "import platform; print(platform.python_version())"], timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def env_dirs(h: Harness, cell: str) -> list[Path]:
    return sorted((h.data_dir / "builds" / "envs").glob(f"{cell}-*/"))


def test_missing_cuda_home_is_refused_before_building(harness):
    """A cell whose CUDA toolkit is not there is refused, naming the path, before any
    environment, source or build step runs. Before this check, a cu128 cell on a host without
    /usr/local/cuda-12.8 was built (by a build that never called nvcc, or with another CUDA
    found on the PATH) and published as `+cu128`: the torch index here is the cu130 view for
    every cell, so everything else a build needs is there."""
    require_tools(nvcc=False)
    h = harness
    h.token("upload")
    admin_token = h.token("admin")
    missing = h.root / "no-such-cuda-12.8"
    empty = h.path("cuda-12.6-without-nvcc")  # exists, but holds no bin/nvcc
    empty.mkdir(parents=True, exist_ok=True)
    config = write_config(
        h.root / "wheelforge.toml",
        {"nocuda": fake_recipe("wf-fake-nocuda", "{python} fake_wheel.py {out}",
                               local_version_variable="WF_FAKE_LOCAL_VERSION",
                               matrix={"python": ["3.11"], "torch": ["2.8"], "cuda": ["12.8", "12.6"]})},
        fake_source=write_fake_source(h.path("src", "fake")),
        cuda_homes={"13.0": CUDA_HOME, "12.8": missing, "12.6": empty},
        torch_index="{server}/cu130/torch{torch}/simple/",
    )
    server = h.serve("--config", str(config))
    upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))
    admin = Admin(server, admin_token)
    created = admin.submit("nocuda")
    jobs = admin.wait_jobs([j["id"] for j in created["jobs"]], FAULT_TIMEOUT)
    homes = {"12.8": missing, "12.6": empty}
    for job in jobs.values():
        home = homes[job["cuda"]]
        assert job["state"] == "failed", admin.describe(job)
        assert job["reason"].startswith(
            f"CUDA {job['cuda']}: no usable nvcc in the CUDA home {home} ("), job["reason"]
        assert f"{home}/bin/nvcc" in job["reason"], job["reason"]
        assert job["attempts"] == 0 and job["wheel"] == "", job
        assert job["toolchain"] == {"nvcc": None, "torch": None, "python": None}, job["toolchain"]
        log = admin.log_text(job["id"])
        for later in (" -m venv ", "pip install", "[building]", "fake_wheel.py", "[ingesting]"):
            assert later not in log, f"{later!r} ran after the toolkit check failed:\n{log}"
    assert env_dirs(h, "py3.11-torch2.8-cu128") == [] and env_dirs(h, "py3.11-torch2.8-cu126") == []
    assert not [f for f in h.filenames() if f.startswith("wf_fake_nocuda")], h.filenames()


def test_torch_of_another_cuda_major_is_refused(harness):
    """A cu128 label over a torch built for CUDA 13.0 is refused before building: the torch
    index here serves the cu130 view to every cell (a configuration mistake), the cu128 cell's
    CUDA home is the stand-in nvcc 12.8 above. The cu130 cell of the same recipe builds, and each
    job records the nvcc, torch and Python it verified."""
    require_tools(nvcc=True)
    h = harness
    h.token("upload")
    admin_token = h.token("admin")
    cuda_12_8 = h.path("cuda-12.8-stand-in")
    (cuda_12_8 / "bin").mkdir(parents=True, exist_ok=True)
    (cuda_12_8 / "bin" / "nvcc").write_text(FAKE_NVCC_12_8)
    (cuda_12_8 / "bin" / "nvcc").chmod(0o755)
    config = write_config(
        h.root / "wheelforge.toml",
        {"mixed": fake_recipe("wf-fake-mixed", "{python} fake_wheel.py {out}",
                              local_version_variable="WF_FAKE_LOCAL_VERSION",
                              matrix={"python": ["3.11"], "torch": ["2.8"], "cuda": ["12.8", "13.0"]})},
        fake_source=write_fake_source(h.path("src", "fake")),
        cuda_homes={"13.0": CUDA_HOME, "12.8": cuda_12_8},
        torch_index="{server}/cu130/torch{torch}/simple/",
    )
    server = h.serve("--config", str(config))
    upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))
    admin = Admin(server, admin_token)
    created = admin.submit("mixed")
    jobs = {j["cuda"]: j for j in admin.wait_jobs([j["id"] for j in created["jobs"]], FAULT_TIMEOUT).values()}
    python = {"path": str(PYTHONS["3.11"]), "version": python_version(PYTHONS["3.11"])}

    refused = jobs["12.8"]
    assert refused["state"] == "failed", admin.describe(refused)
    assert refused["reason"] == (
        "torch 2.8.0+cu130 was built for CUDA 13.0, the cell is CUDA 12.8 (the CUDA major must match)"
    ), refused["reason"]
    assert refused["toolchain"] == {
        "nvcc": {"path": f"{cuda_12_8}/bin/nvcc", "version": "12.8.93"},
        "torch": {"version": "2.8.0+cu130", "cuda": "13.0"},
        "python": python,
    }, refused["toolchain"]
    log = admin.log_text(refused["id"])
    assert "==> [preparing] nvcc: Cuda compilation tools, release 12.8, V12.8.93" in log, log
    assert "[building]" not in log and "fake_wheel.py" not in log, log
    assert refused["attempts"] == 0 and refused["wheel"] == "", refused

    built = jobs["13.0"]
    assert built["state"] == "succeeded", admin.describe(built)
    nvcc = run([NVCC, "--version"], timeout=60).stdout
    release = re.search(r"release 13\.0, V(\d+\.\d+\.\d+)", nvcc)
    assert release, nvcc
    assert built["toolchain"] == {
        "nvcc": {"path": str(NVCC), "version": release.group(1)},
        "torch": {"version": "2.8.0+cu130", "cuda": "13.0"},
        "python": python,
    }, built["toolchain"]
    log = admin.log_text(built["id"])
    assert (f"==> [preparing] toolchain: nvcc {release.group(1)} ({NVCC}), torch 2.8.0+cu130 "
            f"(CUDA 13.0), Python {python['version']} ({python['path']})") in log, log
    assert [f for f in h.filenames() if f.startswith("wf_fake_mixed")] == [
        "wf_fake_mixed-1.0.0+cu130torch2.8-py3-none-any.whl"], h.filenames()


def build_dep_wheel(directory: Path, version: str) -> Artifact:
    """wf-build-dep <version>: a pure-Python build requirement that only tells its version."""
    metadata = f"Metadata-Version: 2.1\nName: wf-build-dep\nVersion: {version}\n"
    files = {"wf_build_dep/__init__.py": f"VERSION = {version!r}\n".encode()}
    return write_wheel(directory, "wf_build_dep", version, "py3-none-any", metadata, files)


def test_changed_build_requires_rebuild_the_environment(harness):
    """A build environment is made from the recipe's build requirements (and the interpreter,
    the torch requirement and the index): when build_requires changes, the next build gets a
    new environment with the new requirements instead of the old one; with no change, the
    environment is reused."""
    require_tools(nvcc=False)
    h = harness
    h.token("upload")
    admin_token = h.token("admin")
    source = write_fake_source(h.path("src", "fake"))
    # Torch and the build requirement come from a static index of their own (as on an offline
    # site with its own mirror), whose URL stays the same across the server's restarts: the
    # index URL is part of what makes an environment.
    write_static_index(h.path("mirror"), [stand_in_torch(h.path("wheels"), "2.8.0+cu130"),
                                          build_dep_wheel(h.path("wheels"), "1.0"),
                                          build_dep_wheel(h.path("wheels"), "2.0")])
    mirror = h.static_index(h.root / "mirror")

    def configure(requirement: str, version: str) -> Path:
        # The fake build takes its version from the recipe's environment, which is not part of
        # what makes the build environment.
        return write_config(
            h.root / "wheelforge.toml",
            {"dep": fake_recipe("wf-fake-dep", "{python} fake_wheel.py {out}",
                                local_version_variable="WF_FAKE_LOCAL_VERSION",
                                env={"WF_FAKE_VERSION": version},
                                build_requires=[requirement])},
            fake_source=source,
            torch_index=f"{mirror.url}/simple/",
        )

    def build(server: Server, version: str) -> tuple[dict, dict, str]:
        admin = Admin(server, admin_token)
        job = admin.run_one("dep", version=version)
        assert job["state"] == "succeeded", admin.describe(job)
        _entry, data = fetch_wheel(server, job["wheel"], "wf-fake-dep")
        seen = json.loads(verify_wheel(data)["wf_fake_dep/build_env.json"])
        return job, seen, admin.log_text(job["id"])

    server = h.serve("--config", str(configure("wf-build-dep==1.0", "1.0.0")))
    _job, seen, _log = build(server, "1.0.0")
    assert seen["build_dep"] == "1.0", seen["build_dep"]
    first_env = env_dirs(h, "py3.11-torch2.8-cu130")
    assert len(first_env) == 1, first_env

    server.stop()
    server = h.serve("--config", str(configure("wf-build-dep==2.0", "1.0.1")))
    _job, seen, log = build(server, "1.0.1")
    assert seen["build_dep"] == "2.0", f"the build ran in the old environment: {seen['build_dep']}"
    envs = env_dirs(h, "py3.11-torch2.8-cu130")
    assert len(envs) == 2 and first_env[0] in envs, envs
    second_env = next(e for e in envs if e != first_env[0])
    assert seen["executable"].startswith(str(second_env.resolve())), (seen["executable"], second_env)
    assert f"==> [preparing] environment {second_env.name}: torch==2.8.* wf-build-dep==2.0 from " in log, log

    # Unchanged requirements: the environment is reused.
    server.stop()
    server = h.serve("--config", str(configure("wf-build-dep==2.0", "1.0.2")))
    _job, seen, log = build(server, "1.0.2")
    assert seen["build_dep"] == "2.0"
    assert f"==> [preparing] environment {second_env.name} (reused)" in log, log
    assert len(env_dirs(h, "py3.11-torch2.8-cu130")) == 2


# A plain setuptools project (setup.py, no pyproject.toml) with a CUDA kernel: build_ext
# compiles kernel.cu with nvcc into a shared library the package loads with ctypes.
PLAIN_SETUP = '''\
"""wf-plain-ext, a test package of wheelforge's runner tests: a plain setuptools project whose
build_ext compiles kernel.cu with $CUDA_HOME/bin/nvcc (for the archs in TORCH_CUDA_ARCH_LIST)."""

import os
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class NvccBuildExt(build_ext):
    def build_extension(self, ext):
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        archs = os.environ.get("TORCH_CUDA_ARCH_LIST", "8.0").replace(".", "").split(";")
        command = [os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc"), "-shared",
                   "-Xcompiler", "-fPIC", "-O2"]
        command += ["-gencode=arch=compute_%s,code=sm_%s" % (a, a) for a in archs]
        command += ["-o", target] + list(ext.sources)
        print(" ".join(command), flush=True)
        subprocess.run(command, check=True)


setup(
    name="wf-plain-ext",
    version="1.0.0",
    packages=["wf_plain_ext"],
    ext_modules=[Extension("wf_plain_ext._kernel", ["kernel.cu"])],
    cmdclass={"build_ext": NvccBuildExt},
)
'''

PLAIN_INIT = '''\
"""wf_plain_ext: loads the kernel library nvcc built; check() calls into it."""

import ctypes
import pathlib

_HERE = pathlib.Path(__file__).resolve().parent


def check():
    library = ctypes.CDLL(str(next(_HERE.glob("_kernel*.so"))))
    return library.wf_demo_answer() == 42
'''

# Upstream setuptools and wheel as wheels, for the server's index: the ones CPython 3.12 ships
# for its own tests. (Debian's python3-setuptools-whl is patched for Debian's Python and fails
# under other interpreters with "AttributeError: install_layout".)
BUILD_TOOL_WHEELS = [
    PYENV / "3.12.1" / "lib" / "python3.12" / "test" / "setuptools-67.6.1-py3-none-any.whl",
    PYENV / "3.12.1" / "lib" / "python3.12" / "test" / "wheel-0.40.0-py3-none-any.whl",
]


def test_plain_setuptools_project_builds_with_the_default_requirements(harness):
    """A recipe that names no build_requires gets setuptools and wheel in its environment (and
    ninja, unless the host has one on the build's PATH), so a plain setuptools project builds
    on Python 3.12, whose venvs come without setuptools. Offline, they come from the torch
    index like torch does: here the server's own views, after uploading them."""
    require_tools(nvcc=True)
    missing = [str(p) for p in BUILD_TOOL_WHEELS if not p.exists()]
    if missing:
        pytest.skip(f"no offline setuptools/wheel wheels: {missing}")
    ninja = shutil.which("ninja", path=f"{CUDA_HOME}/bin:/usr/local/bin:/usr/bin:/bin")
    if ninja is None:
        pytest.skip("no ninja on the build's PATH (Debian: ninja-build), and no ninja wheel here")
    h = harness
    h.token("upload")
    admin_token = h.token("admin")
    source = h.path("src", "wf-plain-ext")
    (source / "wf_plain_ext").mkdir(parents=True)
    (source / "setup.py").write_text(PLAIN_SETUP)
    (source / "kernel.cu").write_text(DEMO_KERNEL)
    (source / "wf_plain_ext" / "__init__.py").write_text(PLAIN_INIT)
    config = write_config(
        h.root / "wheelforge.toml",
        {"plain": {
            # What the first build of docs/runner.md gives: no command, no build_requires.
            "project": "wf-plain-ext",
            "source": {"path": str(source)},
            "arch_variable": "TORCH_CUDA_ARCH_LIST",
            "arch_value": "8.0",
            "import_check": "import wf_plain_ext; assert wf_plain_ext.check()",
            "gb_per_job": 1.0,
            "timeout": "10m",
            "matrix": {"python": ["3.12"], "torch": ["2.8"], "cuda": ["13.0"]},
        }},
    )
    server = h.serve("--config", str(config))
    upload_stand_in_torch(h, server, versions=("2.8.0+cu130",))
    for path in BUILD_TOOL_WHEELS:
        name, version = path.name.split("-")[:2]
        wheel = Artifact(path, name, version, b"")
        resp = server.put_file(wheel, h.token("upload"))
        assert resp.status == 201, f"PUT {wheel.filename} -> {resp.status}: {resp.text[:300]}"
    admin = Admin(server, admin_token)
    job = admin.run_one("plain", timeout=MATRIX_BUILD_TIMEOUT)
    assert job["state"] == "succeeded", admin.describe(job)
    assert re.fullmatch(r"wf_plain_ext-1\.0\.0\+cu130torch2\.8-cp312-cp312-manylinux_2_\d+_x86_64"
                        r"(\.manylinux2014_x86_64)?\.whl", job["wheel"]), job
    log = admin.log_text(job["id"])
    assert re.search(r"^==> \[preparing\] environment py3\.12-torch2\.8-cu130-[0-9a-f]{12}: "
                     r"torch==2\.8\.\* setuptools wheel from ", log, re.M), log[-4000:]
    assert f"==> [preparing] ninja: {ninja} (already there; not installed)" in log, log[-4000:]
    assert job["wheel"] in view_files(server, "cu130/torch2.8", "wf-plain-ext")
    _entry, data = fetch_wheel(server, job["wheel"], "wf-plain-ext")
    members = verify_wheel(data)
    libraries = [n for n in members if re.fullmatch(r"wf_plain_ext/_kernel.*\.so", n)]
    assert len(libraries) == 1 and members[libraries[0]][:4] == b"\x7fELF", sorted(members)
