#!/usr/bin/python3
"""A throwaway single-node OpenStack Swift with its S3 API (s3api + tempauth), for tests.

Debian's swift packages (swift, swift-proxy, swift-object, swift-container, swift-account,
python3-swift) on a temp directory: one-replica rings, the four servers on free loopback ports
with one worker each, the proxy's pipeline with s3api, tempauth (user test:tester, key
testing), slo (multipart uploads) and a bucket. Starts in a few seconds.

As a CLI (gtests and scripts):
    swift_s3.py start DIR   prints {"endpoint", "access_key", "secret_key", "bucket",
                            "region"} as JSON once the bucket answers
    swift_s3.py stop DIR    stops the servers started on DIR (SIGTERM, then SIGKILL)
    swift_s3.py start-again DIR   starts the stopped servers of DIR again, on the same ports
    swift_s3.py uploads DIR prints the bucket's multipart uploads in progress (S3's XML)
As a module: start(dir) -> dict, stop(dir), start_again(dir) -> dict; and the pytest fixture `swift_s3`.

/etc/swift/swift.conf (the hash suffix, policy 0) is the package's; everything else lives in
DIR. The servers run as the current user (`user =` in each config: Swift drops privileges to
that user and would otherwise look for "swift").
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

PYTHON = "/usr/bin/python3"  # python3-swift lives there, not in other Pythons
ACCESS_KEY = "test:tester"
SECRET_KEY = "testing"
BUCKET = "wheelforge"
REGION = "us-east-1"
START_TIMEOUT = 30.0
SERVERS = ("account", "container", "object", "proxy")


COMMON = """[DEFAULT]
bind_ip = 127.0.0.1
bind_port = {port}
workers = 0
user = {user}
swift_dir = {dir}
devices = {dir}/srv
mount_check = false
log_name = swift-{kind}
log_level = WARNING
log_address = {dir}/no-syslog
"""

BACKEND = COMMON + """
[pipeline:main]
pipeline = {kind}-server

[app:{kind}-server]
use = egg:swift#{kind}
"""

PROXY = COMMON + """
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo versioned_writes proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true
conn_timeout = 2
node_timeout = 10

[filter:s3api]
use = egg:swift#s3api
location = {region}

[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:{no_memcache}

[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:copy]
use = egg:swift#copy
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
[filter:versioned_writes]
use = egg:swift#versioned_writes
"""


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def s3_request(endpoint: str, method: str, path: str, body: bytes = b"",
               query: str = "") -> tuple[int, bytes]:
    """One S3 request signed with Signature V4 (path-style; `path` URI-encoded, `query` in
    canonical form: encoded, sorted, "k=v&..."): the harness's own, independent of
    wheelforge's signer."""
    host = endpoint.split("://", 1)[1]
    now = datetime.datetime.now(datetime.timezone.utc)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
    names = ";".join(sorted(headers))
    canonical = "\n".join([method, path, query, *(f"{k}:{headers[k]}" for k in sorted(headers)), "",
                           names, payload])
    scope = f"{day}/{REGION}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + SECRET_KEY).encode()
    for part in (day, REGION, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{scope}, "
                                f"SignedHeaders={names}, Signature={signature}")
    del headers["host"]
    url = endpoint + path + ("?" + query if query else "")
    req = urllib.request.Request(url, data=body if method in ("PUT", "POST") else None,
                                 method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _pids_file(d: Path) -> Path:
    return d / "pids.json"


def start(directory: str | os.PathLike) -> dict:
    """Starts Swift on `directory` (created; must not hold a running one) and creates the
    bucket. Raises RuntimeError naming the log files when it does not come up in time."""
    d = Path(directory).resolve()
    (d / "srv" / "d1").mkdir(parents=True, exist_ok=True)
    user = pwd.getpwuid(os.getuid()).pw_name
    ports = dict(zip(SERVERS + ("no_memcache",), free_ports(len(SERVERS) + 1)))
    for kind in SERVERS:
        template = PROXY if kind == "proxy" else BACKEND
        (d / f"{kind}-server.conf").write_text(template.format(
            port=ports[kind], user=user, dir=d, kind=kind, region=REGION,
            no_memcache=ports["no_memcache"]))
    endpoint = f"http://127.0.0.1:{ports['proxy']}"
    _launch(d, endpoint)
    info = {"endpoint": endpoint, "access_key": ACCESS_KEY, "secret_key": SECRET_KEY,
            "bucket": BUCKET, "region": REGION, "dir": str(d)}
    (d / "swift.json").write_text(json.dumps(info))
    return info


def start_again(directory: str | os.PathLike) -> dict:
    """Starts the Swift that start() made on `directory` and stop() stopped, on the same ports
    and with the objects it held (a store coming back after an outage). Returns start()'s
    dict."""
    d = Path(directory).resolve()
    info = json.loads((d / "swift.json").read_text())
    _launch(d, info["endpoint"])
    return info


def _launch(d: Path, endpoint: str) -> None:
    log = open(d / "swift.log", "ab")
    # eventlet without its DNS resolver (a second less to start; every address is a literal).
    env = dict(os.environ, EVENTLET_NO_GREENDNS="yes")
    p = subprocess.Popen([PYTHON, str(Path(__file__).resolve()), "_serve", str(d)],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True, env=env)
    log.close()
    pids = {"swift": p.pid}
    _pids_file(d).write_text(json.dumps(pids))
    try:
        _wait_and_create_bucket(d, endpoint, pids)
    except BaseException:
        stop(d)
        raise


def serve(directory: str) -> None:
    """The four servers in this one process (one Python start, one import of Swift: a few
    seconds, where four processes take three times as long on two busy cores), each an
    eventlet WSGI server as Swift's own run_server() would make it."""
    import eventlet
    import eventlet.wsgi
    from swift.common import utils, wsgi

    from swift.common.ring import RingBuilder

    os.environ["TZ"] = "UTC+0"
    time.tzset()
    utils.eventlet_monkey_patch()
    confs = {kind: utils.readconf(f"{directory}/{kind}-server.conf", f"app:{kind}-server")
             for kind in SERVERS}
    for kind in ("account", "container", "object"):  # one device, one replica
        builder = RingBuilder(4, 1, 1)
        builder.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1",
                         "port": int(confs[kind]["bind_port"]), "device": "d1", "weight": 1.0,
                         "meta": ""})
        builder.rebalance()
        builder.get_ring().save(f"{directory}/{kind}.ring.gz")
    servers = []
    for kind in SERVERS:
        conf_path = f"{directory}/{kind}-server.conf"
        conf = confs[kind]
        sock = eventlet.listen(("127.0.0.1", int(conf["bind_port"])))
        app = wsgi.loadapp(conf_path, global_conf={"log_name": f"swift-{kind}"})
        servers.append(eventlet.spawn(
            eventlet.wsgi.server, sock, app, utils.NullLogger(),
            custom_pool=wsgi.RestrictedGreenPool(size=1024), protocol=wsgi.SwiftHttpProtocol,
            socket_timeout=60, capitalize_response_headers=False))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    for server in servers:
        server.wait()


def _wait_and_create_bucket(d: Path, endpoint: str, pids: dict) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    last = "no answer"
    while time.monotonic() < deadline:
        for kind, pid in pids.items():
            if _exited(pid):
                raise RuntimeError(f"Swift exited: see {d}/swift.log")
        try:
            status, body = s3_request(endpoint, "PUT", "/" + BUCKET)
            # 409: the bucket is there already (a store started again).
            if status == 200 or (status == 409 and b"BucketAlready" in body):
                return
            last = f"HTTP {status}: {body[:200]!r}"
        except OSError as e:
            last = str(e)
        time.sleep(0.1)
    raise RuntimeError(f"Swift did not come up within {START_TIMEOUT} s ({last}): see {d}/swift.log")


def _exited(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == pid
    except ChildProcessError:  # not our child (the CLI's stop): is it there?
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")  # a zombie has exited


def stop(directory: str | os.PathLike, timeout: float = 5.0) -> None:
    """Stops the servers start() launched on `directory`; the files stay."""
    f = _pids_file(Path(directory))
    if not f.exists():
        return
    pids = list(json.loads(f.read_text()).values())
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(_exited(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if not _exited(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    f.unlink()


try:
    import pytest

    @pytest.fixture(scope="session")
    def swift_s3(tmp_path_factory):
        """A running Swift with its S3 API for the session: the dict start() returns."""
        d = tmp_path_factory.mktemp("swift")
        info = start(d)
        yield info
        stop(d)
except ImportError:  # the CLI needs no pytest
    pass


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "_serve":
        serve(argv[2])
        return 0
    if len(argv) == 3 and argv[1] == "uploads":  # the multipart uploads in progress
        info = json.loads((Path(argv[2]) / "swift.json").read_text())
        status, body = s3_request(info["endpoint"], "GET", "/" + BUCKET, query="uploads=")
        print(body.decode())
        return 0 if status == 200 else 1
    if len(argv) != 3 or argv[1] not in ("start", "stop", "start-again"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[1] == "start":
        print(json.dumps(start(argv[2])), flush=True)
    elif argv[1] == "start-again":
        print(json.dumps(start_again(argv[2])), flush=True)
    else:
        stop(argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
