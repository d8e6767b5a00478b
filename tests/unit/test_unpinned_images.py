"""The plan warns about prod node groups whose image is not pinned (issue 12): their launch templates
resolve an SSM parameter at each launch, so spares and replacements may boot a newer image than the
rest of the job. The fix is `gpuforge pin-images STACK`; a pinned group is not named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from support import planned

from gpuforge.plan.engine import plan_stack
from gpuforge.review.pins import pin_warnings, unpinned_images
from gpuforge.review.report import markdown_plan
from gpuforge.spec.loader import parse_yaml

ROOT = Path(__file__).resolve().parents[2]


def _prod() -> dict[str, Any]:
    document = parse_yaml((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    data: dict[str, Any] = json.loads(json.dumps(document["config"]["gpuforge:cluster"]))
    return data


def test_the_shipped_prod_plan_names_each_unpinned_group_and_the_command() -> None:
    plan = planned("prod")
    groups = {u.group for u in unpinned_images(plan)}
    assert "train" in groups
    (train,) = [line for line in pin_warnings(plan) if line.startswith("train: ")]
    assert train.startswith("train: resolve:ssm:/aws/service/deeplearning/")
    assert "run `gpuforge pin-images prod` (writes node_groups[train].image.ami_id)" in train
    assert f"| unpinned image | {train} |" in markdown_plan(plan)


def test_a_pinned_group_is_not_named(tmp_path: Path) -> None:
    data = _prod()
    data["node_groups"]["train"]["image"] = {"ami_id": "ami-0a1b2c3d4e5f60001"}
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump({"config": {"gpuforge:cluster": data}}))
    plan = plan_stack(path)
    assert "train" not in {u.group for u in unpinned_images(plan)}
    assert not [line for line in pin_warnings(plan) if line.startswith("train: ")]


def test_only_prod_plans_warn() -> None:
    dev = planned("dev")
    assert unpinned_images(dev) and pin_warnings(dev) == []
