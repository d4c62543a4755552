"""`wheelforge upstream check`: the outbound client (the one the upstream proxy uses) against nginx
serving a static PEP 503 tree on loopback, over HTTP and HTTPS with a CA made for the test."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from wfhelpers import make_server_cert, make_test_ca, make_wheel, write_static_index

pytestmark = pytest.mark.skipif(
    shutil.which("nginx") is None or shutil.which("openssl") is None,
    reason="nginx and openssl (Debian packages nginx, openssl) are needed",
)

# Basic auth on /private/ (user "mirror", password "s3cret-pw"), and redirects.
EXTRA = """
        location /private/ {
            auth_basic "upstream";
            auth_basic_user_file @HTPASSWD@;
            alias @ROOT@/;
        }
        location = /old/simple/ { return 301 /simple/; }
        location = /loop/ { return 302 /loop/; }
        location = /to-http/ { return 302 http://127.0.0.1:@HTTP_PORT@/simple/; }
"""


@pytest.fixture
def tree(harness, tmp_path):
    """A static index with one project, and its files."""
    artifacts = harness.path("artifacts")
    wheel = make_wheel(artifacts, "demo-pkg", "1.0")
    root = harness.path("tree")
    write_static_index(root, [wheel])
    return root


@pytest.fixture
def pki(harness):
    """A CA, a certificate for 127.0.0.1 and localhost, and one for another name."""
    d = harness.path("pki")
    ca = make_test_ca(d)
    return {"ca": ca[0], "good": make_server_cert(d, ca, "good"),
            "wrong": make_server_cert(d, ca, "wrong", "DNS:elsewhere.invalid")}


def extra_for(harness, root) -> str:
    htpasswd = harness.root / "htpasswd"
    hashed = subprocess.run(["openssl", "passwd", "-apr1", "s3cret-pw"], check=True,
                            capture_output=True, text=True).stdout.strip()
    htpasswd.write_text(f"mirror:{hashed}\n")
    return EXTRA.replace("@HTPASSWD@", str(htpasswd)).replace("@ROOT@", str(root))


def check(harness, *args: str):
    return harness.cli("upstream", "check", *args, timeout=60)


def field(out: str, name: str) -> str:
    match = re.search(rf"^{name}: (.*)$", out, re.M)
    assert match, f"no '{name}:' line in {out!r}"
    return match.group(1)


def test_http_index_and_project_pages(harness, tree):
    nginx = harness.nginx(tree, extra=extra_for(harness, tree))
    proc = check(harness, f"{nginx.url}/simple/")
    assert proc.returncode == 0, proc.stderr
    assert field(proc.stdout, "status") == "200"
    assert field(proc.stdout, "answered by") == f"{nginx.url}/simple/"
    assert field(proc.stdout, "tls").startswith("none")
    assert field(proc.stdout, "content-type").startswith("text/html")
    assert int(field(proc.stdout, "bytes")) == (tree / "simple" / "index.html").stat().st_size
    assert re.fullmatch(r"\d+ ms", field(proc.stdout, "time"))

    # A project's page, by any spelling of its name.
    proc = check(harness, f"{nginx.url}/simple", "Demo_Pkg")
    assert proc.returncode == 0, proc.stderr
    assert field(proc.stdout, "answered by") == f"{nginx.url}/simple/demo-pkg/"
    page = tree / "simple" / "demo-pkg" / "index.html"
    assert int(field(proc.stdout, "bytes")) == page.stat().st_size

    # One the index does not have: the status is shown and the check fails.
    proc = check(harness, f"{nginx.url}/simple/", "no-such-project")
    assert proc.returncode == 1
    assert field(proc.stdout, "status") == "404"
    assert "answered 404" in proc.stderr

    # What nginx received: one GET per check, with wheelforge's User-Agent.
    log = (nginx.prefix / "access.log").read_text()
    assert log.count('"GET /simple/ HTTP/1.1" 200') == 1, log
    assert '"GET /simple/demo-pkg/ HTTP/1.1" 200' in log, log
    assert re.search(r'"wheelforge/\d+\.\d+\.\d+"', log), log


def test_redirects_are_followed_and_loops_refused(harness, tree):
    nginx = harness.nginx(tree, extra=extra_for(harness, tree))
    proc = check(harness, f"{nginx.url}/old/simple/")
    assert proc.returncode == 0, proc.stderr
    assert field(proc.stdout, "answered by") == f"{nginx.url}/simple/"
    proc = check(harness, f"{nginx.url}/loop/")
    assert proc.returncode == 1
    assert "redirect loop" in proc.stderr, proc.stderr


def test_credentials_in_the_url(harness, tree):
    nginx = harness.nginx(tree, extra=extra_for(harness, tree))
    private = nginx.url.replace("http://", "http://mirror:s3cret-pw@") + "/private/simple/"
    proc = check(harness, private)
    assert proc.returncode == 0, proc.stderr
    assert field(proc.stdout, "status") == "200"
    assert int(field(proc.stdout, "bytes")) == (tree / "simple" / "index.html").stat().st_size
    assert "s3cret" not in proc.stdout + proc.stderr

    wrong = nginx.url.replace("http://", "http://mirror:wrong@") + "/private/simple/"
    proc = check(harness, wrong)
    assert proc.returncode == 1
    assert field(proc.stdout, "status") == "401"
    proc = check(harness, f"{nginx.url}/private/simple/")
    assert proc.returncode == 1
    assert field(proc.stdout, "status") == "401"


def test_https_needs_a_trusted_certificate_for_the_name(harness, tree, pki):
    nginx = harness.nginx(tree, tls=pki["good"], extra=extra_for(harness, tree))
    url = f"{nginx.https_url}/simple/"

    # Not signed by a CA of the system's store.
    proc = check(harness, url)
    assert proc.returncode == 1
    assert "certificate verify failed" in proc.stderr, proc.stderr
    assert "127.0.0.1" in proc.stderr

    # Trusted through --ca-file, by address and by name.
    proc = check(harness, url, "--ca-file", str(pki["ca"]))
    assert proc.returncode == 0, proc.stderr
    assert field(proc.stdout, "status") == "200"
    assert field(proc.stdout, "tls").startswith("verified")
    assert int(field(proc.stdout, "bytes")) == (tree / "simple" / "index.html").stat().st_size
    by_name = url.replace("127.0.0.1", "localhost")
    proc = check(harness, by_name, "--ca-file", str(pki["ca"]))
    assert proc.returncode == 0, proc.stderr
    assert field(proc.stdout, "answered by") == by_name

    # A redirect from https to http is refused.
    proc = check(harness, f"{nginx.https_url}/to-http/", "--ca-file", str(pki["ca"]))
    assert proc.returncode == 1
    assert "redirect from https to http refused" in proc.stderr, proc.stderr

    # A certificate of the trusted CA, for another name.
    other = harness.nginx(tree, tls=pki["wrong"])
    proc = check(harness, f"{other.https_url}/simple/", "--ca-file", str(pki["ca"]))
    assert proc.returncode == 1
    assert "certificate verify failed" in proc.stderr and "mismatch" in proc.stderr, proc.stderr

    # nginx received only the requests of the checks that passed verification.
    log = (nginx.prefix / "access.log").read_text() + (other.prefix / "access.log").read_text()
    assert log.count("GET /simple/ ") == 2, log


def test_unreachable_upstream_and_bad_arguments(harness, tree, pki):
    nginx = harness.nginx(tree)
    url = f"{nginx.url}/simple/"
    nginx.stop()
    proc = check(harness, url)
    assert proc.returncode == 1
    assert "cannot connect to 127.0.0.1:" in proc.stderr and "refused" in proc.stderr, proc.stderr

    for args in (["ftp://127.0.0.1/simple/"], ["not a url"], [url, "--ca-file", "/nonexistent.pem"],
                 [url, "bad name!"], [url, "--timeout", "soon"]):
        proc = check(harness, *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stderr.startswith("error: "), (args, proc.stderr)
