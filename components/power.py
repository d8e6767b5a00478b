"""The power model shared by the plan summary and the power policy.

facility kW = PUE x sum over groups of node_kW x (active + spares x spare_draw_fraction)

node_kW comes from the catalog (`Catalog.node_power_kw`): a server's vendor maximum where
known, else GPU TDP x GPUs + the host's share of overhead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


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


# --- budgets, racks and A/B feeds ------------------------------------------------------------
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
class RackLoad:
    """A rack's IT load (sum of its nodes' power at their draw) and its feeds."""

    name: str
    load_kw: float
    feeds: tuple[Feed, ...]
    budget_kw: float | None = None  # the rack's contracted or cooling limit, if the site sets one


def side_capacity_kw(rack: RackLoad, side: str, derate: float = CONTINUOUS_DERATE) -> float:
    return sum(f.continuous_kw(derate) for f in rack.feeds if f.side.upper() == side.upper())


def feed_headroom(rack: RackLoad, derate: float = CONTINUOUS_DERATE) -> dict[str, Headroom]:
    """N+N: with either side lost, the other side alone carries the whole rack within its
    continuous rating. One Headroom per side (A, B), each against the full rack load."""
    return {side: Headroom(rack.load_kw, side_capacity_kw(rack, side, derate)) for side in ("A", "B")}


def rack_budget_headroom(rack: RackLoad) -> Headroom | None:
    return Headroom(rack.load_kw, rack.budget_kw) if rack.budget_kw is not None else None
