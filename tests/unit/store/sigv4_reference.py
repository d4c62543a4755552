#!/usr/bin/python3
"""botocore's Signature V4 for the requests wf_store_tests describes (the Sigv4 tests).

Reads {"cases": [...]} as JSON on stdin, prints {"NAME": {...}} on stdout:
  kind "sign":    S3SigV4Auth on an AWSRequest (method, url, headers, body or an unsigned
                  payload): canonical_request, string_to_sign, authorization.
  kind "presign": boto3's generate_presigned_url("get_object") at a fixed time:
                  canonical_request, string_to_sign, url.
The time is each case's "time" (Unix seconds). Runs under Debian's /usr/bin/python3 with
python3-boto3; exits 2 when botocore is missing, which fails the test (never skips it).
"""

import datetime
import json
import sys
import types
from unittest import mock

try:
    import boto3
    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.config import Config
    from botocore.credentials import Credentials
except ImportError as e:  # pragma: no cover - the test fails on this
    print(f"botocore is not installed: {e}", file=sys.stderr)
    sys.exit(2)


def fixed_time(seconds):
    at = datetime.datetime.utcfromtimestamp(seconds)

    class Fixed(datetime.datetime):
        @classmethod
        def utcnow(cls):
            return at

    return mock.patch.object(botocore.auth, "datetime", types.SimpleNamespace(datetime=Fixed))


def recording(cls):
    """A subclass of signer `cls` that keeps its canonical request and string to sign."""

    class Recording(cls):
        seen = {}

        def canonical_request(self, request):
            value = super().canonical_request(request)
            Recording.seen["canonical_request"] = value
            return value

        def string_to_sign(self, request, canonical_request):
            value = super().string_to_sign(request, canonical_request)
            Recording.seen["string_to_sign"] = value
            return value

    return Recording


def sign(case):
    creds = Credentials(case["access_key"], case["secret"], case.get("token") or None)
    signer = recording(botocore.auth.S3SigV4Auth)(creds, "s3", case["region"])
    request = AWSRequest(method=case["method"], url=case["url"], headers=dict(case["headers"]),
                         data=case.get("body", "").encode())
    if case.get("unsigned_payload"):
        request.context["client_config"] = types.SimpleNamespace(
            s3={"payload_signing_enabled": False})
    with fixed_time(case["time"]):
        signer.add_auth(request)
    return {**signer.seen, "authorization": request.headers["Authorization"]}


def presign(case):
    client = boto3.client(
        "s3", endpoint_url=case["endpoint"], region_name=case["region"],
        aws_access_key_id=case["access_key"], aws_secret_access_key=case["secret"],
        aws_session_token=case.get("token") or None,
        config=Config(signature_version="s3v4",
                      s3={"addressing_style": case.get("addressing", "path")}))
    seen = {}
    signer_cls = botocore.auth.S3SigV4QueryAuth
    original_cr, original_sts = signer_cls.canonical_request, signer_cls.string_to_sign

    def canonical_request(self, request):
        seen["canonical_request"] = original_cr(self, request)
        return seen["canonical_request"]

    def string_to_sign(self, request, canonical):
        seen["string_to_sign"] = original_sts(self, request, canonical)
        return seen["string_to_sign"]

    params = {"Bucket": case["bucket"], "Key": case["key"]}
    params.update(case.get("params", {}))
    with fixed_time(case["time"]), \
            mock.patch.object(signer_cls, "canonical_request", canonical_request), \
            mock.patch.object(signer_cls, "string_to_sign", string_to_sign):
        url = client.generate_presigned_url("get_object", Params=params,
                                            ExpiresIn=case["expires"])
    return {**seen, "url": url}


def main():
    cases = json.load(sys.stdin)["cases"]
    out = {}
    for case in cases:
        out[case["name"]] = sign(case) if case["kind"] == "sign" else presign(case)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
