"""The site's rail-optimized fabric, tier by tier: leaf ports per scalable unit, then the ports and the
reach of the spine tier, then of the core tier on three tiers; every problem at once, with the numbers.

Rail-optimized (RAIL_FABRIC_SOURCE in site_checks.py): every host of a scalable unit (SU) takes a port on
each of the SU's rail leaves. Ports: each tier's uplinks must land on the tier above. Reach: a switch
reaches at most as many switches below as it has down ports, so a two-tier fabric of 64-port spines stops
at 64 leaves (eight SUs of eight rails), and a three-tier fabric groups whole SUs under spine groups (pods)
of at most spine_down leaves, and stops at core_ports pods. NVIDIA's reference designs
(gpuforge/catalog/data/fabric_reference.yaml) pass these checks exactly, and fail one switch short.
"""

from __future__ import annotations

from collections import defaultdict

from gpuforge.catalog.fabric_reference import load_fabric_reference

from .errors import SpecIssue
from .resolved_site import ResolvedHost
from .site import Site, SiteFabric

PATH = "cluster.site.fabric"


def check_fabric_tiers(site: Site, hosts: dict[str, ResolvedHost]) -> list[SpecIssue]:
    fabric = site.fabric
    if fabric is None:
        return []
    if fabric.uplinks >= fabric.leaf_ports:
        return [
            SpecIssue(
                f"{PATH}.leaf_uplinks",
                f"{fabric.uplinks} uplinks leave no host ports on a {fabric.leaf_ports}-port leaf",
                f"use fewer than {fabric.leaf_ports}",
            )
        ]
    per_su: dict[str, int] = defaultdict(int)
    for host in hosts.values():
        if host.spec.hcas:
            per_su[host.scalable_unit] += 1
    issues = _leaf_tier(fabric, per_su, set(site_units(site)))
    units = sorted(per_su)
    if len(units) > 1 or fabric.spines or fabric.cores:
        issues += _core_tier(fabric, units) if fabric.cores else _spine_tier(fabric, units)
    return issues


def site_units(site: Site) -> list[str]:
    return sorted({rack.scalable_unit for rack in site.racks.values()})


def _leaf_tier(fabric: SiteFabric, per_su: dict[str, int], units: set[str]) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    for su in sorted(set(fabric.reserved_leaf_ports) - units):
        issues.append(
            SpecIssue(
                f"{PATH}.reserved_leaf_ports[{su}]",
                f"no scalable unit {su!r}",
                f"key it by a rack's scalable_unit: {', '.join(sorted(units))}",
            )
        )
    for su, count in sorted(per_su.items()):
        reserved = fabric.reserved_leaf_ports.get(su, 0)
        if count + reserved > fabric.downlinks:
            held = f" and {reserved} held for subnet managers" if reserved else ""
            issues.append(
                SpecIssue(
                    f"{PATH}.leaf_ports",
                    f"scalable unit {su}: {count} hosts{held} need {count + reserved} host ports on each of its "
                    f"{fabric.rails} rail leaves; a leaf has {fabric.downlinks} ({fabric.leaf_ports} ports, "
                    f"{fabric.uplinks} uplinks), short {count + reserved - fabric.downlinks}",
                    "move racks to another scalable unit, or use larger leaves",
                )
            )
    return issues


def _spine_tier(fabric: SiteFabric, units: list[str]) -> list[SpecIssue]:
    """Two tiers: every leaf reaches every spine, so a spine needs a port for every leaf."""
    issues: list[SpecIssue] = []
    leaves = len(units) * fabric.rails
    if leaves > fabric.spine_ports:
        reference = load_fabric_reference()
        issues.append(
            SpecIssue(
                f"{PATH}.cores",
                f"{leaves} leaves ({len(units)} scalable units x {fabric.rails} rails) on two tiers: "
                f"{_article(fabric.spine_ports)} {fabric.spine_ports}-port spine reaches at most "
                f"{fabric.spine_ports} leaves, so leaves past that share no spine with the others ({reference.source})",
                "add a core tier: cores and spine_uplinks, the spines then in groups of whole scalable units (the "
                "32-SU SuperPOD: 256 leaf, 256 spine, 128 core switches)",
            )
        )
    if leaves * fabric.uplinks > fabric.spines * fabric.spine_ports:
        need = -(-leaves * fabric.uplinks // fabric.spine_ports)
        issues.append(
            SpecIssue(
                f"{PATH}.spines",
                f"{leaves} leaves x {fabric.uplinks} uplinks need {leaves * fabric.uplinks} spine ports; "
                f"{fabric.spines} spines have {fabric.spines * fabric.spine_ports}",
                f"use at least {need} spines",
            )
        )
    return issues


def _core_tier(fabric: SiteFabric, units: list[str]) -> list[SpecIssue]:
    """Three tiers: whole SUs under spine groups (pods) whose spines each have a port for every leaf of the pod;
    the pods' spines' uplinks land on the cores, and every core has a port for every pod."""
    issues: list[SpecIssue] = []
    if fabric.units_per_pod == 0:
        return [
            SpecIssue(
                f"{PATH}.spine_uplinks",
                f"a spine's {fabric.spine_down} down ports cannot reach one scalable unit's {fabric.rails} leaves",
                f"use at most {fabric.spine_ports - fabric.rails} spine_uplinks",
            )
        ]
    pods = fabric.pods(units)
    spines_needed = sum(-(-len(pod) * fabric.rails * fabric.uplinks // fabric.spine_down) for pod in pods)
    if fabric.spines < spines_needed:
        issues.append(
            SpecIssue(
                f"{PATH}.spines",
                f"{len(pods)} spine groups of up to {fabric.units_per_pod} scalable units ({fabric.spine_down} leaves "
                f"per spine's {fabric.spine_down} down ports), each leaf's {fabric.uplinks} uplinks landing in its "
                f"group, need {spines_needed} spines; {fabric.spines} declared",
                f"use at least {spines_needed} spines",
            )
        )
    if len(pods) > fabric.core_ports:
        most = fabric.core_ports * fabric.units_per_pod
        issues.append(
            SpecIssue(
                f"{PATH}.core_ports",
                f"{len(pods)} spine groups: {_article(fabric.core_ports)} {fabric.core_ports}-port core reaches "
                f"at most {fabric.core_ports}, so the fabric stops at {most} scalable units of {fabric.rails} "
                f"leaves; it has {len(units)}",
                "use larger core switches, or more spine down ports (fewer spine_uplinks: more units per group, "
                "oversubscribing the spine tier)",
            )
        )
    core_ports_needed = fabric.spines * fabric.spine_up
    if core_ports_needed > fabric.cores * fabric.core_ports:
        need = -(-core_ports_needed // fabric.core_ports)
        issues.append(
            SpecIssue(
                f"{PATH}.cores",
                f"{fabric.spines} spines x {fabric.spine_up} uplinks need {core_ports_needed} core ports; "
                f"{fabric.cores} cores have {fabric.cores * fabric.core_ports}",
                f"use at least {need} cores",
            )
        )
    return issues


def _article(number: int) -> str:
    return "an" if str(number).startswith(("8", "11", "18")) else "a"
