"""The audit trail: uploads (twine, curl), yanks, unyanks, deletions, claims, token creation
and revocation record who (token id and description), when, from which address and what;
`wheelforge audit [--project] [--since]` and `GET /admin/audit` show it; it and the tokens'
expiry survive `wheelforge backup` and a server started on the backup. Free text that reaches
it (yank reasons, token descriptions) cannot hold control characters, so no value can pass for
rows of its own; rows stored before that print escaped, one line each."""

from __future__ import annotations

import datetime
import re
import sqlite3
import urllib.parse

import pytest

import wfbackend
from test_claims import admin_post, new_token
from test_publish import output_of, twine
from test_tokens import age_token, token_rows
from test_ui import form_token, login, origin, post
from wfhelpers import Server, curl, curl_upload, make_wheel, wait_for


def audit_rows(harness, *args: str, data_dir=None) -> list[list[str]]:
    proc = harness.cli("audit", "--data-dir", str(data_dir or harness.data_dir), *args)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["TIME", "ACTION", "ACTOR", "ADDRESS", "PROJECT", "TARGET",
                                "DETAIL"], lines[0]
    return [line.split() for line in lines[1:]]


def describe(harness, *args: str) -> tuple[int, str]:
    """A token with a description: (id, secret)."""
    proc = harness.cli("token", "create", "--data-dir", str(harness.data_dir), *args)
    assert proc.returncode == 0, proc.stderr
    return int(re.search(r"#(\d+)", proc.stderr).group(1)), proc.stdout.strip().splitlines()[-1]


def test_every_change_is_recorded_with_who_when_where_and_what(harness, artifacts):
    admin = harness.token("admin")
    up_id, up = describe(harness, "--scope", "upload", "--description", "ci-uploader")
    server = harness.serve()
    started = datetime.datetime.now(datetime.timezone.utc)
    one = make_wheel(artifacts, "audit-pkg", "1.0")
    two = make_wheel(artifacts, "audit-pkg", "2.0")
    proc = twine(harness, server.url + "/legacy/", up, [one.path])
    assert proc.returncode == 0, output_of(proc)
    assert curl_upload(server, harness.root, two.path, token=up).status == 201
    # A refused upload (the same name, other bytes) records nothing.
    clash = make_wheel(artifacts / "clash", "audit-pkg", "2.0", value="other bytes")
    assert curl_upload(server, harness.root, clash.path, token=up).status == 409

    assert admin_post(server, "/admin/yank", up, "project=audit-pkg&version=2.0&reason=abi").status == 200
    assert admin_post(server, "/admin/unyank", up, "project=audit-pkg&version=2.0").status == 200
    r = server.request("DELETE", f"/admin/files/{one.filename}", {"Authorization": f"Bearer {admin}"})
    assert r.status == 200, r.text
    assert admin_post(server, "/admin/projects/audit-pkg/claim", admin).status == 200
    made = admin_post(server, "/admin/tokens", admin, "scope=read&description=dashboard")
    assert made.status == 201
    assert admin_post(server, f"/admin/tokens/{made.json()['id']}/revoke", admin).status == 200
    assert harness.cli("yank", "--data-dir", str(harness.data_dir), "audit-pkg", "2.0",
                       "--reason", "from-the-shell").returncode == 0

    # The command line: newest first, the project's entries only with --project.
    rows = audit_rows(harness, "--project", "audit-pkg")
    assert [r[1] for r in rows] == ["yank", "claim", "delete", "unyank", "yank", "upload",
                                    "upload"], rows
    by_action = {}
    for r in reversed(rows):
        by_action.setdefault(r[1], r)
    upload = by_action["upload"]
    assert upload[2] == f"token:{up_id}" and upload[3] == "(ci-uploader)", upload
    assert upload[4] == "127.0.0.1" and upload[5] == "audit-pkg" and upload[6] == one.filename
    assert datetime.datetime.fromisoformat(upload[0].rstrip("Z")).replace(
        tzinfo=datetime.timezone.utc) >= started.replace(microsecond=0)
    shell = rows[0]
    assert shell[2] == "cli" and shell[3].startswith("local:"), shell
    everything = audit_rows(harness)
    actions = [r[1] for r in everything]
    assert actions.count("token-create") == 3 and actions.count("token-revoke") == 1, actions
    assert audit_rows(harness, "--since", "2999-01-01") == []
    assert len(audit_rows(harness, "--since", "1h")) == len(everything)

    # Bad values: exit 2 with the reason.
    for args, message in [(["--since", "last-week"], "invalid time 'last-week'"),
                          (["--project", "..x"], "not a valid project name"),
                          (["--limit", "0"], "--limit")]:
        proc = harness.cli("audit", "--data-dir", str(harness.data_dir), *args)
        assert proc.returncode != 0 and message in proc.stderr, (args, proc.stderr)

    # The admin API: the same entries as JSON; admins only.
    r = server.get("/admin/audit?project=audit-pkg&since=1d", {"Authorization": f"Bearer {admin}"})
    assert r.status == 200, r.text
    entries = r.json()["entries"]
    assert [e["action"] for e in entries] == [r[1] for r in rows]
    first_upload = entries[-1]
    assert first_upload["token_id"] == up_id and first_upload["token_description"] == "ci-uploader"
    assert first_upload["address"] == "127.0.0.1"
    assert f"sha256={one.sha256}" in first_upload["detail"]
    assert entries[-3]["detail"] == "reason: abi"
    assert server.get("/admin/audit", {"Authorization": f"Bearer {up}"}).status == 403

    # The project page tells admins (HTTP Basic here, as curl sends it) who uploaded each file.
    page = curl(["-u", f"__token__:{admin}", server.url + "/project/audit-pkg/"], harness.root)
    assert page.status == 200
    assert f"by token #{up_id} (ci-uploader)" in page.body, page.body
    for who in ([], ["-u", f"__token__:{up}"]):
        page = curl([*who, server.url + "/project/audit-pkg/"], harness.root)
        assert page.status == 200 and "uploaded-by" not in page.body and "ci-uploader" not in page.body
    r = server.get("/admin/audit?since=soon", {"Authorization": f"Bearer {admin}"})
    assert r.status == 400 and "invalid time 'soon'" in r.text


def test_audit_and_token_expiry_survive_backup_and_restore(harness, artifacts):
    up_id, up = describe(harness, "--scope", "upload", "--description", "kept",
                         "--expires", "30d")
    old_id, old = describe(harness, "--scope", "read", "--expires", "2099-06-01")
    server = harness.serve()
    wheel = make_wheel(artifacts, "bk-audit-pkg", "1.0")
    assert curl_upload(server, harness.root, wheel.path, token=up).status == 201
    assert admin_post(server, "/admin/yank", up, "project=bk-audit-pkg&version=1.0").status == 200
    age_token(harness, old_id)  # its time has passed
    server.stop()  # writes the last uses it held back
    before_rows = audit_rows(harness)
    before_tokens = token_rows(harness)

    backup = harness.root / "backup"
    proc = harness.cli("backup", str(backup), "--data-dir", str(harness.data_dir))
    assert proc.returncode == 0, proc.stderr
    wfbackend.restore_backup(backup)  # pg-s3: pg_restore of its dump, its blobs into a bucket
    assert audit_rows(harness, data_dir=backup) == before_rows
    restored_tokens = token_rows_of(harness, backup)
    assert restored_tokens == before_tokens
    assert restored_tokens[up_id]["EXPIRES"] != "-" and restored_tokens[old_id]["STATE"] == "expired"

    # A server on the backup: the expired token is refused saying so, the other works, and the
    # trail goes on.
    restored = Server(harness.binary, backup, harness.root / "restored.log", [], None)
    harness.servers.append(restored)  # stopped with the harness
    restored.start()
    later = make_wheel(artifacts, "bk-audit-pkg", "2.0")
    refused = curl_upload(restored, harness.root, later.path, token=old)
    assert refused.status == 401 and f"token #{old_id} expired at" in refused.body, refused.body
    assert curl_upload(restored, harness.root, later.path, token=up).status == 201
    assert wait_for(lambda: len(audit_rows(harness, data_dir=backup)) == len(before_rows) + 1)


def token_rows_of(harness, data_dir):
    original = harness.data_dir
    harness.data_dir = data_dir
    try:
        return token_rows(harness)
    finally:
        harness.data_dir = original


def without_last_used(rows):
    return {token_id: {k: v for k, v in row.items() if k != "LAST-USED"}
            for token_id, row in rows.items()}


# A reason that would print as a row of its own: a deletion "by cli".
FORGED = "abi\r\n2026-01-01T00:00:00Z  delete        cli          local:root           audit-pkg"


def test_control_characters_in_free_text_are_refused_everywhere(harness, artifacts):
    admin = harness.token("admin")
    up_id, up = describe(harness, "--scope", "upload")
    server = harness.serve()
    wheel = make_wheel(artifacts, "ctl-pkg", "1.0")
    assert curl_upload(server, harness.root, wheel.path, token=up).status == 201
    before = audit_rows(harness)
    tokens_before = token_rows(harness)

    # HTTP: 400 naming the field, for the yank's reason and the token's description.
    for reason in (FORGED, "tab\there", "esc\x1b[2J", "nel\u0085", "del\x7f"):
        body = urllib.parse.urlencode({"project": "ctl-pkg", "version": "1.0", "reason": reason})
        r = admin_post(server, "/admin/yank", up, body)
        assert r.status == 400, (reason, r.status, r.text)
        assert "reason must not contain control characters" in r.text, r.text
    r = admin_post(server, "/admin/tokens", admin,
                   urllib.parse.urlencode({"scope": "read", "description": "ci\nfake row"}))
    assert r.status == 400 and "description must not contain control characters (a line feed" \
        in r.text, r.text
    # The web UI's token form says so too.
    cookie = login(server, admin)
    resp = post(server, "/tokens/", {"csrf": form_token(server, cookie), "scope": "read",
                                     "description": "ui\r\nrow"},
                {"Cookie": cookie, **origin(server)})
    assert resp.status == 400, resp.text
    assert "description must not contain control characters (a carriage return" in resp.text

    # The command line: exit 2 naming the option, nothing done.
    proc = harness.cli("yank", "--data-dir", str(harness.data_dir), "ctl-pkg", "1.0",
                       "--reason", FORGED)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "--reason must not contain control characters (a carriage return at byte 4)" \
        in proc.stderr, proc.stderr
    proc = harness.cli("token", "create", "--data-dir", str(harness.data_dir), "--scope", "read",
                       "--description", "x\ny")
    assert proc.returncode == 2 and "--description must not contain control characters" \
        in proc.stderr, proc.stderr
    assert "wf_" not in proc.stdout

    assert audit_rows(harness) == before
    # No token was created or changed (the refused requests still count as the admin token's use).
    assert without_last_used(token_rows(harness)) == without_last_used(tokens_before)
    assert not server.project_json("ctl-pkg")["files"][0].get("yanked")
    # Printable text, UTF-8 included, still goes through.
    body = urllib.parse.urlencode({"project": "ctl-pkg", "version": "1.0",
                                   "reason": "ABI break — use 1.1"})
    assert admin_post(server, "/admin/yank", up, body).status == 200
    assert " ".join(audit_rows(harness)[0]).endswith("reason: ABI break — use 1.1")


@pytest.mark.default_backend_only(reason="writes rows as an older wheelforge (SQLite only) "
                                  "left them, straight into wheelforge.db")
def test_older_rows_with_control_characters_print_escaped_on_one_line(harness):
    harness.token("admin")  # makes the catalog
    conn = sqlite3.connect(harness.data_dir / "wheelforge.db", timeout=10)
    try:
        with conn:
            conn.execute(
                "INSERT INTO audit (at, action, token_id, token_description, origin, address,"
                " project, target, detail) VALUES (?, 'yank', 7, ?, 'http', '127.0.0.1',"
                " 'audit-pkg', 'audit_pkg-1.0-py3-none-any.whl', ?)",
                (1_800_000_000_000_000, "ci\x1b[31m", "reason: " + FORGED))
            conn.execute("UPDATE tokens SET description = ? WHERE id = 1", ("old\r\nrow\t\x85",))
    finally:
        conn.close()
    proc = harness.cli("audit", "--data-dir", str(harness.data_dir))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    yanks = [line for line in lines if " yank " in line]
    assert len(yanks) == 1, lines
    assert "delete" not in [line.split()[1] for line in lines[1:]], lines
    assert yanks[0].endswith("reason: abi\\r\\n2026-01-01T00:00:00Z  delete        cli"
                             "          local:root           audit-pkg"), yanks[0]
    assert "token:7 (ci\\x1b[31m)" in yanks[0] and "\x1b" not in proc.stdout, yanks[0]
    assert len(lines) == 3, lines  # the header, the token's creation, the yank

    listing = harness.cli("token", "list", "--data-dir", str(harness.data_dir))
    assert listing.returncode == 0, listing.stderr
    assert len(listing.stdout.splitlines()) == 2, listing.stdout
    assert listing.stdout.splitlines()[1].endswith("old\\r\\nrow\\t\\u0085"), listing.stdout
