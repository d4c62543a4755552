"""The provenance of the build runner's own wheels (docs/runner.md, "Provenance"), checked as
a verifier would: the file's provenance URL from its JSON page, the attestation's signature over
the DSSE envelope verified with the certificate the server publishes at
/_/build-provenance.pem, and the signed statement read for what it says about the build."""

from __future__ import annotations

import base64
import json
import urllib.parse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from wfhelpers import path_of

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
RUNNER_BUILD_TYPE = "urn:wheelforge:runner-build:v1"


def dsse_pae(statement: bytes) -> bytes:
    payload_type = b"application/vnd.in-toto+json"
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type, len(statement), statement)


def served_certificate(server) -> x509.Certificate:
    resp = server.get("/_/build-provenance.pem")
    assert resp.status == 200, f"/_/build-provenance.pem -> {resp.status}: {resp.text[:300]}"
    assert (resp.header("Content-Type") or "").startswith("application/x-pem-file"), resp.headers
    cert = x509.load_pem_x509_certificate(resp.body)
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CODE_SIGNING in usages, usages
    return cert


def signed_build_statement(server, project: str, filename: str) -> dict:
    """The in-toto statement of `filename`'s provenance, once its signature verified with the
    server's certificate and its subject is the listed file and sha256."""
    resp = server.get(f"/simple/{project}/", {"Accept": JSON_TYPE})
    assert resp.status == 200, resp.text[:300]
    entries = {f["filename"]: f for f in resp.json()["files"]}
    assert filename in entries, sorted(entries)
    entry = entries[filename]
    assert isinstance(entry.get("provenance"), str), f"no provenance for {filename}: {entry}"
    url = urllib.parse.urljoin(server.url + f"/simple/{project}/", entry["provenance"])
    answer = server.get_file(path_of(url))
    assert answer.status == 200, f"{url} -> {answer.status}: {answer.text[:300]}"
    provenance = answer.json()
    assert provenance["version"] == 1, provenance
    (bundle,) = provenance["attestation_bundles"]
    assert bundle["publisher"]["kind"] == "wheelforge", bundle["publisher"]
    assert bundle["publisher"]["builder"] == server.url, bundle["publisher"]
    (attestation,) = bundle["attestations"]
    assert attestation["version"] == 1
    assert attestation["verification_material"]["transparency_entries"] == []

    certificate = served_certificate(server)
    embedded = base64.b64decode(attestation["verification_material"]["certificate"])
    assert embedded == certificate.public_bytes(serialization.Encoding.DER), \
        "the attestation names another certificate than the server publishes"
    statement = base64.b64decode(attestation["envelope"]["statement"])
    signature = base64.b64decode(attestation["envelope"]["signature"])
    # Raises InvalidSignature when the bytes or the key differ.
    certificate.public_key().verify(signature, dsse_pae(statement), ec.ECDSA(hashes.SHA256()))

    parsed = json.loads(statement)
    assert parsed["_type"] == "https://in-toto.io/Statement/v1", parsed
    assert parsed["subject"] == [{"name": filename, "digest": entry["hashes"]}], parsed["subject"]
    assert parsed["predicateType"] == "https://slsa.dev/provenance/v1", parsed
    assert parsed["predicate"]["buildDefinition"]["buildType"] == RUNNER_BUILD_TYPE, parsed
    return parsed
