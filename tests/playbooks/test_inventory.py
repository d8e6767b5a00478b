"""Inventory from the offline plan: groups per node group and role, group variables every role reads."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
import yaml

from gpuforge.nodes.bake import parse_target, rootfs_inventory
from gpuforge.nodes.check import _host_vars, drain_commands, expectations_from_vars
from gpuforge.nodes.health import NodeHealth
from gpuforge.nodes.inventory import aws_ec2_inventory, build_inventory, node_group_vars


@cache
def _prod() -> dict[str, Any]:
    return build_inventory("prod", source="plan")


def test_prod_inventory_groups() -> None:
    children = _prod()["all"]["children"]
    assert "ng_train" in children["gpu_nodes"]["children"]
    assert "ng_login" not in children["gpu_nodes"]["children"]  # no GPUs: site.yml leaves it alone
    assert "ng_train" in children["role_training"]["children"]
    # A YAML inventory Ansible reads back unchanged.
    assert yaml.safe_load(yaml.safe_dump(_prod())) == _prod()


def test_prod_train_group_vars_come_from_spec_and_catalog() -> None:
    from components.catalog import load_catalog

    train = _prod()["all"]["children"]["ng_train"]["vars"]
    it = load_catalog().instance_type(train["gpuforge_instance_type"])
    assert train["gpuforge_fabric"] == "efa" and train["nccl_tuning_fabric"] == "efa"
    assert train["nvidia_fabricmanager_enabled"] is bool(it.nvswitch)
    assert train["gpu_healthcheck_expected_gpus"] == it.gpu_count
    assert train["gpu_healthcheck_expected_efa"] == it.max_efa_interfaces
    assert train["gpu_healthcheck_busbw_floor_gbps"] == pytest.approx(it.nccl_busbw_reference_gbps * 0.8)
    assert train["nccl_net_plugin"] == "aws-ofi-nccl"
    assert train["nccl_tuning_aws_ofi_nccl_version"] and train["nccl_tuning_efa_installer_version"]
    assert set(train["lustre_client_filesystem"]) == {"dnsName", "mountName", "efa"}
    assert train["lustre_client_filesystem"]["efa"] is True  # prod's file system is EFA-enabled


def test_floor_fraction_is_configurable() -> None:
    strict = build_inventory("prod", source="plan", floor_fraction=0.9)["all"]["children"]["ng_train"]["vars"]
    default = _prod()["all"]["children"]["ng_train"]["vars"]
    assert strict["gpu_healthcheck_busbw_floor_gbps"] > default["gpu_healthcheck_busbw_floor_gbps"]


def test_aws_ec2_plugin_config_maps_asgs_to_node_groups() -> None:
    from gpuforge.plan.engine import plan_stack

    outputs = plan_stack("prod").outputs
    config = aws_ec2_inventory("prod", outputs=outputs)
    asg = outputs["nodeGroups"]["train"]["asgName"]
    assert config["plugin"] == "amazon.aws.aws_ec2"
    assert asg in config["filters"]["tag:aws:autoscaling:groupName"]
    assert config["groups"]["ng_train"] == f"tags['aws:autoscaling:groupName'] == '{asg}'"


def test_on_premises_hosts_and_infiniband_vars() -> None:
    outputs = {
        "cluster": {"name": "lab", "region": None},
        "software": {"nvidiaDriverBranch": "580", "ncclVersion": "2.27.7"},
        "nodeGroups": {
            "dgx": {
                "role": "training",
                "fabric": "infiniband",
                "gpusPerNode": 8,
                "hosts": ["dgx-01", "dgx-02"],
                "ibHcas": [f"mlx5_{i}" for i in range(8)],
                "railOptimized": True,
            }
        },
    }
    inventory = build_inventory("onprem-lab", outputs=outputs)
    group = inventory["all"]["children"]["ng_dgx"]
    assert list(group["hosts"]) == ["dgx-01", "dgx-02"]
    assert group["vars"]["nccl_tuning_rail_optimized"] is True
    assert group["vars"]["rdma_fabric"] == "infiniband"
    expect = expectations_from_vars(_host_vars(inventory)["dgx-02"])
    assert expect.ib_hcas == tuple(f"mlx5_{i}" for i in range(8)) and expect.fabric == "infiniband"
    assert node_group_vars(inventory, "dgx")["gpuforge_fabric"] == "infiniband"
    with pytest.raises(ValueError, match="no node group 'nope'"):
        node_group_vars(inventory, "nope")


def test_targets_and_rootfs_inventory(tmp_path: Any) -> None:
    assert parse_target("hosts") == ("hosts", None)
    kind, path = parse_target(f"rootfs:{tmp_path}")
    assert kind == "rootfs" and path == tmp_path
    with pytest.raises(ValueError, match="rootfs:PATH"):
        parse_target("ssh:foo")
    inv = rootfs_inventory(tmp_path, {"gpuforge_fabric": "efa"})
    host = inv["all"]["children"]["gpu_nodes"]["hosts"]["rootfs"]
    assert host["ansible_connection"] == "community.general.chroot"
    assert host["ansible_host"] == str(tmp_path.resolve()) and host["gpuforge_fabric"] == "efa"


def test_drain_commands_per_scheduler() -> None:
    nodes = [NodeHealth("gpu-1", ["found 7 GPUs, expected 8"]), NodeHealth("gpu-2", [])]
    assert drain_commands(nodes, "slurm") == [
        ["scontrol", "update", "nodename=gpu-1", "state=drain", "reason=gpuforge check: found 7 GPUs, expected 8"]
    ]
    kube = drain_commands(nodes, "kubernetes")
    assert kube[0] == ["kubectl", "cordon", "gpu-1"] and kube[1][:3] == ["kubectl", "drain", "gpu-1"]
    assert drain_commands(nodes, "none") == []
