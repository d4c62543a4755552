"""The key that signs the provenance of the build runner's wheels (docs/runner.md,
"Provenance"): the data directory's own, made on first use by a server that runs build jobs;
a configured pair, checked by `config check` and published by the server; and the refusals
when either is unusable. The signed provenance itself is checked where wheels are built
(test_build_cli.py, test_git_source.py, test_first_build.py)."""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from build_provenance import served_certificate
from test_runner import fake_recipe, write_config, write_fake_source
from wfhelpers import run


def key_pair(root, name: str, *, code_signing: bool = True):
    """A P-256 key and a self-signed certificate for it, as PEM files ROOT/NAME-key.pem and
    ROOT/NAME-cert.pem (the key mode 0600)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} provenance")])
    usage = [ExtendedKeyUsageOID.CODE_SIGNING if code_signing else ExtendedKeyUsageOID.SERVER_AUTH]
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
            .sign(key, hashes.SHA256()))
    key_path = root / f"{name}-key.pem"
    cert_path = root / f"{name}-cert.pem"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key_path, cert_path, cert


def config_with(harness, attestations: str, recipes: bool = False):
    path = harness.root / "wheelforge.toml"
    if recipes:
        write_config(path, {"demo": fake_recipe("wf-demo", "{python} fake_wheel.py {out}")},
                     fake_source=write_fake_source(harness.path("src", "fake")))
        text = path.read_text()
    else:
        text = ""
    path.write_text(attestations + "\n" + text)
    return path


def test_a_server_that_runs_jobs_makes_its_key_once_and_publishes_its_certificate(harness):
    h = harness
    config = config_with(h, "", recipes=True)
    server = h.serve("--config", str(config))
    keys = h.data_dir / "keys"
    key_file = keys / "build-provenance-key.pem"
    cert_file = keys / "build-provenance-certificate.pem"
    assert key_file.stat().st_mode & 0o777 == 0o600, oct(key_file.stat().st_mode)
    served = served_certificate(server)
    assert served == x509.load_pem_x509_certificate(cert_file.read_bytes())
    assert served.subject.rfc4514_string() == "CN=wheelforge build provenance", served.subject
    made = key_file.read_bytes()
    server.stop()
    # A restart keeps the key and its certificate.
    server = h.serve("--config", str(config))
    assert key_file.read_bytes() == made
    assert served_certificate(server) == served


def test_a_server_without_builds_or_key_signs_nothing(harness, server):
    resp = server.get("/_/build-provenance.pem")
    assert resp.status == 404, resp.status
    assert "this server signs no build provenance" in resp.text, resp.text
    assert not (harness.data_dir / "keys").exists()


def test_a_configured_pair_is_published_and_checked(harness):
    h = harness
    key, cert, expected = key_pair(h.root, "team")
    config = config_with(h, f'[attestations]\nsigning_key = "{key}"\n'
                            f'signing_certificate = "{cert}"\n')
    proc = h.cli("config", "check", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    server = h.serve("--config", str(config))
    assert served_certificate(server) == expected
    assert not (h.data_dir / "keys").exists()


def test_config_check_names_what_is_wrong_with_the_pair(harness):
    h = harness
    key, cert, _ = key_pair(h.root, "team")
    other_key, other_cert, _ = key_pair(h.root, "other")
    _, tls_cert, _ = key_pair(h.root, "tls", code_signing=False)
    garbage = h.root / "garbage.pem"
    garbage.write_text("not a key\n")
    cases = {
        f'signing_key = "{key}"':
            "error: attestations.signing_certificate: required with attestations.signing_key",
        f'signing_key = "{key}"\nsigning_certificate = "{other_cert}"':
            f"error: attestations.signing_certificate: {other_cert}: the certificate "
            f"\"CN = other provenance\" is not for this private key (attestations.signing_key {key})",
        f'signing_key = "{garbage}"\nsigning_certificate = "{cert}"':
            f"error: attestations.signing_key: {garbage}: no unencrypted PEM private key in it",
        f'signing_key = "{h.root}/absent.pem"\nsigning_certificate = "{cert}"':
            f"error: attestations.signing_key: open {h.root}/absent.pem: No such file or directory",
        f'signing_key = "{key}"\nsigning_certificate = "{garbage}"':
            f"error: attestations.signing_certificate: {garbage}: no PEM certificate in it",
        'signing_key = "relative.pem"\nsigning_certificate = "x.pem"':
            "error: attestations.signing_key: expected an absolute path",
    }
    tls_key = h.root / "tls-key.pem"
    cases[f'signing_key = "{tls_key}"\nsigning_certificate = "{tls_cert}"'] = (
        f"error: attestations.signing_certificate: {tls_cert}: the certificate "
        f"\"CN = tls provenance\" is not for code signing (extended key usage)")
    for body, expected in cases.items():
        config = config_with(h, "[attestations]\n" + body + "\n")
        proc = h.cli("config", "check", "--config", str(config))
        assert proc.returncode == 2, (body, proc.stdout)
        assert any(line.startswith(expected) for line in proc.stderr.splitlines()), (
            f"{body}\nexpected: {expected}\ngot: {proc.stderr}")
        # serve refuses the same configuration the same way.
        proc = run([h.binary, "serve", "--config", str(config), "--data-dir", str(h.data_dir),
                    "--listen", "127.0.0.1:0"], timeout=30)
        assert proc.returncode == 2 and expected in proc.stderr, (body, proc.stderr)
    assert other_key.exists()


def test_a_damaged_key_of_the_data_directory_stops_the_server_with_its_name(harness):
    h = harness
    keys = h.data_dir / "keys"
    keys.mkdir(parents=True)
    key_file = keys / "build-provenance-key.pem"
    key_file.write_text("-----BEGIN PRIVATE KEY-----\ntruncated\n")
    config = config_with(h, "", recipes=True)
    proc = run([h.binary, "serve", "--config", str(config), "--data-dir", str(h.data_dir),
                "--listen", "127.0.0.1:0"], timeout=30)
    assert proc.returncode == 1, proc.stderr
    assert (f"the build provenance key {key_file}: no unencrypted PEM private key in it (a file "
            f"of this server's; remove it to make a new one, or set [attestations] signing_key "
            f"and signing_certificate)") in proc.stderr, proc.stderr
    # Nothing was replaced: the operator decides.
    assert key_file.read_text() == "-----BEGIN PRIVATE KEY-----\ntruncated\n"
    assert not (keys / "build-provenance-certificate.pem").exists()
