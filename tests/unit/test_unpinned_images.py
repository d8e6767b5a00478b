"""The plan warns about prod node groups whose image is not pinned (issue 12): their launch templates
resolve an SSM parameter at each launch, so spares and replacements may boot a newer image than the
rest of the job. The fix is `gpuforge pin-images STACK`; a pinned group is not named."""

from __future__ import annotations

from pathlib import Path

from gpuforge.review.pins import pin_warnings, unpinned_images
from gpuforge.review.report import markdown_plan
from tests.specs import minimal_aws_cluster, planned_cluster

PROD = minimal_aws_cluster(environment="prod")  # its train group names no image: the DLAMI's SSM parameter


def test_a_prod_plan_names_each_unpinned_group_and_the_command(tmp_path: Path) -> None:
    plan = planned_cluster(tmp_path, PROD, name="prod")
    groups = {u.group for u in unpinned_images(plan)}
    assert "train" in groups
    (train,) = [line for line in pin_warnings(plan) if line.startswith("train: ")]
    assert train.startswith("train: resolve:ssm:/aws/service/deeplearning/")
    assert "run `gpuforge pin-images prod` (writes node_groups[train].image.ami_id)" in train
    assert f"| unpinned image | {train} |" in markdown_plan(plan)


def test_a_pinned_group_is_not_named(tmp_path: Path) -> None:
    pinned = minimal_aws_cluster(
        environment="prod", node_groups={"train": {"image": {"ami_id": "ami-0a1b2c3d4e5f60001"}}}
    )
    plan = planned_cluster(tmp_path, pinned, name="prod")
    assert "train" not in {u.group for u in unpinned_images(plan)}
    assert not [line for line in pin_warnings(plan) if line.startswith("train: ")]


def test_only_prod_plans_warn(tmp_path: Path) -> None:
    dev = planned_cluster(tmp_path, minimal_aws_cluster(environment="dev"))
    assert unpinned_images(dev) and pin_warnings(dev) == []
