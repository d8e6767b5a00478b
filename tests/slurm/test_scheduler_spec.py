"""Bad scheduler sections are rejected before anything is declared, every problem with its field path."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.spec import SpecError, resolve
from gpuforge.plan.stacks import load_stack


def _dev() -> dict[str, Any]:
    return copy.deepcopy(load_stack("dev").cluster)


def _problems(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        resolve(data, "test")
    return {issue.path: issue.message for issue in err.value.issues}


def test_dev_is_a_slurm_cluster() -> None:
    resolved = resolve(_dev(), "dev")
    assert resolved.scheduler is not None
    assert resolved.scheduler.default_partition == "gpu"
    assert [c.address for c in resolved.scheduler.controllers] == ["10.20.128.10"]


def test_all_problems_at_once_with_field_paths() -> None:
    data = _dev()
    sched = data["scheduler"]
    sched["partitions"]["gpu"]["node_groups"] = ["train", "trian"]  # unknown group
    sched["partitions"]["debug"]["default"] = True  # two defaults
    sched["partitions"]["empty"] = {"node_groups": []}  # no nodes
    sched["partitions"]["late"] = {"node_groups": ["train"], "max_time": "60", "default_time": "2:00:00"}
    problems = _problems(data)
    unknown = problems["cluster.scheduler.partitions[gpu].node_groups[1]"]
    assert "no node group or site host pool named 'trian'" in unknown
    assert problems["cluster.scheduler.partitions"].startswith("2 default partitions")
    assert problems["cluster.scheduler.partitions[empty].node_groups"] == "a partition with no nodes"
    assert "exceeds max_time" in problems["cluster.scheduler.partitions[late].default_time"]


def test_login_group_without_scheduler() -> None:
    data = _dev()
    del data["scheduler"]
    problems = _problems(data)
    assert problems["cluster.node_groups[login].orchestrator"] == "a login group without a scheduler"
    assert problems["cluster.node_groups[train].orchestrator"] == "a Slurm node group without a scheduler"


def test_partition_group_must_run_slurm() -> None:
    data = _dev()
    data["node_groups"]["train"]["orchestrator"] = "none"
    problems = _problems(data)
    assert "do not run Slurm" in problems["cluster.scheduler.partitions[gpu].node_groups[0]"]


def test_bad_values_are_structural_errors() -> None:
    data = _dev()
    data["scheduler"]["partitions"]["gpu"]["max_time"] = "a week"
    data["scheduler"]["controller"]["hosts"] = {"slurm-01": "10.0.0.300"}
    problems = _problems(data)
    assert "is not a Slurm time" in problems["cluster.scheduler.partitions[gpu].max_time"]
    assert "not an IP address" in problems["cluster.scheduler.controller.hosts"]


def test_aws_controller_fields() -> None:
    data = _dev()
    data["scheduler"]["users"]["bob"] = {"uid": 2002, "account": "nobody"}
    data["scheduler"]["controller"] = {"hosts": {"slurm-01": "10.20.0.5"}}
    problems = _problems(data)
    assert "this is an AWS cluster" in problems["cluster.scheduler.controller"]
    assert problems["cluster.scheduler.controller.instance_type"] == "missing"
    assert problems["cluster.scheduler.users[bob].account"] == "no account named 'nobody'"
