"""Power by hall and feed (issue 28, item 5): racks name their hall, their feeds draw from the hall's feeds (A/B),
and each hall's load is checked against its budget and feeds, normal and with one hall feed lost: every
problem at once, at its field, with the figure and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.plan.engine import plan_stack
from gpuforge.review.report import markdown_plan
from gpuforge.spec import SpecError, resolve
from gpuforge.spec.site_halls import hall_power
from tests.onprem.test_site_model import lab_spec


def halled(hall_feeds: dict[str, float], mapping: dict[str, str] | None = None, **hall: Any) -> dict[str, Any]:
    """The lab site (two racks of four DGX H100, PDUs a, b, c) in one hall."""
    spec = lab_spec()
    site = spec["site"]
    site["halls"] = {"hall-1": {"feeds": hall_feeds, **hall}}
    for rack in site["racks"].values():
        rack["hall"] = "hall-1"
        if mapping is not None:
            rack["hall_feeds"] = mapping
    return spec


def problems(spec: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    return {i.path: f"{i.message}; fix: {i.fix}" for i in caught.value.issues}


def test_three_paths_carry_the_hall_and_the_roll_up_adds_every_rack() -> None:
    resolved = resolve(halled({"a": 200, "b": 200, "c": 200}, budget_kw=120))
    assert resolved.site is not None
    (hall,) = hall_power(resolved.site)
    racks = [resolved.site.rack_load_kw(r) for r in ("r01", "r02")]
    assert hall.racks == ("r01", "r02")
    assert hall.load_kw == pytest.approx(sum(racks))
    # Six PSUs 2+2+2: each hall feed carries a third of the hall.
    assert {f: round(h.load_kw, 3) for f, h in hall.feeds.items()} == dict.fromkeys("abc", round(sum(racks) / 3, 3))
    assert hall.budget is not None and hall.budget.ok and hall.budget.limit_kw == 120


def test_three_pdus_on_two_hall_paths_lose_servers_when_path_a_goes() -> None:
    """PDUs a and c on path a: losing it leaves a DGX H100 (4+2) two PSUs."""
    found = problems(halled({"a": 400, "b": 400}, {"a": "a", "b": "b", "c": "a"}))
    message = found["cluster.site.halls[hall-1].feeds.a"]
    assert "losing hall feed a leaves 8 servers short of PSUs" in message and "2 of 4 needed" in message
    assert "cluster.site.halls[hall-1].feeds.b" not in found  # losing b leaves four PSUs: enough


def test_budget_and_feed_ratings_are_checked_with_the_figures() -> None:
    found = problems(halled({"a": 45, "b": 45, "c": 45}, budget_kw=50))
    assert "the hall's racks draw" in found["cluster.site.halls[hall-1].budget_kw"]
    assert "raise budget_kw to at least" in found["cluster.site.halls[hall-1].budget_kw"]
    # 36 kW continuous per feed: a third of the hall's 81.6 kW fits, half of it (one feed lost) does not.
    assert "cluster.site.halls[hall-1].feeds.a" in found and "81.6 kW of 50.0 kW" in found[
        "cluster.site.halls[hall-1].budget_kw"
    ]
    assert "lost, feed b carries 40.8 kW of 36.0 kW" in found["cluster.site.halls[hall-1].feeds.b"]
    assert "continuous, 80% of rated" in found["cluster.site.halls[hall-1].feeds.b"]


def test_racks_and_halls_that_do_not_match_are_all_reported() -> None:
    spec = halled({"a": 400, "b": 400})  # PDU c has no hall feed of its name
    spec["site"]["racks"]["r02"]["hall"] = "hall-9"
    spec["site"]["racks"]["r01"]["hall_feeds"] = {"d": "a"}
    found = problems(spec)
    assert "hall-9 is not a hall of the site (halls: hall-1)" in found["cluster.site.racks[r02].hall"]
    assert "d is not a feed of the rack" in found["cluster.site.racks[r01].hall_feeds.d"]
    assert "rack feed c draws from hall feed c, which hall hall-1 does not have" in found[
        "cluster.site.racks[r01].hall_feeds"
    ]


def test_a_rack_outside_every_hall_is_refused_once_halls_are_declared() -> None:
    spec = halled({"a": 400, "b": 400, "c": 400})
    del spec["site"]["racks"]["r02"]["hall"]
    found = problems(spec)
    assert "1 racks name no hall (r02)" in found["cluster.site.racks[r02].hall"]


def test_a_site_without_halls_is_unchanged() -> None:
    resolved = resolve(lab_spec())
    assert resolved.site is not None and hall_power(resolved.site) == []


def test_the_plan_shows_power_by_hall_and_feed(tmp_path: Path) -> None:
    """`gpuforge plan` of a site with halls: the Site component carries each hall's load and each feed's."""
    spec = halled({"a": 200, "b": 200, "c": 200}, budget_kw=120)
    stack = tmp_path / "Pulumi.halls.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpuforge:cluster": spec}}))
    plan = plan_stack(str(stack))
    (site,) = [r for r in plan.resources if r.type == "gpuforge:onprem:Site"]
    hall = site.inputs["halls"]["hall-1"]
    assert hall["budgetKw"] == 120 and hall["racks"] == 2
    assert hall["itKw"] == pytest.approx(sum(f["loadKw"] for f in hall["feeds"].values()), abs=0.01)
    assert {f: v["continuousKw"] for f, v in hall["feeds"].items()} == dict.fromkeys("abc", 160.0)
    # The reviewer reads the same roll-up in the plan's Markdown.
    (row,) = [line for line in markdown_plan(plan).splitlines() if line.startswith("| hall hall-1 |")]
    assert "81.6 kW of 120.0 kW budget (2 racks); feeds a 27.2/160.0, b 27.2/160.0, c 27.2/160.0 kW" in row
