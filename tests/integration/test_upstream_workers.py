"""A slow upstream index does not hold the server's workers (docs/upstreams.md): the pages
that wait for an upstream, and the first downloads of its files, run on threads of their own,
so that an upload still goes through while they wait."""

from __future__ import annotations

import http.server
import threading
import urllib.parse

from wfhelpers import curl_upload, http_request, make_wheel, sha256_hex


class StallingUpstream:
    """An index on loopback whose pages are answered (404) only once the test releases them;
    with `files` (name: bytes), the pages list those files at once and the files' bodies wait
    for the release instead."""

    def __init__(self, files: dict[str, bytes] | None = None):
        self.files = files or {}
        self.release = threading.Event()
        self.arrived = 0
        self.cond = threading.Condition()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 (the standard library's name)
                if outer.files and self.path.startswith("/simple/"):
                    links = "".join(f'<a href="/files/{n}#sha256={sha256_hex(b)}">{n}</a>'
                                    for n, b in outer.files.items())
                    return self.answer(200, "text/html", links.encode())
                with outer.cond:
                    outer.arrived += 1
                    outer.cond.notify_all()
                outer.release.wait(120)
                name = self.path.rsplit("/", 1)[-1]
                if name in outer.files:
                    return self.answer(200, "application/octet-stream", outer.files[name])
                self.answer(404, "text/plain", b"no such project")

            def answer(self, status: int, content_type: str, body: bytes):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def wait_arrived(self, n: int, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.arrived >= n, timeout)

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def upload_while_requests_wait(harness, artifacts, upload_token, upstream: StallingUpstream,
                               requests: list) -> tuple:
    """Serves with `upstream` and one worker thread, runs each of `requests` (a function of the
    server, returning what to record) in a thread of its own, waits until the upstream holds
    two of them, and uploads a wheel: it must be answered 201 while they all still wait. Then
    releases the upstream; returns the server and what each request recorded, in order."""
    config = harness.root / "wheelforge.toml"
    config.write_text(f'[[upstream]]\nname = "slow"\nurl = "{upstream.url}/simple/"\n')
    # One worker thread, and more requests waiting for the upstream than that.
    server = harness.serve("--config", str(config), "--worker-threads", "1")
    answers: list = [None] * len(requests)

    def record(i: int):
        try:
            answers[i] = requests[i](server)
        except Exception as e:  # noqa: BLE001 (recorded, asserted by the caller)
            answers[i] = repr(e)

    threads = [threading.Thread(target=record, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    assert upstream.wait_arrived(2, 30), f"the upstream was asked {upstream.arrived} time(s)"

    wheel = make_wheel(artifacts, "local-pkg", "1.0")
    up = curl_upload(server, harness.path("curl"), wheel.path, token=upload_token)
    assert up.status == 201, (up.status, up.body, up.stderr)
    # Answered while every request was still waiting for the upstream.
    assert answers == [None] * len(requests)

    upstream.release.set()
    for t in threads:
        t.join(60)
    return server, answers


def test_an_upload_goes_through_while_pages_wait_for_a_slow_upstream(harness, artifacts,
                                                                   upload_token):
    upstream = StallingUpstream()
    try:
        pages = [lambda server, name=name: http_request(server.url, "GET",
                                                        f"/simple/{name}/").status
                 for name in ("slow-a", "slow-b")]
        server, answers = upload_while_requests_wait(harness, artifacts, upload_token, upstream,
                                                     pages)
        assert answers == [404, 404]
        assert http_request(server.url, "GET", "/simple/local-pkg/").status == 200
    finally:
        upstream.close()


def test_an_upload_goes_through_while_first_downloads_wait_for_a_slow_upstream(
        harness, artifacts, upload_token):
    wheels = [make_wheel(harness.path("up"), name, "1.0") for name in ("dl-a", "dl-b")]
    upstream = StallingUpstream({w.filename: w.path.read_bytes() for w in wheels})

    def download(server, wheel):
        page_path = f"/simple/{wheel.name}/"
        page = http_request(server.url, "GET", page_path)
        link = page.text.split('href="', 1)[1].split('"', 1)[0].split("#", 1)[0]
        r = http_request(server.url, "GET", urllib.parse.urljoin(page_path, link))
        return r.status, r.body == wheel.path.read_bytes()

    try:
        _, answers = upload_while_requests_wait(
            harness, artifacts, upload_token, upstream,
            [lambda server, w=w: download(server, w) for w in wheels])
        assert answers == [(200, True), (200, True)]
    finally:
        upstream.close()
