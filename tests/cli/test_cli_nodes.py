"""inventory, bake and check as a user runs them offline."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from gpuforge.cli import app

runner = CliRunner()


def test_inventory_prod_has_groups_and_nccl_inputs() -> None:
    result = runner.invoke(app, ["inventory", "prod", "--source", "plan"])
    assert result.exit_code == 0, result.output
    children = yaml.safe_load(result.stdout)["all"]["children"]
    train = children["ng_train"]["vars"]
    assert (train["gpuforge_instance_type"], train["gpuforge_fabric"], train["gpuforge_gpus_per_node"]) == (
        "p5.48xlarge",
        "efa",
        8,
    )
    assert train["nccl_tuning_fabric"] == "efa"
    assert train["gpu_healthcheck_expected_efa"] == 32
    assert "ng_train" in children["gpu_nodes"]["children"]
    assert "ng_login" in children["role_login"]["children"]


def test_inventory_aws_ec2_plugin_targets_each_asg() -> None:
    result = runner.invoke(app, ["inventory", "prod", "--source", "plan", "--aws-ec2"])
    assert result.exit_code == 0, result.output
    config = yaml.safe_load(result.output)
    assert config["plugin"] == "amazon.aws.aws_ec2"
    assert config["filters"]["tag:gpuforge:node-group"] == ["login", "services", "train"]


def test_bake_dev_check_runs_offline_and_says_why_no_host_matched() -> None:
    result = runner.invoke(app, ["bake", "dev", "--check"])
    assert result.exit_code == 0, result.output
    assert "no hosts matched" in result.output


def test_bake_to_a_missing_rootfs_is_a_clear_error() -> None:
    result = runner.invoke(app, ["bake", "dev", "--target", "rootfs:/nonexistent/rootfs"])
    assert result.exit_code == 2
    assert "no such directory" in result.output


def test_check_rejects_unknown_checks() -> None:
    result = runner.invoke(app, ["check", "dev", "--checks", "gpu,vibes"])
    assert result.exit_code == 2
    assert "vibes" in result.output


def test_offline_inventory_never_presents_mock_values_as_real() -> None:
    """Offline, the FSx DNS and mount names are unknown: they are marked as such, never the plan's
    mock values, and stderr says the outputs come from the plan."""
    result = runner.invoke(app, ["inventory", "prod", "--source", "plan"])
    assert result.exit_code == 0, result.output
    assert "mock" not in result.stdout
    fs = yaml.safe_load(result.stdout)["all"]["children"]["ng_train"]["vars"]["lustre_client_filesystem"]
    assert fs == {"dnsName": "<known after pulumi up>", "mountName": "<known after pulumi up>"}
    assert "offline plan" in result.stderr and "lustre_client_filesystem" in result.stderr
