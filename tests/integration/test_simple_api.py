"""The simple repository API: PEP 503 HTML and PEP 691 JSON (PEP 700 fields, PEP 658/714
metadata), content negotiation, ETag/304, redirects to the normalized name, 404, gzip."""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse

import pytest

from wfhelpers import (
    JSON_TYPE,
    PIP_ACCEPT,
    curl_upload,
    gunzip,
    make_sdist,
    make_wheel,
    parse_html,
    path_of,
)

HTML_TYPE = "text/html; charset=utf-8"
UPLOAD_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


@pytest.fixture
def populated(server, upload_token, artifacts):
    """Two projects; `My_Pkg` has two versions and a Requires-Python that needs escaping."""
    wheels = [
        make_wheel(artifacts, "My_Pkg", "1.0", requires_python=">=3.8"),
        make_wheel(artifacts, "My_Pkg", "1.1", requires_python=">=3.8"),
        make_wheel(artifacts, "other.pkg", "0.1"),
    ]
    for wheel in wheels:
        resp = server.put_file(wheel, upload_token)
        assert resp.status == 201, f"upload of {wheel.filename}: {resp.status} {resp.text}"
    return {w.filename: w for w in wheels}


def my_pkg(populated):
    return [w for w in populated.values() if w.name == "My_Pkg"]


def test_root_html(server, populated):
    resp = server.get("/simple/")
    assert resp.status == 200
    assert resp.header("Content-Type") == HTML_TYPE
    assert "accept" in (resp.header("Vary") or "").lower()
    page = parse_html(resp.text)
    assert {"name": "pypi:repository-version", "content": "1.1"} in page.metas
    hrefs = {path_of(urllib.parse.urljoin("/simple/", a["href"])) for a in page.anchors}
    assert hrefs == {"/simple/my-pkg/", "/simple/other-pkg/"}


def test_root_json(server, populated):
    resp = server.get("/simple/", {"Accept": PIP_ACCEPT})
    assert resp.status == 200
    assert resp.header("Content-Type") == JSON_TYPE
    assert "accept" in (resp.header("Vary") or "").lower()
    body = resp.json()
    assert body["meta"]["api-version"] == "1.1"
    names = {re.sub(r"[-_.]+", "-", p["name"]).lower() for p in body["projects"]}
    assert names == {"my-pkg", "other-pkg"}


def test_project_html_fields(server, populated):
    resp = server.get("/simple/my-pkg/", {"Accept": "text/html"})
    assert resp.status == 200
    assert resp.header("Content-Type") == HTML_TYPE
    assert 'data-requires-python="&gt;=3.8"' in resp.text, "Requires-Python is not escaped"
    page = parse_html(resp.text)
    assert {"name": "pypi:repository-version", "content": "1.1"} in page.metas
    anchors = {a["#text"].strip(): a for a in page.anchors}
    expected = my_pkg(populated)
    assert set(anchors) == {w.filename for w in expected}
    for wheel in expected:
        a = anchors[wheel.filename]
        href = urllib.parse.urlsplit(a["href"])
        assert re.fullmatch(r"/files/[^/]+/[^/]+", href.path), a["href"]
        assert urllib.parse.unquote(href.path.rsplit("/", 1)[1]) == wheel.filename
        assert href.fragment == f"sha256={wheel.sha256}"
        assert a["data-requires-python"] == ">=3.8"
        assert a["data-core-metadata"] == f"sha256={wheel.metadata_sha256}"
        assert a["data-dist-info-metadata"] == f"sha256={wheel.metadata_sha256}"
        assert "data-yanked" not in a, "a file that is not yanked carries data-yanked"


def test_project_json_fields(server, populated):
    resp = server.get("/simple/my-pkg/", {"Accept": PIP_ACCEPT})
    assert resp.status == 200
    assert resp.header("Content-Type") == JSON_TYPE
    body = resp.json()
    assert body["meta"]["api-version"] == "1.1"
    assert body["name"] == "my-pkg"
    assert body["versions"] == ["1.0", "1.1"]
    files = {f["filename"]: f for f in body["files"]}
    expected = my_pkg(populated)
    assert set(files) == {w.filename for w in expected}
    html_hrefs = {
        a["#text"].strip(): path_of(a["href"])
        for a in parse_html(server.get("/simple/my-pkg/").text).anchors
    }
    for wheel in expected:
        f = files[wheel.filename]
        assert path_of(f["url"]) == html_hrefs[wheel.filename], "JSON and HTML disagree on the URL"
        assert f["hashes"] == {"sha256": wheel.sha256}
        assert f["size"] == wheel.size
        assert UPLOAD_TIME.fullmatch(f["upload-time"]), f["upload-time"]
        assert f["requires-python"] == ">=3.8"
        assert f["core-metadata"] == {"sha256": wheel.metadata_sha256}
        assert "dist-info-metadata" not in f, "pip 23.0-23.1 cannot read dist-info-metadata in JSON"
        assert f["yanked"] is False


@pytest.mark.parametrize(
    "target, headers, expected_type",
    [
        pytest.param("/simple/my-pkg/", {}, HTML_TYPE, id="no-accept"),
        pytest.param("/simple/my-pkg/", {"Accept": "text/html"}, HTML_TYPE, id="text-html"),
        pytest.param("/simple/my-pkg/", {"Accept": PIP_ACCEPT}, JSON_TYPE, id="pip-accept"),
        pytest.param("/simple/my-pkg/", {"Accept": JSON_TYPE}, JSON_TYPE, id="json-only"),
        pytest.param(f"/simple/my-pkg/?format={urllib.parse.quote(JSON_TYPE)}", {}, JSON_TYPE,
                     id="format-query"),
        pytest.param(f"/simple/?format={urllib.parse.quote(JSON_TYPE)}", {}, JSON_TYPE,
                     id="root-format-query"),
        pytest.param("/simple/", {"Accept": "text/html"}, HTML_TYPE, id="root-text-html"),
    ],
)
def test_negotiation(server, populated, target, headers, expected_type):
    resp = server.get(target, headers)
    assert resp.status == 200, f"{resp.status}: {resp.text[:200]}"
    assert resp.header("Content-Type") == expected_type
    assert "accept" in (resp.header("Vary") or "").lower()
    if expected_type == JSON_TYPE:
        assert resp.json()["meta"]["api-version"] == "1.1"
    else:
        assert "<a " in resp.text


@pytest.mark.parametrize("target", ["/simple/", "/simple/my-pkg/"])
def test_plain_json_accept_is_406(server, populated, target):
    resp = server.get(target, {"Accept": "application/json"})
    assert resp.status == 406, f"{resp.status}: {resp.text[:200]}"


def test_etag_and_304(server, populated, upload_token, artifacts):
    html = server.get("/simple/my-pkg/")
    js = server.get("/simple/my-pkg/", {"Accept": PIP_ACCEPT})
    html_etag, json_etag = html.header("ETag"), js.header("ETag")
    assert html_etag and json_etag
    assert html_etag != json_etag, "HTML and JSON pages share one ETag"

    cached = server.get("/simple/my-pkg/", {"If-None-Match": html_etag})
    assert cached.status == 304 and cached.body == b""
    cached = server.get("/simple/my-pkg/", {"Accept": PIP_ACCEPT, "If-None-Match": json_etag})
    assert cached.status == 304 and cached.body == b""
    # A validator of the other representation must not produce a 304.
    other = server.get("/simple/my-pkg/", {"Accept": PIP_ACCEPT, "If-None-Match": html_etag})
    assert other.status == 200 and other.header("Content-Type") == JSON_TYPE

    root_etag = server.get("/simple/").header("ETag")
    assert root_etag
    assert server.get("/simple/", {"If-None-Match": root_etag}).status == 304

    newer = make_wheel(artifacts, "My_Pkg", "1.2")
    assert server.put_file(newer, upload_token).status == 201
    fresh = server.get("/simple/my-pkg/", {"If-None-Match": html_etag})
    assert fresh.status == 200, "a page changed by an upload was answered 304"
    assert newer.filename in fresh.text
    assert fresh.header("ETag") != html_etag


@pytest.mark.parametrize(
    "target",
    ["/simple/My_Pkg/", "/simple/my-pkg", "/simple/My.Pkg", "/simple/MY--PKG/", "/simple/my_pkg/"],
)
def test_redirect_to_normalized(server, populated, target):
    resp = server.get(target, {"Accept": PIP_ACCEPT})
    assert resp.status == 301, f"{target}: {resp.status}"
    assert path_of(resp.header("Location")) == "/simple/my-pkg/"


@pytest.mark.parametrize("headers", [{}, {"Accept": PIP_ACCEPT}])
def test_unknown_project_is_404(server, populated, headers):
    resp = server.get("/simple/no-such-project/", headers)
    assert resp.status == 404


def test_empty_index_root(server):
    resp = server.get("/simple/", {"Accept": PIP_ACCEPT})
    assert resp.status == 200
    assert resp.json()["projects"] == []


@pytest.mark.parametrize("headers", [{}, {"Accept": PIP_ACCEPT}], ids=["html", "json"])
def test_gzip(server, upload_token, artifacts, headers):
    # Enough files that the page is worth compressing.
    for i in range(12):
        wheel = make_wheel(artifacts, "zipped-pkg", f"1.{i}", requires_python=">=3.8")
        assert server.put_file(wheel, upload_token).status == 201
    plain = server.get("/simple/zipped-pkg/", {**headers, "Accept-Encoding": "identity"})
    assert plain.status == 200 and plain.header("Content-Encoding") in (None, "identity")
    packed = server.get("/simple/zipped-pkg/", {**headers, "Accept-Encoding": "gzip"})
    assert packed.status == 200
    assert packed.header("Content-Encoding") == "gzip"
    assert packed.header("Content-Type") == plain.header("Content-Type")
    assert gunzip(packed.body) == plain.body
    assert int(packed.header("Content-Length")) == len(packed.body)


def test_sdist_listed_with_pkg_info_metadata(harness, server, upload_token, artifacts):
    sdist = make_sdist(artifacts, "sdpkg", "1.0", requires_python=">=3.9")
    result = curl_upload(server, harness.root, sdist.path, token=upload_token)
    assert result.status == 201, f"{result.status}: {result.body}"
    entry = server.file_entry("sdpkg", "sdpkg-1.0.tar.gz")
    assert entry["hashes"] == {"sha256": sdist.sha256}
    assert entry["size"] == sdist.size
    assert entry["core-metadata"] == {"sha256": sdist.metadata_sha256}
    assert entry["requires-python"] == ">=3.9"
    anchors = parse_html(server.get("/simple/sdpkg/").text).anchors
    assert [a["#text"].strip() for a in anchors] == ["sdpkg-1.0.tar.gz"]
    assert anchors[0]["data-core-metadata"] == f"sha256={sdist.metadata_sha256}"
    meta = server.get_file(path_of(entry["url"]) + ".metadata")
    assert meta.status == 200
    assert meta.body == sdist.metadata


def test_large_page_on_a_kept_alive_connection(server, upload_token, artifacts):
    # Pages of 16 KiB and more leave through an in-memory file and sendfile(2); they must be
    # byte-identical to what was rendered, for GET and HEAD, on one connection, and follow
    # uploads.
    for i in range(70):
        wheel = make_wheel(artifacts, "big-page", f"1.{i}", requires_python=">=3.8")
        assert server.put_file(wheel, upload_token).status == 201
    parts = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=15)
    try:

        def fetch(method, headers):
            conn.request(method, "/simple/big-page/", headers=headers)
            resp = conn.getresponse()
            return resp, resp.read()

        identity = {"Accept-Encoding": "identity"}
        first, body = fetch("GET", identity)
        assert first.status == 200
        assert len(body) > 16 * 1024, "the page is too small to take the file path"
        assert int(first.getheader("Content-Length")) == len(body)
        anchors = parse_html(body.decode()).anchors
        assert len(anchors) == 70
        head, head_body = fetch("HEAD", identity)
        assert head.status == 200 and head_body == b""
        assert int(head.getheader("Content-Length")) == len(body)
        again, again_body = fetch("GET", identity)
        assert again_body == body
        json_resp, json_body = fetch("GET", {**identity, "Accept": PIP_ACCEPT})
        assert len(json_body) > 16 * 1024
        assert len(json.loads(json_body)["files"]) == 70

        wheel = make_wheel(artifacts, "big-page", "2.0", requires_python=">=3.8")
        assert server.put_file(wheel, upload_token).status == 201
        after, after_body = fetch("GET", identity)
        assert len(parse_html(after_body.decode()).anchors) == 71
        assert wheel.filename in after_body.decode()
        assert int(after.getheader("Content-Length")) == len(after_body)
    finally:
        conn.close()
