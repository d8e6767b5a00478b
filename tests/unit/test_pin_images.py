"""`gpuforge pin-images` against moto's SSM and EC2 (issue 12): the AMI behind each group's parameter is
resolved once and written into the stack file, which keeps its comments and still validates.

moto refuses to hold the public Deep Learning AMI parameter (its name is reserved to AWS), so the tests
point the defaults (DLAMI_SSM, and DLAMI_2404_SSM of Slurm groups) at a parameter of their own that
names an AMI moto holds.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

import gpuforge.spec.node_group as spec_node_group
from gpuforge.cli import app
from gpuforge.pin import PinError, pin_stack
from gpuforge.plan.stacks import load_stack
from gpuforge.plan.validation import check_stack
from gpuforge.preflight import AwsClients

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
PARAMETER = "/gpuforge/test/dlami"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsClients]:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setattr(spec_node_group, "DLAMI_SSM", PARAMETER)
    monkeypatch.setattr(spec_node_group, "DLAMI_2404_SSM", PARAMETER)  # the Slurm groups' default
    with mock_aws():
        yield AwsClients.for_region(REGION, boto3.session.Session())


@pytest.fixture
def prod(tmp_path: Path) -> Path:
    path = tmp_path / "Pulumi.prod.yaml"
    shutil.copy(ROOT / "stacks" / "Pulumi.prod.yaml", path)
    return path


def an_ami(clients: AwsClients) -> str:
    return str(clients.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"])


def test_pinning_writes_each_groups_ami_and_keeps_the_file_reviewable(aws: AwsClients, prod: Path) -> None:
    ami = an_ami(aws)
    aws.ssm.put_parameter(Name=PARAMETER, Value=ami, Type="String")
    before = check_stack(load_stack(prod)).resolved
    unpinned = {n for n, g in before.node_groups.items() if g.image_id == f"resolve:ssm:{PARAMETER}"}
    assert unpinned, "prod's groups boot the default image parameter"

    pins = pin_stack(str(prod), aws)

    assert {p.group for p in pins} == unpinned and {p.ami_id for p in pins} == {ami}
    text = prod.read_text()
    assert "# reached through SSM Session Manager" in text  # the user's comments survive
    assert "pinned " in text and f"from {PARAMETER} (gpuforge pin-images)" in text
    after = check_stack(load_stack(prod)).resolved
    assert {n: after.node_groups[n].image_id for n in unpinned} == dict.fromkeys(unpinned, ami)
    assert pin_stack(str(prod), aws) == []  # pinned once: a rerun changes nothing


def test_an_unresolvable_parameter_pins_nothing(aws: AwsClients, prod: Path) -> None:
    original = prod.read_bytes()
    with pytest.raises(PinError, match=r"cluster\.node_groups\[train\]\.image: cannot read /gpuforge/test/dlami"):
        pin_stack(str(prod), aws)
    aws.ssm.put_parameter(Name=PARAMETER, Value="ami-0123456789abcdef0", Type="String")
    with pytest.raises(PinError, match="ami-0123456789abcdef0, which cannot be found"):
        pin_stack(str(prod), aws)
    aws.ssm.put_parameter(Name=PARAMETER, Value="latest", Type="String", Overwrite=True)
    with pytest.raises(PinError, match="holds 'latest', not an AMI id"):
        pin_stack(str(prod), aws)
    assert prod.read_bytes() == original


def test_cli_dry_run_prints_and_leaves_the_file(aws: AwsClients, prod: Path) -> None:
    aws.ssm.put_parameter(Name=PARAMETER, Value=an_ami(aws), Type="String")
    original = prod.read_bytes()
    result = CliRunner().invoke(app, ["pin-images", str(prod), "--dry-run"], env=dict(os.environ))
    assert result.exit_code == 0, result.output
    assert f"train: {PARAMETER} -> ami-" in result.output and "would pin" in result.output
    assert prod.read_bytes() == original
    missing = CliRunner().invoke(app, ["pin-images", str(ROOT / "stacks" / "nope.yaml")])
    assert missing.exit_code == 2
