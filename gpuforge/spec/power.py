"""The power section of the spec, and the power model shared by the plan summary and the power policy.

facility kW = PUE x sum over groups of node_kW x (active + spares x spare_draw_fraction)

node_kW comes from the catalog (`Catalog.node_power_kw`): a server's vendor maximum where
known, else GPU TDP x GPUs + the host's share of overhead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import Field

from .base import SpecModel


class Power(SpecModel):
    budget_kw: float | None = Field(
        default=None, gt=0, le=1_000_000, description="Facility power budget for the cluster, kW."
    )
    pue: float | None = Field(
        default=None, ge=1.0, le=3.0, description="Power usage effectiveness; default the catalog's average."
    )
    spare_draw_fraction: float = Field(
        default=1.0, ge=0, le=1, description="Share of full power a spare draws (1.0: spares run hot)."
    )


@dataclass(frozen=True)
class GroupLoad:
    name: str
    count: int
    spares: int
    node_kw: float

    def it_kw(self, spare_draw_fraction: float) -> float:
        return self.node_kw * (self.count + self.spares * spare_draw_fraction)


def it_power_kw(groups: Iterable[GroupLoad], spare_draw_fraction: float) -> float:
    return sum(g.it_kw(spare_draw_fraction) for g in groups)


def facility_power_kw(groups: Iterable[GroupLoad], pue: float, spare_draw_fraction: float) -> float:
    return pue * it_power_kw(groups, spare_draw_fraction)


# --- budgets, racks and feeds ---------------------------------------------------------------
#
# A budget check reports headroom, not only pass or fail. Racks and feeds are plain data so the
# on-prem site model can feed them (from its resources or the spec) without touching the checks.

CONTINUOUS_DERATE = 0.8  # a breaker carries at most 80 % of its rating as continuous load (NEC 210.19/215.2)


@dataclass(frozen=True)
class Headroom:
    """Load against a limit: headroom_kw < 0 means over the limit."""

    load_kw: float
    limit_kw: float

    @property
    def headroom_kw(self) -> float:
        return self.limit_kw - self.load_kw

    @property
    def headroom_fraction(self) -> float:
        return self.headroom_kw / self.limit_kw if self.limit_kw else float("-inf")

    @property
    def ok(self) -> bool:
        return self.headroom_kw >= 0

    def describe(self) -> str:
        pct = f"{self.headroom_fraction:.1%}" if self.limit_kw else "n/a"
        return f"{self.load_kw:,.1f} kW of {self.limit_kw:,.1f} kW, headroom {self.headroom_kw:,.1f} kW ({pct})"


def budget_headroom(groups: Iterable[GroupLoad], pue: float, spare_draw_fraction: float, budget_kw: float) -> Headroom:
    """Facility load (IT x PUE, spares at their draw) against the stack's or site's budget."""
    return Headroom(facility_power_kw(groups, pue, spare_draw_fraction), budget_kw)


@dataclass(frozen=True)
class Feed:
    """One power feed (a PDU whip / circuit) into a rack. side: "A" or "B".

    Capacity is either given in kW or computed from the circuit: single-phase V x A x PF,
    three-phase sqrt(3) x V(line-to-line) x A x PF.
    """

    name: str
    side: str
    capacity_kw: float | None = None
    volts: float | None = None
    amps: float | None = None
    phases: int = 1
    power_factor: float = 1.0

    @property
    def rated_kw(self) -> float:
        if self.capacity_kw is not None:
            return self.capacity_kw
        if self.volts is None or self.amps is None:
            raise ValueError(f"feed {self.name}: give capacity_kw, or volts and amps")
        factor = 3**0.5 if self.phases == 3 else 1.0
        return factor * self.volts * self.amps * self.power_factor / 1000

    def continuous_kw(self, derate: float = CONTINUOUS_DERATE) -> float:
        return self.rated_kw * derate


@dataclass(frozen=True)
class PsuLoad:
    """One device in a rack: its draw, how its PSUs land on the rack's feeds, and how many PSUs
    it needs up (N of the vendor's N+M). A device shares its load evenly over its working PSUs."""

    name: str
    load_kw: float
    psus_by_feed: Mapping[str, int]
    required: int

    def psus_without(self, feed: str) -> int:
        return sum(n for f, n in self.psus_by_feed.items() if f != feed)


def psus_over_feeds(count: int, feeds: Iterable[str]) -> dict[str, int]:
    """PSU i on feed i mod F (feeds in name order): 6 PSUs on two feeds 3+3, on three feeds 2+2+2."""
    names = sorted(feeds)
    out = dict.fromkeys(names, 0)
    for i in range(count):
        out[names[i % len(names)]] += 1
    return out


@dataclass(frozen=True)
class RackLoad:
    """A rack's IT load (sum of its nodes' power at their draw) and its feeds."""

    name: str
    load_kw: float
    feeds: tuple[Feed, ...]
    budget_kw: float | None = None  # the rack's contracted or cooling limit, if the site sets one
    devices: tuple[PsuLoad, ...] = ()  # with PSUs mapped to feeds: judged feed by feed (feed_loss)


@dataclass(frozen=True)
class FeedLoss:
    """What the loss of one feed leaves: devices short of PSUs, and each surviving feed's load."""

    lost: str
    short: tuple[tuple[str, int, int], ...]  # (device, PSUs left, PSUs required)
    feeds: dict[str, Headroom]

    @property
    def ok(self) -> bool:
        return not self.short and all(h.ok for h in self.feeds.values())

    @property
    def worst(self) -> Headroom:
        return min(self.feeds.values(), key=lambda h: h.headroom_kw)


def feed_loss(rack: RackLoad, derate: float = CONTINUOUS_DERATE) -> dict[str, FeedLoss]:
    """For each feed lost: every device keeps at least its N PSUs, and the surviving feeds carry
    the load they pick up within their continuous rating (devices share load over working PSUs)."""
    out: dict[str, FeedLoss] = {}
    for lost in rack.feeds:
        loads = {f.name: 0.0 for f in rack.feeds if f.name != lost.name}
        short = []
        for device in rack.devices:
            left = device.psus_without(lost.name)
            if left < device.required:
                short.append((device.name, left, device.required))
            for feed, n in device.psus_by_feed.items():
                if feed != lost.name and left and feed in loads:
                    loads[feed] += device.load_kw * n / left
        out[lost.name] = FeedLoss(
            lost.name,
            tuple(short),
            {f.name: Headroom(loads[f.name], f.continuous_kw(derate)) for f in rack.feeds if f.name != lost.name},
        )
    return out


def side_capacity_kw(rack: RackLoad, side: str, derate: float = CONTINUOUS_DERATE) -> float:
    return sum(f.continuous_kw(derate) for f in rack.feeds if f.side.upper() == side.upper())


def feed_headroom(rack: RackLoad, derate: float = CONTINUOUS_DERATE) -> dict[str, Headroom]:
    """N+N: with either side lost, the other side alone carries the whole rack within its
    continuous rating. One Headroom per side (A, B), each against the full rack load."""
    return {side: Headroom(rack.load_kw, side_capacity_kw(rack, side, derate)) for side in ("A", "B")}


def rack_budget_headroom(rack: RackLoad) -> Headroom | None:
    return Headroom(rack.load_kw, rack.budget_kw) if rack.budget_kw is not None else None
