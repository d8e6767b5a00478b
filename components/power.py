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
