"""Host ranges, rack ranges and address pools: a site of thousands of hosts as a page of YAML.

A range names its members with Slurm's hostlist syntax (`dgx-[00001-12500]`, `r[0001-0004,0010]`, the
form slurm.conf(5) and `scontrol show hostnames` use), one bracket of numbers and number ranges whose
zero padding is kept. `Site` expands its ranges once, while it is validated, into the same racks and
hosts a site written host by host has: every later check, component and template reads `site.hosts`
and `site.racks` and never sees a range. The expansion is deterministic: ranges in the order written,
members in hostlist order, hosts filling racks in order at the range's U positions, and addresses drawn
from each pool in order, so adding a range at the end renumbers nothing before it.

This module is the logic only, on plain values; the models (`HostRange`, `RackRange`, `AddressPool`)
are in site.py beside the `Host` and `Rack` they expand into.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .fields import NAME_PATTERN

if TYPE_CHECKING:
    from .site import Host, Rack, Site

# One bracket of comma-separated numbers or number ranges, with an optional prefix and suffix.
_HOSTLIST = re.compile(r"^(?P<prefix>[^\[\],]*)\[(?P<body>[^\[\]]+)\](?P<suffix>[^\[\],]*)$")
_PART = re.compile(r"^(?P<start>\d+)(?:-(?P<end>\d+))?$")
# The most members one pattern may name: ten times the 12,500-host sites gpuforge is measured at
# (docs/benchmarks.md), so a typo such as dgx-[1-1000000] is an error, not a minute of expansion.
MAX_MEMBERS = 125_000
HOSTLIST_EXAMPLE = "dgx-[0001-1024]"


class RangeError(ValueError):
    """A pattern or pool that cannot be expanded; the message names what was written and what to write."""


def expand_hostlist(pattern: str) -> list[str]:
    """`dgx-[0001-0003,0007]` -> dgx-0001, dgx-0002, dgx-0003, dgx-0007 (slurm.conf(5) hostlist syntax; a name
    without brackets stands for itself). A number keeps the width it is written with."""
    if "[" not in pattern and "]" not in pattern:
        return [pattern]
    match = _HOSTLIST.match(pattern)
    if match is None:
        raise RangeError(
            f"{pattern!r} is not a host range; write one bracket of numbers and ranges like {HOSTLIST_EXAMPLE} "
            "or r[01-04,10] (Slurm's hostlist syntax)"
        )
    prefix, suffix = match["prefix"], match["suffix"]
    numbers: list[str] = []
    for part in match["body"].split(","):
        found = _PART.match(part.strip())
        if found is None:
            raise RangeError(f"{pattern!r}: {part!r} is not a number or a range of numbers like 0001-1024")
        start, end = found["start"], found["end"] or found["start"]
        if int(end) < int(start):
            raise RangeError(f"{pattern!r}: {start}-{end} runs backwards; write {end}-{start}")
        width = len(start) if start.startswith("0") or len(start) == len(end) else 0
        if len(numbers) + int(end) - int(start) + 1 > MAX_MEMBERS:
            raise RangeError(f"{pattern!r} names more than {MAX_MEMBERS:,} members; split the site or check the range")
        numbers += [f"{n:0{width}d}" for n in range(int(start), int(end) + 1)]
    names = [f"{prefix}{n}{suffix}" for n in numbers]
    doubled = sorted({n for n in names if names.count(n) > 1}) if len(set(names)) != len(names) else []
    if doubled:
        raise RangeError(f"{pattern!r} names {', '.join(doubled[:5])} more than once; list each number once")
    return names


@dataclass
class PoolDraw:
    """Addresses handed out in order from a pool's first address to the end of its block."""

    name: str
    network: ipaddress.IPv4Network
    next_address: int
    used: int = 0

    @classmethod
    def of(cls, name: str, cidr: str, first: str | None) -> PoolDraw:
        network = ipaddress.IPv4Network(cidr)
        start = int(ipaddress.IPv4Address(first)) if first else int(network.network_address) + 1
        return cls(name, network, start)

    @property
    def left(self) -> int:
        last = int(self.network.broadcast_address) - (1 if self.network.prefixlen < 31 else 0)
        return max(0, last - self.next_address + 1)

    def take(self, count: int) -> Iterator[str]:
        start = self.next_address
        self.next_address += count
        self.used += count
        return (str(ipaddress.IPv4Address(n)) for n in range(start, start + count))


def spread(members: list[str], groups: list[str]) -> dict[str, str]:
    """Members split into len(groups) equal consecutive runs, member -> its group (racks into scalable units)."""
    size = len(members) // len(groups)
    return {member: groups[i // size] for i, member in enumerate(members)}


Problem = tuple[str, str, str]  # (path below site, what is wrong, the fix): errors.FieldProblems


def expand_ranges(site: Site) -> tuple[dict[str, Rack], dict[str, Host], list[Problem]]:
    """site.racks and site.hosts with the ranges' members added, and every problem found (overlaps between
    ranges and with the listed racks and hosts, unknown racks or pools, too few racks or addresses, bad
    patterns). Without ranges the site's own dicts come back unchanged."""
    if not (site.rack_ranges or site.host_ranges):
        return site.racks, site.hosts, []
    # Local: site.py imports this module at its top, and calls this while it validates a Site.
    from .site import HOST_NAME, Host, Rack

    host_name = re.compile(HOST_NAME)

    problems: list[Problem] = []
    racks: dict[str, Any] = dict(site.racks)
    for pattern, shape in site.rack_ranges.items():
        path = f"rack_ranges[{pattern}]"
        expanded = _expand_each(path, (pattern, shape.scalable_units), problems)
        if expanded is None:
            continue
        names, units = expanded
        if len(names) % len(units):
            problems.append(
                (
                    f"{path}.scalable_units",
                    f"{len(names):,} racks do not split evenly over {len(units):,} scalable units",
                    f"use a unit count that divides {len(names):,}",
                )
            )
            continue
        problems += _named_twice(path, names, racks, "rack", _NAME)
        bad_unit = next((unit for unit in units if not _NAME.match(unit)), None)
        if bad_unit is not None:
            problems.append(
                (
                    f"{path}.scalable_units",
                    f"{bad_unit!r} is not a valid scalable unit name",
                    "start with a letter: lowercase letters, digits and hyphens, 2 to 32",
                )
            )
        fields = shape.model_dump(exclude={"scalable_units"})
        for name, unit in spread(names, units).items():
            racks.setdefault(name, Rack.model_construct(**fields, scalable_unit=unit))
    pools = {name: PoolDraw.of(name, pool.cidr, pool.first) for name, pool in site.address_pools.items()}
    hosts: dict[str, Any] = dict(site.hosts)
    claimed = set(hosts)
    for pattern, spec in site.host_ranges.items():
        path = f"host_ranges[{pattern}]"
        expanded = _expand_each(path, (pattern, spec.racks), problems)
        if expanded is None:
            continue
        names, rack_names = expanded
        found = _range_problems(path, spec, names, rack_names, racks, pools)
        problems += found + _named_twice(path, names, claimed, "host", host_name)
        claimed.update(names)  # a range with problems still claims its names: an overlap with it is reported
        if found:
            continue
        per_rack = len(spec.u_positions)
        traits = {field: getattr(spec, field) for field in _TRAITS}
        management = pools[spec.management_pool].take(len(names))
        bmc = pools[spec.bmc_pool].take(len(names))
        for i, name in enumerate(names):
            hosts.setdefault(
                name,
                Host.model_construct(
                    **traits,
                    rack=rack_names[i // per_rack],
                    u_position=spec.u_positions[i % per_rack],
                    management_ip=next(management),
                    bmc_address=next(bmc),
                    storage_ips=[],
                ),
            )
    return racks, hosts, problems


def _expand_each(path: str, patterns: tuple[str, ...], problems: list[Problem]) -> list[list[str]] | None:
    """Each pattern's members; None (and the problem recorded) where one is not a valid pattern."""
    try:
        return [expand_hostlist(pattern) for pattern in patterns]
    except RangeError as exc:
        problems.append((path, str(exc), "write the pattern as the message says"))
        return None


_TRAITS = ("model", "u_height", "hcas", "pool", "role", "orchestrator", "taints")
_NAME = re.compile(NAME_PATTERN)  # racks and scalable units are Names (model_construct skips the check)


def _named_twice(
    path: str, names: list[str], known: dict[str, Any] | set[str], what: str, shape: re.Pattern[str]
) -> list[Problem]:
    problems: list[Problem] = []
    taken = [n for n in names if n in known]
    if taken:
        problems.append(
            (
                path,
                f"{len(taken):,} {what}(s) already declared in site.{what}s or an earlier range "
                f"({', '.join(taken[:3])}{', ...' if len(taken) > 3 else ''})",
                f"give each {what} one entry",
            )
        )
    bad = [n for n in names if not shape.match(n)]
    if bad:
        problems.append((path, f"{bad[0]!r} is not a valid {what} name", f"write {what} names as site.{what}s keys"))
    return problems


def _range_problems(
    path: str, spec: Any, names: list[str], rack_names: list[str], racks: dict[str, Any], pools: dict[str, PoolDraw]
) -> list[Problem]:
    problems: list[Problem] = []
    unknown = [r for r in rack_names if r not in racks]
    if unknown:
        problems.append(
            (
                f"{path}.racks",
                f"{len(unknown):,} rack(s) not in site.racks or rack_ranges ({', '.join(unknown[:3])})",
                "declare them, or name declared racks",
            )
        )
    capacity = len(rack_names) * len(spec.u_positions)
    if len(names) > capacity:
        need = -(-len(names) // len(spec.u_positions))
        problems.append(
            (
                f"{path}.racks",
                f"{len(names):,} hosts at {len(spec.u_positions)} per rack need {need:,} racks; "
                f"{spec.racks} names {len(rack_names):,}",
                f"name at least {need:,} racks, or fewer hosts",
            )
        )
    shared = spec.management_pool == spec.bmc_pool  # one pool for both: two addresses per host
    for field in ("management_pool", "bmc_pool"):
        name = getattr(spec, field)
        pool = pools.get(name)
        need = len(names) * (2 if shared else 1)
        if pool is None:
            problems.append(
                (f"{path}.{field}", f"no address pool {name!r}", f"use one of {', '.join(pools) or '(none declared)'}")
            )
        elif pool.left < need:
            problems.append(
                (
                    f"{path}.{field}",
                    f"pool {name} ({pool.network}, from {ipaddress.IPv4Address(pool.next_address - pool.used)}) has "
                    f"{pool.left:,} addresses left after earlier ranges drew {pool.used:,}; this range needs {need:,}",
                    "widen the pool's block, or draw from another pool",
                )
            )
    if len(set(spec.u_positions)) != len(spec.u_positions):
        problems.append((f"{path}.u_positions", f"{spec.u_positions} lists a position twice", "give each host its own"))
    return problems
