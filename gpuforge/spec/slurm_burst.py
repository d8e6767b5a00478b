"""`hybrid.burst` with `mechanism: slurm`: the site's Slurm controller bursts into AWS.

The controller, slurmdbd and the site's nodes stay on the site (the `scheduler` section); the cloud node
groups (`orchestrator: slurm`) form partitions of their own, and their nodes register dynamically with
the site's controller over the link (`slurmd -Z`, configless). What crosses the link, and only between
the site's CIDRs and the cloud compute tier: slurmctld (6817), slurmd (6818), srun's port range, and
NFS to the site's /home. A job runs in one partition, so on one side; topology.conf keeps each side
under its own switches, which Slurm never joins in one allocation.

The site's scaler (gpuforge-lifecycle on the controller) drives the cloud Auto Scaling groups with AWS
credentials from IAM Roles Anywhere: the site's CA (the trust anchor below) issues the controller host
a certificate, `aws_signing_helper` trades it for a one-hour session of a role that can only scale this
cluster's groups. No long-lived access key exists to leak or rotate (an IAM user's keys would).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import SpecModel
from .keys import CaCertificates


class SlurmBurstSpec(SpecModel):
    mechanism: Literal["slurm"] = Field(
        description="slurm: cloud node groups (orchestrator: slurm) are partitions of the site's Slurm controller; "
        "their nodes join it over the link (docs/onprem-hybrid.md)."
    )
    scaler_ca_certificate: CaCertificates = Field(
        description="PEM chain of the site CA that issues the Slurm controller hosts' certificates: the IAM Roles "
        "Anywhere trust anchor through which the site's scaler gets short-lived AWS credentials for the cloud "
        "Auto Scaling groups (a certificate, never a key: public data).",
    )
    session_minutes: int = Field(
        default=60,
        ge=15,
        le=720,
        description="How long one Roles Anywhere session of the scaler lasts, minutes (the signing helper renews).",
    )

