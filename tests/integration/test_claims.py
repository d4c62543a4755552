"""Project claims: a project is claimed by the token that uploads its first file, or by an
admin; other upload tokens get 403 and store nothing. Driven with PUT, twine and curl against
the real server, and managed with `wheelforge project` and the admin API."""

from __future__ import annotations

import re
import urllib.parse

from test_publish import output_of, twine
from wfhelpers import make_wheel, wait_for


def new_token(harness, scope: str, project: str | None = None) -> tuple[int, str]:
    """A fresh token (id, secret)."""
    args = ["token", "create", "--data-dir", str(harness.data_dir), "--scope", scope]
    if project:
        args += ["--project", project]
    proc = harness.cli(*args)
    assert proc.returncode == 0, proc.stderr
    token_id = int(re.search(r"#(\d+)", proc.stderr).group(1))
    return token_id, proc.stdout.strip().splitlines()[-1]


def claims(harness) -> dict[str, str]:
    proc = harness.cli("project", "list", "--data-dir", str(harness.data_dir))
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()[1:] if line.strip()]
    return {row[0]: row[2] for row in rows}


def admin_post(server, path: str, admin: str, body: str = ""):
    return server.request(
        "POST",
        path,
        {"Authorization": f"Bearer {admin}", "Content-Type": "application/x-www-form-urlencoded"},
        body.encode(),
    )


def test_first_uploader_claims_and_other_tokens_are_refused(harness):
    a_id, a = new_token(harness, "upload")
    b_id, b = new_token(harness, "upload")
    server = harness.serve()
    out = harness.path("wheels")

    first = make_wheel(out, "claimed-pkg", "1.0")
    assert server.put_file(first, a).status == 201
    assert claims(harness)["claimed-pkg"] == f"token:{a_id}"

    # Another unrestricted upload token: 403 naming the problem, nothing stored (PUT is refused
    # from its head, before the body is read).
    before = harness.state()
    second = make_wheel(out, "claimed-pkg", "2.0")
    refused = server.put_file(second, b)
    assert refused.status == 403, refused.text
    assert "project 'claimed-pkg' is claimed by another uploader" in refused.text
    # Even bytes identical to a stored file: the answer does not depend on what exists.
    assert server.put_file(first, b).status == 403
    # Spelled differently, the same project.
    renamed = make_wheel(out, "Claimed_Pkg", "3.0")
    assert server.put_file(renamed, b).status == 403
    assert harness.state() == before, "a refused upload changed the store or the catalog"

    # twine, through the legacy form: also 403 with the reason.
    proc = twine(harness, server.url + "/legacy/", b, [second.path])
    assert proc.returncode != 0
    assert "403" in output_of(proc) and "claimed by another uploader" in output_of(proc)
    assert harness.state() == before

    # The owner goes on uploading, by PUT and by twine; b can start its own project.
    assert server.put_file(second, a).status == 201
    third = make_wheel(out, "claimed-pkg", "4.0")
    proc = twine(harness, server.url + "/legacy/", a, [third.path])
    assert proc.returncode == 0, output_of(proc)
    own = make_wheel(out, "b-own-pkg", "1.0")
    assert server.put_file(own, b).status == 201
    assert claims(harness) == {"b-own-pkg": f"token:{b_id}", "claimed-pkg": f"token:{a_id}"}

    # Admin tokens and tokens an admin limited to the project upload without taking it over.
    admin = harness.token("admin")
    assert wait_for(
        lambda: server.put_file(make_wheel(out, "claimed-pkg", "5.0"), admin).status == 201,
        timeout=5,
    )
    _, limited = new_token(harness, "upload", project="claimed-pkg")
    assert wait_for(
        lambda: server.put_file(make_wheel(out, "claimed-pkg", "6.0"), limited).status == 201,
        timeout=5,
    )
    assert claims(harness)["claimed-pkg"] == f"token:{a_id}"
    assert server.put_file(make_wheel(out, "claimed-pkg", "7.0"), b).status == 403


def test_admins_hand_over_release_and_claim_projects(harness):
    a_id, a = new_token(harness, "upload")
    b_id, b = new_token(harness, "upload")
    admin = harness.token("admin")
    out = harness.path("wheels")
    # Files imported by the local command belong to admins.
    seeded = make_wheel(out, "seeded-pkg", "1.0")
    assert harness.ingest(seeded.path).returncode == 0
    assert claims(harness)["seeded-pkg"] == "admin"
    server = harness.serve()
    assert server.put_file(make_wheel(out, "seeded-pkg", "2.0"), a).status == 403

    # CLI while the server runs: the server notices the new claim.
    proc = harness.cli("project", "claim", "Seeded.Pkg", "--token", str(a_id),
                       "--data-dir", str(harness.data_dir))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"seeded-pkg: token:{a_id}"
    assert wait_for(
        lambda: server.put_file(make_wheel(out, "seeded-pkg", "2.0"), a).status == 201, timeout=5
    )
    assert server.put_file(make_wheel(out, "seeded-pkg", "3.0"), b).status == 403

    # Admin API: hand it to b, then release it; the next token to upload claims it.
    resp = admin_post(server, "/admin/projects/seeded-pkg/claim", admin, f"token={b_id}")
    assert resp.status == 200, resp.text
    assert resp.json() == {"project": "seeded-pkg", "claim": f"token:{b_id}"}
    assert server.put_file(make_wheel(out, "seeded-pkg", "3.0"), b).status == 201
    assert server.put_file(make_wheel(out, "seeded-pkg", "4.0"), a).status == 403
    resp = admin_post(server, "/admin/projects/seeded-pkg/release", admin)
    assert resp.json() == {"project": "seeded-pkg", "claim": "unclaimed"}
    assert server.put_file(make_wheel(out, "seeded-pkg", "4.0"), a).status == 201
    assert claims(harness)["seeded-pkg"] == f"token:{a_id}"
    resp = admin_post(server, "/admin/projects/seeded-pkg/claim", admin)
    assert resp.json() == {"project": "seeded-pkg", "claim": "admin"}
    assert server.put_file(make_wheel(out, "seeded-pkg", "5.0"), a).status == 403

    # Bad requests name the problem and change nothing.
    for path, body, status, words in [
        ("/admin/projects/seeded-pkg/claim", "token=999", 404, "no such token"),
        ("/admin/projects/seeded-pkg/claim", "token=x", 400, "token=ID must be a token id"),
        ("/admin/projects/seeded-pkg/claim", "owner=1", 400, "unknown parameter 'owner'"),
        ("/admin/projects/no-such-pkg/claim", "", 404, "no such project: no-such-pkg"),
    ]:
        resp = admin_post(server, path, admin, body)
        assert resp.status == status and words in resp.text, (path, body, resp.status, resp.text)
    assert admin_post(server, "/admin/projects/seeded-pkg/claim", a).status == 403
    assert server.get("/admin/projects/seeded-pkg/claim").status in (401, 405)
    assert claims(harness)["seeded-pkg"] == "admin"

    # CLI errors.
    for args, words in [
        (["claim", "seeded-pkg", "--token", "999"], "no such token"),
        (["claim", "nope-pkg"], "no such project"),
        (["release", "bad name!"], "not a valid project name"),
    ]:
        proc = harness.cli("project", *args, "--data-dir", str(harness.data_dir))
        assert proc.returncode != 0 and words in proc.stderr, (args, proc.stderr)


def test_revoked_owner_leaves_the_project_to_admins(harness):
    a_id, a = new_token(harness, "upload")
    _, b = new_token(harness, "upload")
    server = harness.serve()
    out = harness.path("wheels")
    assert server.put_file(make_wheel(out, "orphan-pkg", "1.0"), a).status == 201
    assert harness.cli("token", "revoke", str(a_id), "--data-dir",
                       str(harness.data_dir)).returncode == 0
    assert wait_for(
        lambda: server.put_file(make_wheel(out, "orphan-pkg", "2.0"), a).status == 401, timeout=5
    )
    # The claim stays with the revoked token: nobody else takes the project over by uploading.
    assert server.put_file(make_wheel(out, "orphan-pkg", "2.0"), b).status == 403
    query = urllib.parse.quote("orphan-pkg")
    assert server.get(f"/simple/{query}/").status == 200
