"""`gpuforge preflight` against AWS APIs (issue 12): moto in process (EC2 images and instances, SSM,
Service Quotas) and, where moto 5.2.5 has no implementation, botocore's Stubber, which validates
every request and response against the real EC2 API model.

What moto lacks, and how each test stands in:
- DescribeCapacityReservations: not implemented (moto raises NotImplementedError). preflight
  reports the reservation as *unchecked* (test_moto_without_reservations_reports_unchecked); the
  reservation rules run on a Stubber-answered EC2 client.
- EC2 quotas: moto's GetServiceQuota knows only service code vpc, GetAWSDefaultServiceQuota is not
  implemented. The quota tests seed the P-instance quota into moto's Service Quotas backend
  (`seed_quota`), so boto3, moto's wire format and preflight's parsing still run for real; without
  the seed preflight reports the quota as unchecked.
- Public SSM parameters (the Deep Learning AMI's): absent; the tests pin AMI ids moto holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from moto import mock_aws
from moto.servicequotas import models as sq_models
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.preflight import AwsClients, check_reservations, preflight
from gpuforge.spec import resolve
from gpuforge.spec.loader import parse_yaml

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
NOW = datetime(2026, 11, 23, tzinfo=UTC)
P5_VCPUS = 192


def cluster(stack: str) -> dict[str, Any]:
    document = parse_yaml((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    plain: dict[str, Any] = json.loads(json.dumps(document["config"]["gpuforge:cluster"]))
    return plain


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsClients]:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        yield AwsClients.for_region(REGION, boto3.session.Session())


def seed_quota(monkeypatch: pytest.MonkeyPatch, code: str, vcpus: float) -> None:
    """Give moto's Service Quotas the EC2 quota it does not model (it serves only service code vpc)."""
    original = sq_models.ServiceQuotasBackend.get_service_quota

    def get_service_quota(self: Any, service_code: str, quota_code: str) -> dict[str, Any]:
        if (service_code, quota_code) == ("ec2", code):
            return {"ServiceCode": "ec2", "QuotaCode": code, "QuotaName": "Running On-Demand P instances",
                    "Value": vcpus, "Unit": "None", "Adjustable": True, "GlobalQuota": False}
        return original(self, service_code, quota_code)

    monkeypatch.setattr(sq_models.ServiceQuotasBackend, "get_service_quota", get_service_quota)


def moto_ami(clients: AwsClients) -> str:
    image_id: str = clients.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    return image_id


def pinned_prod(image_id: str) -> dict[str, Any]:
    data = cluster("prod")
    for group in data["node_groups"].values():
        group["image"] = {"ami_id": image_id}
    return data


# --- images ------------------------------------------------------------------------------------------------


def test_a_missing_ami_names_the_field_and_the_fix(aws: AwsClients) -> None:
    data = pinned_prod(moto_ami(aws))
    data["node_groups"]["train"]["image"] = {"ami_id": "ami-0123456789abcdef0"}
    report = preflight(resolve(data), aws, "prod", NOW)
    (missing,) = [f for f in report.problems if f.path.endswith(".image.ami_id")]
    assert missing.path == "cluster.node_groups[train].image.ami_id"
    assert "ami-0123456789abcdef0 does not exist in us-east-1" in missing.message
    assert "aws ec2 copy-image" in missing.fix
    assert any(line.startswith("image ") and "(login)" in line for line in report.checked)


def test_an_ssm_image_parameter_that_does_not_exist_is_a_finding(aws: AwsClients) -> None:
    data = pinned_prod(moto_ami(aws))
    data["node_groups"]["login"]["image"] = {"ssm_parameter": "/gpuforge/forge-prod/login-ami"}
    report = preflight(resolve(data), aws, "prod", NOW)
    (finding,) = [f for f in report.problems if "login" in f.path]
    assert finding.path == "cluster.node_groups[login].image.ssm_parameter"
    assert "/gpuforge/forge-prod/login-ami does not exist" in finding.message
    # Once the parameter names an AMI of the region, the check passes through it.
    aws.ssm.put_parameter(Name="/gpuforge/forge-prod/login-ami", Value=moto_ami(aws), Type="String")
    report = preflight(resolve(data), aws, "prod", NOW)
    assert not [f for f in report.problems if "login" in f.path]


# --- quotas ------------------------------------------------------------------------------------------------


def test_an_exhausted_p_instance_quota_is_a_finding(aws: AwsClients, monkeypatch: pytest.MonkeyPatch) -> None:
    planned_vcpus = 66 * P5_VCPUS  # prod's train group: 64 + 2 spares of p5.48xlarge
    seed_quota(monkeypatch, "L-417A185B", planned_vcpus)
    # One p5.48xlarge already runs in the account, so the plan no longer fits.
    aws.ec2.run_instances(ImageId=moto_ami(aws), InstanceType="p5.48xlarge", MinCount=1, MaxCount=1)
    report = preflight(resolve(pinned_prod(moto_ami(aws))), aws, "prod", NOW)
    (quota,) = [f for f in report.problems if "L-417A185B" in f.message]
    assert quota.path == "cluster.node_groups[train].instance_type"
    assert f"allows {planned_vcpus} vCPUs" in quota.message
    assert f"{P5_VCPUS} run already and the plan launches up to {planned_vcpus} (train)" in quota.message
    assert f"--quota-code L-417A185B --desired-value {planned_vcpus + P5_VCPUS}" in quota.fix


def test_after_a_deploy_the_stacks_own_instances_count_once(aws: AwsClients, monkeypatch: pytest.MonkeyPatch) -> None:
    """A redeploy: the train group's instances run (tagged by its launch template); the plan already counts
    them at their most, so the quota that fits the plan still fits. Another cluster's instance does count."""
    planned_vcpus = 66 * P5_VCPUS
    seed_quota(monkeypatch, "L-417A185B", planned_vcpus)

    def launch(count: int, cluster_name: str) -> None:
        tags = [{"Key": "gpuforge:cluster", "Value": cluster_name}, {"Key": "gpuforge:node-group", "Value": "train"}]
        aws.ec2.run_instances(ImageId=moto_ami(aws), InstanceType="p5.48xlarge", MinCount=count, MaxCount=count,
                              TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])  # fmt: skip

    launch(3, "forge-prod")
    report = preflight(resolve(pinned_prod(moto_ami(aws))), aws, "prod", NOW)
    assert not [f for f in report.findings if "L-417A185B" in f.message], report.findings
    assert any(f"{planned_vcpus} vCPUs, 0 running, {planned_vcpus} planned" in line for line in report.checked)
    launch(1, "forge-staging")
    report = preflight(resolve(pinned_prod(moto_ami(aws))), aws, "prod", NOW)
    (quota,) = [f for f in report.problems if "L-417A185B" in f.message]
    assert f"{P5_VCPUS} run already and the plan launches up to {planned_vcpus} (train)" in quota.message


def test_a_quota_with_room_passes_and_is_listed_as_checked(aws: AwsClients, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_quota(monkeypatch, "L-417A185B", 20_000)
    report = preflight(resolve(pinned_prod(moto_ami(aws))), aws, "prod", NOW)
    assert not [f for f in report.findings if "L-417A185B" in f.message]
    assert any(line.startswith("quota L-417A185B") and "20000 vCPUs, 0 running, 12672 planned" in line
               for line in report.checked)


def test_moto_without_ec2_quotas_reports_unchecked_not_ok(aws: AwsClients) -> None:
    report = preflight(resolve(pinned_prod(moto_ami(aws))), aws, "prod", NOW)
    unchecked = [f for f in report.unchecked if "L-417A185B" in f.message]
    assert unchecked and "NoSuchResourceException" in unchecked[0].message
    assert not any("L-417A185B" in line for line in report.checked)


def test_moto_without_reservations_reports_unchecked(aws: AwsClients) -> None:
    report = preflight(resolve(pinned_prod(moto_ami(aws))), aws, "prod", NOW)
    (reservation,) = [f for f in report.findings if f.path == "cluster.node_groups[train].capacity.reservation_id"]
    assert reservation.kind == "unchecked"
    assert "not implemented" in reservation.message
    assert not any(line.startswith("reservation") for line in report.checked)


# --- reservations and blocks (Stubber: the real EC2 API model, which moto does not implement) ---------------


def answered(reservation: dict[str, Any]) -> Any:
    """An EC2 client whose DescribeCapacityReservations answers `reservation`, validated against the API model."""
    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ec2)
    stub.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [reservation]},
        {"CapacityReservationIds": [reservation["CapacityReservationId"]]},
    )
    stub.activate()
    return ec2


def test_a_reservation_too_small_for_count_plus_spares() -> None:
    group = resolve(cluster("prod")).node_groups["train"]
    ec2 = answered({
        "CapacityReservationId": "cr-0a1b2c3d4e5f67890", "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a", "TotalInstanceCount": 64, "AvailableInstanceCount": 64, "State": "active",
    })
    checked: list[str] = []
    (finding,) = check_reservations({"train": group}, ec2, NOW, checked)
    assert finding.path == "cluster.node_groups[train].count"
    assert finding.message == "count + spares (64 + 2 = 66) exceed cr-0a1b2c3d4e5f67890's 64 instances"
    assert "modify-capacity-reservation --capacity-reservation-id cr-0a1b2c3d4e5f67890 --instance-count 66" in (
        finding.fix
    )
    assert checked == ["reservation cr-0a1b2c3d4e5f67890 (train)"]


def test_a_block_of_another_type_in_another_az_and_another_window() -> None:
    group = resolve(cluster("staging")).node_groups["train"]
    ec2 = answered({
        "CapacityReservationId": "cr-0b2c3d4e5f6a78901", "InstanceType": "p4d.24xlarge",
        "AvailabilityZone": "us-east-1b", "TotalInstanceCount": 9, "State": "scheduled",
        "ReservationType": "capacity-block",
        "StartDate": datetime(2026, 12, 1, 11, 30, tzinfo=UTC), "EndDate": datetime(2026, 12, 8, 11, 30, tzinfo=UTC),
    })
    found = {f.path: f for f in check_reservations({"train": group}, ec2, NOW, [])}
    assert set(found) == {
        "cluster.node_groups[train].instance_type",
        "cluster.node_groups[train].availability_zone",
        "cluster.node_groups[train].capacity.end",
    }
    wrong_type = found["cluster.node_groups[train].instance_type"]
    assert "holds p4d.24xlarge, the group launches p5.48xlarge" in wrong_type.message
    assert found["cluster.node_groups[train].capacity.end"].fix == "set end: 2026-12-08T11:30:00Z"


def test_an_expired_block_is_a_finding() -> None:
    group = resolve(cluster("staging")).node_groups["train"]
    ec2 = answered({
        "CapacityReservationId": "cr-0b2c3d4e5f6a78901", "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a", "TotalInstanceCount": 9, "State": "expired",
        "StartDate": datetime(2026, 12, 1, 11, 30, tzinfo=UTC), "EndDate": datetime(2026, 12, 15, 11, 30, tzinfo=UTC),
    })
    found = check_reservations({"train": group}, ec2, datetime(2026, 12, 16, tzinfo=UTC), [])
    assert {f.path for f in found} == {"cluster.node_groups[train].capacity.reservation_id",
                                       "cluster.node_groups[train].capacity.end"}
    assert any("is expired: nothing launches into it" in f.message for f in found)


def test_a_block_that_has_started_is_a_finding_against_moto(aws: AwsClients) -> None:
    """AWS refuses a scheduled action in the past: once staging's block has started, a deploy that creates
    its block-start action fails. Found from the spec, so also where moto cannot describe the block."""
    data = cluster("staging")
    block = resolve(data).node_groups["train"].spec.capacity
    before = preflight(resolve(data), aws, "staging", block.start - timedelta(hours=1))
    assert not [f for f in before.findings if f.path.endswith(".capacity.start")]
    during = preflight(resolve(data), aws, "staging", block.start + timedelta(days=2))
    (started,) = [f for f in during.problems if f.path == "cluster.node_groups[train].capacity.start"]
    assert "the block started 2026-12-01T11:30:00+00:00" in started.message
    assert "AWS refuses a scheduled action in the past" in started.message
    assert started.fix.startswith("deploy the group before its block starts (by 2026-12-01T11:30:00+00:00)")
    # An ended block is the reservation check's finding (capacity.end), not this one.
    after = preflight(resolve(data), aws, "staging", block.end + timedelta(hours=1))
    assert not [f for f in after.findings if f.path.endswith(".capacity.start")]


# --- the command -------------------------------------------------------------------------------------------


def test_cli_exits_1_with_json_findings(aws: AwsClients, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seed_quota(monkeypatch, "L-417A185B", P5_VCPUS)  # room for one p5, the plan wants 66
    data = pinned_prod(moto_ami(aws))
    stack = tmp_path / "Pulumi.prod.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpuforge:cluster": data}}))
    result = CliRunner().invoke(app, ["preflight", str(stack), "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["region"] == REGION
    assert [p["path"] for p in report["problems"]] == ["cluster.node_groups[train].instance_type"]
    assert any(u["path"].endswith("capacity.reservation_id") for u in report["unchecked"])


def test_cli_refuses_a_bad_spec_with_exit_2(tmp_path: Path) -> None:
    data = cluster("prod")
    data["node_groups"]["train"]["count"] = -1
    stack = tmp_path / "Pulumi.prod.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpuforge:cluster": data}}))
    result = CliRunner().invoke(app, ["preflight", str(stack)])
    assert result.exit_code == 2
    assert "cluster.node_groups[train].count" in result.output and "Traceback" not in result.output


# --- EC2 Auto Scaling's service-linked role, which the cluster key's policy names ---------------------------


def autoscaling_findings(aws: AwsClients, mode: str) -> list[str]:
    data = cluster("dev")
    data["placement"]["autoscaling_service_linked_role"] = mode
    report = preflight(resolve(data), aws, now=NOW)
    return [str(f) for f in report.findings if f.path == "cluster.placement.autoscaling_service_linked_role"]


def test_existing_in_an_account_that_never_used_auto_scaling_is_a_finding(aws: AwsClients) -> None:
    (finding,) = autoscaling_findings(aws, "existing")
    assert "no AWSServiceRoleForAutoScaling" in finding and "create-service-linked-role" in finding
    assert autoscaling_findings(aws, "create") == []


def test_create_where_another_stack_made_the_role_is_a_finding(aws: AwsClients) -> None:
    aws.iam.create_service_linked_role(AWSServiceName="autoscaling.amazonaws.com")
    (finding,) = autoscaling_findings(aws, "create")
    assert "exists already" in finding and "autoscaling_service_linked_role: existing" in finding
    assert autoscaling_findings(aws, "existing") == []


def test_create_after_this_stacks_own_deploy_passes(aws: AwsClients) -> None:
    name = aws.iam.create_service_linked_role(AWSServiceName="autoscaling.amazonaws.com")["Role"]["RoleName"]
    aws.iam.tag_role(RoleName=name, Tags=[{"Key": "gpuforge:cluster", "Value": "forge-dev"}])
    assert autoscaling_findings(aws, "create") == []


def test_the_plan_creates_the_role_before_the_key() -> None:
    from tests.support import planned

    plan = planned("dev")
    (role,) = plan.by_type("aws:iam/serviceLinkedRole:ServiceLinkedRole")
    assert role.inputs["awsServiceName"] == "autoscaling.amazonaws.com"
    (key,) = plan.by_type("aws:kms/key:Key")
    assert role.urn in key.depends_on
def test_teams_sharing_a_reservation_are_checked_together_against_its_size() -> None:
    """Two 8+1 teams on one 16-instance reservation: each fits alone, together they need 18."""
    data = cluster("prod")
    team = data["node_groups"]["train"]
    team.update(count=8, spares=1)
    data["node_groups"]["team-b"] = json.loads(json.dumps(team))
    data["scheduler"]["partitions"]["train"]["node_groups"].append("team-b")
    groups = resolve(data).node_groups
    ec2 = answered({
        "CapacityReservationId": "cr-0a1b2c3d4e5f67890", "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a", "TotalInstanceCount": 16, "State": "active",
    })
    checked: list[str] = []
    (finding,) = check_reservations(groups, ec2, NOW, checked)  # one DescribeCapacityReservations, not two
    assert finding.path == "cluster.node_groups[team-b].count"
    assert finding.message == (
        "count + spares of the groups on it (train 8+1 + team-b 8+1 = 18) exceed cr-0a1b2c3d4e5f67890's 16 instances"
    )
    assert checked == ["reservation cr-0a1b2c3d4e5f67890 (train, team-b)"]


def test_a_stated_reservation_size_is_compared_with_aws() -> None:
    data = cluster("prod")
    data["node_groups"]["train"]["capacity"]["instance_count"] = 66
    group = resolve(data).node_groups["train"]
    ec2 = answered({
        "CapacityReservationId": "cr-0a1b2c3d4e5f67890", "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a", "TotalInstanceCount": 64, "State": "active",
    })
    found = {f.path: f for f in check_reservations({"train": group}, ec2, NOW, [])}
    assert found["cluster.node_groups[train].capacity.instance_count"].message == (
        "the spec says cr-0a1b2c3d4e5f67890 holds 66 instances, AWS says 64"
    )
    assert "cluster.node_groups[train].count" in found
