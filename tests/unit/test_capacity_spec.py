"""Fixed and elastic node groups, Capacity Blocks and update strategies (issue 12): the spec's
rules with their field paths and fixes, and what the offline plan declares for them."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support import planned

from gpuforge.review.diff import how_nodes_roll
from gpuforge.review.report import markdown_plan, summary_rows
from gpuforge.review.windows import block_windows
from gpuforge.spec import SpecError, resolve
from gpuforge.spec.loader import parse_yaml
from gpuforge.spec.node_group import RESERVED_CAPACITY, NodeGroup

ROOT = Path(__file__).resolve().parents[2]


def cluster(stack: str) -> dict[str, Any]:
    """A stack's cluster spec, read as Pulumi reads it (YAML 1.2: timestamps are text)."""
    document = parse_yaml((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    plain: dict[str, Any] = json.loads(json.dumps(document["config"]["gpuforge:cluster"]))
    return plain


def problems(stack: str, edit: Callable[[dict[str, Any]], None]) -> dict[str, str]:
    """path -> "message; fix" of every problem the edited stack has."""
    data = cluster(stack)
    edit(data)
    with pytest.raises(SpecError) as caught:
        resolve(data)
    return {i.path: f"{i.message}; fix: {i.fix}" for i in caught.value.issues}


def train(data: dict[str, Any]) -> dict[str, Any]:
    group: dict[str, Any] = data["node_groups"]["train"]
    return group


# --- fixed or elastic ----------------------------------------------------------------------------


def test_fixed_and_elastic_groups_expose_their_range() -> None:
    dev = resolve(cluster("dev")).node_groups["train"].spec
    assert (dev.is_elastic, dev.min_nodes, dev.max_nodes, dev.total_nodes, dev.nodes_text) == (True, 0, 2, 2, "0-2")
    assert dev.scaling is not None and dev.scaling.scaledown_idle_minutes == 10
    prod = resolve(cluster("prod")).node_groups["train"].spec
    assert (prod.is_elastic, prod.min_nodes, prod.max_nodes, prod.nodes_text) == (False, 66, 66, "64+2")


def test_a_group_sets_count_or_scaling_not_both_nor_neither() -> None:
    def both(data: dict[str, Any]) -> None:
        train(data)["count"] = 2

    found = problems("dev", both)
    assert "both count (2) and scaling are set" in found["cluster.node_groups[train]"]
    assert "fix: remove count for an elastic group" in found["cluster.node_groups[train]"]

    def neither(data: dict[str, Any]) -> None:
        del train(data)["scaling"]

    found = problems("dev", neither)
    assert "neither count nor scaling is set" in found["cluster.node_groups[train]"]


def test_scaling_min_above_max_is_refused() -> None:
    def inverted(data: dict[str, Any]) -> None:
        train(data)["scaling"] = {"min": 3, "max": 2}

    found = problems("dev", inverted)
    assert found["cluster.node_groups[train].scaling"] == "min (3) is above max (2); fix: lower min or raise max"


def test_elastic_needs_a_scheduler_and_no_reservation_and_no_spares() -> None:
    def plain(data: dict[str, Any]) -> None:
        train(data)["orchestrator"] = "none"
        train(data)["spares"] = 1
        del data["scheduler"]  # no Slurm partition may name it any more

    found = problems("dev", plain)
    assert "orchestrator is none" in found["cluster.node_groups[train].scaling"]
    fix = "set orchestrator: slurm (gpuforge-lifecycle scales it with the queue) or eks"
    assert fix in found["cluster.node_groups[train].scaling"]
    assert "remove spares" in found["cluster.node_groups[train].spares"]

    def reserved(data: dict[str, Any]) -> None:
        group = train(data)
        del group["count"], group["spares"]
        group["scaling"] = {"min": 0, "max": 64}

    found = problems("prod", reserved)
    assert "capacity reservation is paid for whether nodes run or not" in found["cluster.node_groups[train].scaling"]
    assert "replace scaling with count" in found["cluster.node_groups[train].scaling"]


def test_an_elastic_eks_group_is_accepted_the_cluster_autoscaler_scales_it() -> None:
    """An EKS managed group's min/max is moved by the Cluster Autoscaler gpuforge installs beside it (issue 28,
    item 4; tests/k8s/test_k8s_elasticity.py plans one)."""

    def elastic_system(data: dict[str, Any]) -> None:
        system = data["node_groups"]["system"]
        del system["count"]
        system["scaling"] = {"min": 1, "max": 3}

    data = cluster("staging")
    elastic_system(data)
    assert resolve(data).node_groups["system"].spec.scaling is not None


def test_dev_plan_declares_an_elastic_asg_whose_desired_capacity_the_scaler_owns() -> None:
    plan = planned("dev")
    (asg,) = [r for r in plan.resources if r.name == "forge-dev-train-asg"]
    assert (asg.inputs["minSize"], asg.inputs["maxSize"], asg.inputs["desiredCapacity"]) == (0, 2, 0)
    # `pulumi up` must not reset what the scaler set: that would terminate busy nodes.
    assert asg.ignore_changes == ["desiredCapacity"]
    (login,) = [r for r in plan.resources if r.name == "forge-dev-login-asg"]
    assert login.ignore_changes == [] and login.inputs["desiredCapacity"] == 1
    assert "ignoreChanges" in next(r for r in plan.to_json()["resources"] if r["name"] == "forge-dev-train-asg")
    # Cost, power and GPUs plan the worst case: the group at its max.
    assert plan.summary.gpus == 8
    assert "| train | training | g5.12xlarge | 0-2 | 8 |" in markdown_plan(plan)


# --- Capacity Blocks ------------------------------------------------------------------------------


def test_staging_block_window_and_size_are_in_the_spec() -> None:
    block = resolve(cluster("staging")).node_groups["train"].spec.capacity
    assert block.type == "capacity_block"
    assert (block.instance_type, block.instance_count) == ("p5.48xlarge", 9)
    assert block.start.isoformat() == "2026-12-01T11:30:00+00:00"
    assert block.end.isoformat() == "2026-12-15T11:30:00+00:00"


def test_a_block_of_another_type_or_too_small_is_refused() -> None:
    def wrong(data: dict[str, Any]) -> None:
        train(data)["capacity"]["instance_type"] = "p4d.24xlarge"
        train(data)["capacity"]["instance_count"] = 8

    found = problems("staging", wrong)
    assert found["cluster.node_groups[train].capacity.instance_type"].startswith(
        "the block holds p4d.24xlarge and the group launches p5.48xlarge"
    )
    assert "count + spares (8 + 1 = 9) exceed the block's 8 instances" in found["cluster.node_groups[train].count"]


def test_a_block_window_must_be_zoned_and_end_after_it_starts() -> None:
    def naive(data: dict[str, Any]) -> None:
        train(data)["capacity"]["start"] = "2026-12-01T11:30:00"

    found = problems("staging", naive)
    assert "has no time zone" in found["cluster.node_groups[train].capacity.start"]

    def backwards(data: dict[str, Any]) -> None:
        train(data)["capacity"]["end"] = "2026-11-30T11:30:00Z"

    found = problems("staging", backwards)
    assert "is not after start (2026-12-01T11:30:00+00:00)" in found["cluster.node_groups[train].capacity.end"]

    def not_a_time(data: dict[str, Any]) -> None:
        train(data)["capacity"]["end"] = "next tuesday"

    assert "cluster.node_groups[train].capacity.end" in problems("staging", not_a_time)


# --- update strategy ------------------------------------------------------------------------------


def test_update_strategy_defaults_and_refusals() -> None:
    groups = resolve(cluster("prod")).node_groups
    assert groups["train"].spec.effective_update_strategy == "drain"  # orchestrator slurm
    assert groups["services"].spec.effective_update_strategy == "instance_refresh"
    assert resolve(cluster("staging")).node_groups["train"].spec.effective_update_strategy == "eks_managed"

    def drain_plain(data: dict[str, Any]) -> None:
        data["node_groups"]["services"]["update_strategy"] = "drain"

    found = problems("prod", drain_plain)
    assert "use update_strategy: instance_refresh" in found["cluster.node_groups[services].update_strategy"]

    def eks_refresh(data: dict[str, Any]) -> None:
        train(data)["update_strategy"] = "instance_refresh"

    assert "remove update_strategy" in problems("staging", eks_refresh)["cluster.node_groups[train].update_strategy"]


# --- what the plan declares: schedules, pinned template versions, maintenance, auto repair ---------------


def test_staging_block_group_scales_with_the_window() -> None:
    plan = planned("staging")
    schedules = {r.name: r.inputs for r in plan.by_type("aws:autoscaling/schedule:Schedule")}
    start, end = schedules["forge-staging-train-block-start"], schedules["forge-staging-train-block-end"]
    assert (start["startTime"], start["desiredCapacity"], start["maxSize"]) == ("2026-12-01T11:30:00Z", 9, 9)
    # 40 minutes before the end: EC2 starts terminating the block's instances 30 minutes before it.
    assert (end["startTime"], end["desiredCapacity"], end["minSize"]) == ("2026-12-15T10:50:00Z", 0, 0)
    (ng,) = [r for r in plan.resources if r.name == "forge-staging-train-ng"]
    # Created empty (EKS User Guide: desired 0 before the block is active); the block-start action fills it.
    assert ng.inputs["scalingConfig"] == {"minSize": 0, "maxSize": 9, "desiredSize": 0}
    assert ng.ignore_changes == ["scalingConfig.desiredSize"]
    assert ng.inputs["nodeRepairConfig"] == {"enabled": True}
    # No surge inside the full block: EKS terminates a node before it launches its replacement.
    assert ng.inputs["updateConfig"] == {"maxUnavailable": 1, "updateStrategy": "MINIMAL"}
    (system,) = [r for r in plan.resources if r.name == "forge-staging-system-ng"]
    assert "nodeRepairConfig" not in system.inputs  # CPU group: no GPU health to repair
    assert system.inputs["updateConfig"] == {"maxUnavailable": 1, "updateStrategy": "DEFAULT"}  # on demand: room
    rows = dict(summary_rows(plan))
    assert rows["Capacity Block"].startswith("train: Capacity Block 2026-12-01 11:30 UTC → 2026-12-15 11:30 UTC")
    assert "scaled to 0 at 2026-12-15 10:50 UTC" in rows["Capacity Block"]


def test_block_window_warns_as_it_nears_its_end() -> None:
    window = {"start": "2026-12-01T11:30:00Z", "end": "2026-12-15T11:30:00Z"}
    inputs = [{"nodeGroup": "train", "capacityWindow": window}]
    (far,) = block_windows(inputs, now=datetime(2026, 12, 2, tzinfo=UTC))
    assert not far.ending_soon and "ending soon" not in far.text()
    (near,) = block_windows(inputs, now=datetime(2026, 12, 13, 11, 30, tzinfo=UTC))
    assert near.ending_soon and "ends in 2.0 days" in near.text() and "purchase-capacity-block-extension" in near.text()
    (over,) = block_windows(inputs, now=datetime(2026, 12, 16, tzinfo=UTC))
    assert "ended" in over.text() and not over.ending_soon


def test_asg_pins_its_template_version_and_refreshes_by_strategy() -> None:
    prod = planned("prod")
    asgs = {r.name: r for r in prod.by_type("aws:autoscaling/group:Group")}
    train, services = asgs["forge-prod-train-asg"].inputs, asgs["forge-prod-services-asg"].inputs
    for group in (train, services):
        assert group["launchTemplate"]["version"] != "$Latest"
    # Slurm group: drained and replaced by gpuforge's scaler, so no instance refresh of its own; it sits in
    # a full reservation: terminate first (max healthy 100 %).
    assert "instanceRefresh" not in train
    assert train["instanceMaintenancePolicy"] == {"minHealthyPercentage": 90, "maxHealthyPercentage": 100}
    assert services["instanceRefresh"]["strategy"] == "Rolling"
    assert services["instanceMaintenancePolicy"] == {"minHealthyPercentage": 100, "maxHealthyPercentage": 110}


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ({"updateStrategy": "drain"}, "drain then replace: each of the 4 nodes is drained in Slurm"),
        ({"updateStrategy": "instance_refresh", "capacity": "on_demand"}, "launch then terminate (min healthy 100 %"),
        ({"updateStrategy": "instance_refresh", "capacity": "capacity_reservation"}, "terminate then launch (min"),
        ({"updateStrategy": "eks_managed", "capacity": "capacity_block"}, "terminate then launch (update strategy MIN"),
        ({"updateStrategy": "eks_managed", "capacity": "on_demand"}, "launch then terminate (update strategy DEFAULT)"),
    ],
)
def test_diff_says_how_nodes_roll(inputs: dict[str, Any], expected: str) -> None:
    assert expected in how_nodes_roll(inputs, 4)


@pytest.mark.parametrize(
    ("capacity", "reserved"),
    [
        ({"type": "on_demand"}, False),
        ({"type": "spot"}, False),
        ({"type": "capacity_reservation", "reservation_id": "cr-0123456789abcdef0"}, True),
        ({"type": "capacity_block", "reservation_id": "cr-0123456789abcdef0", "instance_type": "p5.48xlarge",
          "instance_count": 2, "start": "2026-12-01T11:30:00Z", "end": "2026-12-15T11:30:00Z"}, True),
    ],
)
def test_a_group_knows_whether_it_launches_into_reserved_capacity(capacity: dict[str, Any], reserved: bool) -> None:
    """The one reserved-capacity predicate the checks, components, preflight, status and diff read."""
    group = NodeGroup.model_validate({"instance_type": "p5.48xlarge", "count": 2, "capacity": capacity})
    assert group.is_reserved is reserved
    assert (group.reservation is not None) is reserved
    assert (capacity["type"] in RESERVED_CAPACITY) is reserved
    if reserved:
        assert group.reservation is not None and group.reservation.reservation_id == capacity["reservation_id"]


def test_groups_sharing_a_block_that_say_different_types_are_refused_at_the_nested_field() -> None:
    """The shared-reservation check compares nested fields (capacity.instance_type): its path names them."""

    def share(data: dict[str, Any]) -> None:
        groups = data["node_groups"]
        groups["train"]["count"], groups["train"]["spares"] = 4, 0
        groups["team-b"] = json.loads(json.dumps(groups["train"]))
        groups["team-b"]["instance_type"] = groups["team-b"]["capacity"]["instance_type"] = "p5e.48xlarge"

    found = problems("staging", share)
    assert "cluster.node_groups[team-b].capacity.instance_type" in found, found
    assert "while the groups launching into cr-0b2c3d4e5f6a78901 say" in found[
        "cluster.node_groups[team-b].capacity.instance_type"]
