"""Checks of a Slurm burst (`hybrid.burst.mechanism: slurm`) against the scheduler, the node groups and
the site; every problem at once. What they guard: a job never spans the link (each partition holds one
side), every cloud node can join (it runs Slurm, the site's controller and /home are routed over the
link), and the cloud side has no second control plane (no Kubernetes worker, no cloud login nodes)."""

from __future__ import annotations

import ipaddress

from gpuforge.catalog.mounts import HOME_MOUNT_POINT

from .errors import SpecIssue
from .models import ClusterSpec
from .paths import NODE_GROUPS
from .site import NfsMount
from .slurm_burst import SlurmBurstSpec

PATH = "cluster.hybrid.burst"
FIX_MECHANISM = (
    "set hybrid.burst: {mechanism: slurm, scaler_ca_certificate: <the site CA's PEM>} (cloud partitions of the "
    "site's controller)"
)


def cloud_slurm_groups(spec: ClusterSpec) -> list[str]:
    return sorted(n for n, g in spec.node_groups.items() if g.orchestrator == "slurm")


def check_slurm_burst(spec: ClusterSpec) -> list[SpecIssue]:
    hybrid = spec.hybrid
    burst = hybrid.burst if hybrid is not None else None
    if not isinstance(burst, SlurmBurstSpec):
        if spec.scheduler is not None and cloud_slurm_groups(spec):
            where = f"{PATH}.mechanism" if burst is not None else PATH
            return [SpecIssue(where, f"cloud node groups {', '.join(cloud_slurm_groups(spec))} run Slurm, but the "
                              "burst is not a Slurm burst", FIX_MECHANISM)]
        return []
    issues: list[SpecIssue] = []
    sched = spec.scheduler
    if sched is None:
        issues.append(SpecIssue(f"{PATH}.mechanism", "a Slurm burst needs the site's Slurm controller: there is "
                                "no scheduler section", "add scheduler: {kind: slurm, controller: {hosts: ...}, "
                                "partitions: ...} with a partition of the cloud groups"))
    for name, group in spec.node_groups.items():
        if group.orchestrator != "slurm":
            issues.append(SpecIssue(NODE_GROUPS.key(name).field("orchestrator"),
                                    f"{group.orchestrator} in a Slurm burst: the group's nodes would join nothing",
                                    "use orchestrator: slurm (its nodes register with the site's controller)"))
    if spec.kubernetes is not None:
        issues.append(SpecIssue("cluster.kubernetes", "a Kubernetes cluster in the cloud beside a Slurm burst",
                                "remove it: the cloud nodes join the site's Slurm controller (a Kubernetes site "
                                "bursts with mechanism: multikueue)"))
    if sched is None:
        return issues
    for i, login in enumerate(sched.login.node_groups):
        issues.append(SpecIssue(f"cluster.scheduler.login.node_groups[{i}]",
                                f"{login} puts login nodes in the cloud: their srun would reach site nodes over the "
                                "link", "log users in on the site's login hosts (scheduler.login.hosts)"))
    for pname, partition in sched.partitions.items():
        cloud = [g for g in partition.node_groups if g in spec.node_groups]
        site = [g for g in partition.node_groups if g not in spec.node_groups]
        if cloud and site:
            issues.append(SpecIssue(f"cluster.scheduler.partitions[{pname}].node_groups",
                                    f"mixes site pools ({', '.join(site)}) and cloud groups ({', '.join(cloud)}): a "
                                    "job in it could span the link",
                                    "split it: one partition of the site's pools, one of the cloud groups"))
    if sched.directory is not None:
        # The cloud groups' images carry local users (bake-image-slurm.yml), not SSSD: the directory's users
        # would not resolve on cloud nodes, and their jobs would fail there.
        issues.append(SpecIssue("cluster.scheduler.directory", "the site's directory in a Slurm burst: cloud nodes "
                                "boot from their image with local users only (no SSSD, no bind password in AWS), "
                                "so the directory's users would not resolve there and their jobs would fail",
                                "declare the users in scheduler.users without a directory (created with the same "
                                "uids on site and cloud nodes), or keep the directory on an onprem cluster"))
    if not any(g in spec.node_groups for p in sched.partitions.values() for g in p.node_groups):
        issues.append(SpecIssue("cluster.scheduler.partitions", "no partition holds a cloud node group: the burst "
                                "nodes would join and run nothing", "add a cloud partition, e.g. cloud: "
                                "{node_groups: [<cloud group>]}"))
    return issues + _home_over_the_link(spec)


def _home_over_the_link(spec: ClusterSpec) -> list[SpecIssue]:
    """Cloud nodes mount the site's /home over the link: an NFS export at an address the link routes."""
    site = spec.site
    if site is None:
        return []
    for key, mount in site.storage.mounts.items():
        if mount.mount_point != HOME_MOUNT_POINT:
            continue
        path = f"cluster.site.storage.mounts[{key}]"
        if not isinstance(mount, NfsMount):
            return [SpecIssue(f"{path}.kind", f"/home is {mount.kind}; cloud nodes reach it only over the link's "
                              "IP routes", "serve /home over NFS at an address in site.cidrs")]
        try:
            address = ipaddress.ip_address(mount.server)
        except ValueError:
            return [SpecIssue(f"{path}.server", f"{mount.server!r} is a name; cloud nodes resolve no site names",
                              "give the NFS server's address (in site.cidrs)")]
        if not any(address in ipaddress.ip_network(c) for c in site.cidrs):
            return [SpecIssue(f"{path}.server", f"{address} is outside site.cidrs ({', '.join(site.cidrs)}): the "
                              "link does not route it", "add its range to site.cidrs, or serve /home from there")]
    return []  # no /home at all is the scheduler check's (cluster.site.storage.mounts)
