"""The AWS image pipeline (gpuforge/infra/aws/image_pipeline.py), through the offline plan of a stack
that uses it: EC2 Image Builder runs gpuforge/assets/playbooks/bake-image.yml and publishes the AMI id to SSM."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.plan.engine import plan_stack
from gpuforge.plan.model import Plan, PlanResource
from gpuforge.spec import SpecError, resolve

SPEC: dict[str, Any] = {
    "name": "forge-bake",
    "environment": "dev",
    "placement": {"kind": "aws", "region": "us-east-1"},
    "network": {"cidr": "10.50.0.0/16", "availability_zones": ["us-east-1a", "us-east-1b"], "nat": "single"},
    "node_groups": {
        "train": {
            "instance_type": "p5.48xlarge",
            "count": 2,
            "fabric": "efa",
            "availability_zone": "us-east-1a",
            "image": {"pipeline": True},
        },
        "login": {"instance_type": "m7i.2xlarge", "count": 1, "role": "login"},
    },
    "image_pipeline": {
        "schedule": "cron(0 4 ? * SUN *)",
        "extra_vars": {"dcgm_exporter_enabled": False},
    },
}
PARAMETER = "/gpuforge/forge-bake/gpu-node-ami"


@cache
def _plan(directory: str) -> Plan:
    stack = Path(directory) / "Pulumi.bake.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpuforge:cluster": SPEC}}))
    return plan_stack(stack)


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    return _plan(str(tmp_path_factory.mktemp("bake")))


def one(plan: Plan, type_: str) -> PlanResource:
    (found,) = plan.by_type(type_)
    return found


def test_component_and_children_follow_the_contract(plan: Plan) -> None:
    component = one(plan, "gpuforge:aws:ImagePipeline")
    assert component.name == "forge-bake-image"
    children = [r for r in plan.resources if r.parent == component.urn]
    assert children and all(r.name.startswith("forge-bake-image-") for r in children)
    assert component.outputs["ssmParameter"] == PARAMETER


def test_build_instance_requires_imdsv2_in_a_private_compute_subnet(plan: Plan) -> None:
    infra = one(plan, "aws:imagebuilder/infrastructureConfiguration:InfrastructureConfiguration").inputs
    assert infra["instanceMetadataOptions"] == {"httpTokens": "required", "httpPutResponseHopLimit": 1}
    assert infra["terminateInstanceOnFailure"] is True
    assert infra["subnetId"] == "forge-bake-net-compute-us-east-1a-id"
    assert infra["instanceTypes"] == ["c7i.4xlarge"]


def test_root_volume_is_encrypted_with_the_cluster_key(plan: Plan) -> None:
    recipe = one(plan, "aws:imagebuilder/imageRecipe:ImageRecipe").inputs
    assert recipe["parentImage"] == (
        "ssm:/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id"
    )
    (root,) = recipe["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] == "true"
    assert root["ebs"]["kmsKeyId"] == plan.outputs["kmsKeyArn"]


def test_component_document_runs_bake_image_with_the_spec_versions(plan: Plan) -> None:
    document = yaml.safe_load(one(plan, "aws:imagebuilder/component:Component").inputs["data"])
    build = {step["name"]: step for step in next(p for p in document["phases"] if p["name"] == "build")["steps"]}
    archive = one(plan, "aws:s3/bucketObjectv2:BucketObjectv2").inputs
    assert build["DownloadPlaybooks"]["action"] == "S3Download"
    assert build["DownloadPlaybooks"]["inputs"][0]["source"] == f"s3://{archive['bucket']}/{archive['key']}"
    assert any("ansible-core" in c for c in build["InstallAnsible"]["inputs"]["commands"])
    (run,) = [c for c in build["RunBakeImagePlaybook"]["inputs"]["commands"] if "ansible-playbook" in c]
    assert "ansible-playbook -c local -i localhost," in run and run.endswith("playbooks/bake-image.yml")
    extra = json.loads(run.split(" -e ", 1)[1].rsplit(" ", 1)[0].strip("'"))
    assert extra["nvidia_driver_branch"] == "580" and extra["gpuforge_fabric"] == "efa"
    assert extra["dcgm_exporter_enabled"] is False
    assert "playbooks/bake-image.yml" in archive["source"]["assetArchive"]


def test_archive_bucket_is_private_and_encrypted_and_only_that_object_is_readable(plan: Plan) -> None:
    store = next(r for r in plan.by_type("gpuforge:aws:ObjectStore") if r.name == "forge-bake-image-artifacts")
    kids = {r.type.split(":")[-1] for r in plan.resources if r.parent == store.urn}
    assert {"BucketPublicAccessBlock", "BucketServerSideEncryptionConfiguration"} <= kids
    archive = one(plan, "aws:s3/bucketObjectv2:BucketObjectv2").inputs
    policy = json.loads(
        next(r for r in plan.by_type("aws:iam/rolePolicy:RolePolicy") if r.name == "forge-bake-image-archive").inputs[
            "policy"
        ]
    )
    assert policy["Statement"][0] == {
        "Effect": "Allow",
        "Action": ["s3:GetObject"],
        "Resource": [f"arn:aws:s3:mock:123456789012:{archive['bucket']}/{archive['key']}"],
    }


def test_distribution_writes_the_ami_id_to_the_ssm_parameter(plan: Plan) -> None:
    dist = one(plan, "aws:imagebuilder/distributionConfiguration:DistributionConfiguration").inputs
    (distribution,) = dist["distributions"]
    assert distribution["ssmParameterConfigurations"] == [{"parameterName": PARAMETER, "dataType": "aws:ec2:image"}]
    pipeline = one(plan, "aws:imagebuilder/imagePipeline:ImagePipeline").inputs
    assert pipeline["schedule"]["scheduleExpression"] == "cron(0 4 ? * SUN *)"


def test_node_group_referencing_the_pipeline_launches_from_its_parameter(plan: Plan) -> None:
    templates = {r.name: r.inputs for r in plan.by_type("aws:ec2/launchTemplate:LaunchTemplate")}
    assert templates["forge-bake-train-lt"]["imageId"] == f"resolve:ssm:{PARAMETER}"
    assert "deeplearning" in templates["forge-bake-login-lt"]["imageId"], "other groups keep their image"


def test_custom_parameter_name() -> None:
    spec = json.loads(json.dumps(SPEC))
    spec["image_pipeline"]["ssm_parameter"] = "/images/gpu"
    assert resolve(spec).node_groups["train"].image_id == "resolve:ssm:/images/gpu"


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"image_pipeline": None}, "cluster.node_groups[train].image.pipeline"),
        ({"image_pipeline": {"build_instance_type": "c7i.4xlarg"}}, "cluster.image_pipeline.build_instance_type"),
        ({"image_pipeline": {"extra_vars": {"dcgm_exporter_enabled": False}, "ssm_parameter": "/aws/x"}},
         "cluster.image_pipeline.ssm_parameter"),
    ],
)
def test_spec_errors_name_the_field(change: dict[str, Any], path: str) -> None:
    spec = {**SPEC, **change}
    with pytest.raises(SpecError) as caught:
        resolve({k: v for k, v in spec.items() if v is not None})
    assert path in [issue.path for issue in caught.value.issues]
