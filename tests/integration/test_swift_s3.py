"""The Swift harness (swift_s3.py) that the object store tests run against: it serves the S3
API with the documented credentials, and its fixture is shared by the session."""

from swift_s3 import s3_request, swift_s3  # noqa: F401 (the fixture)


def test_swift_serves_s3_with_tempauth_credentials(swift_s3):  # noqa: F811
    endpoint, bucket = swift_s3["endpoint"], swift_s3["bucket"]
    assert swift_s3["access_key"] == "test:tester"
    status, _ = s3_request(endpoint, "PUT", f"/{bucket}/harness/a%20b%2Bc", b"hello")
    assert status == 200
    status, body = s3_request(endpoint, "GET", f"/{bucket}/harness/a%20b%2Bc")
    assert (status, body) == (200, b"hello")
    status, body = s3_request(endpoint, "GET", f"/{bucket}/harness/absent")
    assert status == 404 and b"<Code>NoSuchKey</Code>" in body
    status, _ = s3_request(endpoint, "DELETE", f"/{bucket}/harness/a%20b%2Bc")
    assert status == 204
