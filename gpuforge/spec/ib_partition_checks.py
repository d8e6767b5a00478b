"""The fabric's partition keys, the hosts' port GUIDs and the subnet managers' priorities, checked together.

Every problem is reported at once, each at its field (the keys' and GUIDs' own form is the models' to check,
ib_partitions.py): a GUID on a device that is not one of the host's compute HCAs, or held by two ports; a
member host that is unknown, in two tenants or without the GUIDs of all its compute ports; sm_priority on UFM,
missing for a subnet manager, or tied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import SpecIssue
from .ib_partitions import SM_PRIORITY_SOURCE
from .site import Site

if TYPE_CHECKING:  # site_checks imports this module
    from .resolved_site import ResolvedHost

SITE = "cluster.site"
FABRIC = f"{SITE}.fabric"


def check_ib_partitions(site: Site, hosts: dict[str, ResolvedHost]) -> list[SpecIssue]:
    issues = _check_port_guids(site, hosts)
    fabric = site.fabric
    if fabric is not None and fabric.partitioning is not None:
        issues += _check_members(site, hosts)
        issues += _check_sm_priorities(site)
    return issues


def _check_port_guids(site: Site, hosts: dict[str, ResolvedHost]) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    owner: dict[str, str] = {}
    for name, host in sorted(hosts.items()):
        compute = host.spec.hcas_by_rail()
        for device, guid in host.spec.port_guids.items():
            path = f"{SITE}.hosts[{name}].port_guids[{device}]"
            if device not in compute:
                issues.append(
                    SpecIssue(
                        path,
                        f"{device} is not one of {name}'s compute HCAs ({', '.join(compute) or 'none'}): only "
                        "compute ports are partitioned on the compute fabric",
                        "list the GUIDs of the host's compute HCAs only",
                    )
                )
            where = f"{name} {device}"
            if guid in owner:
                issues.append(
                    SpecIssue(
                        path,
                        f"{guid} is also {owner[guid]}'s: a port GUID is unique on a fabric",
                        "copy each port's own GUID from `ibstat` on its host",
                    )
                )
            else:
                owner[guid] = where
    return issues


def _check_members(site: Site, hosts: dict[str, ResolvedHost]) -> list[SpecIssue]:
    fabric = site.fabric
    assert fabric is not None and fabric.partitioning is not None
    issues: list[SpecIssue] = []
    tenant_of: dict[str, str] = {}
    for tenant, members in fabric.partitioning.members.items():
        path = f"{FABRIC}.partitioning.members[{tenant}]"
        if tenant not in fabric.partitions:
            issues.append(
                SpecIssue(
                    path,
                    f"{tenant} has no key in site.fabric.partitions ({', '.join(fabric.partitions) or 'none'})",
                    f"add {tenant}: 0x00NN to site.fabric.partitions, or bind the hosts to a tenant that has a key",
                )
            )
        for member in members:
            host = hosts.get(member)
            if host is None:
                issues.append(SpecIssue(path, f"{member} is not a site host", "name hosts of site.hosts"))
                continue
            if member in tenant_of:
                issues.append(
                    SpecIssue(
                        path,
                        f"{member} is already a member of {tenant_of[member]}: its ports' P_Key index 0 (the key "
                        "NCCL_IB_PKEY=0 uses) holds one key",
                        f"put {member} in one tenant",
                    )
                )
                continue
            tenant_of[member] = tenant
    for name, host in sorted(hosts.items()):
        missing = [d for d in host.spec.hcas_by_rail() if d not in host.spec.port_guids]
        if not missing:
            continue
        where = f"a member of {tenant_of[name]}" if name in tenant_of else "in no tenant, a full member of Default"
        issues.append(
            SpecIssue(
                f"{SITE}.hosts[{name}].port_guids",
                f"{name} is {where}, but the GUIDs of its compute ports {', '.join(missing)} are not listed: the "
                "subnet manager partitions ports by GUID, and a port it does not know is a limited member of "
                "Default only, which reaches no other host",
                f"add {', '.join(f'{d}: <Port GUID>' for d in missing)} from `ibstat` on {name}",
            )
        )
    return issues


def _check_sm_priorities(site: Site) -> list[SpecIssue]:
    fabric = site.fabric
    assert fabric is not None and fabric.partitioning is not None
    partitioning = fabric.partitioning
    path = f"{FABRIC}.partitioning.sm_priority"
    if partitioning.manager == "ufm":
        if partitioning.sm_priority:
            return [
                SpecIssue(
                    path,
                    "UFM runs its own subnet manager and failover; gpuforge renders sm_priority for OpenSM only",
                    "remove sm_priority, or set manager: opensm",
                )
            ]
        return []
    issues: list[SpecIssue] = []
    managers = list(fabric.subnet_managers)
    unknown = sorted(set(partitioning.sm_priority) - set(managers))
    missing = [m for m in managers if m not in partitioning.sm_priority]
    if unknown:
        issues.append(
            SpecIssue(
                path,
                f"{', '.join(unknown)} not in site.fabric.subnet_managers ({', '.join(managers)})",
                "give priorities to the subnet manager hosts only",
            )
        )
    if missing:
        issues.append(
            SpecIssue(
                path,
                f"no sm_priority for {', '.join(missing)} ({SM_PRIORITY_SOURCE})",
                "give every subnet manager its own priority, e.g. 15 for the master and 14 for its standby",
            )
        )
    if len(managers) < 2:
        issues.append(
            SpecIssue(
                f"{FABRIC}.subnet_managers",
                f"one subnet manager ({', '.join(managers)}): when it fails, nothing reconfigures the fabric",
                "list a second host in subnet_managers with a lower sm_priority (its standby)",
            )
        )
    by_priority: dict[int, list[str]] = {}
    for host, priority in partitioning.sm_priority.items():
        by_priority.setdefault(priority, []).append(host)
    for priority, tied in sorted(by_priority.items()):
        if len(tied) > 1:
            issues.append(
                SpecIssue(
                    path,
                    f"{', '.join(tied)} share priority {priority}: the master would then be the one with the lower "
                    "port GUID, not the one you chose",
                    "give each subnet manager its own priority",
                )
            )
    return issues
