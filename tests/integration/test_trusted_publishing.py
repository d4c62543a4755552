"""Trusted publishing: a CI job's OIDC token, signed by a configured issuer, is exchanged at
/_/oidc/mint-token for an upload token of the one project whose trusted publisher its claims
match; twine uploads with that token. Two local OIDC issuers on loopback (a discovery document
and a JWKS served by http.server; RSA and P-256 keys made here with `cryptography`) sign
GitHub- and GitLab-shaped tokens. Every refusal is checked: wrong audience or issuer, expired,
not yet valid, alg none, a disallowed algorithm, an unknown key (after one refetch of the
JWKS, at most once per jwks_refetch_interval), a signature that does not verify, no matching
publisher, a token id used before (on PostgreSQL also at a second server). Publishers are
managed with the CLI and the admin API, both written to the audit trail."""

from __future__ import annotations

import base64
import concurrent.futures
import http.server
import json
import threading
import time
import uuid
from pathlib import Path

import pytest

import wfbackend
from test_claims import admin_post
from test_publish import output_of, twine
from wfhelpers import make_wheel

crypto = pytest.importorskip("cryptography")
from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature  # noqa: E402


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def uint(n: int) -> bytes:
    return n.to_bytes((n.bit_length() + 7) // 8, "big")


class Key:
    """A signing key and its JWK."""

    def __init__(self, alg: str, kid: str):
        self.alg = alg
        self.kid = kid
        if alg == "RS256":
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pub = self.private.public_key().public_numbers()
            self.jwk = {"kty": "RSA", "kid": kid, "use": "sig", "alg": alg,
                        "n": b64url(uint(pub.n)), "e": b64url(uint(pub.e))}
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            pub = self.private.public_key().public_numbers()
            self.jwk = {"kty": "EC", "kid": kid, "use": "sig", "alg": alg, "crv": "P-256",
                        "x": b64url(pub.x.to_bytes(32, "big")),
                        "y": b64url(pub.y.to_bytes(32, "big"))}

    def sign(self, data: bytes) -> bytes:
        if self.alg == "RS256":
            return self.private.sign(data, padding.PKCS1v15(), hashes.SHA256())
        r, s = decode_dss_signature(self.private.sign(data, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def jwt(key: Key, claims: dict, *, alg: str | None = None, kid: str | None = None,
        signature: bytes | None = None) -> str:
    header = {"typ": "JWT", "alg": alg or key.alg, "kid": kid or key.kid}
    signing_input = (b64url(json.dumps(header).encode()) + "." +
                     b64url(json.dumps(claims).encode()))
    sig = key.sign(signing_input.encode()) if signature is None else signature
    return signing_input + "." + b64url(sig)


class Issuer:
    """An OIDC issuer on loopback: its discovery document and JWKS; counts JWKS fetches."""

    def __init__(self, path: str, keys: list[Key]):
        self.keys = keys
        self.jwks_fetches = 0
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == path + "/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks"}
                elif self.path == path + "/jwks":
                    issuer.jwks_fetches += 1
                    body = {"keys": [k.jwk for k in issuer.keys]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def issuers():
    github = Issuer("", [Key("RS256", "gh-1")])
    gitlab = Issuer("/gitlab", [Key("ES256", "gl-1")])
    try:
        yield {"github": github, "gitlab": gitlab}
    finally:
        github.close()
        gitlab.close()


def github_claims(issuer: Issuer, **over) -> dict:
    now = int(time.time())
    claims = {
        "iss": issuer.url, "aud": "wheelforge", "iat": now, "nbf": now - 5, "exp": now + 300,
        "jti": str(uuid.uuid4()),
        "sub": "repo:example-org/alpha:environment:release",
        "repository": "example-org/alpha", "repository_owner": "example-org",
        "job_workflow_ref": "example-org/alpha/.github/workflows/release.yml@refs/tags/v1.0",
        "ref": "refs/tags/v1.0", "environment": "release", "event_name": "push",
    }
    claims.update(over)
    return claims


def gitlab_claims(issuer: Issuer, **over) -> dict:
    now = int(time.time())
    claims = {
        "iss": issuer.url, "aud": "wheelforge", "iat": now, "nbf": now, "exp": now + 300,
        "jti": str(uuid.uuid4()),
        "sub": "project_path:example-group/beta:ref_type:branch:ref:main",
        "namespace_path": "example-group", "project_path": "example-group/beta",
        "ref": "main", "ref_type": "branch", "ci_config_ref_uri":
            "gitlab.example.com/example-group/beta//.gitlab-ci.yml@refs/heads/main",
        "pipeline_source": "push",
    }
    claims.update(over)
    return claims


# GitHub's JWKS is fetched again for every unknown key id (the rotation below is found at
# once); GitLab's at most once an hour, so an unknown key id of GitLab's fetches nothing.
REFETCH_INTERVAL = {"github": "0s", "gitlab": "1h"}


def write_config(harness, issuers: dict) -> Path:
    path = harness.root / "wheelforge.toml"
    lines = []
    for name, issuer in issuers.items():
        lines += ["[[oidc_issuer]]", f'name = "{name}"', f'url = "{issuer.url}"',
                  f'jwks_refetch_interval = "{REFETCH_INTERVAL[name]}"']
    path.write_text("\n".join(lines) + "\n")
    wfbackend.config_changed(path)
    return path


def mint(server, token: str):
    return server.request("POST", "/_/oidc/mint-token", {"Content-Type": "application/json"},
                          json.dumps({"token": token}).encode())


def add_publisher(harness, config: Path, project: str, issuer: str, *claims: str) -> None:
    args = []
    for c in claims:
        args += ["--claim", c]
    proc = harness.cli("publisher", "add", project, "--issuer", issuer, "--config", str(config),
                       "--data-dir", str(harness.data_dir), *args)
    assert proc.returncode == 0, proc.stderr


def test_ci_tokens_mint_upload_tokens_for_their_project_and_every_refusal(harness, issuers,
                                                                          artifacts):
    github, gitlab = issuers["github"], issuers["gitlab"]
    config = write_config(harness, issuers)
    add_publisher(harness, config, "Alpha", "github", "repository=example-org/alpha",
                  "job_workflow_ref=example-org/alpha/.github/workflows/release.yml@refs/tags/v1.0",
                  "environment=release")
    add_publisher(harness, config, "beta", "gitlab", "project_path=example-group/beta",
                  "ref=main")
    server = harness.serve("--config", str(config))

    # Discovery (PEP 807) and Warehouse's audience route.
    disc = server.request("GET", "/.well-known/pytp")
    assert disc.status == 200, disc.text
    assert disc.json()["token-mint-endpoint"].endswith("/_/oidc/mint-token")
    assert disc.json()["audience-endpoint"].endswith("/_/oidc/audience")
    aud = server.request("GET", "/_/oidc/audience")
    assert aud.status == 200 and aud.json() == {"audience": "wheelforge"}, aud.text

    alpha = make_wheel(artifacts, "alpha", "1.0")
    beta = make_wheel(artifacts, "beta", "1.0")
    gh_token = jwt(github.keys[0], github_claims(github))
    minted = mint(server, gh_token)
    assert minted.status == 200, minted.text
    body = minted.json()
    assert body["success"] is True
    assert body["expires"] <= time.time() + 15 * 60 + 5
    upload_token = body["token"]

    upload_url = server.url + "/legacy/"
    ok = twine(harness, upload_url, upload_token, [alpha.path])
    assert ok.returncode == 0, output_of(ok)
    other = twine(harness, upload_url, upload_token, [beta.path])
    assert other.returncode != 0
    assert "403" in output_of(other), output_of(other)

    gl_minted = mint(server, jwt(gitlab.keys[0], gitlab_claims(gitlab)))
    assert gl_minted.status == 200, gl_minted.text
    ok = twine(harness, upload_url, gl_minted.json()["token"], [beta.path])
    assert ok.returncode == 0, output_of(ok)
    assert sorted(harness.filenames()) == sorted([alpha.filename, beta.filename])

    # The minted tokens' origin is in the audit trail.
    admin = harness.token("admin")
    trail = server.request("GET", "/admin/audit?project=alpha",
                           {"Authorization": f"Bearer {admin}"}).json()
    entries = trail if isinstance(trail, list) else trail.get("entries", trail)
    text = json.dumps(entries)
    assert "token-create" in text and "origin=oidc" in text and "issuer=github" in text, text

    def refused(token: str, code: str, words: str):
        r = mint(server, token)
        assert r.status == 422, r.text
        err = r.json()["errors"][0]
        assert err["code"] == code and words in err["description"], r.text
        assert r.json()["message"]

    key = github.keys[0]
    now = int(time.time())
    refused(gh_token, "invalid-reuse-token", "exchanged before")
    refused(jwt(key, github_claims(github, aud="pypi")), "invalid-token", "wrong audience")
    refused(jwt(key, github_claims(github, iss="https://token.actions.example.com")),
            "invalid-token", "wrong issuer")
    refused(jwt(key, github_claims(github, exp=now - 3600, iat=now - 4000, nbf=now - 4000)),
            "invalid-token", "expired")
    refused(jwt(key, github_claims(github, nbf=now + 3600, exp=now + 7200)), "invalid-token",
            "not valid yet")
    refused(jwt(key, github_claims(github), alg="none", signature=b""), "invalid-token",
            "'none' is not allowed")
    refused(jwt(key, github_claims(github), alg="HS256"), "invalid-token",
            "'HS256' is not allowed")
    # A token signed by GitLab's key but claiming to be GitHub's: the key's type differs.
    refused(jwt(gitlab.keys[0], github_claims(github), kid="gh-1"), "invalid-token",
            "not a ES256 key")
    # Signed by another RSA key under GitHub's key id, or altered after signing.
    forger = Key("RS256", "gh-1")
    refused(jwt(forger, github_claims(github)), "invalid-token",
            "signature does not verify")
    head, _, sig = jwt(key, github_claims(github)).rpartition(".")
    altered = head.split(".")[0] + "." + b64url(json.dumps(
        github_claims(github, ref="refs/tags/v9.9")).encode()) + "." + sig
    refused(altered, "invalid-token", "signature does not verify")
    fetches = github.jwks_fetches
    stranger = Key("RS256", "gh-unknown")
    refused(jwt(stranger, github_claims(github)), "invalid-token", "unknown signing key")
    assert github.jwks_fetches == fetches + 1  # fetched again once, still unknown
    # GitLab's keys were fetched less than jwks_refetch_interval ago: not again.
    gl_fetches = gitlab.jwks_fetches
    refused(jwt(Key("ES256", "gl-unknown"), gitlab_claims(gitlab)), "invalid-token",
            "at most once per 3600 s")
    assert gitlab.jwks_fetches == gl_fetches
    refused(jwt(key, github_claims(github, repository="example-org/other",
                                   sub="repo:example-org/other:environment:release")),
            "invalid-publisher", "no trusted publisher")
    refused(jwt(key, github_claims(github, environment="staging")), "invalid-publisher",
            "no trusted publisher")

    # A rotated key: published after the server kept the old set, found by the one refetch.
    rotated = Key("RS256", "gh-2")
    github.keys.append(rotated)
    assert mint(server, jwt(rotated, github_claims(github))).status == 200

    if wfbackend.BACKEND == "pg-s3":
        # A second server on the same PostgreSQL catalog: a token exchanged at one is refused
        # at the other, and one sent to both at once is exchanged by exactly one.
        other_server = harness.serve("--config", str(config))
        once = jwt(key, github_claims(github))
        assert mint(server, once).status == 200
        again = mint(other_server, once)
        assert again.status == 422 and again.json()["errors"][0]["code"] == \
            "invalid-reuse-token", again.text
        for _ in range(3):
            raced = jwt(key, github_claims(github))
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                answers = list(pool.map(lambda s: mint(s, raced), (server, other_server)))
            assert sorted(a.status for a in answers) == [200, 422], [a.text for a in answers]


def test_admin_api_and_cli_manage_publishers_with_audit(harness, issuers):
    config = write_config(harness, issuers)
    admin = harness.token("admin")
    server = harness.serve("--config", str(config))
    auth = {"Authorization": f"Bearer {admin}"}

    bad = admin_post(server, "/admin/publishers", admin,
                     "project=gamma&issuer=nowhere&claim.repository=o/gamma")
    assert bad.status == 400 and "not a configured [[oidc_issuer]]" in bad.text, bad.text
    bad = admin_post(server, "/admin/publishers", admin, "project=gamma&issuer=github")
    assert bad.status == 400 and "at least one claim" in bad.text, bad.text
    bad = admin_post(server, "/admin/publishers", admin,
                     "project=gamma&issuer=github&claim.aud=wheelforge")
    assert bad.status == 400 and "not allowed" in bad.text, bad.text

    added = admin_post(server, "/admin/publishers", admin,
                       "project=Gamma&issuer=github&claim.repository=example-org%2Fgamma"
                       "&claim.ref=refs%2Fheads%2Fmain&description=release+job")
    assert added.status == 201, added.text
    pub = added.json()
    assert pub["project"] == "gamma"
    assert pub["claims"] == {"ref": "refs/heads/main", "repository": "example-org/gamma"}

    listed = server.request("GET", "/admin/publishers?project=gamma", auth)
    assert listed.status == 200 and [p["id"] for p in listed.json()["publishers"]] == [pub["id"]]
    cli = harness.cli("publisher", "list", "--data-dir", str(harness.data_dir))
    assert cli.returncode == 0 and "repository=example-org/gamma" in cli.stdout, cli.stdout

    github = issuers["github"]
    token = jwt(github.keys[0], github_claims(github, repository="example-org/gamma",
                                              ref="refs/heads/main"))
    assert mint(server, token).status == 200

    removed = server.request("DELETE", f"/admin/publishers/{pub['id']}", auth)
    assert removed.status == 200, removed.text
    again = jwt(github.keys[0], github_claims(github, repository="example-org/gamma",
                                              ref="refs/heads/main"))
    assert mint(server, again).status == 422
    assert server.request("DELETE", f"/admin/publishers/{pub['id']}", auth).status == 404

    trail = json.dumps(server.request("GET", "/admin/audit?project=gamma", auth).json())
    assert "publisher-add" in trail and "publisher-remove" in trail, trail
    # No issuer configured: the CLI refuses, naming the problem.
    plain = harness.cli("publisher", "add", "delta", "--issuer", "github", "--claim", "sub=x",
                        "--data-dir", str(harness.data_dir))
    assert plain.returncode == 2 and "not a configured" in plain.stderr, plain.stderr
