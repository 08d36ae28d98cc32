"""TLS for the listener: a certificate given by the operator, or a self-signed one for
localhost made on first use and kept in the data folder (clients trust it via AWS_CA_BUNDLE)."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from pathlib import Path

SELF_SIGNED_DIR = "tls"


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


# The virtual-hosted domain the README documents for a laptop (`--domain s3.localhost`):
# always named, so that BUCKET.s3.localhost verifies.
LOCAL_DOMAIN = "s3.localhost"


def _names(domain: str | None) -> list[str]:
    """The DNS names the certificate covers: localhost, and each domain with its wildcard (a
    wildcard covers one label, so `*.localhost` alone never verified `bucket.localhost`'s
    virtual-hosted requests under `s3.localhost`)."""
    names = ["localhost"]
    for served in dict.fromkeys([LOCAL_DOMAIN, *([domain] if domain else [])]):
        names += [served, f"*.{served}"]
    return names


def _covers(cert: Path, names: list[str]) -> bool:
    from cryptography import x509

    try:
        loaded = x509.load_pem_x509_certificate(cert.read_bytes())
        found = loaded.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except (ValueError, x509.ExtensionNotFound):
        return False
    return set(names) <= set(found.value.get_values_for_type(x509.DNSName))


def self_signed(data: Path, domain: str | None = None) -> tuple[Path, Path]:
    """A certificate for localhost / 127.0.0.1 / ::1 and the virtual-hosted domain(s)
    (`s3.localhost`, and `domain`, each with its wildcard), created once and then reused;
    made again when `domain` is one it does not name."""
    folder = data / SELF_SIGNED_DIR
    cert, key = folder / "localhost.crt", folder / "localhost.key"
    wanted = _names(domain)
    if cert.exists() and key.exists() and _covers(cert, wanted):
        return cert, key
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "s3gw localhost")])
    now = datetime.datetime.now(datetime.UTC)
    names = [
        *(x509.DNSName(n) for n in wanted),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(
            private.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return cert, key
