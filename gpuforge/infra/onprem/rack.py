"""Rack: a rack of hosts with its power feeds and cooling. Its inputs are what the power pack's
rack rules read ({rack, loadKw, budgetKw, feeds: [{name, side, capacityKw}], devices: [{name,
loadKw, psusByFeed, psusRequired}]}, see gpuforge/policy/rules/power.py); its children are the hosts
mounted in it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from gpuforge.spec.resolved_site import ResolvedSite

from .host import Host, HostArgs


def rack_props(site: ResolvedSite, rack: str) -> dict[str, Any]:
    spec = site.spec.racks[rack]
    load = site.rack_load(rack)
    hosts = site.rack_hosts(rack)
    return {
        "rack": rack,
        "site": site.spec.name,
        "scalableUnit": spec.scalable_unit,
        "units": spec.units,
        "loadKw": round(load.load_kw, 3),
        # The rack's cooling is its power ceiling: power-rack-budget reads budgetKw.
        "budgetKw": spec.cooling_kw,
        "coolingKw": spec.cooling_kw,
        "feeds": [{"name": f.name, "side": f.side, "capacityKw": f.capacity_kw} for f in load.feeds],
        # What power-rack-feed-redundancy judges feed by feed: each device's PSUs on the feeds.
        "devices": [
            {"name": d.name, "loadKw": d.load_kw, "psusByFeed": dict(d.psus_by_feed), "psusRequired": d.required}
            for d in load.devices
        ],
        "hosts": sorted(h.name for h in hosts),
        "gpus": sum(h.gpus for h in hosts),
    }


@dataclass(frozen=True)
class RackArgs:
    site: ResolvedSite
    rack: str
    prefix: str  # hosts are named f"{prefix}-{host}": moving a host between racks keeps its URN


class Rack(pulumi.ComponentResource):
    members: dict[str, Host]

    def __init__(self, name: str, args: RackArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props = rack_props(args.site, args.rack)
        super().__init__("gpuforge:onprem:Rack", name, props, opts)
        child = pulumi.ResourceOptions(parent=self)
        site = args.site
        self.members = {
            host.name: Host(
                f"{args.prefix}-{host.name}",
                HostArgs(site.spec.name, host, kubernetes=host.spec.orchestrator == "kubernetes"),
                opts=child,
            )
            for host in site.rack_hosts(args.rack)
        }
        self.register_outputs({"inventory": props})  # each host carries its own inventory: not repeated here
