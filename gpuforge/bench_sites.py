"""The on-prem stacks `make bench` plans: the 100,000-GPU example (examples/Pulumi.site-100k.yaml) resized to
a number of DGX H100 hosts, with a fabric that passes the per-tier checks at that size (gpuforge/spec/
fabric_checks.py): two tiers while the leaves fit under one 64-port spine, else three, non-blocking while
64-port cores reach every spine group, else 7:1 at the spines as the example is."""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

SITE_EXAMPLE = Path("examples") / "Pulumi.site-100k.yaml"
SITE_CASES = (128, 1024, 12_500)
SU_HOSTS, RAILS, PORTS, HOSTS_PER_RACK, RACKS_PER_SU = 32, 8, 64, 4, 8
FIRST_SU_HOSTS = SU_HOSTS - 1  # the UFM appliances take a port on each of the first SU's leaves
KW_PER_HOST = 10.2 * 1.25 * 1.2  # DGX H100 maximum x the example's PUE, with a fifth for switches and storage


@lru_cache(maxsize=1)
def _example() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(SITE_EXAMPLE.read_text())
    return document


def fabric_for(units: int) -> dict[str, Any]:
    leaves = units * RAILS
    uplinks = PORTS // 2
    if leaves <= PORTS:
        return {"spines": -(-leaves * uplinks // PORTS), "cores": 0}
    spine_up = PORTS // 2 if -(-units // ((PORTS - PORTS // 2) // RAILS)) <= PORTS else 8
    down = PORTS - spine_up
    per_pod = down // RAILS
    pods = [min(per_pod, units - start) for start in range(0, units, per_pod)]
    spines = sum(-(-pod * RAILS * uplinks // down) for pod in pods)
    return {"spines": spines, "cores": -(-spines * spine_up // PORTS), "spine_uplinks": spine_up}


def site_stack(hosts: int) -> dict[str, Any]:
    """The example with *hosts* DGX H100: 31 in the first scalable unit, 32 in each after."""
    stack = copy.deepcopy(_example())
    site = stack["config"]["gpuforge:cluster"]["site"]
    units = 1 + -(-max(hosts - FIRST_SU_HOSTS, 0) // SU_HOSTS)
    racks = units * RACKS_PER_SU
    width = len(str(hosts))
    (shape,) = site["rack_ranges"].values()
    site["rack_ranges"] = {f"r[{1:04d}-{racks:04d}]": {**shape, "scalable_units": f"su[001-{units:03d}]"}}
    first, rest = list(site["host_ranges"].values())
    site["host_ranges"] = {
        f"dgx-[{1:0{width}d}-{min(hosts, FIRST_SU_HOSTS):0{width}d}]": {**first, "racks": "r[0001-0008]"}
    }
    if hosts > FIRST_SU_HOSTS:
        name = f"dgx-[{FIRST_SU_HOSTS + 1:0{width}d}-{hosts:0{width}d}]"
        site["host_ranges"][name] = {**rest, "racks": f"r[0009-{racks:04d}]"}
    fabric = site["fabric"]
    for key in ("spines", "cores", "spine_uplinks"):
        fabric.pop(key, None)
    fabric.update(fabric_for(units))
    site["power"]["budget_kw"] = round(hosts * KW_PER_HOST + 1000)
    return stack
