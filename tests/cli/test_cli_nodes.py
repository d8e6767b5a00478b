"""inventory, bake and check as a user runs them offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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


def test_bake_matching_no_host_fails_and_says_why() -> None:
    """Offline, an AWS stack's nodes are unknown: the run configures nothing, so it must not pass."""
    result = runner.invoke(app, ["bake", "dev", "--check"])
    assert result.exit_code == 1, result.output
    assert "matched no host" in result.stderr and "nothing was configured" in result.stderr
    assert "--inventory" in result.stderr  # and how to give it hosts


def test_bake_json_reports_no_host_for_ci() -> None:
    result = runner.invoke(app, ["bake", "dev", "--check", "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["hosts"] == {} and "matched no host" in report["reason"]


def test_bake_limit_matching_nothing_names_the_limit() -> None:
    # The enroot release's digests as a user passes them while the catalog has none (the next test).
    digests = '{"enroot_checksums": {"enroot_4.1.2-1_amd64.deb": "0"}}'
    result = runner.invoke(app, ["bake", "onprem-lab", "--limit", "nosuchhost", "--check", "-e", digests])
    assert result.exit_code == 1, result.output
    assert "--limit 'nosuchhost'" in result.stderr


def test_bake_refuses_enroot_without_digests_before_any_play_runs() -> None:
    """onprem-lab's Slurm nodes get enroot (scheduler.containers: enroot_pyxis) and the catalog has no sha256
    for the release's assets: the enroot role would refuse them halfway through the bake, so the bake stops
    before Ansible starts, naming the catalog field and the fix."""
    result = runner.invoke(app, ["bake", "onprem-lab", "--check"])
    assert result.exit_code == 2, result.output
    assert "catalog.slurm.containers.enroot.sha256: no sha256 for enroot_4.1.2-1_amd64.deb, " in result.stderr
    assert "enroot+caps_4.1.2-1_amd64.deb" in result.stderr and "scheduler.containers: none" in result.stderr
    assert "PLAY" not in result.output and "Traceback" not in result.output


def test_bake_refuses_hosts_when_the_plan_lacks_a_deployed_value(tmp_path: Path) -> None:
    """An AWS stack's FSx names are only known once deployed: baking real hosts with the offline plan
    would write a mount that cannot work, so it is refused, naming the value and the way out."""
    hosts = tmp_path / "hosts.yml"
    train = {"ng_train": {"hosts": {"n1": {"ansible_host": "127.0.0.9"}}}}
    hosts.write_text(yaml.safe_dump({"all": {"children": train}}))
    result = runner.invoke(app, ["bake", "dev", "-i", str(hosts), "--check"])
    assert result.exit_code == 2, result.output
    assert "does not know lustre_client_filesystem" in result.output and "--extra-vars" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-i", "/nonexistent/hosts.yml"], "--inventory /nonexistent/hosts.yml: no such file"),
        (["--private-key", "/nonexistent/key"], "--private-key /nonexistent/key: no such file"),
        (["-e", "not a pair"], "--extra-vars: not a pair: expected KEY=VALUE"),
        (["-e", "@/nonexistent/vars.yml"], "@/nonexistent/vars.yml: no such file"),
        (["--forks", "0"], "--forks"),
    ],
)
def test_bake_option_mistakes_are_usage_errors(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["bake", "dev", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_extra_vars_merge_like_ansible(tmp_path: Path) -> None:
    from gpuforge.nodes.bake import parse_extra_vars

    file = tmp_path / "vars.yml"
    file.write_text("a: 1\nb: [x]\n")
    merged = parse_extra_vars([f"@{file}", "a=2 c='three words'", '{"d": {"e": true}}'])
    assert merged == {"a": "2", "b": ["x"], "c": "three words", "d": {"e": True}}


def test_check_with_zero_hosts_is_not_a_pass() -> None:
    result = runner.invoke(app, ["check", "dev", "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["checked"] == 0
    assert "no host was checked" in report["reason"]


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
    # efa comes from the spec (known offline): EFA nodes configure LNet over EFA.
    assert fs == {"dnsName": "<known after pulumi up>", "mountName": "<known after pulumi up>", "efa": True}
    assert "offline plan" in result.stderr and "lustre_client_filesystem" in result.stderr


def test_a_failed_loop_says_which_items_failed_and_why() -> None:
    """Ansible's own message for a loop is only 'One or more items failed': each item's reason follows."""
    from gpuforge.nodes.bake import failure_message

    res = {
        "msg": "One or more items failed",
        "results": [
            {"item": {"key": "xid.log"}, "_ansible_item_label": "xid.log", "changed": False},
            {
                "_ansible_item_label": "nvidia-smi.csv",
                "failed": True,
                "msg": "Destination directory /var/lib/gpuforge/healthcheck does not exist",
            },
        ],
    }
    assert failure_message(res) == (
        "One or more items failed: nvidia-smi.csv: Destination directory /var/lib/gpuforge/healthcheck does not exist"
    )


def test_check_reason_names_each_failing_node_and_its_problems() -> None:
    from gpuforge.nodes.bake import PlaybookResult
    from gpuforge.nodes.check import CheckReport
    from gpuforge.nodes.health import NodeHealth

    nodes = [
        NodeHealth("gpu1", problems=["nvidia-smi failed (rc 9): NVIDIA-SMI has failed", "nccl-tests missing: ..."]),
        NodeHealth("gpu2", problems=[]),
    ]
    report = CheckReport(nodes=nodes, playbook=PlaybookResult("healthcheck.yml", "failed", 2))
    assert (
        report.reason
        == "1 of 2 node(s) failing: gpu1: nvidia-smi failed (rc 9): NVIDIA-SMI has failed, nccl-tests missing: ..."
    )
    assert report.to_json()["failing"] == ["gpu1"]
