"""PEP 740 attestations: a twine-style upload (`POST /legacy/`) carries an `attestations` form
field, a JSON array of attestation objects (a Fulcio-style signing certificate, a DSSE envelope
over an in-toto statement); the server verifies them against the trust roots of its
configuration (`[attestations] trust_roots`, a PEM bundle of a root and an intermediate CA) and
serves them as the file's provenance (the JSON and HTML simple pages name its URL, which
answers an application/vnd.pypi.integrity.v1+json document). Every refusal is checked: a
tampered statement, another key, another file's name or digest, a certificate of another CA,
a malformed field, a server without trust roots, and (through trusted publishing) a
certificate of another repository than the uploading publisher's. A refused upload stores
nothing.

The PKI (a root, an intermediate and signing certificates, P-256 keys) and the DSSE signatures
are made here at test time with `cryptography`.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import urllib.parse
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

import wfbackend
from test_claims import new_token
from test_publish import assert_nothing_left, html_anchors, listed_files, post_form
from test_trusted_publishing import Issuer, Key, add_publisher, github_claims, jwt, mint
from wfhelpers import Artifact, make_sdist, make_wheel, normalize, path_of


INTEGRITY_TYPE = "application/vnd.pypi.integrity.v1+json"
PUBLISH_PREDICATE = "https://docs.pypi.org/attestations/publish/v1"
SLSA_PREDICATE = "https://slsa.dev/provenance/v1"
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
REPOSITORY = "org/repo"
WORKFLOW_URI = "https://github.com/org/repo/.github/workflows/release.yml@refs/tags/v1"
# The publisher object the provenance names for a certificate of WORKFLOW_URI.
GITHUB_PUBLISHER = {"kind": "GitHub", "repository": "org/repo", "workflow": "release.yml"}
# Fulcio's certificate extensions (github.com/sigstore/fulcio, docs/oid-info.md).
OID_ISSUER = "1.3.6.1.4.1.57264.1.8"
OID_BUILD_SIGNER_URI = "1.3.6.1.4.1.57264.1.9"
OID_SOURCE_REPOSITORY_URI = "1.3.6.1.4.1.57264.1.12"
OID_SOURCE_REPOSITORY_REF = "1.3.6.1.4.1.57264.1.14"
OID_BUILD_CONFIG_URI = "1.3.6.1.4.1.57264.1.18"
TRANSPARENCY_ENTRIES = [{"logIndex": "12345", "kindVersion": {"kind": "dsse", "version": "0.0.1"}}]


# ---------------------------------------------------------------------------------------------
# PKI: a root CA, an intermediate CA and Fulcio-style signing certificates


@dataclasses.dataclass
class Pki:
    root: x509.Certificate
    root_key: ec.EllipticCurvePrivateKey
    intermediate: x509.Certificate
    intermediate_key: ec.EllipticCurvePrivateKey

    def bundle_pem(self) -> bytes:
        """The trust roots of a server's configuration: the root and the intermediate, PEM."""
        return b"".join(c.public_bytes(serialization.Encoding.PEM)
                        for c in (self.root, self.intermediate))


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def der_utf8string(text: str) -> bytes:
    """The DER encoding of a UTF8String (tag 0x0c, definite length, the bytes)."""
    data = text.encode()
    n = len(data)
    if n < 0x80:
        length = bytes([n])
    else:
        octets = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(octets)]) + octets
    return b"\x0c" + length + data


def _ski(cert: x509.Certificate) -> x509.SubjectKeyIdentifier:
    return cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value


def make_ca(common_name: str, key: ec.EllipticCurvePrivateKey,
            issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None
            ) -> x509.Certificate:
    """A CA certificate of `key` named `common_name`: self-signed when `issuer` is None, else
    signed by issuer's (certificate, key). Valid from an hour ago for a day."""
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "wheelforge tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = utc_now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer[0].subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None if issuer is None else 0),
                       critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(_ski(issuer[0])),
            critical=False)
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


def make_pki(label: str = "wheelforge test") -> Pki:
    """A root CA and an intermediate CA it issued (names start with `label`)."""
    root_key, intermediate_key = new_key(), new_key()
    root = make_ca(f"{label} root CA", root_key)
    intermediate = make_ca(f"{label} intermediate CA", intermediate_key, (root, root_key))
    return Pki(root, root_key, intermediate, intermediate_key)


def make_signing_cert(pki: Pki, key: ec.EllipticCurvePrivateKey, *,
                      oidc_issuer: str = GITHUB_ISSUER, repository: str = REPOSITORY,
                      ref: str = "refs/tags/v1") -> x509.Certificate:
    """A Fulcio-style signing certificate of `key` issued by the intermediate CA for the GitHub
    Actions job `https://github.com/<repository>/.github/workflows/release.yml@<ref>`: an empty
    subject (the SAN is critical), code signing, valid from a minute ago for 10 minutes, the
    claim extensions as DER UTF8Strings (the OIDC issuer is `oidc_issuer`)."""
    workflow = f"https://github.com/{repository}/.github/workflows/release.yml@{ref}"
    not_before = utc_now() - datetime.timedelta(minutes=1)
    claims = [
        (OID_ISSUER, oidc_issuer),
        (OID_BUILD_SIGNER_URI, workflow),
        (OID_SOURCE_REPOSITORY_URI, f"https://github.com/{repository}"),
        (OID_SOURCE_REPOSITORY_REF, ref),
        (OID_BUILD_CONFIG_URI, workflow),
    ]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([]))
        .issuer_name(pki.intermediate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_before + datetime.timedelta(minutes=10))
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=False, crl_sign=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(_ski(pki.intermediate)),
            critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(workflow)]),
                       critical=True)
    )
    for oid, value in claims:
        builder = builder.add_extension(
            x509.UnrecognizedExtension(ObjectIdentifier(oid), der_utf8string(value)),
            critical=False)
    return builder.sign(pki.intermediate_key, hashes.SHA256())


# ---------------------------------------------------------------------------------------------
# Statements, DSSE and attestation objects


def statement_bytes(filename: str, sha256: str, predicate_type: str = PUBLISH_PREDICATE) -> bytes:
    """An in-toto v1 statement about one file."""
    return json.dumps({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": filename, "digest": {"sha256": sha256}}],
        "predicateType": predicate_type,
        "predicate": None,
    }, separators=(",", ":")).encode()


def dsse_pae(statement: bytes) -> bytes:
    """DSSE's pre-authentication encoding of an in-toto statement: what the signature signs."""
    payload_type = b"application/vnd.in-toto+json"
    return (b"DSSEv1 " + str(len(payload_type)).encode() + b" " + payload_type + b" " +
            str(len(statement)).encode() + b" " + statement)


def sign(key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    """ECDSA P-256 over SHA-256, DER form."""
    return key.sign(data, ec.ECDSA(hashes.SHA256()))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def attestation(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey, statement: bytes,
                signed: bytes | None = None) -> dict:
    """A PEP 740 attestation object: `statement` in a DSSE envelope whose signature by `key`
    signs `signed` (default: `statement` itself; another value makes a tampered envelope)."""
    return {
        "version": 1,
        "verification_material": {
            "certificate": b64(cert.public_bytes(serialization.Encoding.DER)),
            "transparency_entries": TRANSPARENCY_ENTRIES,
        },
        "envelope": {
            "statement": b64(statement),
            "signature": b64(sign(key, dsse_pae(statement if signed is None else signed))),
        },
    }


def field(attestations: list[dict]) -> str:
    """The `attestations` form field."""
    return json.dumps(attestations)


# ---------------------------------------------------------------------------------------------
# Fixtures and checks


@dataclasses.dataclass
class Signer:
    """The trusted PKI (its bundle written to `roots`), and a signing key and certificate."""

    pki: Pki
    roots: Path
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def attest(self, artifact: Artifact, predicate_type: str = PUBLISH_PREDICATE) -> dict:
        return attestation(self.cert, self.key,
                           statement_bytes(artifact.filename, artifact.sha256, predicate_type))


def write_config(harness, roots: Path, extra: str = "") -> Path:
    """A configuration with `[attestations] trust_roots` (after `extra`, other tables)."""
    path = harness.root / "wheelforge.toml"
    text = (extra.rstrip("\n") + "\n\n" if extra else "")
    text += f'[attestations]\ntrust_roots = "{roots}"\n'
    path.write_text(text)
    wfbackend.config_changed(path)
    return path


@pytest.fixture
def signer(harness) -> Signer:
    pki = make_pki()
    roots = harness.path("pki") / "roots.pem"
    roots.write_bytes(pki.bundle_pem())
    key = new_key()
    return Signer(pki, roots, key, make_signing_cert(pki, key))


@pytest.fixture
def server(harness, tokens, signer):
    """A server whose configuration trusts the signer's PKI."""
    return harness.serve("--config", str(write_config(harness, signer.roots)))


def expected_path(artifact: Artifact) -> str:
    return (f"/integrity/{normalize(artifact.name)}/{artifact.version}/"
            f"{urllib.parse.quote(artifact.filename)}/provenance")


def assert_provenance(server, artifact: Artifact, attestations: list[dict],
                      publisher: dict | None = None) -> None:
    """The JSON and HTML pages name the file's provenance URL, and it answers the provenance
    object of `attestations` (exactly as uploaded) signed by `publisher`."""
    project = normalize(artifact.name)
    page = server.url + f"/simple/{project}/"
    entries = listed_files(server, project)
    assert artifact.filename in entries, f"{artifact.filename} not listed: {sorted(entries)}"
    entry = entries[artifact.filename]
    assert entry["hashes"] == {"sha256": artifact.sha256}, entry
    assert isinstance(entry.get("provenance"), str), f"no provenance URL: {entry}"
    url = urllib.parse.urljoin(page, entry["provenance"])
    assert path_of(url) == expected_path(artifact), entry

    anchors = html_anchors(server, project)
    assert artifact.filename in anchors, f"{artifact.filename} not on the HTML page: {anchors}"
    html_value = anchors[artifact.filename].get("data-provenance")
    assert html_value, f"no data-provenance: {anchors[artifact.filename]}"
    assert urllib.parse.urljoin(page, html_value) == url, (html_value, entry["provenance"])

    resp = server.get_file(path_of(url))  # follows the redirect to the object store (pg-s3)
    assert resp.status == 200, f"GET {path_of(url)} -> {resp.status}: {resp.text[:300]}"
    content_type = (resp.header("Content-Type") or "").split(";")[0].strip()
    assert content_type == INTEGRITY_TYPE, resp.header("Content-Type")
    assert resp.json() == {
        "version": 1,
        "attestation_bundles": [{
            "publisher": publisher or GITHUB_PUBLISHER,
            "attestations": attestations,
        }],
    }, resp.text


def assert_no_provenance(server, artifact: Artifact) -> None:
    """The file is listed without a provenance URL, and its would-be URL answers 404."""
    project = normalize(artifact.name)
    entries = listed_files(server, project)
    assert artifact.filename in entries, f"{artifact.filename} not listed: {sorted(entries)}"
    assert "provenance" not in entries[artifact.filename], entries[artifact.filename]
    anchor = html_anchors(server, project)[artifact.filename]
    assert "data-provenance" not in anchor, anchor
    resp = server.get(expected_path(artifact))
    assert resp.status == 404, f"GET {expected_path(artifact)} -> {resp.status}: {resp.text[:200]}"


def assert_refused_then_plain_upload_works(harness, server, token: str, artifact: Artifact,
                                           attestations: str, message: str) -> None:
    """The upload with `attestations` answers 400 naming `message` and stores nothing; the same
    file without attestations is then stored (201), without provenance."""
    before = harness.state()
    answer = post_form(server, artifact, token, attestations=attestations)
    assert answer.status == 400, answer.describe()
    assert message in answer.body, f"body lacks {message!r}: {answer.describe()}"
    assert_nothing_left(harness, before, f"a refused upload ({message})")
    assert artifact.filename not in listed_files(server, normalize(artifact.name))
    assert artifact.filename not in harness.filenames()

    plain = post_form(server, artifact, token)
    assert plain.status == 201, f"the same file without attestations: {plain.describe()}"
    assert_no_provenance(server, artifact)


# ---------------------------------------------------------------------------------------------
# Tests


def test_attested_upload_serves_its_provenance(harness, server, upload_token, signer, artifacts):
    wheel = make_wheel(artifacts, "attested-pkg", "1.0")
    both = [signer.attest(wheel, PUBLISH_PREDICATE), signer.attest(wheel, SLSA_PREDICATE)]
    answer = post_form(server, wheel, upload_token, attestations=field(both))
    assert answer.status == 201, answer.describe()
    assert json.loads(answer.body)["sha256"] == wheel.sha256, answer.body
    assert harness.filenames() == [wheel.filename]
    assert_provenance(server, wheel, both)

    # Another file of the same release, uploaded without attestations, has none.
    sdist = make_sdist(artifacts, "attested-pkg", "1.0")
    answer = post_form(server, sdist, upload_token)
    assert answer.status == 201, answer.describe()
    assert_no_provenance(server, sdist)
    assert_provenance(server, wheel, both)


def test_file_without_attestations_has_no_provenance(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "plain-pkg", "1.0")
    answer = post_form(server, wheel, upload_token)
    assert answer.status == 201, answer.describe()
    assert_no_provenance(server, wheel)


@dataclasses.dataclass
class Case:
    signer: Signer
    wheel: Artifact


def _tampered_statement(c: Case):
    """The envelope's statement was changed after signing (another predicate type)."""
    signed = statement_bytes(c.wheel.filename, c.wheel.sha256, SLSA_PREDICATE)
    shown = statement_bytes(c.wheel.filename, c.wheel.sha256, PUBLISH_PREDICATE)
    return ([attestation(c.signer.cert, c.signer.key, shown, signed=signed)],
            "the signature does not verify with its certificate's key")


def _other_key(c: Case):
    """Signed by another key than the certificate's."""
    stmt = statement_bytes(c.wheel.filename, c.wheel.sha256)
    return ([attestation(c.signer.cert, new_key(), stmt)],
            "the signature does not verify with its certificate's key")


def _second_of_two_tampered(c: Case):
    """A good attestation first does not carry a tampered second one."""
    good = c.signer.attest(c.wheel)
    bad = attestation(c.signer.cert, c.signer.key,
                      statement_bytes(c.wheel.filename, c.wheel.sha256, SLSA_PREDICATE),
                      signed=statement_bytes(c.wheel.filename, "0" * 64, SLSA_PREDICATE))
    return [good, bad], "the signature does not verify with its certificate's key"


def _other_digest(c: Case):
    stmt = statement_bytes(c.wheel.filename, "ab" * 32)
    return [attestation(c.signer.cert, c.signer.key, stmt)], "is not the file's"


def _other_file(c: Case):
    other = "other_pkg-1.0-py3-none-any.whl"
    stmt = statement_bytes(other, c.wheel.sha256)
    return ([attestation(c.signer.cert, c.signer.key, stmt)],
            f"the statement is about {other}, not {c.wheel.filename}")


def _foreign_ca(c: Case):
    """A certificate issued by another CA (same shape, same claims) than the trusted one."""
    foreign = make_signing_cert(make_pki("foreign"), c.signer.key)
    stmt = statement_bytes(c.wheel.filename, c.wheel.sha256)
    return [attestation(foreign, c.signer.key, stmt)], "does not chain to a trusted root"


def _not_an_array(c: Case):
    return json.dumps(c.signer.attest(c.wheel)), "attestations: not a JSON array"


def _not_json(c: Case):
    return "this is not JSON [", "attestations: not a JSON array"


@pytest.mark.parametrize("build", [
    pytest.param(_tampered_statement, id="tampered-statement"),
    pytest.param(_other_key, id="signed-by-another-key"),
    pytest.param(_second_of_two_tampered, id="second-of-two-tampered"),
    pytest.param(_other_digest, id="statement-sha256-differs"),
    pytest.param(_other_file, id="statement-about-another-file"),
    pytest.param(_foreign_ca, id="certificate-of-another-ca"),
    pytest.param(_not_an_array, id="object-not-array"),
    pytest.param(_not_json, id="not-json"),
])
def test_refused_attestations_store_nothing(harness, server, upload_token, signer, artifacts,
                                            build):
    wheel = make_wheel(artifacts, "refused-pkg", "1.0")
    value, message = build(Case(signer, wheel))
    attestations = value if isinstance(value, str) else field(value)
    assert_refused_then_plain_upload_works(harness, server, upload_token, wheel, attestations,
                                           message)


def test_server_without_trust_roots_refuses_attestations(harness, tokens, signer, artifacts):
    server = harness.serve()
    wheel = make_wheel(artifacts, "untrusted-pkg", "1.0")
    assert_refused_then_plain_upload_works(harness, server, tokens["upload"], wheel,
                                           field([signer.attest(wheel)]), "trust_roots")


def test_trusted_publisher_must_match_the_certificate(harness, signer, artifacts):
    """A token minted for a trusted publisher uploads attestations only of a certificate that
    its publisher's claims accept (its OIDC issuer is the publisher's issuer, its source
    repository extension the publisher's repository claim)."""
    issuer = Issuer("", [Key("RS256", "gh-1")])
    try:
        config = write_config(harness, signer.roots, extra="\n".join([
            "[[oidc_issuer]]", 'name = "github"', f'url = "{issuer.url}"',
            'jwks_refetch_interval = "0s"',
        ]))
        add_publisher(harness, config, "tp-good", "github", f"repository={REPOSITORY}")
        add_publisher(harness, config, "tp-other", "github", "repository=org/other")
        server = harness.serve("--config", str(config))
        # The certificate a GitHub job of org/repo gets, its OIDC issuer the configured one.
        key = new_key()
        cert = make_signing_cert(signer.pki, key, oidc_issuer=issuer.url)

        def token_for(repository: str) -> str:
            owner = repository.split("/")[0]
            claims = github_claims(
                issuer, repository=repository, repository_owner=owner,
                sub=f"repo:{repository}:ref:refs/tags/v1", ref="refs/tags/v1",
                job_workflow_ref=f"{repository}/.github/workflows/release.yml@refs/tags/v1")
            minted = mint(server, jwt(issuer.keys[0], claims))
            assert minted.status == 200, minted.text
            return minted.json()["token"]

        good = make_wheel(artifacts, "tp-good", "1.0")
        both = [attestation(cert, key, statement_bytes(good.filename, good.sha256, p))
                for p in (PUBLISH_PREDICATE, SLSA_PREDICATE)]
        answer = post_form(server, good, token_for(REPOSITORY), attestations=field(both))
        assert answer.status == 201, answer.describe()
        assert_provenance(server, good, both)

        other = make_wheel(artifacts, "tp-other", "1.0")
        one = [attestation(cert, key, statement_bytes(other.filename, other.sha256))]
        assert_refused_then_plain_upload_works(harness, server, token_for("org/other"), other,
                                               field(one), "does not match trusted publisher")
    finally:
        issuer.close()


def put_attestations(server, artifact: Artifact, token: str, body: str,
                     name: str | None = None):
    """PUT /upload/<file>.attestations: the attestations companion of a PUT upload."""
    target = urllib.parse.quote(name or artifact.filename, safe="") + ".attestations"
    return server.request("PUT", f"/upload/{target}",
                          {"Authorization": f"Bearer {token}",
                           "Content-Type": "application/json"}, body.encode())


def test_attestations_put_after_their_file_become_its_provenance(harness, server, upload_token,
                                                                 signer, artifacts):
    wheel = make_wheel(artifacts, "put-attested", "1.0")
    assert server.put_file(wheel, upload_token).status == 201
    assert_no_provenance(server, wheel)
    both = [signer.attest(wheel, PUBLISH_PREDICATE), signer.attest(wheel, SLSA_PREDICATE)]

    answer = put_attestations(server, wheel, upload_token, field(both))
    assert answer.status == 201, answer.text
    assert answer.json()["sha256"] == wheel.sha256, answer.text
    assert_provenance(server, wheel, both)
    # The same attestations again change nothing (200); others are refused: a file's
    # provenance does not change.
    again = put_attestations(server, wheel, upload_token, field(both))
    assert again.status == 200, again.text
    before = harness.state()
    other = put_attestations(server, wheel, upload_token, field(both[:1]))
    assert other.status == 409, other.text
    assert "has provenance already" in other.text, other.text
    assert_nothing_left(harness, before, "refused attestations")
    assert_provenance(server, wheel, both)

    # The audit trail says who added them.
    audit = server.get("/admin/audit?project=put-attested",
                       {"Authorization": f"Bearer {harness.token('admin')}"})
    assert audit.status == 200, audit.text
    actions = [(e["action"], e["target"]) for e in audit.json()["entries"]]
    assert ("attestations", wheel.filename) in actions, actions


def test_refused_attestations_put_leave_the_file_as_it_was(harness, server, upload_token, signer,
                                                          artifacts):
    wheel = make_wheel(artifacts, "put-refused", "1.0")
    sdist = make_sdist(artifacts, "put-refused", "1.0")
    assert server.put_file(wheel, upload_token).status == 201
    before = harness.state()
    tampered = attestation(signer.cert, signer.key,
                           statement_bytes(wheel.filename, wheel.sha256),
                           signed=statement_bytes(wheel.filename, "0" * 64))
    cases = [
        # (artifact, body, status, message)
        (wheel, field([tampered]), 400, "the signature does not verify"),
        (wheel, field([signer.attest(sdist)]), 400, f"the statement is about {sdist.filename}"),
        (wheel, "not json", 400, "not a JSON array of attestation objects"),
        (sdist, field([signer.attest(sdist)]), 404, "upload the file first"),
    ]
    for artifact, body, status, message in cases:
        answer = put_attestations(server, artifact, upload_token, body)
        assert answer.status == status, (message, answer.status, answer.text)
        assert message in answer.text, (message, answer.text)
    assert_nothing_left(harness, before, "refused attestations")
    assert_no_provenance(server, wheel)

    # A token of another project may not add them; without a token nothing is said at all.
    _, other_token = new_token(harness, "upload", project="someone-else")
    answer = put_attestations(server, wheel, other_token, field([signer.attest(wheel)]))
    assert answer.status == 403, answer.text
    anonymous = server.request("PUT", f"/upload/{wheel.filename}.attestations", {},
                               field([signer.attest(wheel)]).encode())
    assert anonymous.status == 401, anonymous.text
    # A body larger than attestations ever are is refused before it is read.
    huge = put_attestations(server, wheel, upload_token, "[" + " " * (1 << 20) + "]")
    assert huge.status == 413, huge.text
    assert_nothing_left(harness, before, "refused attestations")
    assert_no_provenance(server, wheel)
