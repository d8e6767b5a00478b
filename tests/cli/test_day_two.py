"""`gpuforge status` and `gpuforge ssh` against moto: instances launched with the tags the stack's launch
templates and controllers carry, read back as an operator would on day two."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from moto import mock_aws
from typer.testing import CliRunner

from gpuforge import status as status_module
from gpuforge.cli import app, day_two
from gpuforge.nodes.inventory import CLUSTER_TAG, NODE_GROUP_TAG
from gpuforge.spec.loader import parse_yaml

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
# The tags gpuforge/infra/aws/slurm.py gives a controller instance.
CONTROLLER = {CLUSTER_TAG: "forge-dev", "Name": "forge-dev-ctl-0", "gpuforge:slurm-role": "controller"}
runner = CliRunner()


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        yield boto3.client("ec2", region_name=REGION)


def images(ec2: Any) -> list[str]:
    return [i["ImageId"] for i in ec2.describe_images(Owners=["amazon"])["Images"][:2]]


def launch(ec2: Any, count: int, image: str, tags: dict[str, str], instance_type: str = "m7i.xlarge") -> list[str]:
    answer = ec2.run_instances(
        ImageId=image, MinCount=count, MaxCount=count, InstanceType=instance_type,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
    )
    return [i["InstanceId"] for i in answer["Instances"]]


def dev_pinned(tmp_path: Path, image: str) -> Path:
    """The dev stack with its login group pinned to *image* (what `gpuforge pin-images` writes)."""
    document = parse_yaml((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    config = json.loads(json.dumps(document["config"]))
    config["gpuforge:cluster"]["node_groups"]["login"]["image"] = {"ami_id": image}
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return stack


def test_status_reads_nodes_images_and_controllers(ec2: Any, tmp_path: Path) -> None:
    pinned, other = images(ec2)
    cluster = {CLUSTER_TAG: "forge-dev"}
    launch(ec2, 1, pinned, {**cluster, NODE_GROUP_TAG: "login"})
    launch(ec2, 1, other, {**cluster, NODE_GROUP_TAG: "login"})  # one more login node, on another image
    launch(ec2, 2, other, {**cluster, NODE_GROUP_TAG: "train"}, "g5.12xlarge")
    launch(ec2, 1, other, CONTROLLER)
    launch(ec2, 3, other, {CLUSTER_TAG: "someone-else", NODE_GROUP_TAG: "train"})  # not this cluster
    result = runner.invoke(app, ["status", str(dev_pinned(tmp_path, pinned)), "--json"])
    assert result.exit_code == 1, result.output  # the login group runs more than planned, on two images
    report = json.loads(result.stdout)
    groups = {g["name"]: g for g in report["groups"]}
    assert groups["train"]["by_state"] == {"running": 2} and groups["train"]["planned"] == "0-2"
    assert groups["train"]["findings"] == []  # an elastic group at its max is as planned
    login = groups["login"]
    assert login["running"] == 2 and login["images"] == {pinned: 1, other: 1}
    assert "2 running, more than the group's 1" in login["findings"]
    assert f"1 node(s) boot another image than the pinned {pinned}" in login["findings"]
    assert [c["name"] for c in report["controllers"]] == ["forge-dev-ctl-0"]
    assert len(report["nodes"]) == 5


def test_status_says_spares_short_and_what_aws_did_not_answer(ec2: Any) -> None:
    (image, _) = images(ec2)
    launch(ec2, 63, image, {CLUSTER_TAG: "forge-prod", NODE_GROUP_TAG: "train"}, "p5.48xlarge")
    result = runner.invoke(app, ["status", "prod"], env={"COLUMNS": "250"})
    assert result.exit_code == 1
    assert "63 running of 66: 3 short (spares in hand: 0 of 2)" in result.output
    # moto has no DescribeCapacityReservations: said, never shown as fine
    assert "reservation  cr-0a1b2c3d4e5f67890 (train): unchecked not implemented" in result.output
    assert "unchecked Slurm states: no controller is running" in result.output


def test_status_never_reads_an_empty_run_command_answer_as_an_idle_cluster(ec2: Any) -> None:
    """moto's Run Command succeeds without running anything: no sinfo output is no answer."""
    (image, _) = images(ec2)
    launch(ec2, 1, image, CONTROLLER)
    launch(ec2, 1, image, {CLUSTER_TAG: "forge-dev", NODE_GROUP_TAG: "login"})
    result = runner.invoke(app, ["status", "dev", "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert "Slurm states: the answer from forge-dev-ctl-0 carries no sinfo output" in report["unchecked"]
    assert report["pending_jobs"] is None


def test_status_counts_slurm_states_and_the_queue_from_the_controller(
    ec2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller answers through Run Command (botocore's Stubber: the SSM API model checks both the
    request and the answer); sinfo lists a node once per partition, so train-…-b (gpu and debug) counts once."""
    (image, _) = images(ec2)
    (ctl,) = launch(ec2, 1, image, CONTROLLER)
    launch(ec2, 1, image, {CLUSTER_TAG: "forge-dev", NODE_GROUP_TAG: "login"})
    a, b = launch(ec2, 2, image, {CLUSTER_TAG: "forge-dev", NODE_GROUP_TAG: "train"}, "g5.12xlarge")
    ssm = boto3.client("ssm", region_name=REGION)
    stub = Stubber(ssm)
    stub.add_response("send_command", {"Command": {"CommandId": "0f7c5e5a-1111-2222-3333-444455556666"}})
    stub.add_response("get_command_invocation", {"Status": "InProgress"})
    sinfo = f"train-{a} idle\ntrain-{b} allocated\ntrain-{b} allocated\n--- pending\n7\n"
    stub.add_response("get_command_invocation", {"Status": "Success", "StandardOutputContent": sinfo})
    stub.activate()
    monkeypatch.setattr(day_two, "_client", lambda service, region: ssm if service == "ssm" else ec2)
    monkeypatch.setattr(status_module.time, "sleep", lambda seconds: None)
    result = runner.invoke(app, ["status", "dev"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "2 running; Slurm: 1 allocated, 1 idle;" in result.output
    assert "queue        7 pending job(s)" in result.output
    stub.assert_no_pending_responses()
    assert ctl in result.output


def test_ssh_opens_session_manager_to_a_login_node_by_default(ec2: Any) -> None:
    (image, _) = images(ec2)
    (login,) = launch(ec2, 1, image, {CLUSTER_TAG: "forge-dev", NODE_GROUP_TAG: "login"})
    trains = launch(ec2, 2, image, {CLUSTER_TAG: "forge-dev", NODE_GROUP_TAG: "train"}, "g5.12xlarge")
    result = runner.invoke(app, ["ssh", "dev", "--print"])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"aws ssm start-session --target {login} --region {REGION}\n"
    by_name = runner.invoke(app, ["ssh", "dev", f"train-{trains[1]}", "--print"])
    assert by_name.stdout.split()[4] == trains[1]
    missing = runner.invoke(app, ["ssh", "dev", "train-i-0000000000", "--print"])
    assert missing.exit_code == 2
    assert "no running node 'train-i-0000000000'; running: " in missing.output and login in missing.output


def test_ssh_on_premises_goes_to_the_login_hosts_address() -> None:
    result = runner.invoke(app, ["ssh", "onprem-lab", "--print", "--user", "alice"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "ssh alice@10.64.1.7\n"
    host = runner.invoke(app, ["ssh", "onprem-lab", "dgx-a02", "--print"])
    assert host.stdout == "ssh 10.64.1.12\n"
    nope = runner.invoke(app, ["ssh", "onprem-lab", "dgx-z99", "--print"])
    assert nope.exit_code == 2 and "no site host 'dgx-z99'" in nope.output
    keyed = runner.invoke(app, ["ssh", "onprem-lab", "dgx-a02", "-o", "IdentityFile=~/.ssh/site", "-o",
                                "ProxyJump=bastion", "--print"])  # fmt: skip
    assert keyed.stdout == "ssh -o 'IdentityFile=~/.ssh/site' -o ProxyJump=bastion 10.64.1.12\n"


def test_ssh_options_are_refused_for_session_manager() -> None:
    result = runner.invoke(app, ["ssh", "dev", "-o", "IdentityFile=~/.ssh/site", "--print"])
    assert result.exit_code == 2 and "--ssh-option is for SSH on premises" in result.output


def test_status_on_premises_lists_the_site_hosts() -> None:
    result = runner.invoke(app, ["status", "onprem-lab"])
    assert result.exit_code == 0, result.output
    assert "on premises: 8 site hosts" in result.output and "10.64.1.11" in result.output
