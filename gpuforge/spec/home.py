"""`scheduler.home`: where a Slurm cluster's shared /home lives.

On AWS: Amazon EFS (the default; TLS through the EFS mount helper) or Amazon FSx for OpenZFS (NFS, a single-AZ
file system: lower latency for many small files, what ParallelCluster users pick for large home directories). On
a site, /home is the site's own export: the mount at /home in site.storage.mounts, so this section stays unset
there. The checks that need the placement and the catalog (throughput per deployment type) are in
scheduler_checks.py, so every problem is reported at once.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import SpecModel

OpenZfsDeployment = Literal["SINGLE_AZ_1", "SINGLE_AZ_2", "SINGLE_AZ_HA_1", "SINGLE_AZ_HA_2"]


class EfsHome(SpecModel):
    kind: Literal["efs"] = Field(
        description="Amazon EFS: elastic, in every availability zone, encrypted at rest and in transit (TLS through "
        "the EFS mount helper), AWS Backup on."
    )


class FsxOpenZfsHome(SpecModel):
    kind: Literal["fsx_openzfs"] = Field(
        description="Amazon FSx for OpenZFS: provisioned throughput, one availability zone, NFS v4.1 (no encryption "
        "in transit of its own), encrypted at rest with the cluster key, daily backups."
    )
    deployment_type: OpenZfsDeployment = Field(
        default="SINGLE_AZ_HA_2",
        description="SINGLE_AZ_1/2 (one file server) or SINGLE_AZ_HA_1/2 (a standby in the same zone); the _2 types "
        "add an NVMe read cache. MULTI_AZ_1 is not offered here.",
    )
    storage_gib: int = Field(default=1024, ge=1, description="Storage capacity, GiB (64-524288).")
    throughput_mbps: int = Field(
        default=160,
        ge=1,
        description="Throughput capacity, MB/s: 64-4096 for the _1 types, 160-10240 for the _2 types (the catalog "
        "lists the values FSx takes).",
    )
    backup_retention_days: int = Field(
        default=7, ge=0, le=90, description="Daily automatic backups kept this many days (0 turns them off)."
    )


Home = Annotated[EfsHome | FsxOpenZfsHome, Field(discriminator="kind")]
