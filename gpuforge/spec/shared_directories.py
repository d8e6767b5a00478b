"""`scheduler.shared_directories`: directories every Slurm host mounts beside /home (ParallelCluster's shared
`/apps`: software, modules and containers built once for the whole cluster).

On AWS each is an Amazon EFS file system of its own, made like /home's (encrypted, TLS, AWS Backup, protected in
prod) and mounted on every controller, login and compute node. On a site each names a mount of
site.storage.mounts (an NFS export, usually), which the Slurm hosts mount too (the GPU hosts mount every site
mount already). Checks needing the placement and the other mounts are in scheduler_checks.py.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import SpecModel
from .fields import ABSOLUTE_PATH, Name


class EfsSharedDirectory(SpecModel):
    kind: Literal["efs"] = Field(description="AWS: an Amazon EFS file system of its own, set up like /home's.")
    mount_point: Annotated[str, Field(pattern=ABSOLUTE_PATH)] = Field(description="Where every host mounts it.")


class SiteSharedDirectory(SpecModel):
    kind: Literal["site"] = Field(description="On a site: a mount of site.storage.mounts, at its own mount_point.")
    mount: Name = Field(description="The key of the site mount (site.storage.mounts), e.g. apps.")


SharedDirectory = Annotated[EfsSharedDirectory | SiteSharedDirectory, Field(discriminator="kind")]
