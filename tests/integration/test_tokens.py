"""Token lifecycle: expiry (`token create --expires`), description, creator and last use, shown
by `token list` and the admin API; expired tokens answer 401 saying so, on uploads (twine,
curl) and on reads (pip, curl) of a private index; admins create, list and revoke tokens over
HTTP. And the yank rights of upload tokens: their own project's files, never another's, and
never a delete. The web UI says when a token expired, as the API does; a token revoked while
its upload is in flight stores nothing. Driven with twine, pip, curl and raw HTTP against the
real server."""

from __future__ import annotations

import datetime
import http.client
import re

from test_claims import admin_post, new_token
from test_pip import PIP_TIMEOUT, pip_python_or_skip
from test_publish import output_of, twine
from test_ui import basic, login, origin, post
from wfhelpers import (PIP_PYTHONS, assert_nothing_stored, catalog_execute, catalog_query, curl,
                       curl_upload, make_wheel,
                       page_etags, pip_args, put_awaiting_body, run, wait_for)


def token_rows(harness) -> dict[int, dict[str, str]]:
    """`wheelforge token list`, by id: its columns by header name."""
    proc = harness.cli("token", "list", "--data-dir", str(harness.data_dir))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = lines[0].split()
    assert header[:8] == ["ID", "SCOPE", "PROJECT", "STATE", "CREATED", "CREATED-BY", "EXPIRES",
                          "LAST-USED"], lines[0]
    rows = {}
    for line in lines[1:]:
        parts = line.split(None, 8)
        row = dict(zip(header, parts + [""] * (9 - len(parts))))
        rows[int(row["ID"])] = row
    return rows


def age_token(harness, token_id: int) -> None:
    """Moves a token's expiry to a second ago, as if its time had passed (the server sees the
    change at its next look at the catalog)."""
    past = int((datetime.datetime.now(datetime.timezone.utc).timestamp() - 1) * 1_000_000)
    catalog_execute(harness.data_dir,
                    f"UPDATE tokens SET expires_at = {int(past)} WHERE id = {int(token_id)}")


def create(harness, *args: str):
    return harness.cli("token", "create", "--data-dir", str(harness.data_dir), *args)


def test_expires_description_and_creator_are_listed(harness):
    proc = create(harness, "--scope", "upload", "--expires", "90d", "--description", "ci uploads")
    assert proc.returncode == 0, proc.stderr
    token_id = int(re.search(r"#(\d+)", proc.stderr).group(1))
    expected = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=90)).date()
    assert f"expires {expected.isoformat()}" in proc.stderr, proc.stderr
    dated = create(harness, "--scope", "read", "--expires", "2099-12-31")
    assert dated.returncode == 0, dated.stderr
    forever = create(harness, "--scope", "admin")
    assert forever.returncode == 0, forever.stderr

    rows = token_rows(harness)
    row = rows[token_id]
    assert row["STATE"] == "active"
    assert row["CREATED-BY"] == "cli"
    assert row["EXPIRES"].startswith(expected.isoformat()), row
    assert row["LAST-USED"] == "-"
    assert row["DESCRIPTION"] == "ci uploads"
    assert rows[token_id + 1]["EXPIRES"] == "2099-12-31T00:00:00Z"
    assert rows[token_id + 2]["EXPIRES"] == "-"


def test_bad_expires_values_are_refused_and_create_nothing(harness):
    before = token_rows(harness)
    for value, message in [
        ("soon", "invalid expiry 'soon'"),
        ("0d", "is zero"),
        ("-3d", "invalid expiry '-3d'"),
        ("5y", "invalid expiry '5y'"),
        ("2001-01-01", "in the past"),
        ("2099-02-30", "invalid expiry '2099-02-30'"),
        ("2099-01-01T25:00", "invalid expiry"),
    ]:
        proc = create(harness, "--scope", "upload", "--expires", value)
        assert proc.returncode == 2, (value, proc.stdout, proc.stderr)
        assert message in proc.stderr, (value, proc.stderr)
        assert "wf_" not in proc.stdout
    assert token_rows(harness) == before


def test_expired_token_gets_401_saying_so_on_upload_and_read(harness, artifacts):
    up_id, up = new_token(harness, "upload")
    rd_id, rd = new_token(harness, "read")
    server = harness.serve("--private", "true")
    wheel = make_wheel(artifacts, "exp-pkg", "1.0")
    proc = twine(harness, server.url + "/legacy/", up, [wheel.path])
    assert proc.returncode == 0, output_of(proc)

    age_token(harness, up_id)
    age_token(harness, rd_id)
    # The server notices at its next look at the catalog (a read, which changes nothing).
    assert wait_for(lambda: server.get("/simple/", {"Authorization": f"Bearer {up}"}).status == 401,
                    timeout=10), "the aged token was still accepted"
    later = make_wheel(artifacts, "exp-pkg", "2.0")
    before = harness.state()
    refused = curl_upload(server, harness.root, later.path, token=up)
    assert refused.status == 401, refused.body
    assert f"token #{up_id} expired at" in refused.body, refused.body
    assert refused.headers.get("www-authenticate", "").startswith("Basic")
    proc = twine(harness, server.url + "/legacy/", up, [later.path])
    assert proc.returncode != 0
    assert "401" in output_of(proc), output_of(proc)
    assert harness.state() == before, "a refused upload changed the store or the catalog"

    # Reads of a private index: curl sees the reason; pip is refused.
    r = curl(["-u", f"__token__:{rd}", server.url + "/simple/exp-pkg/"], harness.root)
    assert r.status == 401, r.body
    assert f"token #{rd_id} expired at" in r.body
    python = PIP_PYTHONS["24.2"]
    if python.exists():
        url = server.url.replace("http://", f"http://__token__:{rd}@") + "/simple/"
        proc = run([python, "-m", "pip", "download", "--no-deps", "--dest",
                    harness.path("dl"), *pip_args(url), "exp-pkg==1.0"],
                   timeout=PIP_TIMEOUT, cwd=harness.path("neutral"))
        assert proc.returncode != 0
        assert "No matching distribution found for exp-pkg==1.0" in proc.stderr, proc.stderr
        assert not list(harness.path("dl").iterdir())
        # pip was answered 401 (after curl's one), which it reports as nothing found.
        assert wait_for(lambda: server.log().count("GET /simple/exp-pkg/ -> 401") >= 2), \
            server.log_tail()


def test_last_use_is_recorded(harness, artifacts):
    up_id, up = new_token(harness, "upload")
    idle_id, _ = new_token(harness, "upload")
    server = harness.serve()
    wheel = make_wheel(artifacts, "used-pkg", "1.0")
    proc = twine(harness, server.url + "/legacy/", up, [wheel.path])
    assert proc.returncode == 0, output_of(proc)
    assert wait_for(lambda: token_rows(harness)[up_id]["LAST-USED"] != "-", timeout=10), \
        token_rows(harness)[up_id]
    used = datetime.datetime.fromisoformat(token_rows(harness)[up_id]["LAST-USED"].rstrip("Z"))
    assert abs(datetime.datetime.utcnow() - used) < datetime.timedelta(minutes=5)
    assert token_rows(harness)[idle_id]["LAST-USED"] == "-"


def last_used_micros(harness, token_id: int) -> int | None:
    rows = catalog_query(harness.data_dir,
                         f"SELECT last_used_at FROM tokens WHERE id = {int(token_id)}")
    value = rows[0][0]
    return None if value in (None, "") else int(value)


def test_uses_held_back_within_the_minute_are_written_when_the_server_stops(harness, artifacts):
    up_id, up = new_token(harness, "upload")
    server = harness.serve()
    first = make_wheel(artifacts, "stop-pkg", "1.0")
    assert curl_upload(server, harness.root, first.path, token=up).status == 201
    assert wait_for(lambda: last_used_micros(harness, up_id) is not None, timeout=10)
    written = last_used_micros(harness, up_id)
    # Used again within the minute: held back while the server runs...
    second = make_wheel(artifacts, "stop-pkg", "2.0")
    assert curl_upload(server, harness.root, second.path, token=up).status == 201
    # ...and written when it stops.
    assert server.stop() == 0
    assert last_used_micros(harness, up_id) > written


def test_admins_create_list_and_revoke_tokens_over_http(harness, artifacts):
    admin = harness.token("admin")
    _, upload = new_token(harness, "upload")
    server = harness.serve()
    r = admin_post(server, "/admin/tokens", admin,
                   "scope=upload&description=made+over+http&expires=30d")
    assert r.status == 201, r.text
    created = r.json()
    secret = created["token"]
    assert created["description"] == "made over http"
    assert created["created_by"].startswith("token:")
    assert created["expires_at"].startswith(
        (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=30)).date()
        .isoformat())

    # The new token uploads at once, with twine.
    wheel = make_wheel(artifacts, "http-tok-pkg", "1.0")
    proc = twine(harness, server.url + "/legacy/", secret, [wheel.path])
    assert proc.returncode == 0, output_of(proc)

    listing = server.get("/admin/tokens", {"Authorization": f"Bearer {admin}"})
    assert listing.status == 200
    assert secret not in listing.text and "hash" not in listing.text
    mine = [t for t in listing.json()["tokens"] if t["id"] == created["id"]]
    assert mine and mine[0]["state"] == "active"
    assert token_rows(harness)[created["id"]]["CREATED-BY"] == created["created_by"]

    # Only admins: an upload token is refused, naming the scope it needs.
    r = admin_post(server, "/admin/tokens", upload, "scope=admin")
    assert r.status == 403 and "needs 'admin'" in r.text
    r = admin_post(server, "/admin/tokens", admin, "scope=upload&expires=whenever")
    assert r.status == 400 and "invalid expiry 'whenever'" in r.text

    r = admin_post(server, f"/admin/tokens/{created['id']}/revoke", admin)
    assert r.status == 200 and r.json()["state"] == "revoked"
    later = make_wheel(artifacts, "http-tok-pkg", "2.0")
    proc = twine(harness, server.url + "/legacy/", secret, [later.path])
    assert proc.returncode != 0 and "401" in output_of(proc)
    assert admin_post(server, "/admin/tokens/9999/revoke", admin).status == 404


def yank(server, token: str, body: str, action: str = "yank"):
    return admin_post(server, f"/admin/{action}", token, body)


def test_upload_tokens_yank_their_own_projects_files(harness, artifacts):
    owner_id, owner = new_token(harness, "upload")
    _, other = new_token(harness, "upload")
    _, limited = new_token(harness, "upload", "yank-pkg")
    server = harness.serve()
    old = make_wheel(artifacts, "yank-pkg", "1.0", value="one")
    new = make_wheel(artifacts, "yank-pkg", "2.0", value="two")
    proc = twine(harness, server.url + "/legacy/", owner, [old.path, new.path])
    assert proc.returncode == 0, output_of(proc)
    others = make_wheel(artifacts, "other-yank-pkg", "1.0")
    assert curl_upload(server, harness.root, others.path, token=other).status == 201

    # Another uploader's token: 403 naming the rule, nothing yanked.
    r = yank(server, other, "project=yank-pkg&version=2.0&reason=not+mine")
    assert r.status == 403, r.text
    assert "may not yank files of project 'yank-pkg'" in r.text
    assert not server.file_entry("yank-pkg", new.filename).get("yanked")

    # The owner yanks 2.0: pip then takes 1.0 unless 2.0 is pinned.
    r = yank(server, owner, "project=yank-pkg&version=2.0&reason=broken")
    assert r.status == 200, r.text
    assert server.file_entry("yank-pkg", new.filename)["yanked"] == "broken"
    python = pip_python_or_skip("24.2")
    target = harness.path("target")
    proc = run([python, "-m", "pip", "install", "--target", target,
                *pip_args(server.url + "/simple/"), "yank-pkg"],
               timeout=PIP_TIMEOUT, cwd=harness.path("neutral"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(target.glob("yank_pkg-1.0.dist-info")), sorted(p.name for p in target.iterdir())

    # A token limited to the project unyanks; the other token cannot touch it either way.
    r = yank(server, other, "project=yank-pkg&version=2.0", "unyank")
    assert r.status == 403
    r = yank(server, limited, "project=yank-pkg&version=2.0", "unyank")
    assert r.status == 200, r.text
    assert not server.file_entry("yank-pkg", new.filename).get("yanked")
    # The limited token stays out of other projects.
    assert yank(server, limited, "project=other-yank-pkg&version=1.0").status == 403

    # Deleting stays an admin's: 403 for the owner, the file stays.
    r = server.request("DELETE", f"/admin/files/{new.filename}",
                       {"Authorization": f"Bearer {owner}"})
    assert r.status == 403 and "needs 'admin'" in r.text
    assert server.file_entry("yank-pkg", new.filename)
    # A read token may not yank at all.
    _, reader = new_token(harness, "read")
    r = yank(server, reader, "project=yank-pkg&version=1.0")
    assert r.status == 403 and "needs 'upload'" in r.text, r.text
    assert owner_id > 0


def test_expired_token_in_the_web_ui_says_it_expired_and_when(harness):
    admin_id, admin = new_token(harness, "admin")
    rd_id, rd = new_token(harness, "read")
    server = harness.serve("--private", "true")
    cookie = login(server, admin)  # a session made while the token was valid
    age_token(harness, admin_id)
    age_token(harness, rd_id)
    assert wait_for(lambda: server.get("/simple/", {"Authorization": f"Bearer {rd}"}).status == 401,
                    timeout=10), "the aged token was still accepted"
    rows = token_rows(harness)

    def says_expired(resp, token_id: int) -> None:
        expired_at = rows[token_id]["EXPIRES"][:19]  # the listing shows whole seconds
        assert resp.status == 401, resp.text[:500]
        assert f"token #{token_id} expired at {expired_at}" in resp.text, resp.text
        assert "unknown or was revoked" not in resp.text and "This index is private" not in resp.text

    # The tokens page, by the login session and by HTTP Basic.
    says_expired(server.get("/tokens/", {"Cookie": cookie}), admin_id)
    says_expired(server.get("/tokens/", basic(admin)), admin_id)
    # The project list of a private index.
    says_expired(server.get("/projects/", basic(rd)), rd_id)
    says_expired(server.get("/projects/", {"Cookie": cookie}), admin_id)
    # Logging in again with it.
    says_expired(post(server, "/login", {"token": rd, "next": "/"}, origin(server)), rd_id)
    # A token nobody knows still gets the general text.
    unknown = server.get("/tokens/", basic("wf_" + "x" * 43))
    assert unknown.status == 401 and "expired" not in unknown.text


def test_a_token_revoked_while_its_upload_is_in_flight_stores_nothing(harness, artifacts):
    up_id, up = new_token(harness, "upload")
    server = harness.serve()
    wheel = make_wheel(artifacts, "inflight-pkg", "1.0", padding=256 * 1024)
    data = wheel.data
    before = (harness.state(), page_etags(server, "inflight-pkg"))

    # The server checked the token and asks for the body.
    sock = put_awaiting_body(server, wheel.filename, up, len(data), timeout=30)
    try:
        half = len(data) // 2
        sock.sendall(data[:half])
        proc = harness.cli("token", "revoke", "--data-dir", str(harness.data_dir), str(up_id))
        assert proc.returncode == 0, proc.stderr
        sock.sendall(data[half:])
        resp = http.client.HTTPResponse(sock)
        resp.begin()
        body = resp.read().decode()
    finally:
        sock.close()
    assert resp.status == 401, body
    assert f"token #{up_id} was revoked" in body, body
    assert resp.getheader("WWW-Authenticate", "").startswith("Basic")
    assert_nothing_stored(harness.data_dir, server, "inflight-pkg", before,
                          "an upload whose token was revoked in flight")
    assert "inflight" not in " ".join(harness.filenames())
