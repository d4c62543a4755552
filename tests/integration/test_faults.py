"""Fault injection: the server killed with SIGKILL during concurrent uploads, `wheelforge
ingest` killed with SIGKILL while it stores a wheelhouse, a full disk, a
read-only blob store, many concurrent uploads of one file name, and a client that sends its
headers one byte per second. Whatever happens, the store never lists a partial file, never
has a row without its blob, and keeps no half-written file.

The disk-full and read-only tests mount filesystems and are skipped where that is not allowed.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import os
import random
import re
import select
import shutil
import socket
import sqlite3
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

import wfbackend
from wfhelpers import (
    blob_objects,
    catalog_query,
    stored_blob,
    JSON_TYPE,
    Artifact,
    curl_upload,
    http_request,
    make_wheel,
    path_of,
    sha256_hex,
    store_state,
    wait_for,
)

SHA256_RE = re.compile(r"[0-9a-f]{64}")

# ---------------------------------------------------------------------------------------------
# Looking at a data directory from the outside


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# Faults of the local file layout and SQLite (kill -9 recovery of blobs/ and tmp/, a full or
# read-only file system, I/O errors injected into file calls): the PostgreSQL and S3 faults are
# test_pg_catalog.py's and test_s3_store.py's.
LOCAL_LAYOUT = "faults of SQLite and the local blobs/ layout; PostgreSQL + S3 faults have their own tests"


def catalog_files(data_dir: Path) -> dict[str, tuple[str, int, str]]:
    """filename -> (sha256, size, metadata_sha256) for every row of `files`."""
    rows = catalog_query(data_dir, "SELECT filename, sha256, size, metadata_sha256 FROM files")
    return {name: (sha, int(size), meta) for name, sha, size, meta in rows}


def blob_files(data_dir: Path) -> dict[str, Path]:
    """Every regular file under blobs/ (every object under PREFIX/blobs/ on pg-s3), by its
    name."""
    if wfbackend.active() is not None:
        return {Path(key).name: Path(key) for key, _size in blob_objects(data_dir)}
    out = {}
    for dirpath, _dirs, files in os.walk(data_dir / "blobs"):
        for f in files:
            out[f] = Path(dirpath) / f
    return out


def blob_path(data_dir: Path, sha: str) -> Path:
    return data_dir / "blobs" / sha[:2] / sha[2:4] / sha


def _blob_bytes(data_dir: Path, digest: str) -> bytes | None:
    blob = stored_blob(data_dir, digest)
    return blob.read_bytes() if blob.exists() else None


def store_problems(data_dir: Path, *, orphans_allowed: bool) -> list[str]:
    """Rows without a (correct) blob, blobs that are not where their name says or whose bytes
    do not match their name, and (unless allowed) blobs that no row references."""
    problems = []
    rows = catalog_files(data_dir)
    referenced = set()
    for name, (sha, size, meta) in sorted(rows.items()):
        for role, digest, want_size in (("file", sha, size), ("METADATA", meta, None)):
            referenced.add(digest)
            data = _blob_bytes(data_dir, digest)
            if data is None:
                problems.append(f"row {name}: {role} blob {digest} is missing")
                continue
            actual = sha256_hex(data)
            if actual != digest:
                problems.append(
                    f"row {name}: {role} blob {digest} holds bytes with sha256 {actual}"
                )
            if want_size is not None and len(data) != want_size:
                problems.append(
                    f"row {name}: blob {digest} has {len(data)} bytes, row says {want_size}"
                )
    for name, path in sorted(blob_files(data_dir).items()):
        where = (Path(name[:2]) / name[2:4] / name if wfbackend.active() is not None
                 else blob_path(data_dir, name))
        if not SHA256_RE.fullmatch(name) or path != where:
            problems.append(f"stray file in blobs/: {path}")
            continue
        if name in referenced:
            continue
        data = _blob_bytes(data_dir, name) or b""
        actual = sha256_hex(data)
        if actual != name:
            problems.append(f"orphan blob {name} is a partial/corrupt file (sha256 {actual})")
        elif not orphans_allowed:
            problems.append(f"orphan blob {name} ({len(data)} bytes, no row references it)")
    return problems


def tmp_leftovers(data_dir: Path, live_sessions: int) -> list[str]:
    """Everything in tmp/ beyond `live_sessions` session directories holding only `.lock`."""
    tmp = data_dir / "tmp"
    entries = sorted(tmp.iterdir()) if tmp.exists() else []
    problems = []
    sessions = [e for e in entries if e.is_dir() and e.name.startswith("s-")]
    for e in entries:
        if e not in sessions:
            problems.append(f"stray entry tmp/{e.name}")
    for s in sessions:
        for dirpath, _dirs, files in os.walk(s):
            for f in files:
                rel = (Path(dirpath) / f).relative_to(tmp)
                if str(rel) != f"{s.name}/.lock":
                    problems.append(f"leftover temp file tmp/{rel}")
    if len(sessions) != live_sessions:
        problems.append(
            f"{len(sessions)} session directories in tmp/ ({[s.name for s in sessions]}), "
            f"expected {live_sessions} (dead sessions must be removed at start, and a clean "
            f"stop removes its own)"
        )
    return problems


def fsck(harness, *args: str):
    return harness.cli("fsck", "--data-dir", str(harness.data_dir), "--min-age", "0", *args)


def fsck_available(harness) -> bool:
    return harness.cli("fsck", "--help").returncode == 0


def put(url: str, wheel: Artifact, token: str, data: bytes | None = None, timeout: float = 30):
    """PUT /upload/<name> on a fresh connection; returns (status, body text). Raises OSError or
    http.client.HTTPException when the connection breaks."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request(
            "PUT",
            "/upload/" + urllib.parse.quote(wheel.filename, safe=""),
            body=wheel.data if data is None else data,
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/octet-stream",
            },
        )
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", errors="replace")
    finally:
        conn.close()


def listed_files(server) -> dict[str, dict]:
    """filename -> JSON file entry, over every project of /simple/."""
    root = server.get("/simple/", {"Accept": JSON_TYPE})
    assert root.status == 200, f"GET /simple/ -> {root.status}: {root.text[:300]}"
    out = {}
    for project in root.json()["projects"]:
        for entry in server.project_json(project["name"])["files"]:
            out[entry["filename"]] = entry
    return out


def check_downloads(server, entries: dict[str, dict]) -> list[str]:
    """Every listed file downloads whole with its listed sha256, and its .metadata matches."""
    problems = []
    for name, entry in sorted(entries.items()):
        url = path_of(entry["url"])
        resp = server.get(url)
        if resp.status != 200:
            problems.append(f"{name}: GET {url} -> {resp.status}")
            continue
        if sha256_hex(resp.body) != entry["hashes"]["sha256"]:
            problems.append(
                f"{name}: downloaded {len(resp.body)} bytes with sha256 {sha256_hex(resp.body)}, "
                f"listed {entry['hashes']['sha256']} ({entry.get('size')} bytes)"
            )
        meta = server.get(url + ".metadata")
        want = (entry.get("core-metadata") or {}).get("sha256")
        if meta.status != 200 or sha256_hex(meta.body) != want:
            problems.append(f"{name}: .metadata -> {meta.status}, sha256 {sha256_hex(meta.body)}, "
                            f"listed core-metadata {want}")
    return problems


# ---------------------------------------------------------------------------------------------
# 1. SIGKILL during concurrent uploads


UPLOADERS = 4
ROUNDS = 6


@pytest.mark.default_backend_only(reason=LOCAL_LAYOUT)
def test_kill9_during_concurrent_uploads_then_restart(harness, tokens, artifacts):
    seed = int(os.environ.get("WF_FAULT_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    token = tokens["upload"]
    # Distinct names over a few projects, sizes spread log-uniformly over 50 KB .. 2 MB. A
    # producer keeps fresh wheels coming while the rounds run, so that every round stores new
    # files (the server stores dozens per second).
    counter = iter(range(10**6))

    def new_wheel() -> Artifact:
        i = next(counter)
        return make_wheel(artifacts / f"w{i}", f"crash-pkg-{i % 5}", f"1.{i}",
                          padding=int(50_000 * (40 ** rng.random())))

    lock = threading.Lock()
    queue = [new_wheel() for _ in range(30)]
    by_name = {w.filename: w for w in queue}
    payload = {w.filename: w.data for w in queue}
    retry: list[Artifact] = []
    acked: dict[str, int] = {}
    statuses: dict[int, int] = {}
    unexpected: list[str] = []
    errors = [0]
    current = {"url": None}
    stop = threading.Event()

    def producer():
        while not stop.is_set() and len(by_name) < 400:
            if len(queue) >= 20:
                time.sleep(0.01)
                continue
            wheel = new_wheel()
            data = wheel.data
            with lock:
                by_name[wheel.filename] = wheel
                payload[wheel.filename] = data
                queue.insert(0, wheel)

    def uploader():
        while not stop.is_set():
            url = current["url"]
            if url is None:
                time.sleep(0.02)
                continue
            with lock:
                if retry:
                    wheel = retry.pop()
                elif queue:
                    wheel = queue.pop()
                elif acked and rng.random() < 0.25:  # identical bytes again: expects 200
                    wheel = by_name[rng.choice(sorted(acked))]
                else:
                    wheel = None
            if wheel is None:
                time.sleep(0.01)
                continue
            try:
                status, body = put(url, wheel, token, payload[wheel.filename])
            except (OSError, http.client.HTTPException):
                with lock:
                    errors[0] += 1
                    retry.append(wheel)
                time.sleep(0.02)
                continue
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
                if status in (200, 201):
                    acked[wheel.filename] = status
                else:
                    unexpected.append(f"{wheel.filename}: {status} {body[:200]!r}")

    threads = [threading.Thread(target=uploader, daemon=True) for _ in range(UPLOADERS)]
    threads.append(threading.Thread(target=producer, daemon=True))
    for t in threads:
        t.start()
    kills = []
    try:
        for _ in range(ROUNDS):
            server = harness.serve()
            current["url"] = server.url
            time.sleep(rng.uniform(0.3, 1.2))
            server.stopped_by_us = True
            server.proc.kill()
            server.proc.wait(10)
            current["url"] = None
            with lock:
                kills.append(dict(statuses, errors=errors[0], acked=len(acked)))
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    stats = f"seed {seed}; per kill (cumulative): {kills}"
    print(stats)
    assert not unexpected, f"uploads got answers other than 200/201: {unexpected} ({stats})"
    assert statuses.get(201, 0) > 0, f"no upload was stored at all ({stats})"

    final = harness.serve()
    data = harness.data_dir
    assert not tmp_leftovers(data, live_sessions=1), (
        f"after restart, tmp/ holds leftovers: {tmp_leftovers(data, 1)} ({stats})"
    )
    rows = catalog_files(data)
    entries = listed_files(final)
    assert set(entries) == set(rows), (
        f"listed files differ from catalog rows: only listed {set(entries) - set(rows)}, "
        f"only in rows {set(rows) - set(entries)}"
    )
    lost = sorted(set(acked) - set(entries))
    assert not lost, (
        f"uploads answered 200/201 before a kill are gone after restart: {lost} ({stats})"
    )
    for name, entry in entries.items():
        wheel = by_name.get(name)
        assert wheel is not None, f"listed file {name} was never uploaded"
        assert entry["hashes"]["sha256"] == wheel.sha256, f"{name}: listed sha256 is wrong"
        assert entry["core-metadata"] == {"sha256": wheel.metadata_sha256}, (
            f"{name}: core-metadata {entry['core-metadata']} is not the wheel's METADATA"
        )
    problems = check_downloads(final, entries)
    assert not problems, f"listed files that do not download intact: {problems} ({stats})"
    problems = store_problems(data, orphans_allowed=True)
    assert not problems, f"store after kill -9 loop: {problems} ({stats})"

    final.stop()
    assert not tmp_leftovers(data, live_sessions=0), (
        f"a clean stop left tmp/ entries: {tmp_leftovers(data, 0)}"
    )
    referenced = {d for r in catalog_files(data).values() for d in (r[0], r[2])}
    orphans = sorted(set(blob_files(data)) - referenced)
    print(f"{len(rows)} files stored, {len(orphans)} orphan blobs before fsck")
    if not fsck_available(harness):
        # Without fsck, orphans are acceptable only as complete blobs (checked above).
        return
    check = fsck(harness)
    assert check.returncode == 0, (
        f"fsck found problems ({check.returncode}):\n{check.stdout}{check.stderr}"
    )
    assert re.search(rf"^{len(orphans)} orphan blobs", check.stdout, re.M), (
        f"fsck disagrees on orphans (python sees {len(orphans)}): {check.stdout}"
    )
    repair = fsck(harness, "--repair")
    assert repair.returncode == 0, (
        f"fsck --repair failed ({repair.returncode}):\n{repair.stdout}{repair.stderr}"
    )
    problems = store_problems(data, orphans_allowed=False)
    assert not problems, f"after fsck --repair: {problems}\nfsck said:\n{repair.stdout}"
    again = fsck(harness)
    assert again.returncode == 0 and re.search(r"^0 orphan blobs", again.stdout, re.M), again.stdout
    assert "unexpected file" not in again.stdout, again.stdout
    assert not tmp_leftovers(data, live_sessions=0), (
        f"fsck left tmp/ entries: {tmp_leftovers(data, 0)}"
    )


def count_rows(data_dir: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{data_dir / 'wheelforge.db'}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error:
        return 0
    try:
        return conn.execute("SELECT count(*) FROM files").fetchone()[0]
    except sqlite3.Error:  # not created yet
        return 0
    finally:
        conn.close()


@pytest.mark.default_backend_only(reason=LOCAL_LAYOUT)
def test_kill9_during_wheelhouse_ingest_then_rerun(harness, artifacts):
    """`wheelforge ingest` stores a wheelhouse in batches that share their syncs and their
    catalog transaction. Killed with SIGKILL right after a batch was recorded (while the next
    one is being stored), in several rounds: every row has its complete blob, no half file is
    visible, and a final run stores the rest and exits 0."""
    seed = int(os.environ.get("WF_FAULT_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    house = artifacts / "house"
    wheels = {
        w.filename: w
        for w in (
            make_wheel(house, f"ingest-crash-{i % 4}", f"1.{i}", padding=rng.randrange(0, 40_000))
            for i in range(700)
        )
    }
    data = harness.data_dir
    cmd = [str(harness.binary), "ingest", "--data-dir", str(data), str(house)]
    killed_mid_run = 0
    for round_no in range(4):
        before = count_rows(data)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            # Kill once this run recorded a batch, somewhere in the next one.
            deadline = time.monotonic() + 60
            while proc.poll() is None and count_rows(data) <= before and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.uniform(0, 0.15))
            proc.kill()
        finally:
            _out, err = proc.communicate(timeout=30)
        rows = catalog_files(data)
        print(f"round {round_no}: exit {proc.returncode}, {len(rows)} of {len(wheels)} rows")
        if proc.returncode == -9:
            # A kill may also land after the last batch was recorded, before the exit.
            killed_mid_run += len(rows) < len(wheels)
        else:
            assert proc.returncode == 0, f"ingest failed (seed {seed}): {err.decode()[-2000:]}"
        for name, (sha, size, meta) in rows.items():
            wheel = wheels.get(name)
            assert wheel is not None, f"row {name} is not a file of the wheelhouse"
            assert (sha, size, meta) == (wheel.sha256, wheel.size, wheel.metadata_sha256), name
        problems = store_problems(data, orphans_allowed=True)
        assert not problems, f"store after kill -9 of ingest (seed {seed}): {problems[:10]}"
    assert killed_mid_run > 0, f"no round was killed while it ran (seed {seed})"

    stored = len(catalog_files(data))
    final = harness.ingest(house)
    assert final.returncode == 0, final.stderr[-2000:]
    assert final.stdout.splitlines()[-1] == (
        f"{len(wheels) - stored} added, {stored} skipped, 0 rejected"
    ), final.stdout[-500:]
    rows = catalog_files(data)
    assert set(rows) == set(wheels)
    problems = store_problems(data, orphans_allowed=True)
    assert not problems, f"store after the final ingest (seed {seed}): {problems[:10]}"
    assert not tmp_leftovers(data, live_sessions=0), tmp_leftovers(data, 0)


# ---------------------------------------------------------------------------------------------
# Mounts (root only)


def mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


def unmount(path: Path) -> None:
    proc = subprocess.run(["umount", str(path)], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, text=True, timeout=30)


def stop_servers(harness) -> None:
    for s in harness.servers:
        s.stop()


def assert_unchanged(harness, before, what: str) -> None:
    if not wait_for(lambda: harness.state() == before, timeout=3.0):
        now = harness.state()
        raise AssertionError(
            f"{what} left something behind:\n"
            f"  new blobs: {sorted(now.blobs - before.blobs)}\n"
            f"  new tmp: {sorted(now.tmp - before.tmp)}\n"
            f"  removed tmp: {sorted(before.tmp - now.tmp)}\n"
            f"  rows before: {len(before.rows)}, after: {len(now.rows)}"
        )


# ---------------------------------------------------------------------------------------------
# 2. Disk full


@pytest.mark.default_backend_only(reason=LOCAL_LAYOUT)
def test_disk_full_507_leaves_nothing_then_recovers(harness, artifacts):
    data = harness.data_dir
    mounted = mount("-t", "tmpfs", "-o", "size=3m", "tmpfs", str(data))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        token = harness.token("upload")
        server = harness.serve()
        small = make_wheel(artifacts / "small", "full-pkg", "1.0")
        assert server.put_file(small, token).status == 201

        big = make_wheel(artifacts / "big", "full-pkg", "2.0", padding=700_000)
        st = os.statvfs(data)
        free = st.f_bavail * st.f_frsize
        keep = 256 * 1024
        assert free > big.size + keep, f"tmpfs has only {free} bytes free"
        dummy = data / "dummy"
        with open(dummy, "wb") as f:
            f.write(b"\0" * (free - keep))
        st = os.statvfs(data)
        free = st.f_bavail * st.f_frsize
        assert big.size > free, f"wheel of {big.size} bytes fits into {free} free bytes"

        before = harness.state()
        result = curl_upload(server, harness.root, big.path, token=token)
        assert result.status == 507, (
            f"upload larger than the free space: expected 507, got {result.status} "
            f"(curl rc {result.rc}: {result.stderr.strip()}); body {result.body[:300]!r}"
        )
        assert re.search(r"space|full", result.body, re.IGNORECASE), (
            f"507 body does not say the disk is full: {result.body[:300]!r}"
        )
        print(f"disk full: {result.status} {result.body.strip()!r}")
        assert_unchanged(harness, before, "a 507 upload")
        assert server.get("/simple/full-pkg/").status == 200, "server unusable after ENOSPC"

        dummy.unlink()
        result = curl_upload(server, harness.root, big.path, token=token)
        assert result.status == 201, f"after freeing space: {result.status} {result.body[:300]!r}"
        assert server.file_entry("full-pkg", big.filename)["hashes"] == {"sha256": big.sha256}
        problems = store_problems(data, orphans_allowed=False)
        assert not problems, f"store after the 507 and the retry: {problems}"
        stop_servers(harness)
    finally:
        stop_servers(harness)
        unmount(data)


@pytest.mark.default_backend_only(reason=LOCAL_LAYOUT)
def test_disk_full_ingest_rejects_the_file_that_does_not_fit_and_keeps_the_others(
    harness, artifacts
):
    data = harness.data_dir
    mounted = mount("-t", "tmpfs", "-o", "size=3m", "tmpfs", str(data))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        house = artifacts / "house"
        small = [make_wheel(house, "full-ingest", f"1.{i}") for i in range(3)]
        big = make_wheel(house, "full-ingest", "2.0", padding=700_000)
        assert harness.ingest(small[0].path).returncode == 0  # creates the catalog
        st = os.statvfs(data)
        keep = 256 * 1024
        with open(data / "dummy", "wb") as f:
            f.write(b"\0" * (st.f_bavail * st.f_frsize - keep))

        proc = harness.ingest(house)
        assert proc.returncode == 1, f"exit {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        reported = [line for line in proc.stderr.splitlines() if big.filename in line]
        assert len(reported) == 1 and re.search(r"space|full", reported[0], re.I), proc.stderr
        assert proc.stdout.splitlines()[-1] == "2 added, 1 skipped, 1 rejected", proc.stdout
        assert set(catalog_files(data)) == {w.filename for w in small}
        problems = store_problems(data, orphans_allowed=False)
        assert not problems, f"store after an ingest that ran out of space: {problems}"
        assert not tmp_leftovers(data, live_sessions=0), tmp_leftovers(data, 0)

        (data / "dummy").unlink()
        again = harness.ingest(house)
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines()[-1] == "1 added, 3 skipped, 0 rejected", again.stdout
    finally:
        unmount(data)


# ---------------------------------------------------------------------------------------------
# 3. Read-only blob store


@pytest.mark.default_backend_only(reason=LOCAL_LAYOUT)
def test_read_only_blob_store_refuses_uploads_and_keeps_serving(harness, tokens, artifacts):
    """A data directory that is read-only as a whole cannot be served at all (the server needs
    its temp session directory and SQLite its -wal/-shm files), so the blob store alone is
    made read-only, by a read-only bind mount over DATA/blobs, while the server runs."""
    data = harness.data_dir
    token = tokens["upload"]
    server = harness.serve()
    stored = [make_wheel(artifacts / f"s{i}", "ro-pkg", f"1.{i}", padding=20_000) for i in range(2)]
    for w in stored:
        assert server.put_file(w, token).status == 201

    blobs = data / "blobs"
    bound = mount("--bind", str(blobs), str(blobs))
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount (needs root): {bound.stderr.strip()}")
    try:
        ro = mount("-o", "remount,ro,bind", str(blobs))
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only: {ro.stderr.strip()}")
        assert not os.access(blobs, os.W_OK) or _write_fails(blobs), "blobs/ is still writable"

        before = harness.state()
        etags = page_etags(server, "ro-pkg")
        new = make_wheel(artifacts / "new", "ro-pkg", "2.0", padding=20_000)
        status, body = put(server.url, new, token)
        print(f"read-only blobs/: {status} {body.strip()!r}")
        assert status == 503, f"upload into a read-only store: {status} {body!r} (expected 503)"
        assert_names_data_dir(body, data, "Read-only file system")
        assert_unchanged(harness, before, f"an upload into a read-only store ({status})")
        assert page_etags(server, "ro-pkg") == etags, "pages changed after a refused upload"
        assert wait_for(lambda: "Read-only file system" in server.log(), timeout=3.0), (
            "the log does not name the cause (Read-only file system):\n" + server.log_tail(10)
        )

        assert server.get("/simple/").status == 200
        assert server.get("/simple/ro-pkg/").status == 200
        entries = {e["filename"]: e for e in server.project_json("ro-pkg")["files"]}
        assert set(entries) == {w.filename for w in stored}
        problems = check_downloads(server, entries)
        assert not problems, f"reads from a read-only store: {problems}"
        assert server.get("/").status == 200
    finally:
        unmount(blobs)

    # Writable again: the same server stores the upload, with nothing left from the failure.
    status, body = put(server.url, new, token)
    assert status == 201, f"after the store became writable again: {status} {body!r}"
    problems = store_problems(data, orphans_allowed=False)
    assert not problems, f"store after the read-only episode: {problems}"


def assert_names_data_dir(body: str, data: Path, cause: str) -> None:
    """The 503 of a store the server may not write names the data directory and the cause."""
    assert f"the data directory {data} is not writable" in body, (
        f"the answer does not name the data directory {data}: {body!r}"
    )
    assert cause in body, f"the answer does not name the cause ({cause}): {body!r}"


def _write_fails(directory: Path) -> bool:
    try:
        (directory / ".probe").write_bytes(b"x")
    except OSError:
        return True
    (directory / ".probe").unlink()
    return False


# ---------------------------------------------------------------------------------------------
# 3b. Storage faults (EIO, permissions, a read-only filesystem) through an LD_PRELOAD shim
#
# faultshim.c, compiled here with gcc, makes chosen calls of the server fail with a chosen
# errno for paths under a chosen prefix, read from a control file at every call: a failing disk
# without root block devices. The server must answer with the server's fault (500 for EIO, 503
# naming the data directory when it may not write there), never blame the file, and leave
# nothing behind: no blob, no temp file, no row, no page changed.

SHIM_SOURCE = Path(__file__).with_name("faultshim.c")


@pytest.fixture(scope="session")
def fault_shim(tmp_path_factory) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed (Debian package: build-essential)")
    out = tmp_path_factory.mktemp("faultshim") / "faultshim.so"
    proc = subprocess.run(
        [gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(out), str(SHIM_SOURCE),
         "-ldl"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"cannot build {SHIM_SOURCE.name}:\n{proc.stderr}"
    return out


class Faults:
    """The shim's control file and the record of the faults it injected."""

    def __init__(self, root: Path, shim: Path):
        self.shim = shim
        self.control = root / "faults"
        self.hits_file = root / "fault-hits"
        self.control.write_text("")

    def env(self) -> dict[str, str]:
        # Under AddressSanitizer its runtime must come first unless told not to check; the shim
        # allocates nothing, so ASan works behind it.
        asan = os.environ.get("ASAN_OPTIONS", "")
        return {
            "LD_PRELOAD": str(self.shim),
            "WF_FAULTS": str(self.control),
            "WF_FAULTS_HITS": str(self.hits_file),
            "ASAN_OPTIONS": f"{asan}:verify_asan_link_order=0" if asan else "verify_asan_link_order=0",
        }

    def inject(self, op: str, err: str, prefix: Path) -> None:
        self.hits_file.unlink(missing_ok=True)
        self.control.write_text(f"{op} {err} {prefix}\n")

    def clear(self) -> None:
        self.control.write_text("")

    def hits(self) -> list[str]:
        try:
            return self.hits_file.read_text().splitlines()
        except FileNotFoundError:
            return []


# Every view of the pages whose ETag must stay the same after a refused upload.
def page_etags(server, project: str) -> dict[str, str]:
    targets = [
        ("/simple/", "text/html"),
        ("/simple/", JSON_TYPE),
        (f"/simple/{project}/", "text/html"),
        (f"/simple/{project}/", JSON_TYPE),
        (f"/cpu/simple/{project}/", JSON_TYPE),
        (f"/project/{project}/", "text/html"),
        (f"/api/projects/{project}/variants", "application/json"),
    ]
    out = {}
    for target, accept in targets:
        resp = server.get(target, {"Accept": accept})
        assert resp.status == 200, f"GET {target} -> {resp.status}: {resp.text[:200]}"
        etag = resp.header("ETag")
        assert etag, f"GET {target} has no ETag"
        out[f"{target} ({accept})"] = etag
    return out


def blob_dir(data: Path, sha: str) -> Path:
    return data / "blobs" / sha[:2] / sha[2:4]


# (what fails, errno, where: a function of (data dir, wheel), the status, words of the answer)
STORAGE_FAULTS = [
    ("fsync", "EIO", lambda d, w: d / "tmp", 500, ["Input/output error"]),
    ("write", "EIO", lambda d, w: d / "tmp", 500, ["Input/output error"]),
    # After the METADATA blob was published: it must go again.
    ("rename", "EIO", lambda d, w: blob_path(d, w.sha256), 500, ["Input/output error"]),
    # After the rename, syncing the blob's directory fails: the new blob must go again.
    ("fsync", "EIO", lambda d, w: blob_dir(d, w.sha256), 500, ["Input/output error"]),
    ("rename", "EACCES", lambda d, w: d / "blobs", 503, ["Permission denied"]),
    ("mkostemp", "EROFS", lambda d, w: d / "tmp", 503, ["Read-only file system"]),
]
FAULT_IDS = [f"{op}-{err}" for op, err, *_ in STORAGE_FAULTS]


def assert_server_fault(status: int, text: str, expected: int, words: list[str], data: Path):
    """The answer is the server's fault, with its cause, and never blames the upload."""
    assert status == expected, f"expected {expected}, got {status}: {text[:400]!r}"
    for word in words:
        assert word in text, f"the answer does not name the cause ({word}): {text[:400]!r}"
    assert not re.search(r"does not match|invalid|malformed", text, re.IGNORECASE), (
        f"a server storage fault is blamed on the upload: {text[:400]!r}"
    )
    if expected == 500:
        assert "server storage error (not a problem with the request)" in text, text[:400]
    else:
        assert f"the data directory {data} is not writable" in text, text[:400]


def refuse_under_faults(harness, server, faults, upload, wheel, project: str) -> None:
    """Runs `upload(wheel) -> (status, text)` under each storage fault in turn: each answer is
    the server's fault, the fault was really hit, and nothing is stored; then, the faults
    cleared, the same upload is stored."""
    data = Path(os.path.realpath(harness.data_dir))
    for op, err, where, expected, words in STORAGE_FAULTS:
        before = harness.state()
        etags = page_etags(server, project)
        faults.inject(op, err, where(data, wheel))
        try:
            status, text = upload(wheel)
        finally:
            faults.clear()
        print(f"{op} {err}: {status} {text.strip()[:300]!r}")
        assert faults.hits(), f"the {op} {err} fault was never hit ({status} {text[:200]!r})"
        assert_server_fault(status, text, expected, words, data)
        assert_unchanged(harness, before, f"an upload refused for {op} {err} ({status})")
        assert page_etags(server, project) == etags, f"pages changed after {op} {err}"
        assert wheel.filename not in harness.filenames()
    status, text = upload(wheel)
    assert status == 201, f"after the faults were cleared: {status} {text[:300]!r}"
    assert server.file_entry(project, wheel.filename)["hashes"] == {"sha256": wheel.sha256}
    problems = store_problems(harness.data_dir, orphans_allowed=False)
    assert not problems, f"store after the storage faults: {problems}"
    assert not tmp_leftovers(harness.data_dir, live_sessions=1), tmp_leftovers(harness.data_dir, 1)


@pytest.mark.default_backend_only(reason=LOCAL_LAYOUT)
def test_storage_faults_on_put_are_the_servers_and_leave_nothing(harness, artifacts, fault_shim):
    token = harness.token("upload")
    faults = Faults(harness.root, fault_shim)
    server = harness.serve(env=faults.env())
    first = make_wheel(artifacts / "first", "fault-put", "1.0")
    assert server.put_file(first, token).status == 201
    wheel = make_wheel(artifacts / "second", "fault-put", "2.0", padding=600_000)

    def upload(w: Artifact) -> tuple[int, str]:
        result = curl_upload(server, harness.root, w.path, token=token)
        assert result.status != 0, f"curl got no answer (rc {result.rc}): {result.stderr}"
        return result.status, result.body

    refuse_under_faults(harness, server, faults, upload, wheel, "fault-put")
    assert re.search(r"upload of \S+ failed: .*Input/output error", server.log()), (
        "the server's log does not record the storage fault:\n" + server.log_tail(20)
    )


@pytest.mark.default_backend_only(reason=LOCAL_LAYOUT)
def test_storage_faults_on_twine_upload_are_the_servers_and_leave_nothing(
    harness, artifacts, fault_shim
):
    from test_publish import output_of, twine

    token = harness.token("upload")
    faults = Faults(harness.root, fault_shim)
    server = harness.serve(env=faults.env())
    first = make_wheel(artifacts / "first", "fault-twine", "1.0")
    assert server.put_file(first, token).status == 201
    wheel = make_wheel(artifacts / "second", "fault-twine", "2.0", padding=600_000)

    def upload(w: Artifact) -> tuple[int, str]:
        proc = twine(harness, server.url + "/legacy/", token, [w.path])
        text = output_of(proc)
        if proc.returncode == 0:
            return 201, text
        match = re.search(r"HTTPError: (\d{3}) ", text)
        assert match, f"twine failed without an HTTP status:\n{text}"
        return int(match.group(1)), text

    refuse_under_faults(harness, server, faults, upload, wheel, "fault-twine")


# ---------------------------------------------------------------------------------------------
# 4. Concurrent uploads of one file name


CONCURRENT = 20


def _race(url: str, token: str, wheels: list[Artifact]) -> list[tuple[int, str]]:
    barrier = threading.Barrier(len(wheels))
    results: list[tuple[int, str] | None] = [None] * len(wheels)

    def one(i: int, wheel: Artifact, data: bytes) -> None:
        barrier.wait(30)
        try:
            results[i] = put(url, wheel, token, data)
        except (OSError, http.client.HTTPException) as exc:
            results[i] = (0, f"connection error: {exc!r}")

    threads = [
        threading.Thread(target=one, args=(i, w, w.data), daemon=True) for i, w in enumerate(wheels)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return [r if r is not None else (0, "no answer within 60 s") for r in results]


def _summary(results) -> dict[int, int]:
    out: dict[int, int] = {}
    for status, _ in results:
        out[status] = out.get(status, 0) + 1
    return out


def test_concurrent_uploads_same_file(harness, tokens, artifacts):
    server = harness.serve("--worker-threads", "4")
    wheel = make_wheel(artifacts, "same-pkg", "1.0", padding=300_000)
    results = _race(server.url, tokens["upload"], [wheel] * CONCURRENT)
    summary = _summary(results)
    bad = [r for r in results if r[0] not in (200, 201)]
    assert not bad, (
        f"identical concurrent uploads: answers {summary}; others than 200/201: {bad[:3]}"
    )
    assert summary.get(201) == 1, f"expected exactly one 201, got {summary}"
    rows = catalog_files(harness.data_dir)
    assert list(rows) == [wheel.filename]
    assert rows[wheel.filename][0] == wheel.sha256
    assert sorted(blob_files(harness.data_dir)) == sorted([wheel.sha256, wheel.metadata_sha256])
    assert not store_problems(harness.data_dir, orphans_allowed=False)
    assert wait_for(lambda: not tmp_leftovers(harness.data_dir, 1), timeout=3.0), (
        tmp_leftovers(harness.data_dir, 1)
    )


def test_concurrent_uploads_same_name_different_bytes(harness, tokens, artifacts):
    server = harness.serve("--worker-threads", "4")
    wheels = [
        make_wheel(artifacts / f"v{i}", "clash-pkg", "1.0", value=f"variant {i}", padding=300_000)
        for i in range(CONCURRENT)
    ]
    assert len({w.sha256 for w in wheels}) == CONCURRENT
    results = _race(server.url, tokens["upload"], wheels)
    summary = _summary(results)
    assert summary.get(201) == 1 and summary.get(409) == CONCURRENT - 1, (
        f"expected one 201 and {CONCURRENT - 1} 409, got {summary}: "
        f"{[r for r in results if r[0] not in (201, 409)][:3]}"
    )
    for status, body in results:
        if status == 409:
            assert body.startswith("File already exists"), body[:200]
    winner = wheels[[s for s, _ in results].index(201)]
    rows = catalog_files(harness.data_dir)
    assert list(rows) == [winner.filename] and rows[winner.filename][0] == winner.sha256, rows
    assert server.file_entry("clash-pkg", winner.filename)["hashes"] == {"sha256": winner.sha256}
    leftover = sorted(set(blob_files(harness.data_dir)) - {winner.sha256, winner.metadata_sha256})
    losers = {w.sha256 for w in wheels} - {winner.sha256}
    if wfbackend.active() is not None:
        # An object store's blobs are uploaded before the catalog transaction and a refused
        # file's are left for gc's grace period (docs/storage.md, "Consistency: blob before
        # row"): only bytes of the losing uploads (and their METADATA) may stay, and no row
        # names them.
        loser_metadata = {w.metadata_sha256 for w in wheels if w.sha256 in losers}
        assert set(leftover) <= losers | loser_metadata, leftover
        leftover = []
    assert not leftover, (
        f"{len(leftover)} rejected (409) uploads left their blob behind "
        f"({len(set(leftover) & losers)} are bytes of losing uploads): a 409 must leave nothing; "
        f"the ingest publishes the blob before the row insert finds the conflict and never "
        f"removes it. Leftover: {leftover[:3]}..."
    )
    assert wait_for(lambda: not tmp_leftovers(harness.data_dir, 1), timeout=3.0), (
        tmp_leftovers(harness.data_dir, 1)
    )


# ---------------------------------------------------------------------------------------------
# 5. Slow headers


def test_slow_header_clients_do_not_block_others(harness, tokens):
    server = harness.serve("--read-timeout", "3s")
    host, port = server.host.split(":")
    request = f"GET /simple/ HTTP/1.1\r\nHost: {server.host}\r\nUser-Agent: slow\r\n\r\n".encode()
    slow = 8
    outcome: dict[int, tuple[float, str]] = {}
    started = time.monotonic()
    stop = threading.Event()

    def slow_client(i: int) -> None:
        with contextlib.closing(socket.create_connection((host, int(port)), timeout=10)) as sock:
            for pos in range(len(request)):
                if stop.is_set():
                    return
                try:
                    sock.sendall(request[pos : pos + 1])
                except OSError as exc:
                    outcome[i] = (time.monotonic() - started, f"send failed: {exc!r}")
                    return
                readable, _, _ = select.select([sock], [], [], 1.0)
                if readable:
                    try:
                        got = sock.recv(4096)
                    except OSError as exc:
                        got = f"recv failed: {exc!r}".encode()
                    what = got[:80].decode(errors="replace") or "closed"
                    outcome[i] = (time.monotonic() - started, what)
                    return
            outcome[i] = (time.monotonic() - started, "sent the whole request, never cut off")

    threads = [threading.Thread(target=slow_client, args=(i,), daemon=True) for i in range(slow)]
    try:
        for t in threads:
            t.start()
        time.sleep(0.5)
        for _ in range(5):
            t0 = time.monotonic()
            resp = http_request(server.url, "GET", "/simple/")
            assert resp.status == 200, (
                f"normal GET while {slow} clients dribble headers: {resp.status}"
            )
            assert time.monotonic() - t0 < 5, "a normal GET was held up by the slow clients"
            assert server.get("/healthz").status == 200
            time.sleep(0.2)
        # The header deadline (3 s here) is for the whole header, not per byte.
        assert wait_for(lambda: len(outcome) == slow, timeout=15.0, interval=0.2), (
            f"{slow - len(outcome)} of {slow} clients sending one header byte per second are still "
            f"connected after 15 s although the server runs with --read-timeout 3s (the header "
            f"deadline is not applied: with the default 30 s they are cut off after 30 s, so "
            f"`serve` ignores --read-timeout). Cut off so far: {outcome}"
        )
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    late = {i: o for i, o in outcome.items() if o[0] > 10 or "never cut off" in o[1]}
    assert not late, f"slow clients were not cut off by the header deadline: {late}"
    assert server.get("/simple/").status == 200


# ---------------------------------------------------------------------------------------------
# 6. Slow upload bodies: the minimum upload rate


def _dribble_upload(server, token: str, artifact: Artifact, piece: int, pause: float):
    """PUTs `artifact` in pieces of `piece` bytes with `pause` seconds between them; returns
    (seconds until the server answered or closed, the answer's first line, bytes sent)."""
    host, port = server.host.split(":")
    auth = base64.b64encode(f"__token__:{token}".encode()).decode()
    data = artifact.data
    head = (
        f"PUT /upload/{artifact.filename} HTTP/1.1\r\nHost: {server.host}\r\n"
        f"Authorization: Basic {auth}\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with contextlib.closing(socket.create_connection((host, int(port)), timeout=30)) as sock:
        sock.sendall(head)
        sent = 0
        while True:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable or sent >= len(data):
                if not readable:
                    select.select([sock], [], [], 30)
                try:
                    got = sock.recv(65536)
                except OSError as exc:
                    got = f"recv failed: {exc!r}".encode()
                # Read until the server closes or the whole answer is in.
                while got and b"\r\n\r\n" not in got:
                    more = sock.recv(65536)
                    if not more:
                        break
                    got += more
                return time.monotonic() - started, got.decode(errors="replace"), sent
            try:
                sock.sendall(data[sent : sent + piece])
            except OSError:
                readable = True
                continue
            sent += min(piece, len(data) - sent)
            time.sleep(pause)


def test_uploads_below_the_minimum_rate_are_cut_off_and_leave_nothing(harness, tokens):
    server = harness.serve("--read-timeout", "2s", "--min-upload-rate", "16K")
    before = store_state(harness.data_dir)
    trickle = make_wheel(harness.root / "trickle", "trickle", "1.0", padding=400_000)
    # About 2 KB/s: each piece arrives well inside the 2 s read deadline, so only the rate
    # check can stop this client.
    elapsed, answer, sent = _dribble_upload(server, tokens["upload"], trickle, 200, 0.1)
    assert answer.startswith("HTTP/1.1 408"), (
        f"a client sending ~2 KB/s against a 16 KiB/s minimum got {answer[:200]!r} after "
        f"{elapsed:.1f} s ({sent} of {trickle.size} bytes sent)"
    )
    assert "upload too slow" in answer and "16384 bytes/s" in answer, answer
    assert "connection: close" in answer.lower(), answer
    # Cut off after one averaging window (the read timeout, 2 s), not after the whole body.
    assert 1.5 < elapsed < 10, f"cut off after {elapsed:.1f} s"
    assert sent < trickle.size
    assert wait_for(lambda: store_state(harness.data_dir) == before, timeout=5), (
        "the aborted upload left files or rows behind"
    )
    assert "upload too slow" in server.log()

    # A client above the minimum but slower than the read deadline per window completes: the
    # rate is an average, not a per-read deadline.
    steady = make_wheel(harness.root / "steady", "steady", "1.0", padding=250_000)
    elapsed, answer, sent = _dribble_upload(server, tokens["upload"], steady, 8192, 0.1)
    assert answer.startswith("HTTP/1.1 201"), f"{answer[:300]!r} after {elapsed:.1f} s"
    assert elapsed > 2, "the steady upload should span more than one averaging window"
    assert server.file_entry("steady", steady.filename)["hashes"]["sha256"] == steady.sha256


def test_min_upload_rate_zero_turns_the_check_off(harness, tokens):
    server = harness.serve("--read-timeout", "2s", "--min-upload-rate", "0")
    slow = make_wheel(harness.root / "slow", "slowpoke", "1.0", padding=12_000)
    # About 4 KB/s for 3+ s: no minimum, and every piece within the read deadline.
    elapsed, answer, _ = _dribble_upload(server, tokens["upload"], slow, 400, 0.1)
    assert answer.startswith("HTTP/1.1 201"), f"{answer[:300]!r} after {elapsed:.1f} s"
    assert elapsed > 2
