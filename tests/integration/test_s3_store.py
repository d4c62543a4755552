"""The blob store on an S3 object store (OpenStack Swift's s3api, swift_s3.py): uploads become
objects under blobs/aa/bb/SHA256 before their rows, file URLs answer a presigned redirect
(pip follows it) or are proxied from the read cache (Range, ETag, HEAD), and a store that
stops during an upload makes it answer 503 naming the store, with nothing listed, /readyz
answer 503 naming the bucket, until it is back."""

from __future__ import annotations

import hashlib
import shutil
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zipfile
from pathlib import Path

import pytest

import swift_s3
from swift_s3 import swift_s3 as swift  # noqa: F401 (the session's Swift)
from wfhelpers import (
    PIP_PYTHONS,
    catalog_filenames,
    clean_env,
    make_wheel,
    metric_sum,
    path_of,
    pip_args,
    put_awaiting_body,
    run,
    wait_for,
    write_static_index,
)

TWINE = Path("/usr/bin/twine")


def write_config(harness, store: dict, prefix: str, file_serving: str, extra: str = "") -> Path:
    secret = harness.root / "s3-secret"
    secret.write_text(store["secret_key"] + "\n")
    config = harness.root / "wheelforge.toml"
    config.write_text(
        f'blob_store = "s3://{store["bucket"]}/{prefix}"\n'
        f'file_serving = "{file_serving}"\n'
        "[s3]\n"
        f'endpoint = "{store["endpoint"]}"\n'
        f'region = "{store["region"]}"\n'
        f'access_key_id = "{store["access_key"]}"\n'
        f'secret_access_key_file = "{secret}"\n'
        'presign_expiry = "2m"\n' + extra
    )
    return config


def boto3_client(store: dict):
    boto3 = pytest.importorskip("boto3")
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=store["endpoint"],
        region_name=store["region"],
        aws_access_key_id=store["access_key"],
        aws_secret_access_key=store["secret_key"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def object_key(prefix: str, sha: str) -> str:
    return f"{prefix}/blobs/{sha[:2]}/{sha[2:4]}/{sha}"


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=15) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_uploads_are_objects_and_files_redirect_to_the_store(harness, swift, artifacts):  # noqa: F811
    prefix = "idx-" + uuid.uuid4().hex[:8]
    token = harness.token("upload")
    server = harness.serve("--config", str(write_config(harness, swift, prefix, "redirect")))
    assert wait_for(lambda: "object store s3://wheelforge/" + prefix in server.log())
    wheel = make_wheel(artifacts, "wf-s3-app", "1.0", module="wf_s3_app", value="from s3")

    if not TWINE.exists():
        pytest.skip("/usr/bin/twine is not installed")
    home = harness.path("client-home")
    up = run(
        [TWINE, "upload", "--non-interactive", "--disable-progress-bar", "--repository-url",
         server.url + "/legacy/", "-u", "__token__", "-p", token, wheel.path],
        timeout=120, cwd=harness.path("client-cwd"), env=clean_env(HOME=str(home)),
    )
    assert up.returncode == 0, f"twine upload failed:\n{up.stdout}\n{up.stderr}"

    # The wheel and its METADATA are objects under their content addresses.
    s3 = boto3_client(swift)
    body = s3.get_object(Bucket=swift["bucket"], Key=object_key(prefix, wheel.sha256))["Body"]
    assert hashlib.sha256(body.read()).hexdigest() == wheel.sha256
    s3.head_object(Bucket=swift["bucket"], Key=object_key(prefix, wheel.metadata_sha256))
    assert not (harness.data_dir / "blobs" / wheel.sha256[:2]).exists()

    # Its URL answers 302 to a presigned GET, HEAD too; the page's hashes are the file's.
    entry = server.get("/simple/wf-s3-app/", {"Accept": "application/vnd.pypi.simple.v1+json"})
    assert entry.status == 200
    (file,) = entry.json()["files"]
    assert file["hashes"] == {"sha256": wheel.sha256}
    target = urllib.parse.urlsplit(urllib.parse.urljoin(server.url + "/simple/wf-s3-app/",
                                                        file["url"])).path
    for method in ("GET", "HEAD"):
        r = server.request(method, target)
        assert r.status == 302, (method, r.status, r.text)
        assert r.header("Cache-Control") == "no-store"
        location = r.header("Location")
        assert location.startswith(f"{swift['endpoint']}/{swift['bucket']}/{prefix}/blobs/")
        assert "X-Amz-Signature=" in location and "X-Amz-Expires=120" in location
    status, headers, data = fetch(location)
    assert status == 200 and data == wheel.data
    assert f'filename="{wheel.filename}"' in headers.get("Content-Disposition", "")
    # A conditional request is answered here.
    assert server.get(target, {"If-None-Match": f'"{wheel.sha256}"'}).status == 304

    # .metadata redirects to the METADATA object.
    r = server.get(target + ".metadata")
    assert r.status == 302
    status, _, data = fetch(r.header("Location"))
    assert status == 200 and hashlib.sha256(data).hexdigest() == wheel.metadata_sha256

    # pip follows the redirect and gets the wheel's bytes.
    python = PIP_PYTHONS["23.2.1"]
    if not python.exists():
        pytest.skip(f"{python} is not installed")
    dest = harness.path("pip-download")
    proc = run([python, "-m", "pip", "download", "--no-deps", "-d", dest,
                *pip_args(server.url + "/simple/"), "wf-s3-app"],
               timeout=120, cwd=harness.path("neutral-cwd"))
    assert proc.returncode == 0, f"pip download failed:\n{proc.stdout}\n{proc.stderr}"
    assert (dest / wheel.filename).read_bytes() == wheel.data


def test_proxy_serves_the_bytes_with_range_and_etag(harness, swift, artifacts):  # noqa: F811
    prefix = "idx-" + uuid.uuid4().hex[:8]
    token = harness.token("upload")
    server = harness.serve("--config", str(write_config(harness, swift, prefix, "proxy")))
    wheel = make_wheel(artifacts, "wf-s3-proxied", "1.0", padding=200_000)
    assert server.put_file(wheel, token).status == 201
    # The read cache is emptied behind the server's back: the bytes come from the store.
    shutil.rmtree(harness.data_dir / "cache" / "blobs")
    target = f"/files/{wheel.sha256}/{wheel.filename}"
    r = server.get(target)
    assert r.status == 200, r.text
    assert r.body == wheel.data
    assert r.header("ETag") == f'"{wheel.sha256}"'
    assert (harness.data_dir / "cache" / "blobs" / wheel.sha256[:2] / wheel.sha256[2:4]
            / wheel.sha256).exists()
    r = server.get(target, {"Range": "bytes=100-199"})
    assert r.status == 206 and r.body == wheel.data[100:200]
    assert r.header("Content-Range") == f"bytes 100-199/{wheel.size}"
    assert server.get(target, {"If-None-Match": f'"{wheel.sha256}"'}).status == 304
    r = server.head(target)
    assert r.status == 200 and r.header("Content-Length") == str(wheel.size)
    r = server.get(target + ".metadata")
    assert r.status == 200 and hashlib.sha256(r.body).hexdigest() == wheel.metadata_sha256


def test_the_inspector_reads_ranges_of_an_object_not_a_copy(harness, swift, artifacts):  # noqa: F811
    """A wheel not in the read cache is inspected by a few ranged GETs of its object: its
    members and ELF facts as the wheel has them, and no copy made in the read cache."""
    prefix = "idx-" + uuid.uuid4().hex[:8]
    token = harness.token("upload")
    server = harness.serve("--config", str(write_config(harness, swift, prefix, "redirect")))
    lib = Path("/lib/x86_64-linux-gnu/libz.so.1").read_bytes()
    wheel = make_wheel(artifacts, "wf-s3-inspect", "1.0", tag="cp311-cp311-linux_x86_64",
                       padding=8_000_000, extra=(("wf_s3_inspect/_z.so", lib),))
    assert server.put_file(wheel, token).status == 201

    # The read cache is emptied behind the server's back: the parts come from the store.
    shutil.rmtree(harness.data_dir / "cache" / "blobs")
    gets = metric_sum(server, "wheelforge_object_store_request_duration_seconds_count",
                      operation="get")
    resp = server.get(f"/api/files/{wheel.sha256}/contents")
    assert resp.status == 200, resp.text
    made = metric_sum(server, "wheelforge_object_store_request_duration_seconds_count",
                      operation="get") - gets
    assert 1 <= made <= 20, made
    doc = resp.json()
    with zipfile.ZipFile(wheel.path) as z:
        assert {m["name"]: m["size"] for m in doc["members"]} == {
            i.filename: i.file_size for i in z.infolist()}
    (binary,) = doc["binaries"]
    assert binary["path"] == "wf_s3_inspect/_z.so" and binary["size"] == len(lib)
    assert "deflate" in [e["name"] for e in binary["exported"]]
    page = server.get(f"/inspect/{wheel.sha256}", {"Accept": "text/html"})
    assert page.status == 200 and "wf_s3_inspect/_z.so" in page.text
    assert not (harness.data_dir / "cache" / "blobs" / wheel.sha256[:2] / wheel.sha256[2:4]
                / wheel.sha256).exists()


def test_a_store_stopped_during_an_upload_answers_503_naming_it(harness, artifacts):
    """The object store stops during an upload and stays down a while: that upload and the
    next answer 503 naming the store and leave no row, no listed file and no object; /readyz
    answers 503 naming the bucket and endpoint; pages and the files stored before are still
    served; /metrics counts the store's requests and failures. Once the store is back,
    /readyz answers 200 and uploads work again."""
    own = harness.path("swift-own")
    store = swift_s3.start(own)
    try:
        prefix = "idx-" + uuid.uuid4().hex[:8]
        token = harness.token("upload")
        server = harness.serve("--config", str(write_config(harness, store, prefix, "proxy")))
        first = make_wheel(artifacts, "wf-s3-outage", "1.0")
        assert server.put_file(first, token).status == 201
        assert metric_sum(server, "wheelforge_object_store_request_duration_seconds_count",
                          operation="put") > 0
        assert server.get("/readyz").status == 200
        first_url = path_of(server.file_entry("wf-s3-outage", first.filename)["url"])
        wheel = make_wheel(artifacts, "wf-s3-outage", "2.0", padding=100_000)
        sock = put_awaiting_body(server, wheel.filename, token, wheel.size)
        try:
            sock.sendall(wheel.data[: wheel.size // 2])
            swift_s3.stop(own)
            sock.sendall(wheel.data[wheel.size // 2:])
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        finally:
            sock.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        named = f"object store s3://wheelforge/{prefix} at {store['endpoint']}"
        assert head.startswith(b"HTTP/1.1 503"), answer[:500]
        assert named.encode() in answer, answer[:1000]
        # While it is down: uploads answer 503 naming it, /readyz too (its probe is cached
        # for two seconds), pages and the files already read are served.
        later = make_wheel(artifacts, "wf-s3-outage", "3.0")
        r = server.put_file(later, token)
        assert r.status == 503 and named in r.text, (r.status, r.text)
        ready = wait_for(lambda: (r := server.get("/readyz")).status == 503 and r, timeout=10)
        assert ready, "/readyz stayed 200 with the object store down"
        assert f"S3 bucket wheelforge at endpoint {store['endpoint']}" in ready.text, ready.text
        assert store["secret_key"] not in ready.text
        # Nothing of them is visible: no row, not on the page, no file URL.
        assert catalog_filenames(harness.data_dir) == [first.filename]
        page = server.get("/simple/wf-s3-outage/",
                          {"Accept": "application/vnd.pypi.simple.v1+json"}).json()
        assert [f["filename"] for f in page["files"]] == [first.filename]
        assert server.get(first_url).body == first.data
        assert server.get(first_url.replace(first.sha256, wheel.sha256)
                          .replace(first.filename, wheel.filename)).status == 404
        assert metric_sum(server, "wheelforge_object_store_errors_total",
                          kind="unreachable") > 0
        assert metric_sum(server, "wheelforge_object_store_errors_total", operation="probe",
                          kind="unreachable") > 0

        swift_s3.start_again(own)
        assert wait_for(lambda: server.get("/readyz").status == 200, timeout=10), \
            server.get("/readyz").text
        # No object was left behind by the failed uploads.
        for w in (wheel, later):
            status, _ = swift_s3.s3_request(store["endpoint"], "HEAD",
                                            "/wheelforge/" + object_key(prefix, w.sha256))
            assert status == 404, w.filename
        assert server.put_file(later, token).status == 201
        page = server.get("/simple/wf-s3-outage/",
                          {"Accept": "application/vnd.pypi.simple.v1+json"}).json()
        assert sorted(f["filename"] for f in page["files"]) == sorted(
            [first.filename, later.filename])
    finally:
        swift_s3.stop(own)


def test_upstream_files_are_stored_in_the_store_and_then_redirected(harness, swift, artifacts):  # noqa: F811
    up = make_wheel(harness.path("upstream-artifacts"), "wf-s3-up", "1.0")
    root = harness.path("tree")
    write_static_index(root, [up])
    nginx = harness.nginx(root)
    prefix = "idx-" + uuid.uuid4().hex[:8]
    upstream = f'[[upstream]]\nname = "static"\nurl = "{nginx.url}/simple/"\n'
    server = harness.serve("--config",
                           str(write_config(harness, swift, prefix, "redirect", upstream)))
    target = f"/upstream/static/{up.sha256}/{up.filename}"
    # The first download is streamed from the upstream while it is stored in the object store.
    r = server.get(target)
    assert r.status == 200 and r.body == up.data, (r.status, r.text[:300])
    s3 = boto3_client(swift)
    assert wait_for(lambda: s3.list_objects_v2(Bucket=swift["bucket"],
                                               Prefix=object_key(prefix, up.sha256))["KeyCount"])
    # Stored: later requests redirect to the store, even with the upstream gone.
    nginx.stop()
    r = server.get(target)
    assert r.status == 302, (r.status, r.text[:300])
    status, _, data = fetch(r.header("Location"))
    assert status == 200 and data == up.data
