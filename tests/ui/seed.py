"""Writes the corpus and configuration the web UI tests serve: wheels of a small CUDA-variant
project (a coverage matrix with holes), a pure-Python project, a torch stand-in for the build
runner, the fake build sources and a wheelforge.toml with two quick recipes.

Usage: python3 seed.py DIR   (prints a JSON description of what it wrote)
The wheels are generated here; nothing is downloaded."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))

from test_runner import fake_recipe, stand_in_torch, write_config, write_fake_source  # noqa: E402
from test_project_pages import described_wheel  # noqa: E402
from wfhelpers import make_wheel  # noqa: E402

# A project page with a Markdown description, a very long command in it, and injections that
# must not run (window.__wf_xss stays unset).
DESCRIBED_HEADERS = (
    "Summary: Fused attention kernels, described in Markdown\n"
    "License-Expression: Apache-2.0\nRequires-Python: >=3.9\nAuthor: Ada Lovelace\n"
    "Project-URL: Source, https://example.com/wf-described\n"
    "Project-URL: Evil, javascript:window.__wf_xss=3\n"
    "Requires-Dist: einops-lite>=0.7\nClassifier: Programming Language :: Python :: 3\n"
    "Description-Content-Type: text/markdown\n"
)
DESCRIBED_BODY = """# wf-described

Fast **fused** kernels. See [the docs](https://example.com/docs).

## Install

```sh
pip install --extra-index-url https://a-rather-long-host-name.example.internal/cu128/torch2.8/simple/ --only-binary wf-described wf-described==1.0.0
```

<script>window.__wf_xss = 1</script>

<img src=x onerror="window.__wf_xss = 2">

[click me](javascript:window.__wf_xss=4)
"""

# (version, local label, python tags): the coverage the tests expect to see.
FLASH = [
    ("2.8.3", "cu128torch2.8", ["cp311", "cp312"]),
    ("2.8.3", "cu126torch2.8", ["cp312"]),
    ("2.8.3", "cu128torch2.7", ["cp311"]),
    ("2.8.3", "cu130torch2.9", ["cp312", "cp313"]),
    ("2.8.2", "cu128torch2.8", ["cp312"]),
]


# An extension module on torch's stable C ABI, for the wheel inspector's page (in 2.8.2's wheel).
EXTENSION_C = """
int aoti_torch_get_device_type(void*, int*);
int device_of(void* t) { int d = 0; aoti_torch_get_device_type(t, &d); return d; }
void* PyInit__C(void) { return 0; }
"""


def extension(root: Path) -> tuple[tuple[str, bytes], ...]:
    """flash_attn/_C.so compiled with gcc (none when gcc is missing)."""
    if not shutil.which("gcc"):
        return ()
    root.mkdir(parents=True, exist_ok=True)
    (root / "ext.c").write_text(EXTENSION_C)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "ext.c", "-o", "_C.so"], cwd=root,
                   check=True)
    return (("flash_attn/_C.so", (root / "_C.so").read_bytes()),)


def main() -> None:
    root = Path(sys.argv[1])
    wheels_dir = root / "wheels"
    wheels = []
    ext = extension(root / "ext")
    for version, label, pythons in FLASH:
        for py in pythons:
            wheel = make_wheel(
                wheels_dir,
                "flash-attn",
                f"{version}+{label}",
                tag=f"{py}-{py}-linux_x86_64",
                requires_python=">=3.9",
                extra=ext if version == "2.8.2" else (),
            )
            wheels.append(str(wheel.path))
    wheels.append(str(make_wheel(wheels_dir, "einops-lite", "0.8.0").path))
    wheels.append(str(make_wheel(wheels_dir, "einops-lite", "0.7.0").path))
    wheels.append(str(described_wheel(wheels_dir, "wf-described", "1.0.0", DESCRIBED_HEADERS,
                                      DESCRIBED_BODY).path))
    torch = stand_in_torch(root / "torch", "2.8.0+cu130")
    source = write_fake_source(root / "fake-src")
    config = write_config(
        root / "wheelforge.toml",
        {
            "demo": fake_recipe(
                "wf-ui-demo", "{python} fake_wheel.py {out}",
                local_version_variable="WF_FAKE_LOCAL_VERSION",
            ),
            "slow": fake_recipe(
                "wf-ui-slow", "sh ./hang.sh", timeout="10m",
                env={"WF_PIDS_FILE": str(root / "pids-slow.txt")},
            ),
        },
        fake_source=source,
    )
    # An OIDC issuer, for the trusted publishers page (nothing is fetched from it).
    with open(config, "a") as f:
        f.write('\n[[oidc_issuer]]\nname = "github"\n'
                'url = "https://token.actions.githubusercontent.com"\n')
    print(json.dumps({
        "wheels": wheels,
        "torch": str(torch.path),
        "config": str(config),
        "pids": str(root / "pids-slow.txt"),
    }))


if __name__ == "__main__":
    main()
