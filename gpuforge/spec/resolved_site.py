"""The site as `check_site` resolves it: each host with its catalog server, scalable unit and power, and
each rack's load, so the on-prem components, the power rules and the inventory read one set of facts.
Keyword-only, so a new field cannot shift the others."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property

from gpuforge.catalog import ServerModel
from gpuforge.spec.power import Feed, PsuLoad, RackLoad, psus_over_feeds

from .site import Host, Site


@dataclass(frozen=True, kw_only=True)
class ResolvedHost:
    name: str
    spec: Host
    server: ServerModel
    scalable_unit: str
    node_power_kw: float

    @property
    def gpus(self) -> int:
        return self.server.gpu_count


@dataclass(frozen=True, kw_only=True)
class ResolvedSite:
    spec: Site
    hosts: dict[str, ResolvedHost]

    @cached_property
    def hosts_by_rack(self) -> dict[str, list[ResolvedHost]]:
        """Rack -> its hosts by name, built once: per-rack lookups stay linear in the hosts at 12,500 of them."""
        out: dict[str, list[ResolvedHost]] = defaultdict(list)
        for host in sorted(self.hosts.values(), key=lambda h: h.name):
            out[host.spec.rack].append(host)
        return dict(out)

    def rack_hosts(self, rack: str) -> list[ResolvedHost]:
        return self.hosts_by_rack.get(rack, [])

    def rack_devices(self, rack: str) -> tuple[PsuLoad, ...]:
        """Hosts and equipment drawing from the rack, with their PSUs spread over its feeds."""
        feeds = self.spec.racks[rack].feeds
        devices = [
            PsuLoad(h.name, h.node_power_kw, psus_over_feeds(h.server.psus.count, feeds), h.server.psus.required)
            for h in self.rack_hosts(rack)
        ]
        for name, unit in sorted(self.spec.equipment.items()):
            if unit.rack == rack:
                devices += [
                    PsuLoad(
                        name if unit.count == 1 else f"{name}-{i + 1}",
                        unit.power_kw,
                        psus_over_feeds(unit.psus, feeds),
                        unit.psus_required,
                    )
                    for i in range(unit.count)
                ]
        return tuple(devices)

    def rack_load_kw(self, rack: str) -> float:
        return sum(d.load_kw for d in self.rack_devices(rack))

    def rack_load(self, rack: str) -> RackLoad:
        r = self.spec.racks[rack]
        feeds = tuple(Feed(name, name, capacity_kw=kw) for name, kw in sorted(r.feeds.items()))
        return RackLoad(rack, self.rack_load_kw(rack), feeds, budget_kw=r.cooling_kw, devices=self.rack_devices(rack))

    def su_names(self) -> list[str]:
        return sorted({r.scalable_unit for r in self.spec.racks.values()})

    @property
    def fabric_switches(self) -> tuple[int, int]:
        """(leaves, spines): a leaf per rail per scalable unit with fabric hosts."""
        fabric = self.spec.fabric
        if fabric is None:
            return 0, 0
        units = {h.scalable_unit for h in self.hosts.values() if h.spec.hcas}
        return len(units) * fabric.rails, fabric.spines

    @property
    def switch_kw(self) -> float:
        """Every leaf, spine and core switch at the datasheet maximum."""
        fabric = self.spec.fabric
        if fabric is None:
            return 0.0
        return (sum(self.fabric_switches) + fabric.cores) * (fabric.switch_power_kw or 0.0)

    @property
    def equipment_kw(self) -> float:
        return sum(e.power_kw * e.count for e in self.spec.equipment.values())

    @property
    def hosts_kw(self) -> float:
        return sum(h.node_power_kw for h in self.hosts.values())

    @property
    def it_kw(self) -> float:
        """Everything the site powers for the cluster: hosts, fabric switches, subnet managers,
        management network and servers, storage."""
        return self.hosts_kw + self.switch_kw + self.equipment_kw

    @property
    def facility_kw(self) -> float:
        return self.spec.power.pue * self.it_kw

    def pools(self) -> dict[str, list[ResolvedHost]]:
        out: dict[str, list[ResolvedHost]] = defaultdict(list)
        for host in self.hosts.values():
            out[host.spec.pool].append(host)
        return dict(out)

    def gpus_by_model(self, orchestrator: str = "kubernetes") -> dict[str, tuple[int, int]]:
        """GPU model -> (GPUs on hosts of that orchestrator, GPUs per host)."""
        out: dict[str, tuple[int, int]] = {}
        for h in self.hosts.values():
            if h.spec.orchestrator != orchestrator or h.gpus == 0:
                continue
            total, _ = out.get(h.server.gpu_model, (0, h.gpus))
            out[h.server.gpu_model] = (total + h.gpus, h.gpus)
        return out
