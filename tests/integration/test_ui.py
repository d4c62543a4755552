"""The web UI's HTTP behaviour, driven with plain HTTP against the real binary: redirects and
404s, escaping of hostile metadata, authorization of the builds pages, CSRF defences on every
state-changing POST, conditional and compressed answers, private mode. (The pages in a real
browser are tested by tests/ui/.)"""

from __future__ import annotations

import base64
import gzip
import re
import urllib.parse

import pytest

from wfhelpers import make_wheel

HOSTILE = '<script>alert("wf")</script>'


def basic(token: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"__token__:{token}".encode()).decode()}


def form(values: dict[str, str]) -> bytes:
    return urllib.parse.urlencode(values).encode()


def post(server, target: str, values: dict[str, str], headers: dict[str, str] | None = None):
    h = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
    return server.request("POST", target, h, form(values))


def origin(server) -> dict[str, str]:
    return {"Origin": server.url}


@pytest.fixture
def ui_server(harness, tokens, artifacts):
    harness.token("admin")
    server = harness.serve()
    wheel = make_wheel(artifacts, "Flash_Attn", "2.8.3+cu128torch2.8", tag="cp312-cp312-linux_x86_64")
    assert server.put_file(wheel, tokens["upload"]).status == 201
    old = make_wheel(artifacts, "flash-attn", "2.8.2+cu128torch2.8", tag="cp312-cp312-linux_x86_64")
    assert server.put_file(old, tokens["upload"]).status == 201
    resp = server.request(
        "POST", "/admin/yank",
        {"Authorization": f"Bearer {harness.token('admin')}",
         "Content-Type": "application/x-www-form-urlencoded"},
        form({"project": "flash-attn", "version": "2.8.2+cu128torch2.8", "reason": HOSTILE}),
    )
    assert resp.status == 200, resp.text
    return server


def login(server, token: str) -> str:
    """Logs in through the form; returns the session cookie ("wf_session=...")."""
    resp = post(server, "/login", {"token": token, "next": "/builds/"}, origin(server))
    assert resp.status == 303, resp.text
    cookie = resp.header("Set-Cookie")
    assert cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie, cookie
    assert "Secure" not in cookie  # plain HTTP
    return cookie.split(";", 1)[0]


def form_token(server, cookie: str) -> str:
    page = server.get("/builds/", {"Cookie": cookie})
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert match, page.text[:2000]
    return match.group(1)


def test_project_urls_redirect_to_the_normalized_name_and_unknown_is_404(ui_server):
    for target in ("/project/Flash_Attn/", "/project/flash-attn", "/project/FLASH.attn"):
        resp = ui_server.get(target)
        assert resp.status == 301, (target, resp.status)
        assert resp.header("Location") == "/project/flash-attn/"
    resp = ui_server.get("/project/Flash_Attn/?torch=2.8")
    assert resp.header("Location") == "/project/flash-attn/?torch=2.8"
    resp = ui_server.get("/project/flash-attn/")
    assert resp.status == 200 and resp.header("Content-Type").startswith("text/html")
    for target in ("/project/nope/", "/project/flash-attn/extra", "/project/..bad/"):
        resp = ui_server.get(target)
        assert resp.status == 404, (target, resp.status)
        assert "<h1>Not found</h1>" in resp.text and 'lang="en"' in resp.text


def test_hostile_metadata_and_queries_are_escaped(ui_server):
    page = ui_server.get("/project/flash-attn/").text
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(&quot;wf&quot;)&lt;/script&gt;" in page
    search = ui_server.get("/?q=" + urllib.parse.quote(HOSTILE)).text
    assert HOSTILE not in search and "&lt;script&gt;" in search
    # A hostile Host header does not reach the commands on the page.
    home = ui_server.get("/", {"Host": 'evil"><script>x</script>'}).text
    assert "<script>x" not in home and "http://localhost/simple/" in home
    # Pages forbid inline scripts outright.
    csp = ui_server.get("/").header("Content-Security-Policy")
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp


def test_builds_pages_need_an_admin_token(ui_server, tokens, harness):
    resp = ui_server.get("/builds/")
    assert resp.status == 303 and resp.header("Location") == "/login?next=/builds/"
    resp = ui_server.get("/jobs/1")
    assert resp.status == 303 and resp.header("Location") == "/login?next=/jobs/1"
    for scope in ("read", "upload"):
        resp = ui_server.get("/builds/", basic(tokens[scope]))
        assert resp.status == 403, (scope, resp.status)
        assert f"needs a token of scope admin; yours has scope {scope}" in resp.text
        resp = ui_server.get("/builds/", {"Cookie": login(ui_server, tokens[scope])})
        assert resp.status == 403
    resp = ui_server.get("/builds/", basic("wf_unknown"))
    assert resp.status == 401 and resp.header("WWW-Authenticate", ) is not None
    resp = ui_server.get("/builds/", basic(harness.token("admin")))
    assert resp.status == 200 and "build runner is not enabled" in resp.text
    cookie = login(ui_server, harness.token("admin"))
    resp = ui_server.get("/builds/", {"Cookie": cookie})
    assert resp.status == 200 and resp.header("Cache-Control") == "no-store"
    # A wrong token at the login form: 401 and the form again; the token is not logged.
    resp = post(ui_server, "/login", {"token": "wf_wrong-token-value"}, origin(ui_server))
    assert resp.status == 401 and "Unknown or revoked token" in resp.text
    log = ui_server.log()
    for value in ("wf_wrong-token-value", harness.token("admin"), tokens["read"], cookie.split("=", 1)[1]):
        assert value not in log


def test_cross_origin_posts_are_refused(ui_server, harness):
    admin = harness.token("admin")
    evil = {"Origin": "http://evil.example"}
    # Login from another site, or with neither Origin nor Referer.
    assert post(ui_server, "/login", {"token": admin}, evil).status == 403
    assert post(ui_server, "/login", {"token": admin}).status == 403
    assert post(ui_server, "/login", {"token": admin}, {"Referer": "http://evil.example/x"}).status == 403
    referer = post(ui_server, "/login", {"token": admin}, {"Referer": ui_server.url + "/login"})
    assert referer.status == 303
    cookie = login(ui_server, admin)
    csrf = form_token(ui_server, cookie)
    with_cookie = {"Cookie": cookie}
    # Signed in, but the form comes from elsewhere, or lacks this session's form token.
    resp = post(ui_server, "/builds/", {"csrf": csrf, "recipe": "x", "version": "1"}, {**with_cookie, **evil})
    assert resp.status == 403 and "not sent from a page of this server" in resp.text
    resp = post(ui_server, "/builds/", {"recipe": "x", "version": "1"}, {**with_cookie, **origin(ui_server)})
    assert resp.status == 403 and "form has expired" in resp.text
    resp = post(ui_server, "/jobs/1/cancel", {"csrf": "0" * 32}, {**with_cookie, **origin(ui_server)})
    assert resp.status == 403
    # HTTP Basic credentials are sent by browsers to any request too: same rules.
    resp = post(ui_server, "/jobs/1/retry", {}, {**basic(admin), **evil})
    assert resp.status == 403
    # Logout: cross-origin refused; same origin with the form token ends the session.
    assert post(ui_server, "/logout", {"csrf": csrf}, {**with_cookie, **evil}).status == 403
    resp = post(ui_server, "/logout", {"csrf": csrf}, {**with_cookie, **origin(ui_server)})
    assert resp.status == 303 and "Max-Age=0" in resp.header("Set-Cookie")
    assert ui_server.get("/builds/", with_cookie).status == 303


def test_pages_answer_conditional_and_compressed_requests(ui_server, tokens, artifacts):
    first = ui_server.get("/project/flash-attn/")
    etag = first.header("ETag")
    assert etag and first.header("Cache-Control") == "no-cache"
    assert ui_server.get("/project/flash-attn/", {"If-None-Match": etag}).status == 304
    zipped = ui_server.get("/project/flash-attn/", {"Accept-Encoding": "gzip"})
    assert zipped.header("Content-Encoding") == "gzip" and zipped.header("ETag") != etag
    assert gzip.decompress(zipped.body) == first.body
    home = ui_server.get("/")
    assert ui_server.get("/", {"If-None-Match": home.header("ETag")}).status == 304
    # A new upload is a new catalog generation: the page and its validator change.
    wheel = make_wheel(artifacts, "flash-attn", "2.8.4+cu128torch2.8", tag="cp312-cp312-linux_x86_64")
    assert ui_server.put_file(wheel, tokens["upload"]).status == 201
    again = ui_server.get("/project/flash-attn/", {"If-None-Match": etag})
    assert again.status == 200 and "2.8.4" in again.text
    # Static files: a content-addressed URL is immutable; the plain one revalidates.
    css = re.search(r'href="(/static/[0-9a-f]{16}/style\.css)"', first.text).group(1)
    resp = ui_server.get(css)
    assert resp.status == 200 and resp.header("Content-Type").startswith("text/css")
    assert "immutable" in resp.header("Cache-Control")
    assert ui_server.get(css, {"If-None-Match": resp.header("ETag")}).status == 304
    assert ui_server.get("/static/style.css").header("Cache-Control") == "no-cache"
    assert ui_server.get("/static/0000000000000000/style.css").status == 404
    assert ui_server.get("/static/nope.css").status == 404


def test_private_mode_needs_read_credentials_for_pages(harness, tokens, artifacts):
    server = harness.serve("--private", "true")
    wheel = make_wheel(artifacts, "secret-pkg", "1.0")
    assert server.put_file(wheel, tokens["upload"]).status == 201
    for target in ("/", "/project/secret-pkg/", "/?q=secret"):
        resp = server.get(target)
        assert resp.status == 401, (target, resp.status)
        assert resp.header("WWW-Authenticate", ) and "secret-pkg" not in resp.text
        assert server.get(target, basic(tokens["read"])).status == 200
    assert "secret-pkg" in server.get("/project/secret-pkg/", basic(tokens["read"])).text
    # A session from the login form counts as read credentials.
    cookie = login(server, tokens["read"])
    assert server.get("/project/secret-pkg/", {"Cookie": cookie}).status == 200
    # The login page and the (public) stylesheet stay reachable so that one can sign in.
    assert server.get("/login").status == 200
    assert server.get("/static/style.css").status == 200


def test_under_tls_urls_say_https_and_the_cookie_is_secure(harness, tmp_path):
    from test_security import _make_cert, _start_tls
    from wfhelpers import run

    cert, key = _make_cert(tmp_path)
    admin = harness.token("admin")
    proc, url = _start_tls(harness, cert, key)
    try:
        home = run(["curl", "-sS", "--cacert", str(cert), f"{url}/"])
        assert (f"pip install --extra-index-url {url}/simple/ --only-binary PROJECT PROJECT==VERSION"
                in home.stdout), home.stdout[-2000:]
        assert f"curl -sS &quot;{url}/api/resolve?project=PROJECT&amp;" in home.stdout
        resolve = run(["curl", "-sS", "--cacert", str(cert), f"{url}/api/resolve?torch=2.8.0%2Bcu128"])
        assert f'"index_url":"{url}/cu128/torch2.8/simple/"' in resolve.stdout.replace(" ", ""), resolve.stdout
        login = run(["curl", "-sS", "--cacert", str(cert), "-o", "/dev/null", "-D", "-",
                     "-H", f"Origin: {url}", "--data-urlencode", f"token={admin}", f"{url}/login"])
        cookie = next(line for line in login.stdout.splitlines() if line.lower().startswith("set-cookie:"))
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie, cookie
    finally:
        proc.terminate()
        assert proc.wait(20) == 0
