"""`gpuforge preflight` never reads "ok" when it checked nothing: without credentials it says so once
and exits 1; with credentials AWS refuses every call to, it says that instead (moto for STS, EC2, SSM and
Service Quotas; botocore's Stubber for the refusals moto cannot be told to make)."""

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

from gpuforge import preflight as preflight_module
from gpuforge.cli import app
from gpuforge.preflight import AwsClients, preflight
from gpuforge.spec import resolve
from gpuforge.spec.loader import parse_yaml

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
runner = CliRunner()


def prod() -> dict[str, Any]:
    document = parse_yaml((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    plain: dict[str, Any] = json.loads(json.dumps(document["config"]["gpuforge:cluster"]))
    return plain


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_without_credentials_it_fails_and_says_why_once(no_credentials: None) -> None:
    result = runner.invoke(app, ["preflight", "prod"])
    assert result.exit_code == 1, result.output
    assert "nothing checked: no usable AWS credentials" in result.output
    assert result.output.count("Unable to locate credentials") == 1
    assert "grant " not in result.output  # not a permissions problem
    assert " ok" not in result.output


def test_without_credentials_the_json_says_not_ok(no_credentials: None) -> None:
    result = runner.invoke(app, ["preflight", "prod", "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["checked"] == []
    assert report["nothing_checked"].startswith("no usable AWS credentials")
    assert [u["path"] for u in report["unchecked"]] == ["aws"]


@pytest.fixture
def refused(monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsClients]:
    """Valid credentials (moto's STS answers) whose every EC2, SSM and Service Quotas call is refused."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        clients = {name: session.client(name) for name in ("ec2", "service-quotas", "ssm")}
        stubs = []
        for client, operations in (
            (clients["ec2"], ["describe_capacity_reservations"]),
            (clients["ssm"], ["get_parameter", "get_parameter", "get_parameter"]),
            (clients["service-quotas"], ["get_service_quota", "get_service_quota"]),
        ):
            stub = Stubber(client)
            for operation in operations:
                code = "UnauthorizedOperation" if client is clients["ec2"] else "AccessDeniedException"
                stub.add_client_error(operation, code, "You are not authorized to perform this operation.")
            stub.activate()
            stubs.append(stub)
        yield AwsClients(clients["ec2"], clients["service-quotas"], clients["ssm"], sts=session.client("sts"))


def test_with_no_permission_it_fails_and_names_each_missing_one(
    refused: AwsClients, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = preflight(resolve(prod()), refused, "prod")
    assert report.identity.startswith("arn:aws:")
    assert report.nothing_checked is not None and "lacks the permissions" in report.nothing_checked
    monkeypatch.setattr(preflight_module.AwsClients, "for_region", classmethod(lambda cls, region: refused))
    result = runner.invoke(app, ["preflight", "prod"])
    assert result.exit_code == 1, result.output
    assert "nothing checked: AWS answered none of the" in result.output
    for permission in ("ec2:DescribeCapacityReservations", "ssm:GetParameter", "servicequotas:GetServiceQuota"):
        assert f"grant {permission}" in result.output
    assert "no usable AWS credentials" not in result.output


def test_an_onprem_stack_has_nothing_to_ask_aws(no_credentials: None) -> None:
    result = runner.invoke(app, ["preflight", "onprem-lab"])
    assert result.exit_code == 0, result.output
    assert "ok" in result.output


def test_validate_refuses_teams_that_overfill_a_block_together(tmp_path: Path) -> None:
    """staging's Capacity Block holds 9: two 8+1 groups each fit alone, not together."""
    document = parse_yaml((ROOT / "stacks" / "Pulumi.staging.yaml").read_text())
    config = json.loads(json.dumps(document["config"]))
    groups = config["gpuforge:cluster"]["node_groups"]
    groups["train"]["count"], groups["train"]["spares"] = 4, 1
    groups["team-b"] = json.loads(json.dumps(groups["train"]))
    groups["team-b"]["availability_zone"] = "us-east-1b"
    stack = tmp_path / "Pulumi.shared.yaml"
    stack.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    result = runner.invoke(app, ["validate", str(stack), "--json"])
    assert result.exit_code == 2, result.output
    problems = {p["path"]: p for p in json.loads(result.stdout)["problems"]}
    assert set(problems) >= {"cluster.node_groups[team-b].availability_zone", "cluster.node_groups[team-b].count"}
    where = problems["cluster.node_groups[team-b].availability_zone"]
    assert "a reservation holds one instance type in one AZ" in where["message"]
    assert where["fix"].startswith("set availability_zone: us-east-1a as the others do")
    size = problems["cluster.node_groups[team-b].count"]
    assert "add up to 10 (train 4+1 + team-b 4+1), past its 9 instances" in size["message"]
    assert "to share spares, make the teams one group" in size["fix"] and size["line"]


def test_the_plan_shows_teams_sharing_a_reservation_and_their_spares(tmp_path: Path) -> None:
    document = parse_yaml((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    config = json.loads(json.dumps(document["config"]))
    cluster = config["gpuforge:cluster"]
    train = cluster["node_groups"]["train"]
    train.update(count=32, spares=1)
    train["capacity"]["instance_count"] = 66
    cluster["node_groups"]["team-b"] = json.loads(json.dumps(train))
    cluster["scheduler"]["partitions"]["train"]["node_groups"].append("team-b")
    stack = tmp_path / "Pulumi.shared.yaml"
    stack.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    result = runner.invoke(app, ["plan", str(stack), "--no-tree"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert (
        "reservation cr-0a1b2c3d4e5f67890 │ train 32+1 + team-b 32+1 = 66 of 66; spares are per group, not shared"
        in result.output
    )
