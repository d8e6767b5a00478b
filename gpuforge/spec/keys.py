"""Certificates and keys in a stack file, parsed with `cryptography` rather than matched as text.

A field that takes a CA certificate holds PEM certificates and nothing else, and every one of them
parses: a private key pasted after the certificate, base64 that is no certificate, a block cut short
are all refused (the sssd role writes the directory's CA world-readable on every Slurm node, which
is only safe because nothing but certificates can get there). A field of SSH public keys holds
public keys of a type OpenSSH accepts, each of which parses. Messages say what is wrong with the
text, never the text: a refused value may be a private key.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from pydantic import AfterValidator

from gpuforge.catalog.spec_limits import spec_limits

PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)
# PEM (PKCS#1, PKCS#8, SEC1, OpenSSH's own format) and PuTTY private keys.
PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----|PuTTY-User-Key-File-\d+:")


def private_key_kind(text: str) -> str | None:
    """'an OpenSSH private key', 'a PEM private key (RSA PRIVATE KEY)', ... when the text holds one."""
    match = PRIVATE_KEY.search(text)
    if match is None:
        return None
    if match.group(0).startswith("PuTTY"):
        return "a PuTTY private key"
    label = match.group(0).removeprefix("-----BEGIN ").removesuffix("-----")
    return "an OpenSSH private key" if label.startswith("OPENSSH") else f"a PEM private key ({label})"


def certificate_chain_problem(text: str) -> str | None:
    """None when `text` is one or more PEM certificates that all parse, and nothing else; otherwise
    what is wrong, in words that never quote the text."""
    key = private_key_kind(text)
    if key is not None:
        return f"holds {key}, not only certificates"
    blocks = list(PEM_BLOCK.finditer(text))
    if not blocks:
        if "-----BEGIN CERTIFICATE-----" in text:
            return "a certificate is cut short: -----BEGIN CERTIFICATE----- has no -----END CERTIFICATE-----"
        return "holds no PEM certificate (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)"
    outside = PEM_BLOCK.sub("", text).strip()
    if outside:
        cut = "-----BEGIN" in outside
        return (
            "a certificate is cut short (a BEGIN line without its END line)"
            if cut
            else "holds text outside its PEM blocks; only certificates belong here"
        )
    for number, block in enumerate(blocks, start=1):
        if block.group(1) != "CERTIFICATE":
            return f"block {number} of {len(blocks)} is a {block.group(1)}, not a CERTIFICATE"
        try:
            x509.load_pem_x509_certificate(block.group(0).encode("ascii", "replace"))
        except ValueError:
            return (
                f"certificate {number} of {len(blocks)} does not parse (its base64 is truncated, altered or "
                "not a DER certificate)"
            )
    return None


def ssh_public_key_problem(text: str) -> str | None:
    """None when `text` is one OpenSSH public key line (type, base64, optional comment) of a known type
    that parses; otherwise what is wrong, without quoting the text."""
    key = private_key_kind(text)
    if key is not None:
        return f"is {key}, not a public key"
    known = spec_limits().ssh.public_key_types
    parts = text.strip().split(None, 2)
    if not parts:
        return "is empty"
    if parts[0] not in known:
        if _decodes(parts[0]):
            return f"has no key type before the key (one of {', '.join(known)})"
        return f"does not start with a key type OpenSSH accepts ({', '.join(known)})"
    if len(parts) < 2 or not _decodes(parts[1]):
        return f"has the type {parts[0]} but no base64 key after it"
    blob = base64.b64decode(parts[1])
    if _embedded_type(blob) != parts[0]:
        return f"says {parts[0]}, but the key after it is not one (truncated, or another type's key)"
    try:
        load_ssh_public_key(f"{parts[0]} {parts[1]}".encode())
    except UnsupportedAlgorithm:
        if not parts[0].startswith("sk-"):  # releases before 42 do not load FIDO keys; their type matched
            return f"the {parts[0]} key does not parse (truncated or altered)"
    except ValueError:
        return f"the {parts[0]} key does not parse (truncated or altered)"
    return None


def _decodes(text: str) -> bool:
    if len(text) < 16:
        return False
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _embedded_type(blob: bytes) -> str | None:
    """The key type an SSH public key blob starts with (RFC 4253 6.6: a length-prefixed string)."""
    if len(blob) < 4:
        return None
    length = int.from_bytes(blob[:4], "big")
    if length > 64 or len(blob) < 4 + length:
        return None
    return blob[4 : 4 + length].decode("ascii", "replace")


def _ca_chain(value: str) -> str:
    problem = certificate_chain_problem(value)
    if problem:
        raise ValueError(
            f"{problem} (a private key never belongs in a stack file); give only the CA's PEM certificate chain "
            "(-----BEGIN CERTIFICATE----- ...)"
        )
    return value


# A CA field: PEM certificates only, each parsed. Public by nature, and written world-readable on nodes
# (the sssd role's directory CA): a private key here would be neither.
CaCertificates = Annotated[str, AfterValidator(_ca_chain)]
