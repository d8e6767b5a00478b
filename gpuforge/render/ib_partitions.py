"""A site's InfiniBand partitions as the subnet manager receives them (site.fabric.partitioning).

- OpenSM: partitions.conf (its partition_config_file) and, per subnet manager host, the opensm.conf settings that
  make one the master and the other its standby (sm_priority).
- UFM: the PKey calls of UFM's REST API, one per tenant (UFM writes partitions.conf itself).

Each tenant's key goes at index 0 of its members' P_Key tables (`indx0`, UFM's `index0`), so the NCCL_IB_PKEY=0
its members get (the P_Key index NCCL's queue pairs use) selects it. Ports in no tenant stay full members of
the Default partition; tenants' ports are limited members of it, so they reach the subnet manager (a full
member) but not each other's ports through it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpuforge.spec.ib_partitions import OPENSM_PARTITIONS_SOURCE, UFM_PKEY_API_SOURCE, FabricPartitioning
from gpuforge.spec.resolved import ResolvedSpec
from gpuforge.spec.site import Site

from .templates import render

PARTITIONS_TEMPLATE = "fabric/partitions.conf.j2"
OPENSM_TEMPLATE = "fabric/opensm.conf.j2"
PARTITIONS_PATH = "/etc/opensm/partitions.conf"
UFM_PKEYS_PATH = "/ufmRest/resources/pkeys"
# The index NCCL's queue pairs take from the port's P_Key table, where indx0 puts the tenant's key.
NCCL_PKEY_INDEX = 0


@dataclass(frozen=True)
class Partition:
    tenant: str
    pkey: str  # 0x and four hex digits
    guids: tuple[str, ...]


def fabric_partitioning(resolved: ResolvedSpec) -> FabricPartitioning | None:
    site = resolved.site
    fabric = site.spec.fabric if site is not None else None
    return fabric.partitioning if fabric is not None else None


def host_guids(resolved: ResolvedSpec, host: str) -> tuple[str, ...]:
    """The host's compute ports' GUIDs in rail order."""
    assert resolved.site is not None
    spec = resolved.site.hosts[host].spec
    return tuple(spec.port_guids[device] for device in spec.hcas_by_rail() if device in spec.port_guids)


def partitions(resolved: ResolvedSpec) -> list[Partition]:
    """Each tenant with members, its key and its members' port GUIDs (hosts by name, ports in rail order)."""
    partitioning = fabric_partitioning(resolved)
    assert resolved.site is not None and resolved.site.spec.fabric is not None and partitioning is not None
    keys = resolved.site.spec.fabric.partitions
    return [
        Partition(
            tenant,
            f"0x{int(keys[tenant], 16):04x}",
            tuple(guid for host in sorted(members) for guid in host_guids(resolved, host)),
        )
        for tenant, members in partitioning.members.items()
        if members
    ]


def unpartitioned_guids(resolved: ResolvedSpec) -> tuple[str, ...]:
    """The compute ports of hosts in no tenant: full members of Default, as they were before partitioning."""
    partitioning = fabric_partitioning(resolved)
    assert resolved.site is not None and partitioning is not None
    members = {host for hosts in partitioning.members.values() for host in hosts}
    outside = [host for host in sorted(resolved.site.hosts) if host not in members]
    return tuple(guid for host in outside for guid in host_guids(resolved, host))


def render_fabric(resolved: ResolvedSpec) -> dict[str, str]:
    """File name -> content: partitions.conf and opensm-<host>.conf per subnet manager (OpenSM), or
    ufm-pkeys.json (UFM). Empty when the site declares no partitioning."""
    partitioning = fabric_partitioning(resolved)
    if partitioning is None:
        return {}
    assert resolved.site is not None and resolved.site.spec.fabric is not None
    site = resolved.site.spec
    if partitioning.manager == "ufm":
        return {"ufm-pkeys.json": json.dumps(ufm_pkey_requests(resolved), indent=2) + "\n"}
    files = {
        "partitions.conf": render(
            PARTITIONS_TEMPLATE,
            site=site.name,
            source=OPENSM_PARTITIONS_SOURCE,
            partitions=partitions(resolved),
            unpartitioned=unpartitioned_guids(resolved),
        )
    }
    ranked = sorted(partitioning.sm_priority.items(), key=lambda item: -item[1])
    for rank, (host, priority) in enumerate(ranked):
        files[f"opensm-{host}.conf"] = render(
            OPENSM_TEMPLATE,
            host=host,
            priority=priority,
            role="master" if rank == 0 else "standby",
            partitions_path=PARTITIONS_PATH,
        )
    return files


def ufm_pkey_requests(resolved: ResolvedSpec) -> list[dict[str, Any]]:
    """One POST per tenant: its members' GUIDs, full members, the key at index 0 (NCCL_IB_PKEY=0), no IPoIB
    (the compute fabric carries RDMA only)."""
    return [
        {
            "method": "POST",
            "path": UFM_PKEYS_PATH,
            "source": UFM_PKEY_API_SOURCE,
            "body": {
                "pkey": partition.pkey,
                "guids": list(partition.guids),  # 0x and 16 digits: 18 characters, within the API's 16-20
                "membership": "full",
                "index0": True,
                "ip_over_ib": False,
            },
        }
        for partition in partitions(resolved)
    ]


def host_pkey_index(site: Site, host: str) -> int | None:
    """NCCL_IB_PKEY for a host: the index of its tenant's key (0, where indx0 puts it), or None when the host is in
    no tenant (NCCL's default index 0 is then the Default partition)."""
    partitioning = site.fabric.partitioning if site.fabric is not None else None
    if partitioning is None:
        return None
    return NCCL_PKEY_INDEX if any(host in members for members in partitioning.members.values()) else None
