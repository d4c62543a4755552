""".ci/check-layering: the real tree passes; a copy of it with one bad include, link, stated
order or module map fails, naming the file, the line and the rule broken. The module order comes
from WF_MODULES in src/CMakeLists.txt: a module added there is checked in its place."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "check-layering"


def check(root: Path | None = None) -> subprocess.CompletedProcess:
    args = [sys.executable, str(SCRIPT)] + (["--root", str(root)] if root else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of what the script reads: src/, include/, ARCHITECTURE.md, CMakeLists.txt."""
    copy = tmp_path / "tree"
    copy.mkdir()
    shutil.copytree(ROOT / "src", copy / "src")
    shutil.copytree(ROOT / "include", copy / "include")
    for name in ("ARCHITECTURE.md", "CMakeLists.txt"):
        shutil.copyfile(ROOT / name, copy / name)
    return copy


def modules(root: Path) -> list[str]:
    text = (root / "src" / "CMakeLists.txt").read_text()
    return re.search(r"set\(WF_MODULES ([^)$]+)\)", text).group(1).split()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def problems(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 1, result.stdout + result.stderr
    return result.stdout.splitlines()


def test_the_real_tree_keeps_its_layering():
    result = check()
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("layering: ok")


def test_an_unchanged_copy_passes(tree):
    result = check(tree)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "path, text, expected",
    [
        # A module to the right: core includes http's public header.
        (
            "src/core/injected.cpp",
            '#include <string>\n#include "wheelforge/http/server.hpp"\n',
            r"^src/core/injected\.cpp:2: higher-module: core includes \"wheelforge/http/server\.hpp\" of http",
        ),
        # The same from a public header.
        (
            "include/wheelforge/util/injected.hpp",
            '#pragma once\n\n#include "wheelforge/core/name.hpp"\n',
            r"^include/wheelforge/util/injected\.hpp:3: higher-module: util includes .* of core",
        ),
        # Third-party headers outside their owner.
        (
            "src/render/injected.cpp",
            "#include <sqlite3.h>\n",
            r"^src/render/injected\.cpp:1: third-party: render includes <sqlite3\.h>: SQLite belongs to catalog only",
        ),
        (
            "src/build/injected.cpp",
            "#include <vector>\n#include <spdlog/spdlog.h>\n",
            r"^src/build/injected\.cpp:2: third-party: build includes <spdlog/spdlog\.h>: spdlog .* belongs to util only",
        ),
        (
            "src/ui/injected.cpp",
            "#include <boost/asio/post.hpp>\n",
            r"^src/ui/injected\.cpp:1: third-party: ui includes <boost/asio/post\.hpp>: Boost .* belongs to http, store only",
        ),
        (
            "src/core/injected.cpp",
            "#include <nlohmann/json.hpp>\n",
            r"^src/core/injected\.cpp:1: third-party: core includes <nlohmann/json\.hpp>",
        ),
        # A library the table does not know.
        (
            "src/core/injected.cpp",
            "#include <yaml-cpp/yaml.h>\n",
            r"^src/core/injected\.cpp:1: unknown-header: <yaml-cpp/yaml\.h>",
        ),
        # Another module's private header, even one to the left.
        (
            "src/ui/injected.cpp",
            '#include "archive/zip_layout.hpp"\n',
            r"^src/ui/injected\.cpp:1: private-header: ui includes \"archive/zip_layout\.hpp\", a private header of archive",
        ),
        # A header that does not exist.
        (
            "src/core/injected.cpp",
            '#include "no_such_header.hpp"\n',
            r"^src/core/injected\.cpp:1: unresolved: \"no_such_header\.hpp\"",
        ),
    ],
)
def test_a_bad_include_is_named(tree, path, text, expected):
    write(tree / path, text)
    found = problems(check(tree))
    assert len(found) == 1, found
    assert re.search(expected, found[0]), found[0]


def test_allowed_includes_pass(tree):
    """The owner includes its library; system headers and fmt are everyone's; a module includes
    its own private headers and the public headers of the modules to its left."""
    write(tree / "src/catalog/injected.cpp", "#include <sqlite3.h>\n#include <fmt/format.h>\n")
    write(
        tree / "src/http/injected.cpp",
        "#include <sys/socket.h>\n#include <unistd.h>\n#include <optional>\n"
        '#include "wheelforge/util/log.hpp"\n#include "wheelforge/build/runner.hpp"\n'
        '#include "injected_private.hpp"\n',
    )
    write(tree / "src/http/injected_private.hpp", "#pragma once\n#include <string>\n")
    result = check(tree)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_link_to_a_higher_module_is_named(tree):
    cmake = tree / "src/core/CMakeLists.txt"
    lines = cmake.read_text().splitlines()
    lines.append("target_link_libraries(wf_core PRIVATE wf_ingest)")
    cmake.write_text("\n".join(lines) + "\n")
    found = problems(check(tree))
    assert found == [
        f"src/core/CMakeLists.txt:{len(lines)}: higher-module: core names wf_ingest, which is to "
        "the right of core in WF_MODULES (src/CMakeLists.txt)"
    ]


def test_a_stated_order_that_differs_is_named(tree):
    order = modules(tree)
    stated = " <- ".join(order)
    swapped = " <- ".join(order[:2][::-1] + order[2:])
    architecture = tree / "ARCHITECTURE.md"
    text = architecture.read_text()
    assert text.count(stated) == 1
    architecture.write_text(text.replace(stated, swapped))
    line = text[: text.index(stated)].count("\n") + 1
    found = problems(check(tree))
    assert len(found) == 1, found
    assert found[0].startswith(f"ARCHITECTURE.md:{line}: module-order: states the order {swapped};")


def add_module_row(tree: Path, module: str, before: str) -> None:
    """Puts `module`'s row into ARCHITECTURE.md's module map, before `before`'s."""
    architecture = tree / "ARCHITECTURE.md"
    lines = architecture.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"| `{before}` |"))
    lines.insert(at, f"| `{module}` | what it owns |")
    architecture.write_text("\n".join(lines) + "\n")


def test_a_module_map_that_misses_or_swaps_a_module_is_named(tree):
    architecture = tree / "ARCHITECTURE.md"
    text = architecture.read_text()
    lines = text.splitlines()
    order = modules(tree)
    at = {m: next(i for i, line in enumerate(lines) if line.startswith(f"| `{m}` |"))
          for m in order}

    missing = [line for i, line in enumerate(lines) if i != at["store"]]
    architecture.write_text("\n".join(missing) + "\n")
    found = problems(check(tree))
    assert len(found) == 1, found
    listed = ", ".join(m for m in order if m != "store")
    assert found[0].startswith(f"ARCHITECTURE.md:{at['store'] + 1}: module-table: the module map "
                               f"lists {listed}; WF_MODULES"), found

    swapped = list(lines)
    swapped[at["crypto"]], swapped[at["core"]] = swapped[at["core"]], swapped[at["crypto"]]
    architecture.write_text("\n".join(swapped) + "\n")
    found = problems(check(tree))
    assert len(found) == 1, found
    assert found[0].startswith(f"ARCHITECTURE.md:{at['crypto'] + 1}: module-table:"), found


def test_no_stated_order_is_named(tree):
    cmake = tree / "CMakeLists.txt"
    stated = " <- ".join(modules(tree))
    cmake.write_text("\n".join(l for l in cmake.read_text().splitlines() if stated not in l))
    found = problems(check(tree))
    assert len(found) == 1 and found[0].startswith("CMakeLists.txt: module-order: states no"), found


def test_a_new_module_is_checked_in_its_wf_modules_place(tree):
    """A directory that is no module fails; listed in WF_MODULES (and in the stated orders and
    the module map), it may include the modules to its left and not those to its right."""
    write(tree / "src/proxy/upstream.cpp", '#include "wheelforge/build/runner.hpp"\n')
    found = problems(check(tree))
    assert found == ["src/proxy: not-a-module: src/proxy/ is not in WF_MODULES (src/CMakeLists.txt)"]

    order = modules(tree)
    new_order = order[: order.index("http")] + ["proxy"] + order[order.index("http") :]
    for name in ("src/CMakeLists.txt", "ARCHITECTURE.md", "CMakeLists.txt"):
        path = tree / name
        text = path.read_text()
        text = text.replace(" ".join(order), " ".join(new_order))
        text = text.replace(" <- ".join(order), " <- ".join(new_order))
        path.write_text(text)
    found = problems(check(tree))
    assert len(found) == 1 and found[0].startswith("ARCHITECTURE.md:"), found
    assert ": module-table: the module map lists " in found[0], found
    add_module_row(tree, "proxy", before="http")
    result = check(tree)
    assert result.returncode == 0, result.stdout + result.stderr

    write(tree / "src/proxy/client.cpp", '#include "wheelforge/http/server.hpp"\n')
    found = problems(check(tree))
    assert len(found) == 1, found
    assert found[0].startswith(
        'src/proxy/client.cpp:1: higher-module: proxy includes "wheelforge/http/server.hpp" of http'
    )
