"""Real keys and certificates for tests, made with `cryptography` on the spot: what a user pastes (a
.pub line, a CA's PEM, by mistake a private key), never a truncated look-alike the spec would refuse."""

from __future__ import annotations

import datetime
from functools import cache

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID


@cache
def _ed25519() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


def ssh_public_key(comment: str) -> str:
    """An OpenSSH public key line, as in a user's id_ed25519.pub."""
    blob = _ed25519().public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return f"{blob.decode()} {comment}"


def ssh_private_key() -> str:
    """The private half in OpenSSH's format, as in id_ed25519."""
    return _ed25519().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()


@cache
def _ca() -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuforge test CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem


def ca_certificate() -> str:
    """A CA certificate in PEM."""
    return _ca()[0]


def ca_private_key() -> str:
    """The CA's private key in PEM (PKCS#8): what must never reach a stack file."""
    return _ca()[1]
