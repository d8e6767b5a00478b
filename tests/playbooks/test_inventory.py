"""Inventory from the offline plan: groups per node group and role, group variables every role reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
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
    from gpuforge.catalog import load_catalog

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
    # LNet over EFA as FSx's client setup configures it, from the catalog (data/aws_wiring.yaml, lustre).
    assert train["lustre_client_efa_interfaces"] == 8  # FSx's default for p5.48xlarge
    assert train["lustre_client_efa_peer_credits"] == 32
    assert train["lustre_client_lnet_discovery"] is True
    assert train["lustre_client_efa_udsp_priority"] == 0


def test_floor_fraction_is_configurable() -> None:
    strict = build_inventory("prod", source="plan", floor_fraction=0.9)["all"]["children"]["ng_train"]["vars"]
    default = _prod()["all"]["children"]["ng_train"]["vars"]
    assert strict["gpu_healthcheck_busbw_floor_gbps"] > default["gpu_healthcheck_busbw_floor_gbps"]


def test_aws_ec2_plugin_config_selects_instances_by_stable_tags() -> None:
    """Hosts are found by the gpuforge:cluster and gpuforge:node-group tags every instance carries,
    never by the ASG name (Pulumi suffixes it with random characters)."""
    from gpuforge.plan.engine import plan_stack

    outputs = plan_stack("prod").outputs
    config = aws_ec2_inventory("prod", outputs=outputs)
    assert config["plugin"] == "amazon.aws.aws_ec2"
    assert config["filters"]["tag:gpuforge:cluster"] == ["forge-prod"]
    assert "train" in config["filters"]["tag:gpuforge:node-group"]
    assert config["groups"]["ng_train"] == "tags.get('gpuforge:node-group') == 'train'"
    assert not any("autoscaling" in key for key in config["filters"])


def test_launch_templates_tag_instances_with_their_node_group() -> None:
    """Whichever path launches an instance (an ASG, or an EKS managed node group, which does not
    propagate its own tags), the launch template tags it with its node group and cluster."""
    from gpuforge.plan.engine import plan_stack

    for stack in ("prod", "dev"):
        plan = plan_stack(stack)
        # Node groups' templates (the Slurm controllers are single instances, found by their address).
        launch_templates = plan.by_type("aws:ec2/launchTemplate:LaunchTemplate")
        templates = [t for t in launch_templates if "SlurmControlPlane" not in t.urn]
        assert templates
        for template in templates:
            group = template.name.removeprefix(f"{plan.outputs['cluster']['name']}-").rsplit("-lt", 1)[0]
            specs = {spec["resourceType"]: spec["tags"] for spec in template.inputs["tagSpecifications"]}
            assert specs["instance"]["gpuforge:node-group"] == group, template.name


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


# What only a deployed Slurm cluster on AWS knows: its accounting database and its EFS file systems; and a
# hybrid one's: the Roles Anywhere ARNs of the site's scaler (stack output hybrid.burst.scaler).
SLURM_DEPLOYED = {
    f"all.vars.slurm_config.{path}"
    for path in ("accounting.database.host", "home.server", "home.source", "state_shared.server",
                 "state_shared.source", "lifecycle.aws_credentials.trust_anchor_arn",
                 "lifecycle.aws_credentials.profile_arn", "lifecycle.aws_credentials.role_arn")
}


@pytest.mark.parametrize("stack", ["dev", "staging", "prod", "onprem-lab", "hybrid"])
def test_offline_inventory_of_every_stack_holds_no_mock_value(stack: str) -> None:
    """Values only the engine computes are ENGINE_ONLY offline, never the mock monitor's inventions."""
    from gpuforge.nodes.inventory import ENGINE_ONLY, engine_only_values

    inventory = build_inventory(stack, source="plan")
    assert inventory["all"]["vars"]["gpuforge_outputs_source"] == "plan"
    text = yaml.safe_dump(inventory)
    assert "mock" not in text and "123456789012" not in text
    for path in engine_only_values(inventory):
        assert path.endswith((".dnsName", ".mountName")) or path in SLURM_DEPLOYED, path
    assert (ENGINE_ONLY in text) == bool(engine_only_values(inventory))


def test_aws_ec2_plugin_names_each_instance_as_slurm_does(tmp_path: Path) -> None:
    """The real amazon.aws.aws_ec2 plugin (ansible-inventory) against moto's EC2 on 127.0.0.1: each instance
    gets slurm_node_name <group>-<instance id>, the name its slurmd registers under (instance_name.py), which
    `gpuforge check --drain slurm` (slurm-drain.yml) drains."""
    import boto3  # type: ignore[import-untyped,unused-ignore]

    from gpuforge.nodes.instance_name import node_name
    from tests.standins.moto_server import CREDENTIALS, boto3_args, moto_server

    outputs = {"cluster": {"name": "forge-prod", "region": "us-east-1"}, "nodeGroups": {"train": {}}}
    config = aws_ec2_inventory("prod", outputs=outputs)
    with moto_server(tmp_path) as endpoint:
        ec2 = boto3.client("ec2", **boto3_args(endpoint))
        image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        tags = [{"Key": "gpuforge:cluster", "Value": "forge-prod"}, {"Key": "gpuforge:node-group", "Value": "train"}]
        launched = ec2.run_instances(
            ImageId=image, InstanceType="p5.48xlarge", MinCount=2, MaxCount=2,
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )["Instances"]  # fmt: skip
        source = tmp_path / "forge-prod.aws_ec2.yml"
        source.write_text(yaml.safe_dump({**config, "endpoint_url": endpoint}))
        env = {**os.environ, **CREDENTIALS, "ANSIBLE_INVENTORY_ENABLED": "amazon.aws.aws_ec2"}
        listed = subprocess.run(
            [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(source), "--list"],
            capture_output=True, text=True, timeout=120, env=env, check=False,
        )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    hostvars = json.loads(listed.stdout)["_meta"]["hostvars"]  # hosts by private address
    names = {host: _unsafe(v.get("slurm_node_name")) for host, v in hostvars.items()}
    assert names == {i["PrivateIpAddress"]: node_name("train", i["InstanceId"]) for i in launched}
    assert sorted(json.loads(listed.stdout)["ng_train"]["hosts"]) == sorted(names)


def _unsafe(value: Any) -> Any:
    """A value as ansible-inventory --list prints it: strings from AWS are marked unsafe (not templated)."""
    return value.get("__ansible_unsafe") if isinstance(value, dict) else value


@pytest.mark.parametrize("stack", ["prod", "onprem-lab"])
def test_local_scratch_is_required_exactly_where_enroot_uses_it(stack: str) -> None:
    """The local_scratch role's selection per node group agrees with the rendered enroot.conf: a group whose
    enroot paths are under /scratch requires its NVMe there (the catalog gives its type or server model
    local drives); any other group mounts nothing and enroot uses /var/lib/enroot on the root disk.
    job_container.conf's BasePath (/var/spool/slurmd-tmpfs, AutoBasePath) exists on every node: on the
    NVMe through the role's bind where there is one."""
    from gpuforge.catalog.aws_wiring import load_aws_wiring
    from gpuforge.render.slurm import JOB_TMPFS_BASE, LOCAL_NVME_DIR

    inventory = build_inventory(stack, source="plan")
    config = inventory["all"]["vars"]["slurm_config"]
    assert config["job_container"] == {"enabled": True, "base_path": JOB_TMPFS_BASE}
    settings = config["containers"]["enroot"]["settings"]
    checked = 0
    for name, enroot in settings.items():
        group = inventory["all"]["children"].get(f"ng_{name}")
        if group is None:
            continue
        scratch = group["vars"]
        on_nvme = enroot["ENROOT_DATA_PATH"].startswith(f"{LOCAL_NVME_DIR}/")
        assert scratch["local_scratch_required"] is on_nvme, name
        assert on_nvme or enroot["ENROOT_DATA_PATH"].startswith("/var/lib/enroot/")
        if "local_scratch_model" in scratch:
            assert scratch["local_scratch_model"] == load_aws_wiring().instance_store.nvme_model
        checked += 1
    assert checked
    if stack == "prod":  # p5.48xlarge has instance store, the login type none
        assert inventory["all"]["children"]["ng_train"]["vars"]["local_scratch_required"] is True
        assert inventory["all"]["children"]["ng_login"]["vars"]["local_scratch_required"] is False


def test_site_lustre_beegfs_and_weka_reach_the_inventory_from_the_spec() -> None:
    """site.storage.mounts of a spec declaring a Lustre over o2ib, a BeeGFS and a WEKA file system
    (tests/fixtures/stacks/Pulumi.booted-site.yaml) become each GPU group's site_mounts_mounts, as the
    site_mounts role takes them, and LNet's o2ib network on the interfaces the Lustre names. The booted
    site.yml test mounts exactly these (it takes them from site_mounts_from_spec)."""
    from tests.support import site_mounts_from_spec

    assert site_mounts_from_spec() == {
        "site_mounts_mounts": [
            {
                "name": "datasets",
                "kind": "weka",
                "backends": ["10.64.9.30", "10.64.9.31"],
                "filesystem": "datasets",
                "mount_point": "/site/datasets",
            },
            {"name": "projects", "kind": "beegfs", "mgmtd_host": "10.64.9.20", "mount_point": "/site/projects"},
            {
                "name": "scratch",
                "kind": "lustre",
                "mgs_nids": ["10.64.9.10@o2ib", "10.64.9.11@o2ib"],
                "fsname": "scratch",
                "lnet_interfaces": ["ibp170s0f0"],
                "mount_point": "/site/scratch",
            },
        ],
        "lustre_client_o2ib_networks": {"o2ib": ["ibp170s0f0"]},
    }
