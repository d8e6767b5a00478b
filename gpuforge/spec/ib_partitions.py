"""InfiniBand partitioning of a site's compute fabric, as the subnet manager applies it: per port GUID.

Partition membership is a property of a port, not of a user: the subnet manager writes each port's P_Key
table, so a key per Slurm account cannot isolate two accounts whose jobs share a node. gpuforge binds each
tenant's key (`site.fabric.partitions`) to the hosts whose compute ports are full members of it
(`members`), from the hosts' port GUIDs (`site.hosts[].port_guids`). The key goes at index 0 of the ports'
P_Key tables (OpenSM partitions.conf `indx0`, UFM's `index0`), which is the index NCCL uses: NCCL_IB_PKEY is
the P_Key *index* its queue pairs take (net_ib's `qpAttr.pkey_index = ncclParamIbPkey()`), default 0.

Rules that cross the site (GUIDs against the hosts' compute ports, duplicates, members against hosts and
keys) live in `ib_partition_checks.py`, so every problem is reported at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field

from .base import SpecModel
from .fields import Name

SmPriority = Annotated[int, Field(ge=0, le=15)]
PORT_GUID = re.compile(r"^0x[0-9a-f]{16}$")
PKEY_TEXT = re.compile(r"^0x[0-9a-fA-F]{1,4}$")
DEFAULT_PKEY = 0x7FFF
Problem = tuple[str, str, str]  # (path below the model, message, fix): errors.FieldProblems

OPENSM_PARTITIONS_SOURCE = (
    "OpenSM doc/partition-config.txt (linux-rdma/opensm): <name>=<PKey>[,indx0][,ipoib] : <PortGUID>=full|limited, "
    "... ; only the low 15 bits of a P_Key are used, 0x7fff is the Default partition"
)
UFM_PKEY_API_SOURCE = (
    "NVIDIA UFM Enterprise REST API Guide, PKey GUIDs REST API: POST /ufmRest/resources/pkeys with guids, pkey "
    "(0x0-0x7fff exclusive), membership, index0, ip_over_ib"
)
SM_PRIORITY_SOURCE = (
    "opensm(8): sm_priority 0-15 in opensm.conf; the SM of the highest priority becomes master, the others stand by"
)


class FabricPartitioning(SpecModel):
    manager: Literal["opensm", "ufm"] = Field(
        default="opensm",
        description="What manages the fabric's partitions: opensm (gpuforge renders partitions.conf and each subnet "
        "manager's opensm.conf) or ufm (gpuforge renders the UFM REST API's PKey calls; UFM writes partitions.conf "
        "itself and runs its own failover).",
    )
    members: dict[Name, list[str]] = Field(
        default_factory=dict,
        description="Per tenant of site.fabric.partitions, the site hosts whose compute ports are full members of "
        "its key, at P_Key index 0 (NCCL_IB_PKEY=0 on them). A host belongs to one tenant; hosts in none stay "
        "full members of the Default partition (0x7fff).",
    )
    sm_priority: dict[str, SmPriority] = Field(
        default_factory=dict,
        description="OpenSM only: sm_priority (0-15) per site.fabric.subnet_managers host, every one listed, each "
        "its own: the highest is master, the next takes over when it fails.",
    )


def pkey_problems(partitions: Mapping[str, str]) -> list[Problem]:
    """Every key that is not hex, outside 0x0001-0x7ffe, or another tenant's."""
    problems: list[Problem] = []
    seen: dict[int, str] = {}
    for tenant, pkey in partitions.items():
        where = f"partitions[{tenant}]"
        if not PKEY_TEXT.match(pkey):
            problems.append((where, f"{pkey!r} is not a partition key", "write it in hex, like 0x0010"))
            continue
        number = int(pkey, 16)
        if not 0x0001 <= number < DEFAULT_PKEY:
            message = (
                f"{pkey} is outside 0x0001-0x7ffe: 0x0000 is invalid, 0x7fff is the Default partition and the top "
                f"bit (0x8000) is the membership the subnet manager sets ({OPENSM_PARTITIONS_SOURCE})"
            )
            problems.append((where, message, f"give {tenant} a 15-bit key of its own between 0x0001 and 0x7ffe"))
        elif number in seen:
            problems.append((where, f"{pkey} is already tenant {seen[number]}'s", f"give {tenant} a key of its own"))
        else:
            seen[number] = tenant
    return problems


def port_guid_problems(port_guids: Mapping[str, str]) -> list[Problem]:
    """Every GUID not written as ibstat prints a Port GUID."""
    return [
        (
            f"port_guids[{device}]",
            f"{guid!r} is not a port GUID (0x and 16 lowercase hex digits, as ibstat prints 'Port GUID')",
            "copy the Port GUID from `ibstat <device>` on the host, e.g. 0x946dae0300a1b2c0",
        )
        for device, guid in port_guids.items()
        if not PORT_GUID.match(guid)
    ]
