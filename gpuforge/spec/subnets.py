"""Subnet plan: one subnet per tier per availability zone, carved from the VPC CIDR.

Largest blocks are placed first so they stay aligned, and AZs are taken in name order so
reordering the AZ list changes nothing. Adding an AZ can move planned subnets: pin a tier
with explicit `cidrs` where that matters.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from .errors import SpecIssue
from .models import DEFAULT_TIER_PREFIX, TIERS, Network, Tier

Subnets = dict[tuple[Tier, str], ipaddress.IPv4Network]


def plan_subnets(network: Network) -> tuple[Subnets, list[SpecIssue]]:
    """Return the subnet per (tier, AZ) and the problems that stop the plan."""
    vpc = ipaddress.IPv4Network(network.cidr)
    base = "cluster.network"
    issues: list[SpecIssue] = []
    taken: Subnets = {}
    wanted: list[tuple[int, Tier, str]] = []
    azs = sorted(network.availability_zones)

    for tier in TIERS:
        spec = network.tier(tier)
        if spec.cidrs is not None:
            issues += _place_explicit(network, tier, spec.cidrs, vpc, taken)
        else:
            prefix = spec.prefix_length or DEFAULT_TIER_PREFIX[tier]
            if prefix < vpc.prefixlen:
                issues.append(
                    SpecIssue(
                        f"{base}.tiers[{tier}].prefix_length",
                        f"/{prefix} is larger than the VPC {vpc}",
                        f"use a prefix length of at least /{vpc.prefixlen + 2}",
                    )
                )
                continue
            wanted += [(prefix, tier, az) for az in azs]

    for prefix, tier, az in sorted(wanted, key=lambda w: (w[0], TIERS.index(w[1]), w[2])):
        block = next(_free_blocks(vpc, prefix, list(taken.values())), None)
        if block is None:
            issues.append(
                SpecIssue(
                    f"{base}.tiers[{tier}]",
                    f"no free /{prefix} left in {vpc} for {az} ({len(azs)} AZs x {len(TIERS)} tiers do not fit)",
                    "use a larger VPC CIDR, longer prefix_length values, or fewer availability zones",
                )
            )
            continue
        taken[(tier, az)] = block
    return taken, issues


def _free_blocks(
    vpc: ipaddress.IPv4Network, prefix: int, used: list[ipaddress.IPv4Network]
) -> Iterator[ipaddress.IPv4Network]:
    for block in vpc.subnets(new_prefix=prefix):
        if not any(block.overlaps(u) for u in used):
            yield block


def _place_explicit(
    network: Network,
    tier: Tier,
    cidrs: dict[str, str],
    vpc: ipaddress.IPv4Network,
    taken: Subnets,
) -> list[SpecIssue]:
    path = f"cluster.network.tiers[{tier}].cidrs"
    issues = []
    missing = sorted(set(network.availability_zones) - set(cidrs))
    if missing:
        issues.append(SpecIssue(path, f"no CIDR for {', '.join(missing)}", "give one CIDR per availability zone"))
    for az, cidr in sorted(cidrs.items()):
        block = ipaddress.IPv4Network(cidr, strict=False)
        if az not in network.availability_zones:
            issues.append(
                SpecIssue(f"{path}[{az}]", f"{az} is not in network.availability_zones", "add the AZ or drop it")
            )
        if not block.subnet_of(vpc):
            issues.append(SpecIssue(f"{path}[{az}]", f"{block} is outside the VPC {vpc}", f"pick a block in {vpc}"))
            continue
        clash = next(((k, v) for k, v in taken.items() if v.overlaps(block)), None)
        if clash is not None:
            (other_tier, other_az), other = clash
            issues.append(
                SpecIssue(
                    f"{path}[{az}]",
                    f"{block} overlaps {other} ({other_tier} in {other_az})",
                    "give each subnet its own range",
                )
            )
            continue
        taken[(tier, az)] = block
    return issues
