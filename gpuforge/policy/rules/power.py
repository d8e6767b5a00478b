"""Power pack: the stack's (or site's) budget, rack budgets and A/B feed redundancy.

The arithmetic lives in gpuforge/spec/power.py, shared with the plan summary:

    facility kW = PUE x sum over groups of node_kW x (count + spares x spare_draw_fraction)

Racks are read from `gpuforge:onprem:Rack` resources (the on-prem site model) with inputs
{rack, site, loadKw, budgetKw?, feeds: [{name, side: A|B, capacityKw | volts + amps [+ phases,
powerFactor]}]}; sites from `gpuforge:onprem:Site` {site, budgetKw, pue}: a site's facility load is
its PUE x the sum of its racks' loads.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuforge.catalog.tokens import NODE_GROUP, SITE
from gpuforge.spec.power import (
    CONTINUOUS_DERATE,
    Feed,
    GroupLoad,
    Headroom,
    PsuLoad,
    RackLoad,
    budget_headroom,
    feed_headroom,
    feed_loss,
    rack_budget_headroom,
)

from .base import RACK, Param, Resource, RuleContext, Stack, Violation, as_list, is_unknown, stack_rule


def group_loads(stack: Stack) -> list[GroupLoad]:
    loads = []
    for g in stack.of_type(NODE_GROUP):
        values = (g.get("count"), g.get("spares"), g.get("nodePowerKw"))
        if any(v is None or is_unknown(v) for v in values):
            continue
        loads.append(GroupLoad(str(g.get("nodeGroup") or g.name), int(values[0]), int(values[1]), float(values[2])))
    return loads


def rack_from_resource(r: Resource) -> RackLoad | None:
    load = r.get("loadKw")
    if load is None or is_unknown(load):
        return None
    feeds = tuple(
        Feed(
            name=str(f.get("name", f"feed-{i}")),
            side=str(f.get("side", "?")),
            capacity_kw=f.get("capacityKw"),
            volts=f.get("volts"),
            amps=f.get("amps"),
            phases=int(f.get("phases", 1)),
            power_factor=float(f.get("powerFactor", 1.0)),
        )
        for i, f in enumerate(as_list(r.get("feeds")))
        if isinstance(f, Mapping)
    )
    budget = r.get("budgetKw")
    devices = tuple(
        PsuLoad(str(d.get("name")), float(d["loadKw"]), dict(d.get("psusByFeed") or {}), int(d.get("psusRequired", 1)))
        for d in as_list(r.get("devices"))
        if isinstance(d, Mapping) and d.get("loadKw") is not None
    )
    name = str(r.get("rack") or r.name)
    return RackLoad(name, float(load), feeds, None if is_unknown(budget) else budget, devices)


def feed_report(rack: RackLoad, derate: float = CONTINUOUS_DERATE) -> dict[str, Headroom]:
    """Per feed lost, the most loaded surviving feed (PSU-mapped racks); per side, the whole rack
    on one side (A/B racks without a PSU map)."""
    if rack.devices:
        return {f"without {lost}": result.worst for lost, result in feed_loss(rack, derate).items()}
    return feed_headroom(rack, derate)


@dataclass(frozen=True)
class PowerReport:
    """What the plan prints: the cluster against its budget, and each rack's feeds."""

    facility_kw: float
    it_kw: float
    pue: float
    budget: Headroom | None
    racks: dict[str, dict[str, Headroom]] = field(default_factory=dict)
    sites: dict[str, SiteReport] = field(default_factory=dict)
    pue_source: str = ""
    placement: str = ""

    def to_json(self) -> dict[str, Any]:
        def h(x: Headroom | None) -> dict[str, float] | None:
            if x is None:
                return None
            return {
                "loadKw": round(x.load_kw, 2),
                "limitKw": round(x.limit_kw, 2),
                "headroomKw": round(x.headroom_kw, 2),
            }

        out: dict[str, Any] = {
            "itKw": round(self.it_kw, 2),
            "pue": self.pue,
            "facilityKw": round(self.facility_kw, 2),
            "budget": h(self.budget),
            "racks": {rack: {k: h(v) for k, v in sides.items()} for rack, sides in self.racks.items()},
        }
        if self.sites:  # only on-prem and hybrid plans carry the key
            out["sites"] = {
                name: {"itKw": round(s.it_kw, 2), "pue": s.pue, "budget": h(s.budget)} for name, s in self.sites.items()
            }
        return out


@dataclass(frozen=True)
class SiteReport:
    """A site's facility load (its PUE x its racks' IT load) against its budget."""

    it_kw: float
    pue: float
    budget: Headroom


def site_reports(stack: Stack) -> dict[str, tuple[Resource, SiteReport]]:
    out: dict[str, tuple[Resource, SiteReport]] = {}
    racks = [(r.get("site"), rack_from_resource(r)) for r in stack.of_type(RACK)]
    for s in stack.of_type(SITE):
        name, pue, budget = s.get("site"), s.get("pue"), s.get("budgetKw")
        if any(v is None or is_unknown(v) for v in (name, pue, budget)):
            continue
        declared = s.get("itKw")  # hosts, switches and equipment; else the racks' loads
        it_kw = (
            float(declared)
            if isinstance(declared, int | float)
            else sum(rack.load_kw for site, rack in racks if site == name and rack is not None)
        )
        out[str(name)] = (s, SiteReport(it_kw, float(pue), Headroom(float(pue) * it_kw, float(budget))))
    return out


def power_report(stack: Stack, derate: float = CONTINUOUS_DERATE) -> PowerReport:
    cluster = stack.cluster()
    power = (cluster.get("power") if cluster else None) or {}
    pue = float(power.get("pue") or 1.0)
    spare_draw = float(power.get("spareDrawFraction", 1.0))
    loads = group_loads(stack)
    it_kw = sum(g.it_kw(spare_draw) for g in loads)
    budget_kw = power.get("budgetKw")
    budget = budget_headroom(loads, pue, spare_draw, float(budget_kw)) if budget_kw else None
    racks: dict[str, dict[str, Headroom]] = {}
    for r in stack.of_type(RACK):
        rack = rack_from_resource(r)
        if rack is not None:
            racks[rack.name] = feed_report(rack, derate)
            rb = rack_budget_headroom(rack)
            if rb is not None:
                racks[rack.name]["budget"] = rb
    sites = {name: report for name, (_, report) in site_reports(stack).items()}
    source = power.get("pueSource")
    return PowerReport(
        pue * it_kw,
        it_kw,
        pue,
        budget,
        racks,
        sites,
        pue_source=source if isinstance(source, str) else "",
        placement=str((cluster.get("placement") if cluster else None) or ""),
    )


@stack_rule(
    "power-cluster-budget",
    why="A cluster drawing more than its contracted power trips breakers or throttles mid-run.",
    fix="lower count/spares, raise power.budget_kw to the contracted figure, or lower spare_draw_fraction",
    params={
        "min_headroom_fraction": Param(
            0.0, {"type": "number", "minimum": 0, "maximum": 0.9}, "share of the budget to keep free"
        ),
        "require_budget": Param(True, {"type": "boolean"}, "a stack must declare power.budget_kw"),
    },
)
def cluster_budget(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    cluster = stack.cluster()
    if cluster is None:
        return
    floor = float(ctx.param("min_headroom_fraction"))
    # A site (on-premises, or the site half of a hybrid) against its own budget and PUE.
    for name, (resource, site) in site_reports(stack).items():
        if site.budget.headroom_kw < floor * site.budget.limit_kw:
            yield Violation(
                "power-cluster-budget",
                resource.urn,
                f"{resource.name}: site {name} at {site.budget.describe()}"
                + (f", below the required {floor:.0%}" if floor else "")
                + f" (IT {site.it_kw:,.1f} kW x PUE {site.pue}); remove hosts or raise site.power.budget_kw",
            )
    if not stack.of_type(NODE_GROUP) and stack.of_type(SITE):
        return  # on-premises only: no cloud load to judge
    report = power_report(stack)
    if report.budget is None:
        if ctx.param("require_budget"):
            yield Violation(
                "power-cluster-budget",
                cluster.urn,
                f"{cluster.name}: no power budget declared; the plan estimates {report.facility_kw:,.1f} kW with PUE "
                f"{report.pue}: set power.budget_kw to the contracted figure",
            )
        return
    if report.budget.headroom_kw < floor * report.budget.limit_kw:
        yield Violation(
            "power-cluster-budget",
            cluster.urn,
            f"{cluster.name}: estimated {report.budget.describe()}"
            + (f", below the required {floor:.0%}" if floor else "")
            + f" (IT {report.it_kw:,.1f} kW x PUE {report.pue}); remove nodes or spares, or raise power.budget_kw",
        )


@stack_rule(
    "power-rack-feed-redundancy",
    why="A rack must survive the loss of any one feed: every server keeps the N PSUs of its N+M (a DGX H100, 4+2, "
    "split 3+3 over two feeds keeps 3, so A/B is not N+N for it), and the other feeds carry the load they pick up "
    "within their continuous rating, or losing one feed trips the rest.",
    fix="spread each server's PSUs over enough feeds that one feed holds no more than its spares (three feeds of two "
    "PSUs for a DGX H100), move nodes to another rack, or upsize the feeds",
    params={
        "derate": Param(
            CONTINUOUS_DERATE,
            {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "continuous-load derate of a feed's rating",
        )
    },
)
def rack_feed_redundancy(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    derate = float(ctx.param("derate"))
    for r in stack.of_type(RACK):
        rack = rack_from_resource(r)
        if rack is None:
            continue
        if rack.devices:
            yield from _feed_loss_violations(r, rack, derate)
            continue
        for side, room in feed_headroom(rack, derate).items():
            if not room.ok:
                yield Violation(
                    "power-rack-feed-redundancy",
                    r.urn,
                    f"{r.name}: rack {rack.name} side {side} alone carries {room.load_kw:,.1f} kW "
                    f"against {room.limit_kw:,.1f} kW "
                    f"continuous ({derate:.0%} of rating), short {-room.headroom_kw:,.1f} kW; "
                    "move nodes to another rack or upsize that side's feeds",
                )


@stack_rule(
    "power-rack-budget",
    why="A rack above its power (and so cooling) limit overheats: air cooling tops out near 30 kW.",
    fix="spread nodes over more racks or raise the rack's budget where the site allows",
)
def rack_budget(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for r in stack.of_type(RACK):
        rack = rack_from_resource(r)
        room = rack_budget_headroom(rack) if rack else None
        if rack is not None and room is not None and not room.ok:
            yield Violation(
                "power-rack-budget",
                r.urn,
                f"{r.name}: rack {rack.name} at {room.describe()}; move nodes to another rack or raise the rack budget",
            )


def _feed_loss_violations(r: Resource, rack: RackLoad, derate: float) -> Iterator[Violation]:
    for lost, result in feed_loss(rack, derate).items():
        if result.short:
            detail = ", ".join(f"{d} keeps {left} of {need} PSUs" for d, left, need in result.short)
            yield Violation(
                "power-rack-feed-redundancy",
                r.urn,
                f"{r.name}: rack {rack.name} losing feed {lost}: {detail}; add feeds so no feed holds more of a "
                "server's PSUs than its spares",
            )
        for feed, room in sorted(result.feeds.items()):
            if not room.ok:
                yield Violation(
                    "power-rack-feed-redundancy",
                    r.urn,
                    f"{r.name}: rack {rack.name} losing feed {lost}: feed {feed} carries {room.load_kw:,.1f} kW "
                    f"against {room.limit_kw:,.1f} kW continuous ({derate:.0%} of rating), short "
                    f"{-room.headroom_kw:,.1f} kW; move nodes or upsize feed {feed}",
                )
