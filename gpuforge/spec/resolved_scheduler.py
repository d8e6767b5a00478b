"""The Slurm cluster as `check_scheduler` resolves it: each partition's node groups, the controllers with their
names and addresses, and where accounting's database and /home live, so the rendered Slurm configuration, the
AWS components and the inventory read one set of facts. Keyword-only, so a new field cannot shift the others."""

from __future__ import annotations

from dataclasses import dataclass

from .resolved_site import ResolvedHost
from .scheduler import SchedulerSpec


@dataclass(frozen=True, kw_only=True)
class SlurmController:
    name: str  # host name, SlurmctldHost's name
    address: str  # management address
    availability_zone: str | None = None  # AWS
    subnet: str | None = None  # AWS management subnet CIDR


@dataclass(frozen=True, kw_only=True)
class SlurmGroup:
    """A node group as Slurm sees it: cloud (dynamic nodes) or a site pool (static hosts)."""

    name: str
    cloud: bool
    instance_type: str | None  # cloud
    hosts: tuple[ResolvedHost, ...]  # site
    count: int  # active nodes (cloud) or hosts (site)


@dataclass(frozen=True, kw_only=True)
class ResolvedScheduler:
    spec: SchedulerSpec
    controllers: tuple[SlurmController, ...]  # the first is the primary
    groups: dict[str, SlurmGroup]  # compute groups that sit in a partition
    login_groups: tuple[str, ...]
    login_hosts: dict[str, str]  # site service hosts users log in to: name -> management address
    database: str  # managed | controller
    home: str  # efs (AWS), or the key of the site's /home mount
    state_shared: bool  # StateSaveLocation on shared storage (a backup controller reads it)

    @property
    def default_partition(self) -> str:
        marked = [n for n, p in self.spec.partitions.items() if p.default]
        return marked[0] if marked else next(iter(self.spec.partitions))
