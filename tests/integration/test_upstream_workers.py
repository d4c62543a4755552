"""A slow upstream index does not hold the server's workers (README, "Upstreams"): the pages
that wait for an upstream run on threads of their own, so that an upload still goes through
while they wait."""

from __future__ import annotations

import http.server
import threading

from wfhelpers import curl_upload, http_request, make_wheel


class StallingUpstream:
    """An index on loopback whose pages are answered (404) only once the test releases them."""

    def __init__(self):
        self.release = threading.Event()
        self.arrived = 0
        self.cond = threading.Condition()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 (the standard library's name)
                with outer.cond:
                    outer.arrived += 1
                    outer.cond.notify_all()
                outer.release.wait(120)
                body = b"no such project"
                self.send_response(404)
                self.send_header("Content-Type", "text/plain")
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


def test_an_upload_goes_through_while_pages_wait_for_a_slow_upstream(harness, artifacts,
                                                                   upload_token):
    upstream = StallingUpstream()
    try:
        config = harness.root / "wheelforge.toml"
        config.write_text(f'[[upstream]]\nname = "slow"\nurl = "{upstream.url}/simple/"\n')
        # One worker thread, and more pages waiting for the upstream than that.
        server = harness.serve("--config", str(config), "--worker-threads", "1")
        answers: list = []

        def ask(name: str):
            try:
                answers.append(http_request(server.url, "GET", f"/simple/{name}/").status)
            except Exception as e:  # noqa: BLE001 (recorded, asserted below)
                answers.append(repr(e))

        pages = [threading.Thread(target=ask, args=(name,)) for name in ("slow-a", "slow-b")]
        for t in pages:
            t.start()
        assert upstream.wait_arrived(2, 30), f"the upstream was asked {upstream.arrived} time(s)"

        wheel = make_wheel(artifacts, "local-pkg", "1.0")
        up = curl_upload(server, harness.path("curl"), wheel.path, token=upload_token)
        assert up.status == 201, (up.status, up.body, up.stderr)
        # Answered while both pages were still waiting for the upstream.
        assert answers == []

        upstream.release.set()
        for t in pages:
            t.join(60)
        assert answers == [404, 404]
        assert http_request(server.url, "GET", "/simple/local-pkg/").status == 200
    finally:
        upstream.close()
