"""The site Prometheus's AWS credentials for EC2 discovery on a hybrid Slurm burst.

A site host has no instance profile, so `ec2_sd_configs` name an AWS profile (`profile:`, Prometheus'
configuration docs, `<ec2_sd_config>`: "Named AWS profile used to connect to the API") whose
`credential_process` runs IAM Roles Anywhere's aws_signing_helper with the Prometheus host's certificate, for a
session of the discovery role the stack declares (gpuforge/infra/hybrid/roles_anywhere.py). The prometheus role
writes that profile and points the service at it (`AWS_CONFIG_FILE`, and `AWS_SDK_LOAD_CONFIG=1`: Prometheus 2.x
builds its EC2 client with aws-sdk-go v1's session.NewSessionWithOptions, whose default SharedConfigStateFromEnv
reads the config file, and with it credential_process, only when that variable is set).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuforge.spec import ResolvedSpec
from gpuforge.spec.monitoring import SiteHostServer
from gpuforge.spec.slurm_burst import SlurmBurstSpec

DISCOVERY_PROFILE = "gpuforge-discovery"
# Beside prometheus.yml in what `gpuforge render monitoring --output` writes; the prometheus role reads it.
DISCOVERY_FILE = "aws-discovery.json"
# Stack output hybrid.burst.discovery (gpuforge/infra/hybrid/placement.py) -> the prometheus role's variables.
DISCOVERY_ARNS = {
    "trustAnchorArn": "prometheus_discovery_trust_anchor_arn",
    "profileArn": "prometheus_discovery_profile_arn",
    "roleArn": "prometheus_discovery_role_arn",
}


def discovers_through_roles_anywhere(resolved: ResolvedSpec) -> bool:
    """A site Prometheus (monitoring.server kind site_host) on a hybrid Slurm burst: the stack gives it a
    Roles Anywhere profile (SlurmBurst) and its ec2_sd jobs use it. A MultiKueue burst's nodes are monitored
    inside their EKS cluster."""
    spec = resolved.spec
    mon = spec.monitoring
    hybrid = spec.hybrid
    return (
        mon is not None
        and isinstance(mon.server, SiteHostServer)
        and hybrid is not None
        and isinstance(hybrid.burst, SlurmBurstSpec)
        and bool(resolved.node_groups)
    )


def discovery_settings(resolved: ResolvedSpec) -> dict[str, Any] | None:
    """What `gpuforge render monitoring` writes beside prometheus.yml (DISCOVERY_FILE) for the prometheus role: the
    profile the ec2_sd jobs name, the region, and the catalog's signing helper release. None where Prometheus
    needs no AWS credentials of its own."""
    if not discovers_through_roles_anywhere(resolved):
        return None
    helper = resolved.catalog.slurm.signing_helper
    return {
        "profile": DISCOVERY_PROFILE,
        "region": resolved.spec.region,
        "signing_helper": {"version": helper.version, "url": dict(helper.url), "sha256": dict(helper.sha256)},
    }


def discovery_role_vars(resolved: ResolvedSpec, outputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ARNs the prometheus role's profile names, from the deployed stack's output hybrid.burst.discovery ({}
    before `pulumi up` or where the stack needs none: the role then refuses, naming that output)."""
    if not discovers_through_roles_anywhere(resolved):
        return {}
    deployed = (((outputs or {}).get("hybrid") or {}).get("burst") or {}).get("discovery") or {}
    return {var: str(deployed[key]) for key, var in DISCOVERY_ARNS.items() if deployed.get(key)}
