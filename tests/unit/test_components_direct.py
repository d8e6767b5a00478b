"""Components used directly under Pulumi's mocks, as a library user would compose them."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
import yaml

from gpuforge.infra.aws import GpuNodeGroup, GpuNodeGroupArgs
from gpuforge.infra.aws.efa import efa_layout
from gpuforge.spec import resolve
from tests.support import REPO as PROJECT_ROOT


class Mocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.created: dict[str, dict[str, Any]] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.created[args.name] = args.inputs
        return f"{args.name}-id", {**args.inputs, "arn": f"arn:mock:{args.name}", "name": args.name}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


@pytest.fixture
def mocks() -> Mocks:
    m = Mocks()
    pulumi.runtime.set_mocks(m, project="gpuforge", stack="unit", preview=False)
    return m


def dev_group(name: str) -> Any:
    config = yaml.safe_load((PROJECT_ROOT / "stacks" / "Pulumi.dev.yaml").read_text())["config"]
    return resolve(config["gpuforge:cluster"]).node_groups[name]


@pulumi.runtime.test
def test_node_group_exposes_asg_and_launch_template(mocks: Mocks) -> Any:
    group = GpuNodeGroup(
        "unit-train",
        GpuNodeGroupArgs(
            group=dev_group("train"),
            cluster="unit",
            subnet_ids=["subnet-a"],
            security_group_ids=["sg-compute", "sg-efa"],
            kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/unit",
        ),
    )

    def check(values: list[Any]) -> None:
        asg_name, template_id = values
        assert asg_name == "unit-train-asg"
        assert template_id == "unit-train-lt-id"
        lt = mocks.created["unit-train-lt"]
        assert lt["instanceType"] == "g5.12xlarge"
        assert [i.get("interfaceType") for i in lt["networkInterfaces"]] == [None, "efa-only"]
        # dev's train group is elastic 0-2: it starts empty and may grow to 2.
        asg = mocks.created["unit-train-asg"]
        assert (asg["minSize"], asg["maxSize"], asg["desiredCapacity"]) == (0, 2, 0)
        assert "unit-train-buckets" not in mocks.created, "no bucket policy without buckets"

    return pulumi.Output.all(group.asg_name, group.launch_template_id).apply(check)


@pytest.mark.parametrize(
    ("efa", "cards", "expected"),
    [
        (0, 1, [(0, 0, "interface")]),
        (1, 1, [(0, 0, "interface"), (0, 1, "efa-only")]),
        (4, 4, [(0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only"), (2, 0, "efa-only"), (3, 0, "efa-only")]),
    ],
)
def test_efa_layout(efa: int, cards: int, expected: list[tuple[int, int, str]]) -> None:
    slots = efa_layout(efa, cards)
    assert [(s.network_card_index, s.device_index, s.interface_type) for s in slots] == expected


def test_efa_layout_refuses_more_efas_than_cards() -> None:
    with pytest.raises(ValueError, match="network cards"):
        efa_layout(5, 4)
