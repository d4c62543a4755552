"""The archive policy (docs/security.md): what an uploaded wheel or sdist may declare and hold,
each refusal naming the limit (and the setting that changes it), and the `/legacy/` form's
`filetype`. Wheels, sdists and bombs are generated here; real-sized wheels (a torch-like mix of
incompressible and cubin-like data) must pass the defaults.

After every refusal, nothing is stored (no blob, temp file or row) and the pages' ETags stay."""

from __future__ import annotations

import base64
import hashlib
import io
import random
import re
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from test_publish import post_form
from wfhelpers import (
    Artifact,
    assert_nothing_stored,
    curl_upload,
    dist_name,
    make_sdist,
    make_wheel,
    metadata_text,
    normalize,
    page_etags,
    store_state,
)

MiB = 1024 * 1024


def snapshot(harness, server, project: str):
    return store_state(harness.data_dir), page_etags(server, project)


def upload_refused(harness, server, token: str, artifact: Artifact, words: list[str],
                   *, status: int = 400) -> str:
    """PUTs `artifact` with curl; asserts the refusal, that every regex in `words` is in the
    answer, and that nothing was stored. Returns the answer's body."""
    project = normalize(artifact.name)
    before = snapshot(harness, server, project)
    result = curl_upload(server, harness.root, artifact.path, token=token)
    assert result.status == status, (
        f"PUT {artifact.filename}: expected {status}, got {result.status}: {result.body[:500]}"
    )
    for word in words:
        assert re.search(word, result.body), f"/{word}/ not in the answer: {result.body[:800]}"
    assert_nothing_stored(harness.data_dir, server, project, before, f"PUT {artifact.filename}")
    return result.body


def upload_stored(harness, server, token: str, artifact: Artifact) -> None:
    result = curl_upload(server, harness.root, artifact.path, token=token)
    assert result.status == 201, f"PUT {artifact.filename}: {result.status} {result.body[:500]}"


# ---------------------------------------------------------------------------------------------
# Archives written chunk by chunk, so that a 200 MiB member never sits in memory


def zeros(size: int):
    chunk = bytes(MiB)
    while size > 0:
        yield chunk[: min(size, MiB)]
        size -= MiB


def cubin_like(size: int, rng: random.Random):
    """Data that deflates about 10:1, as cubin sections do: short random runs among zeros."""
    while size > 0:
        block = bytearray(64 * 1024)
        for at in range(0, len(block), 1024):
            block[at : at + 64] = rng.randbytes(64)
        yield bytes(block[: min(size, len(block))])
        size -= len(block)


def random_bytes(size: int, rng: random.Random):
    while size > 0:
        yield rng.randbytes(min(size, MiB))
        size -= MiB


def streamed_wheel(directory: Path, name: str, version: str, big: dict[str, object],
                   *, omit_record: bool = False) -> Artifact:
    """A valid pure wheel whose members in `big` (path -> iterator of chunks) are streamed
    into the zip, deflated, with their RECORD lines computed on the way."""
    directory.mkdir(parents=True, exist_ok=True)
    distinfo = f"{dist_name(name)}-{version}.dist-info"
    metadata = metadata_text(name, version).encode()
    path = directory / f"{dist_name(name)}-{version}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for member, chunks in big.items():
            digest = hashlib.sha256()
            size = 0
            info = zipfile.ZipInfo(member, (2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(info, "w") as out:
                for chunk in chunks:
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
            b64 = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
            record.append(f"{member},sha256={b64},{size}")
        for member, data in [
            (f"{distinfo}/METADATA", metadata),
            (f"{distinfo}/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        ]:
            zf.writestr(zipfile.ZipInfo(member, (2024, 1, 1, 0, 0, 0)), data,
                        compress_type=zipfile.ZIP_DEFLATED)
            b64 = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{member},sha256={b64},{len(data)}")
        if not omit_record:
            record.append(f"{distinfo}/RECORD,,")
            zf.writestr(zipfile.ZipInfo(f"{distinfo}/RECORD", (2024, 1, 1, 0, 0, 0)),
                        "\n".join(record) + "\n", compress_type=zipfile.ZIP_DEFLATED)
    return Artifact(path, name, version, metadata)


def _file_info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    return info


class ChunkReader(io.RawIOBase):
    """A file object over an iterator of chunks, for tarfile.addfile."""

    def __init__(self, chunks):
        self._chunks = iter(chunks)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buffer))
        b[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


def sdist_with(directory: Path, name: str, version: str,
               extra: list[tuple[tarfile.TarInfo, object]]) -> Artifact:
    """An sdist (PKG-INFO, pyproject.toml) plus `extra` members: (TarInfo with its size set,
    iterator of chunks or None). Names in the TarInfos are relative to the top directory."""
    directory.mkdir(parents=True, exist_ok=True)
    top = f"{dist_name(name).lower()}-{version}"
    pkg_info = metadata_text(name, version).encode()
    path = directory / f"{top}.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as tf:
        for member, data in [(f"{top}/PKG-INFO", pkg_info),
                             (f"{top}/pyproject.toml", b"[build-system]\nrequires = []\n")]:
            info = tarfile.TarInfo(member)
            info.size = len(data)
            info.mtime = 1704067200
            tf.addfile(info, io.BytesIO(data))
        for info, chunks in extra:
            info.name = f"{top}/{info.name}"
            info.mtime = 1704067200
            tf.addfile(info, io.BufferedReader(ChunkReader(chunks)) if chunks is not None else None)
    return Artifact(path, name, version, pkg_info)


# ---------------------------------------------------------------------------------------------
# Size and ratio


def test_bombs_are_refused_and_real_sized_wheels_pass_the_defaults(harness, server, upload_token,
                                                                    artifacts):
    rng = random.Random(20)
    # Shaped like a CUDA wheel scaled down: incompressible code, cubin-like data about 10:1;
    # about 3:1 overall, and above the size from which the ratio is judged.
    real = streamed_wheel(artifacts / "real", "wf-kernels", "1.0", {
        "wf_kernels/_C.so": random_bytes(8 * MiB, rng),
        "wf_kernels/kernels.cubin": cubin_like(24 * MiB, rng),
    })
    assert 8 * MiB < real.size < 16 * MiB, real.size
    upload_stored(harness, server, upload_token, real)

    bomb = streamed_wheel(artifacts / "bomb", "wf-bomb", "1.0", {"wf_bomb/zeros.bin": zeros(200 * MiB)})
    assert bomb.size < 400 * 1024, bomb.size  # 200 MiB of zeros in a few hundred KiB
    upload_refused(harness, server, upload_token, bomb, [
        r"the wheel inflates to \d+ bytes, \d+ times its size of " + str(bomb.size) + " bytes",
        r"more than the limit of 100 times \(max_compression_ratio\)",
    ])

    sdist_bomb = sdist_with(artifacts / "sdist-bomb", "wf-bomb", "1.0", [
        (_file_info("zeros.bin", 200 * MiB), zeros(200 * MiB)),
    ])
    assert sdist_bomb.size < 400 * 1024, sdist_bomb.size
    upload_refused(harness, server, upload_token, sdist_bomb, [
        r"the sdist inflates to more than 100 times its size",
        r"\(max_compression_ratio\)",
    ])


def test_bomb_problems_are_reported_with_the_others(harness, server, upload_token, artifacts):
    bomb = streamed_wheel(artifacts, "wf-bomb", "2.0", {"wf_bomb/zeros.bin": zeros(64 * MiB)},
                          omit_record=True)
    upload_refused(harness, server, upload_token, bomb, [
        r"\(max_compression_ratio\)", r"wf_bomb-2\.0\.dist-info/RECORD is missing",
    ])


def test_inflated_size_limit_is_a_setting(harness, tokens, artifacts):
    server = harness.serve("--max-inflated-size", "4M")
    token = tokens["upload"]
    big = make_wheel(artifacts / "big", "wf-big", "1.0", padding=5 * MiB)
    upload_refused(harness, server, token, big, [
        r"the wheel inflates to \d+ bytes, more than the limit of 4194304 bytes "
        r"\(max_inflated_size\)",
    ])
    upload_stored(harness, server, token, make_wheel(artifacts / "ok", "wf-big", "1.1", padding=3 * MiB))

    sdist = sdist_with(artifacts / "sdist", "wf-big", "2.0", [
        (_file_info("data.bin", 5 * MiB), random_bytes(5 * MiB, random.Random(5))),
    ])
    upload_refused(harness, server, token, sdist, [
        r"the sdist inflates to more than the limit of 4194304 bytes \(max_inflated_size\)",
    ])


def test_member_count_limit_is_a_setting(harness, tokens, artifacts):
    server = harness.serve("--max-archive-members", "40")
    token = tokens["upload"]
    files = tuple((f"wf_many/m{i}.py", b"x = 1\n") for i in range(40))
    many = make_wheel(artifacts / "many", "wf-many", "1.0", extra=files)
    upload_refused(harness, server, token, many, [
        r"the archive has 44 members, more than the limit of 40 \(max_archive_members\)",
    ])
    upload_stored(harness, server, token, make_wheel(artifacts / "few", "wf-many", "1.1", extra=files[:30]))

    sdist = sdist_with(artifacts / "sdist", "wf-many", "2.0", [
        (_file_info(f"m{i}.py", 6), [b"x = 1\n"]) for i in range(40)
    ])
    upload_refused(harness, server, token, sdist, [
        r"the archive has more than 40 members, the limit \(max_archive_members\)",
    ])


# ---------------------------------------------------------------------------------------------
# Contents


def test_metadata_version_must_be_known(harness, server, upload_token, artifacts):
    for version, fmt in [("1.0", "1.2"), ("1.1", "2.4")]:
        upload_stored(harness, server, upload_token,
                      make_wheel(artifacts / fmt, "wf-meta", version, metadata_format=fmt))
    wheel = make_wheel(artifacts / "w3", "wf-meta", "3.0", metadata_format="3.0")
    upload_refused(harness, server, upload_token, wheel,
                   [r"METADATA", r'Metadata-Version "3\.0" is not supported'])
    sdist = make_sdist(artifacts / "s3", "wf-meta", "3.0", metadata_format="3.0")
    upload_refused(harness, server, upload_token, sdist,
                   [r"PKG-INFO", r'Metadata-Version "3\.0" is not supported'])


def test_wheel_without_record_is_refused(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "wf-norecord", "1.0", omit=("RECORD",))
    upload_refused(harness, server, upload_token, wheel,
                   [r"wf_norecord-1\.0\.dist-info/RECORD is missing"])


def _special(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    return info


@pytest.mark.parametrize("kind, words", [
    pytest.param(tarfile.FIFOTYPE, r"is a FIFO", id="fifo"),
    pytest.param(tarfile.CHRTYPE, r"is a character device", id="char-device"),
    pytest.param(tarfile.BLKTYPE, r"is a block device", id="block-device"),
])
def test_sdist_special_members_are_refused(harness, server, upload_token, artifacts, kind, words):
    sdist = sdist_with(artifacts, "wf-special", "1.0", [(_special("node", kind), None)])
    upload_refused(harness, server, upload_token, sdist,
                   [r"member 'wf_special-1\.0/node' " + words,
                    r"an sdist holds files, directories and links only"])


def test_sdist_sparse_member_is_refused(harness, server, upload_token, artifacts):
    tar = shutil.which("tar")
    if tar is None:
        pytest.skip("GNU tar is not installed (needed to write a sparse member)")
    tree = artifacts / "tree"
    top = tree / "wf_sparse-1.0"
    top.mkdir(parents=True)
    (top / "PKG-INFO").write_text(metadata_text("wf-sparse", "1.0"))
    with open(top / "holes.bin", "wb") as f:
        f.truncate(4 * MiB)
        f.seek(2 * MiB)
        f.write(b"data")
    path = artifacts / "wf_sparse-1.0.tar.gz"
    proc = subprocess.run([tar, "--sparse", "--format=gnu", "-czf", str(path), "wf_sparse-1.0"],
                          cwd=tree, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    sdist = Artifact(path, "wf-sparse", "1.0", b"")
    upload_refused(harness, server, upload_token, sdist,
                   [r"member 'wf_sparse-1\.0/holes\.bin' is a sparse file"])


def test_sdist_that_is_also_a_zip_is_refused(harness, server, upload_token, artifacts):
    sdist = make_sdist(artifacts / "plain", "wf-poly", "1.0")
    payload = io.BytesIO()
    with zipfile.ZipFile(payload, "w") as zf:
        zf.writestr("setup.py", "import os; os.system('echo surprise')\n")
    path = artifacts / sdist.filename
    path.write_bytes(sdist.data + payload.getvalue())
    assert zipfile.is_zipfile(path), "the test file is not a polyglot"
    polyglot = Artifact(path, "wf-poly", "1.0", sdist.metadata)
    upload_refused(harness, server, upload_token, polyglot, [
        r"the sdist is also a zip archive \(a zip end-of-central-directory record at offset "
        + str(polyglot.size - 22) + r"\)",
    ])
    upload_stored(harness, server, upload_token, sdist)


# ---------------------------------------------------------------------------------------------
# /legacy/: the form's filetype


@pytest.mark.parametrize("filetype, words", [
    pytest.param(None, [r"missing filetype"], id="missing"),
    pytest.param("", [r"missing filetype"], id="empty"),
    pytest.param("bdist_egg", [r"unknown filetype 'bdist_egg'"], id="unknown"),
    pytest.param("sdist", [r"filetype 'sdist' does not match the file \(a wheel"],
                 id="wheel-as-sdist"),
])
def test_legacy_upload_needs_a_matching_filetype(harness, server, upload_token, artifacts,
                                                 filetype, words):
    wheel = make_wheel(artifacts, "wf-filetype", "1.0")
    before = snapshot(harness, server, "wf-filetype")
    answer = post_form(server, wheel, upload_token, filetype=filetype)
    assert answer.status == 400, answer.describe()
    for word in words:
        assert re.search(word, answer.body), answer.describe()
        assert re.search(word, answer.reason), f"not in the reason twine prints: {answer.describe()}"
    assert_nothing_stored(harness.data_dir, server, "wf-filetype", before,
                          f"form with filetype {filetype!r}")
    sdist = make_sdist(artifacts, "wf-filetype", "1.0")
    answer = post_form(server, sdist, upload_token, filetype="bdist_wheel" if filetype == "sdist" else filetype)
    assert answer.status == 400, answer.describe()
    assert_nothing_stored(harness.data_dir, server, "wf-filetype", before,
                          f"sdist form with filetype {filetype!r}")
