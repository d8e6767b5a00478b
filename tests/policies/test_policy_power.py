"""The power model's budget, rack and A/B feed checks (gpuforge/spec/power.py), and the plan's headroom."""

from __future__ import annotations

import math

import pytest

from gpuforge.plan.model import Plan
from gpuforge.spec.power import (
    CONTINUOUS_DERATE,
    Feed,
    GroupLoad,
    RackLoad,
    budget_headroom,
    facility_power_kw,
    feed_headroom,
    rack_budget_headroom,
)


def test_facility_power_formula() -> None:
    groups = [GroupLoad("train", 64, 2, 10.2), GroupLoad("login", 2, 0, 0.5)]
    # PUE x sum(node_kW x (count + spares x draw))
    assert facility_power_kw(groups, 1.55, 0.5) == pytest.approx(1.55 * (10.2 * 65 + 0.5 * 2))
    room = budget_headroom(groups, 1.55, 1.0, 1100)
    assert room.load_kw == pytest.approx(1.55 * (10.2 * 66 + 1.0))
    assert room.headroom_kw == pytest.approx(1100 - room.load_kw)
    assert room.ok and "headroom" in room.describe()


def test_feed_capacity_from_circuit() -> None:
    three_phase = Feed("a", "A", volts=415, amps=32, phases=3)
    assert three_phase.rated_kw == pytest.approx(math.sqrt(3) * 415 * 32 / 1000)
    assert three_phase.continuous_kw() == pytest.approx(three_phase.rated_kw * CONTINUOUS_DERATE)
    assert Feed("b", "B", volts=230, amps=16, power_factor=0.95).rated_kw == pytest.approx(230 * 16 * 0.95 / 1000)
    with pytest.raises(ValueError, match="capacity_kw, or volts and amps"):
        _ = Feed("c", "A").rated_kw


def test_n_plus_n_each_side_carries_the_whole_rack() -> None:
    feeds = (Feed("a", "A", capacity_kw=20), Feed("b", "B", capacity_kw=20))
    fits = feed_headroom(RackLoad("r1", 16.0, feeds))
    assert fits["A"].ok and fits["B"].ok and fits["A"].headroom_kw == pytest.approx(0.0)
    over = feed_headroom(RackLoad("r2", 16.5, feeds))
    assert not over["A"].ok and over["B"].headroom_kw == pytest.approx(-0.5)
    one_sided = feed_headroom(RackLoad("r3", 1.0, (Feed("a", "A", capacity_kw=20),)))
    assert one_sided["A"].ok and not one_sided["B"].ok
    assert rack_budget_headroom(RackLoad("r4", 31, feeds, budget_kw=30)) is not None
    assert rack_budget_headroom(RackLoad("r5", 31, feeds)) is None


def test_prod_plan_reports_headroom(prod_plan: Plan) -> None:
    report = prod_plan.policy
    assert report is not None and report.power.budget is not None
    assert report.power.facility_kw == pytest.approx(prod_plan.summary.power_kw, abs=0.01)
    assert report.power.budget.limit_kw == 1100
    assert report.power.budget.headroom_kw == pytest.approx(1100 - prod_plan.summary.power_kw, abs=0.01)
    assert prod_plan.to_json()["power"]["budget"]["headroomKw"] > 0
