"""Helpers shared by test modules."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gpuforge.plan.engine import plan_stack
from gpuforge.plan.model import Plan

REPO = Path(__file__).resolve().parents[1]  # the checkout

# The onprem-lab site run as the site's Kubernetes cluster (stacks/Pulumi.onprem-lab.yaml is Slurm):
# the tests of the site-Kubernetes path plan this one.
ONPREM_K8S = str(Path(__file__).resolve().parent / "fixtures" / "stacks" / "Pulumi.onprem-k8s.yaml")
# A Kubernetes site bursting through Kueue MultiKueue (stacks/Pulumi.hybrid.yaml is the Slurm burst): the
# tests of the MultiKueue path plan this one.
HYBRID_MULTIKUEUE = str(Path(__file__).resolve().parent / "fixtures" / "stacks" / "Pulumi.hybrid-multikueue.yaml")

# The site file systems of the booted site.yml test (Lustre over o2ib, BeeGFS, WEKA) as a user declares them:
# the test's machines get their mounts from this stack's inventory (site_mounts_from_spec).
BOOTED_SITE = str(Path(__file__).resolve().parent / "fixtures" / "stacks" / "Pulumi.booted-site.yaml")


@cache
def planned(stack: str) -> Plan:
    """A stack's offline plan, evaluated once per test session (a plan is a pure function of the stack file)."""
    return plan_stack(stack)


@cache
def site_mounts_from_spec() -> dict[str, Any]:
    """The site_mounts_mounts and lustre_client_o2ib_networks the BOOTED_SITE stack's inventory gives its
    GPU nodes (every group gets the same: the site's mounts are the site's)."""
    from gpuforge.nodes.inventory import build_inventory

    children = build_inventory(BOOTED_SITE, source="plan")["all"]["children"]
    keys = ("site_mounts_mounts", "lustre_client_o2ib_networks")
    found = [{key: children[ng]["vars"][key] for key in keys} for ng in children["gpu_nodes"]["children"]]
    assert found and all(entry == found[0] for entry in found), found
    return found[0]


def skip_unless_ci(missing: bool, reason: str) -> pytest.MarkDecorator:
    """Skip where a tool is missing on a developer's machine; in CI (CI=true, which .ci/run
    has installed everything for) run anyway, so a missing install step fails loudly."""
    return pytest.mark.skipif(missing and not os.environ.get("CI"), reason=reason)


def skip_or_fail(reason: str) -> None:
    """Inside a test or fixture: skip on a developer's machine, fail in CI (where .ci/run installed it)."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must provide it (see .ci/run)")
    pytest.skip(reason)


def private_ca_tls(ca_name: str, addresses: list[str]) -> tuple[bytes, bytes, bytes]:
    """(CA certificate, server certificate for *addresses*, server key), PEM: a site's private CA and a server it
    signed (the test directory's LDAP server, the BMC emulators)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    issuer = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca = (
        x509.CertificateBuilder().subject_name(issuer).issuer_name(issuer).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, addresses[0])])).issuer_name(issuer)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]),
                       critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca.public_bytes(serialization.Encoding.PEM), server.public_bytes(serialization.Encoding.PEM), key_pem
