"""Operating wheelforge: the systemd units, `config check` and the configuration precedence,
online `backup` while uploads run, `gc` and `fsck` on a real data directory."""

from __future__ import annotations

import os
import re
import shutil
import stat
import threading
import tomllib
import urllib.parse
from pathlib import Path

import pytest

import wfbackend
from wfhelpers import (
    JSON_TYPE,
    PIP_PYTHONS,
    Server,
    StoredBlob,
    catalog_filenames,
    clean_env,
    make_sdist,
    make_wheel,
    normalize,
    path_of,
    pip_args,
    run,
    put_blob,
    sha256_hex,
    stored_blob,
    wait_for,
)

REPO = Path(__file__).resolve().parents[2]
SYSTEMD = REPO / "systemd"
# The exposure level `systemd-analyze security` gives the unit must stay at or below this
# ("OK" ends at 4.0; the unit scores about 1.1 on systemd 252).
MAX_EXPOSURE = 2.0


def blob_path(data_dir: Path, sha: str) -> StoredBlob:
    """A data directory's blob: DATA_DIR/blobs/aa/bb/SHA, or its object under pg-s3."""
    return stored_blob(data_dir, sha)


def backup_blob(backup: Path, sha: str) -> Path:
    """A blob in a `wheelforge backup` directory: always a local file, on every backend."""
    return backup / "blobs" / sha[:2] / sha[2:4] / sha


def write_blob(data_dir: Path, data: bytes) -> str:
    """Puts bytes into the store by hand, as the store would; returns the sha."""
    return put_blob(data_dir, data)


def flip_byte(blob: StoredBlob, offset: int = 10) -> None:
    """Damages a blob in place, its size kept."""
    blob.flip_byte(offset)


# fsck hashes local files always, objects only with --verify (a HEAD checks presence and size):
# the tests that damage bytes in place ask for it on pg-s3.
VERIFY = ("--verify",) if wfbackend.BACKEND == "pg-s3" else ()


def served_files(server: Server) -> dict[str, dict]:
    """Every file listed on the server's /simple/ pages, by file name."""
    root = server.get("/simple/", {"Accept": "application/vnd.pypi.simple.v1+json"})
    assert root.status == 200, root.text[:300]
    files: dict[str, dict] = {}
    for project in root.json()["projects"]:
        name = normalize(project["name"])
        for entry in server.project_json(name)["files"]:
            entry = dict(entry, project=name)
            files[entry["filename"]] = entry
    return files


def download(server: Server, entry: dict, suffix: str = "") -> bytes:
    url = urllib.parse.urljoin(f"/simple/{entry['project']}/", entry["url"])
    resp = server.get_file(path_of(url) + suffix)  # a redirect to the object store followed
    assert resp.status == 200, f"GET {url}{suffix} -> {resp.status}"
    return resp.body


def assert_serves_verified(server: Server, entry: dict) -> None:
    body = download(server, entry)
    assert sha256_hex(body) == entry["hashes"]["sha256"], f"{entry['filename']}: wrong bytes"
    want_meta = (entry.get("core-metadata") or {}).get("sha256")
    if want_meta:
        meta = download(server, entry, ".metadata")
        assert sha256_hex(meta) == want_meta, f"{entry['filename']}: wrong METADATA"


def cli(harness, *args: str, env: dict[str, str] | None = None):
    return run([harness.binary, *args], cwd=harness.root, env=clean_env(**(env or {})))


# ---------------------------------------------------------------------------------------------
# systemd units


@pytest.fixture
def units(harness, wheelforge_bin) -> Path:
    """The units in a temp dir, ExecStart pointing at the built binary (verify wants it to
    exist); everything else exactly as shipped."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian package: systemd)")
    out = harness.path("units")
    for name in ("wheelforge.service", "wheelforge.socket"):
        text = (SYSTEMD / name).read_text()
        text = text.replace("ExecStart=/usr/bin/wheelforge ", f"ExecStart={wheelforge_bin} ")
        (out / name).write_text(text)
    return out


def test_service_unit_runs_the_documented_command():
    text = (SYSTEMD / "wheelforge.service").read_text()
    command = "/usr/bin/wheelforge serve --config /etc/wheelforge/wheelforge.toml"
    assert f"\nExecStart={command}\n" in text
    for line in ("Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "WatchdogSec=30s",
                 "User=wheelforge", "StateDirectory=wheelforge", "Restart=on-failure"):
        assert f"\n{line}\n" in text, f"{line} missing from wheelforge.service"
    sysusers = (SYSTEMD / "sysusers.d" / "wheelforge.conf").read_text()
    assert re.search(r"^u wheelforge ", sysusers, re.M), "sysusers does not create User="


def test_units_pass_systemd_analyze_verify(units):
    proc = run(["systemd-analyze", "verify", "--man=no", "--recursive-errors=no",
                units / "wheelforge.service", units / "wheelforge.socket"])
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"systemd-analyze verify failed ({proc.returncode}):\n{output}"
    ours = [line for line in output.splitlines() if "wheelforge" in line]
    assert not ours, "systemd-analyze verify complains about the units:\n" + "\n".join(ours)


def test_service_exposure_level(units):
    proc = run(["systemd-analyze", "security", "--offline=yes", "--no-pager",
                units / "wheelforge.service"])
    output = proc.stdout + proc.stderr
    if "--offline" in output and proc.returncode != 0:
        pytest.skip(f"this systemd-analyze cannot review unit files offline: {output[:200]}")
    match = re.search(r"Overall exposure level for wheelforge\.service: (\d+\.\d+)", output)
    assert match, f"no exposure level in:\n{output}"
    assert float(match.group(1)) <= MAX_EXPOSURE, (
        f"exposure {match.group(1)} > {MAX_EXPOSURE}:\n"
        + "\n".join(line for line in output.splitlines() if line.startswith("✗"))
    )


def test_sysusers_and_tmpfiles_snippets(harness):
    if shutil.which("systemd-sysusers") is None or shutil.which("systemd-tmpfiles") is None:
        pytest.skip("systemd-sysusers / systemd-tmpfiles are not installed (Debian: systemd)")
    root = harness.path("sysroot")
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    sysusers = SYSTEMD / "sysusers.d" / "wheelforge.conf"
    proc = run(["systemd-sysusers", f"--root={root}", sysusers])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^wheelforge:x:\d+:\d+:", (root / "etc" / "passwd").read_text(), re.M)
    if os.geteuid() != 0:
        return  # creating directories owned by another user needs root
    proc = run(["systemd-tmpfiles", "--create", f"--root={root}",
                SYSTEMD / "tmpfiles.d" / "wheelforge.conf"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = root / "var" / "lib" / "wheelforge"
    assert state.is_dir() and stat.S_IMODE(state.stat().st_mode) == 0o750


def test_example_config_is_valid(harness):
    proc = cli(harness, "config", "check", "--config", str(SYSTEMD / "wheelforge.toml.example"))
    assert proc.returncode == 0, proc.stderr
    config = tomllib.loads(proc.stdout)
    assert config["data_dir"] == "/var/lib/wheelforge"
    assert config["listen"] == "127.0.0.1:8080"


# ---------------------------------------------------------------------------------------------
# Configuration


def test_config_check_prints_effective_configuration(harness):
    config = harness.root / "wheelforge.toml"
    config.write_text('listen = "127.0.0.1:7001"\nworker_threads = 4\nread_timeout = "2m"\n')
    proc = cli(harness, "config", "check", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    printed = tomllib.loads(proc.stdout)
    assert printed["listen"] == "127.0.0.1:7001"
    assert printed["worker_threads"] == 4
    assert printed["read_timeout"] == "2m"
    # Defaults for everything else.
    assert printed["data_dir"] == "data"
    assert printed["max_upload_size"] == "8G"
    assert printed["min_upload_rate"] == "1K"
    assert printed["access_log"] is True
    assert set(printed) >= {"idle_timeout", "max_connections", "shutdown_grace"}

    # The printed configuration reads back to itself.
    again_file = harness.root / "printed.toml"
    again_file.write_text(proc.stdout)
    again = cli(harness, "config", "check", "--config", str(again_file))
    assert again.returncode == 0, again.stderr
    assert tomllib.loads(again.stdout) == printed


def test_flags_beat_environment_beat_file(harness):
    config = harness.root / "wheelforge.toml"
    config.write_text('listen = "127.0.0.1:7001"\nmax_upload_size = "1M"\n')

    def effective(*flags: str, **env: str) -> dict:
        proc = cli(harness, "config", "check", "--config", str(config), *flags, env=env)
        assert proc.returncode == 0, proc.stderr
        return tomllib.loads(proc.stdout)

    assert effective()["listen"] == "127.0.0.1:7001"
    assert effective(WHEELFORGE_LISTEN="127.0.0.1:7002")["listen"] == "127.0.0.1:7002"
    both = effective("--listen", "127.0.0.1:7003", WHEELFORGE_LISTEN="127.0.0.1:7002")
    assert both["listen"] == "127.0.0.1:7003"
    assert both["max_upload_size"] == "1M"  # untouched settings still come from the file
    assert effective(WHEELFORGE_MAX_UPLOAD_SIZE="2G")["max_upload_size"] == "2G"
    assert effective(WHEELFORGE_ACCESS_LOG="off")["access_log"] is False
    # An empty variable counts as unset.
    assert effective(WHEELFORGE_LISTEN="")["listen"] == "127.0.0.1:7001"


def test_config_problems_are_all_reported_by_name(harness):
    config = harness.root / "wheelforge.toml"
    config.write_text(
        'listen = "x:99999"\nmax_upload_size = "lots"\nworker_threads = 0\n'
        'idle_timeout = "soon"\naccess_log = "maybe"\nmystery = 1\nmin_upload_rate = "fast"\n'
    )
    proc = cli(harness, "config", "check", "--config", str(config),
               env={"WHEELFORGE_SHUTDOWN_GRACE": "forever"})
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout == ""
    problems = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    for name in ("listen: invalid port in 'x:99999'", "max_upload_size: expected a size",
                 "worker_threads: ", "idle_timeout: ", "access_log: ", "unknown setting 'mystery'",
                 "shutdown_grace: ", "min_upload_rate: expected bytes per second"):
        assert any(p.startswith("error: " + name) for p in problems), (name, proc.stderr)
    assert any("WHEELFORGE_SHUTDOWN_GRACE" in p for p in problems), proc.stderr

    # Every command refuses to start on a bad configuration, naming the problems.
    serve = cli(harness, "serve", "--config", str(config), "--data-dir", str(harness.data_dir))
    assert serve.returncode == 2
    assert "listen: invalid port" in serve.stderr and "max_upload_size" in serve.stderr


def test_missing_config_file_is_an_error(harness):
    proc = cli(harness, "config", "check", "--config", str(harness.root / "absent.toml"))
    assert proc.returncode == 2
    assert "absent.toml: no such file" in proc.stderr


def test_server_takes_limits_from_environment_unless_a_flag_says_otherwise(
    harness, tokens, artifacts, monkeypatch
):
    wheel = make_wheel(artifacts, "sized-pkg", "1.0", padding=64 * 1024)
    monkeypatch.setenv("WHEELFORGE_MAX_UPLOAD_SIZE", "16K")
    limited = harness.serve()
    assert limited.put_file(wheel, tokens["upload"]).status == 413
    limited.stop()
    roomy = harness.serve("--max-upload-size", "1M")
    assert roomy.put_file(wheel, tokens["upload"]).status == 201


# ---------------------------------------------------------------------------------------------
# backup


def test_backup_during_uploads_restores_exactly_the_backed_up_files(
    harness, server, upload_token, artifacts
):
    def wheel(i: int):
        return make_wheel(artifacts / "w", f"ops-pkg{i % 4}", f"1.{i}", padding=64 * 1024)

    wheels = [wheel(i) for i in range(6)]
    # Some files are in before the backup starts, so the backup cannot be empty.
    for w in wheels:
        assert server.put_file(w, upload_token).status == 201
    # Uploads go on, with new wheels made as needed, until the test stops them: however slow
    # the backup is on a loaded machine, some uploads land after it.
    next_index = [6]
    lock = threading.Lock()
    stored: list[str] = [w.filename for w in wheels]
    made = {w.filename: w for w in wheels}
    failures: list[str] = []
    stop = threading.Event()

    def uploader() -> None:
        while not stop.is_set():
            with lock:
                i = next_index[0]
                next_index[0] += 1
            w = wheel(i)
            with lock:
                made[w.filename] = w
            resp = server.put_file(w, upload_token)
            with lock:
                if resp.status == 201:
                    stored.append(w.filename)
                else:
                    failures.append(f"{w.filename}: {resp.status} {resp.text[:200]}")

    threads = [threading.Thread(target=uploader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        def stored_count() -> int:
            with lock:
                return len(stored)

        while stored_count() < 12 and any(t.is_alive() for t in threads):
            threading.Event().wait(0.02)
        dest = harness.root / "backup"
        proc = cli(harness, "backup", str(dest), "--data-dir", str(harness.data_dir))
        after_backup = stored_count()
        # Uploads go on after the backup finished; none of them may appear in it.
        while stored_count() < after_backup + 3 and any(t.is_alive() for t in threads):
            threading.Event().wait(0.02)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not failures, failures
    assert proc.returncode == 0, f"backup failed ({proc.returncode}): {proc.stderr}"
    assert (dest / "BACKUP-INFO").is_file()
    wfbackend.restore_backup(dest)  # pg-s3: pg_restore of its dump, its blobs into a bucket

    backed_up = set(catalog_filenames(dest))
    assert set(stored) >= backed_up, f"backup lists files never stored: {backed_up - set(stored)}"
    assert backed_up >= {w.filename for w in wheels}
    assert len(backed_up) < len(harness.filenames()), "no upload after the backup: not a snapshot"
    info = tomllib.loads((dest / "BACKUP-INFO").read_text())
    assert info["files"] == len(backed_up)

    # Restore = serve the backup directory (restored as above on pg-s3).
    restored = Server(harness.binary, dest, harness.root / "restored.log", [])
    harness.servers.append(restored)
    restored.start()
    listed = served_files(restored)
    assert set(listed) == backed_up
    for name, entry in listed.items():
        assert entry["hashes"]["sha256"] == made[name].sha256
        assert_serves_verified(restored, entry)
    restored.stop()

    # The backup is a consistent data directory.
    check = cli(harness, "fsck", "--data-dir", str(dest), "--min-age", "0")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "\n0 orphan blobs\n" in check.stdout


def test_backup_refuses_a_non_empty_destination(harness, artifacts):
    assert harness.ingest(make_wheel(artifacts, "demo", "1.0").path).returncode == 0
    dest = harness.path("occupied")
    (dest / "keep.txt").write_text("mine")
    proc = cli(harness, "backup", str(dest), "--data-dir", str(harness.data_dir))
    assert proc.returncode == 2
    assert "not an empty directory" in proc.stderr
    assert sorted(p.name for p in dest.iterdir()) == ["keep.txt"]

    if wfbackend.BACKEND == "pg-s3":
        return  # every data directory the suite names has a database there
    missing = cli(harness, "backup", str(harness.root / "b"), "--data-dir",
                  str(harness.root / "no-such-data"))
    assert missing.returncode == 2
    assert "not a wheelforge data directory" in missing.stderr


@pytest.mark.default_backend_only(
    reason="about local files: reflinks, hard links and inodes of DATA_DIR/blobs (an S3 store's "
           "backup copies every object, --link too: test_maintenance_backends.py)")
def test_backup_copies_by_default_and_hard_links_only_with_link(harness, artifacts):
    wheel = make_wheel(artifacts, "bk-pkg", "1.0", value="restored from the backup")
    assert harness.ingest(wheel.path).returncode == 0
    data = harness.data_dir
    shas = (wheel.sha256, wheel.metadata_sha256)

    copied = harness.root / "copied"
    proc = cli(harness, "backup", str(copied), "--data-dir", str(data))
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"2 copied \(\d+ as reflinks\), 0 hard-linked", proc.stdout), proc.stdout
    for sha in shas:
        live, backup = blob_path(data, sha).stat(), backup_blob(copied, sha).stat()
        assert (live.st_dev, live.st_ino) != (backup.st_dev, backup.st_ino), f"{sha} is shared"
        assert live.st_nlink == 1 and backup.st_nlink == 1, (live.st_nlink, backup.st_nlink)
        assert stat.S_IMODE(backup.st_mode) == 0o444
    info = tomllib.loads((copied / "BACKUP-INFO").read_text())
    assert (info["copied"], info["hardlinked"]) == (2, 0), info

    linked = harness.root / "linked"
    proc = cli(harness, "backup", str(linked), "--link", "--data-dir", str(data))
    assert proc.returncode == 0, proc.stderr
    assert "0 copied (0 as reflinks), 2 hard-linked" in proc.stdout, proc.stdout
    assert "damage to one is damage to both" in proc.stdout, proc.stdout
    for sha in shas:
        live, backup = blob_path(data, sha).stat(), backup_blob(linked, sha).stat()
        assert (live.st_dev, live.st_ino) == (backup.st_dev, backup.st_ino)
        assert live.st_nlink == 2  # the live name and the backup's
    help_text = cli(harness, "backup", "--help").stdout
    assert "--link" in help_text and "corruption of one is corruption of both" in " ".join(
        help_text.split()
    ), help_text

    # The live file goes bad: the copy does not, the hard link does.
    flip_byte(blob_path(data, wheel.sha256))
    assert sha256_hex(backup_blob(copied, wheel.sha256).read_bytes()) == wheel.sha256
    assert sha256_hex(backup_blob(linked, wheel.sha256).read_bytes()) != wheel.sha256
    check = cli(harness, "fsck", "--data-dir", str(copied), "--min-age", "0")
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.endswith("ok\n"), check.stdout
    bad = cli(harness, "fsck", "--data-dir", str(linked), "--min-age", "0")
    assert bad.returncode == 1 and f"corrupt blob {wheel.sha256}" in bad.stdout, bad.stdout

    # Restore: serve the backup; pip installs the intact file from it.
    restored = Server(harness.binary, copied, harness.root / "restored.log", [])
    harness.servers.append(restored)
    restored.start()
    python = PIP_PYTHONS["23.2.1"]
    if not python.exists():
        pytest.skip(f"{python} (pip 23.2.1) is not installed")
    target = harness.path("target")
    proc = run(
        [python, "-m", "pip", "install", "--target", target, *pip_args(restored.url + "/simple/"),
         "bk-pkg==1.0"],
        timeout=120,
        cwd=harness.path("pip-cwd"),
    )
    assert proc.returncode == 0, f"pip install from the restored backup:\n{proc.stdout}{proc.stderr}"
    value = run(
        [python, "-c", "import bk_pkg; print(bk_pkg.VALUE)"],
        cwd=harness.path("pip-cwd"),
        env=clean_env(PYTHONPATH=str(target)),
    )
    assert value.stdout.strip() == "restored from the backup", value.stdout + value.stderr


# ---------------------------------------------------------------------------------------------
# gc


def test_gc_removes_orphans_and_deleted_files_blobs_only(harness, artifacts):
    wheel = make_wheel(artifacts, "gc-pkg", "1.0")
    sdist = make_sdist(artifacts, "gc-pkg", "1.0")
    assert wheel.metadata == sdist.metadata  # one METADATA blob, referenced by both rows
    assert harness.ingest(wheel.path, sdist.path).returncode == 0
    orphan = write_blob(harness.data_dir, os.urandom(300))
    data = str(harness.data_dir)

    # Fresh orphans are kept by default: they may belong to an upload in progress.
    kept = cli(harness, "gc", "--data-dir", data)
    assert kept.returncode == 0, kept.stderr
    assert blob_path(harness.data_dir, orphan).exists()
    assert "1 younger than" in kept.stdout

    dry = cli(harness, "gc", "--data-dir", data, "--min-age", "0", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"would remove {orphan}" in dry.stdout
    assert blob_path(harness.data_dir, orphan).exists()

    assert cli(harness, "delete", "--data-dir", data, wheel.filename).returncode == 0
    gc = cli(harness, "gc", "--data-dir", data, "--min-age", "0")
    assert gc.returncode == 0, gc.stderr
    assert f"removed {orphan}" in gc.stdout
    assert f"removed {wheel.sha256}" in gc.stdout
    assert not blob_path(harness.data_dir, orphan).exists()
    assert not blob_path(harness.data_dir, wheel.sha256).exists()
    for sha in (sdist.sha256, sdist.metadata_sha256):
        assert blob_path(harness.data_dir, sha).exists(), f"gc removed referenced blob {sha}"

    server = harness.serve()
    listed = served_files(server)
    assert set(listed) == {sdist.filename}
    assert_serves_verified(server, listed[sdist.filename])


# ---------------------------------------------------------------------------------------------
# fsck


def test_fsck_detects_corrupt_and_missing_blobs_and_repair_quarantines(harness, artifacts):
    damaged = make_wheel(artifacts, "fsck-a", "1.0")
    lost = make_wheel(artifacts, "fsck-b", "1.0")
    assert harness.ingest(damaged.path, lost.path).returncode == 0
    data = harness.data_dir
    orphan = write_blob(data, b"nobody references this")

    clean = cli(harness, "fsck", "--data-dir", str(data))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "checked 4 blobs referenced by 2 files" in clean.stdout

    flip_byte(blob_path(data, damaged.sha256))
    blob_path(data, lost.sha256).unlink()
    proc = cli(harness, "fsck", "--data-dir", str(data), "--min-age", "0", *VERIFY)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"corrupt blob {damaged.sha256}" in proc.stdout
    assert f"missing blob {lost.sha256}" in proc.stdout
    assert f"orphan blob {orphan}" in proc.stdout
    for f in (damaged, lost):
        assert f"wheelforge delete --data-dir {data} {f.filename}" in proc.stdout
    assert blob_path(data, damaged.sha256).exists(), "fsck without --repair changed the store"

    repair = cli(harness, "fsck", "--data-dir", str(data), "--min-age", "0", "--repair", *VERIFY)
    assert repair.returncode == 1, "rows without their blob are still a problem"
    quarantined = list((data / "quarantine").iterdir())
    assert [p.name.split(".")[0] for p in quarantined] == [damaged.sha256]
    assert sha256_hex(quarantined[0].read_bytes()) != damaged.sha256
    assert not blob_path(data, damaged.sha256).exists()
    assert not blob_path(data, orphan).exists()
    assert f"removed orphan blob {orphan}" in repair.stdout

    # Rows are never removed by fsck; the printed commands do it.
    assert set(harness.filenames()) == {damaged.filename, lost.filename}
    for f in (damaged, lost):
        assert cli(harness, "delete", "--data-dir", str(data), f.filename).returncode == 0
    final = cli(harness, "fsck", "--data-dir", str(data))
    assert final.returncode == 0, final.stdout


def page_views(server, project: str) -> dict[str, tuple[str, str]]:
    """Every view of a project that lists its files: (ETag, body) by target and Accept."""
    out = {}
    for target, accept in (
        (f"/simple/{project}/", JSON_TYPE),
        (f"/simple/{project}/", "text/html"),
        (f"/cpu/simple/{project}/", JSON_TYPE),
        (f"/cpu/torch2.8/simple/{project}/", "text/html"),
        (f"/project/{project}/", "text/html"),
        (f"/api/projects/{project}/variants", "application/json"),
    ):
        resp = server.get(target, {"Accept": accept})
        assert resp.status == 200, f"GET {target} -> {resp.status}: {resp.text[:200]}"
        out[f"{target} ({accept})"] = (resp.header("ETag") or "", resp.text)
    return out


def test_fsck_repair_while_serving_withdraws_damaged_files_and_reingest_heals_them(
    harness, tokens, artifacts
):
    from test_publish import output_of, twine

    server = harness.serve()
    token = tokens["upload"]
    data = harness.data_dir
    project = "heal-pkg"
    # Healed by: PUT, twine, `wheelforge ingest` (its METADATA blob is the damaged one), and a
    # blob copied back from a backup followed by fsck --repair (its blob is gone).
    by_put, by_twine, by_ingest, from_backup, intact = (
        make_wheel(artifacts / v, project, v, padding=30_000)
        for v in ("1.0", "1.1", "1.2", "1.3", "2.0")
    )
    damaged = (by_put, by_twine, by_ingest, from_backup)
    for w in (*damaged, intact):
        assert server.put_file(w, token).status == 201
    entries = {w.filename: server.file_entry(project, w.filename) for w in (*damaged, intact)}
    urls = {name: path_of(e["url"]) for name, e in entries.items()}
    views = page_views(server, project)
    backup = harness.root / "backup"
    assert cli(harness, "backup", str(backup), "--data-dir", str(data)).returncode == 0

    flip_byte(blob_path(data, by_put.sha256))
    flip_byte(blob_path(data, by_twine.sha256))
    flip_byte(blob_path(data, by_ingest.metadata_sha256))
    blob_path(data, from_backup.sha256).unlink()

    repair = cli(harness, "fsck", "--data-dir", str(data), "--min-age", "0", "--repair", *VERIFY)
    assert repair.returncode == 1, repair.stdout + repair.stderr
    for w in damaged:
        assert f"withdrew {w.filename} (damaged" in repair.stdout, repair.stdout
    assert f"withdrew {intact.filename}" not in repair.stdout

    def damaged_answer(target: str, name: str) -> str:
        resp = server.get(target)
        assert resp.status == 503, f"GET {target} -> {resp.status} {resp.text[:200]!r}"
        assert name in resp.text and "damaged" in resp.text and "backup" in resp.text, resp.text
        return resp.text

    # At once: the blobs are gone from the store, so their URLs cannot serve them. (A redirect
    # to the object store, pg-s3's file serving, reads no object: there they answer 503 from
    # the catalog poll on, checked below.)
    if wfbackend.BACKEND == "default":
        for w in (by_put, by_twine, from_backup):
            damaged_answer(urls[w.filename], w.filename)
        damaged_answer(urls[by_ingest.filename] + ".metadata", by_ingest.filename)

    # Within the server's catalog poll: every view drops them, their ETags change.
    def withdrawn() -> bool:
        listed = {f["filename"] for f in server.project_json(project)["files"]}
        return listed == {intact.filename}

    assert wait_for(withdrawn, timeout=10), server.project_json(project)
    now = page_views(server, project)
    for view, (etag, body) in now.items():
        assert etag != views[view][0], f"{view}: the ETag did not change"
        for w in damaged:
            assert w.filename not in body, f"{view} still offers {w.filename}"
        if "variants" not in view:
            assert intact.filename in body, f"{view} lost the intact file"
    for w in damaged:
        damaged_answer(urls[w.filename], w.filename)
        damaged_answer(urls[w.filename] + ".metadata", w.filename)
    assert_serves_verified(server, dict(entries[intact.filename], project=project))

    # Healing: the same bytes, by every path.
    assert server.put_file(by_put, token).status == 201
    proc = twine(harness, server.url + "/legacy/", token, [by_twine.path])
    assert proc.returncode == 0, output_of(proc)
    proc = harness.ingest(by_ingest.path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"restored {by_ingest.path}" in proc.stdout, proc.stdout
    blob_path(data, from_backup.sha256).replace_bytes(
        backup_blob(backup, from_backup.sha256).read_bytes())
    again = cli(harness, "fsck", "--data-dir", str(data), "--min-age", "0", "--repair")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"blob {from_backup.sha256} is intact again" in again.stdout, again.stdout

    # Served again at the same URLs with the same bytes; the pages are what they were.
    def all_back() -> bool:
        listed = {f["filename"] for f in server.project_json(project)["files"]}
        return listed == set(entries)

    assert wait_for(all_back, timeout=10), server.project_json(project)
    for name, entry in entries.items():
        assert server.file_entry(project, name) == entry, name
        assert_serves_verified(server, dict(entry, project=project))
    assert {view: etag for view, (etag, _) in page_views(server, project).items()} == {
        view: etag for view, (etag, _) in views.items()
    }
    final = cli(harness, "fsck", "--data-dir", str(data), "--min-age", "0")
    assert final.returncode == 0 and final.stdout.endswith("ok\n"), final.stdout
