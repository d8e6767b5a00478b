"""Elastic EKS GPU groups (issue 28, item 4): the group's min/max (0 included) from the one node-group spec, the
Cluster Autoscaler that moves it, Kueue's ProvisioningRequest admission check that asks for a workload's nodes,
and the cost as a range. The plan is tests/fixtures/stacks/Pulumi.eks-elastic.yaml (staging with its GPU group
elastic); custom resources are checked against the upstream CRDs (tests/k8s_objects.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pulumi
import pytest

from gpuforge.catalog.charts import load_charts
from gpuforge.infra.aws.cluster_autoscaler import (
    ClusterAutoscaler,
    ClusterAutoscalerArgs,
    autoscaler_policy,
)
from gpuforge.infra.k8s.elastic import ELASTIC_CHECK, PROVISIONING_CLASS, PROVISIONING_CONTROLLER
from gpuforge.plan.model import Plan, PlanResource
from gpuforge.plan.stacks import load_stack
from gpuforge.spec import SpecError, resolve
from tests.k8s_objects import is_crd, manifests, validate
from tests.support import planned

ELASTIC = str(Path(__file__).resolve().parent.parent / "fixtures" / "stacks" / "Pulumi.eks-elastic.yaml")
RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.fixture(scope="module")
def elastic() -> Plan:
    return planned(ELASTIC)


def named(plan: Plan, name: str) -> PlanResource:
    (found,) = [r for r in plan.resources if r.name == name]
    return found


def test_the_group_scales_from_zero_and_up_does_not_reset_what_the_autoscaler_set(elastic: Plan) -> None:
    group = named(elastic, "forge-elastic-train-ng")
    assert group.inputs["scalingConfig"] == {"minSize": 0, "maxSize": 8, "desiredSize": 0}
    assert group.ignore_changes == ["scalingConfig.desiredSize"]
    # The fixed system group keeps its size and owns it.
    assert named(elastic, "forge-elastic-system-ng").ignore_changes == []


def test_the_auto_scaling_group_carries_discovery_and_scale_from_zero_tags(elastic: Plan) -> None:
    tags = {
        r.inputs["tag"]["key"]: r.inputs["tag"]["value"]
        for r in elastic.by_type("aws:autoscaling/tag:Tag")
        if r.name.startswith("forge-elastic-train-ca-")
    }
    template = "k8s.io/cluster-autoscaler/node-template"
    assert tags == {
        "k8s.io/cluster-autoscaler/enabled": "true",
        "k8s.io/cluster-autoscaler/forge-elastic-eks": "owned",
        f"{template}/label/gpuforge.dev/node-group": "train",
        f"{template}/label/gpuforge.dev/gpu-model": "H100",
        f"{template}/taint/nvidia.com/gpu": "present:NoSchedule",
        f"{template}/resources/nvidia.com/gpu": "8",
        f"{template}/resources/vpc.amazonaws.com/efa": "32",
        f"{template}/autoscaling-options/scaledownunneededtime": "15m0s",
    }
    group = named(elastic, "forge-elastic-train-ng")
    for tag in elastic.by_type("aws:autoscaling/tag:Tag"):
        assert tag.dependencies["autoscalingGroupName"] == [group.urn]  # the ASG EKS made for the group
        assert tag.inputs["tag"]["propagateAtLaunch"] is False
    # The labels and taint in the tags are the ones the node group registers its nodes with.
    labels = group.inputs["labels"]
    assert {k.removeprefix(f"{template}/label/"): v for k, v in tags.items() if "/label/" in k} == labels
    (taint,) = group.inputs["taints"]
    assert tags[f"{template}/taint/{taint['key']}"] == f"{taint['value']}:NoSchedule"
    assert not [r for r in elastic.by_type("aws:autoscaling/tag:Tag") if "-system-" in r.name]


def test_the_autoscaler_release_is_pinned_and_matches_the_control_plane(elastic: Plan) -> None:
    chart = load_charts().chart("cluster_autoscaler")
    (release,) = [r for r in elastic.by_type(RELEASE) if r.inputs["name"] == "cluster-autoscaler"]
    assert (release.inputs["chart"], release.inputs["version"]) == ("cluster-autoscaler", chart.version)
    values = release.inputs["values"]
    version = elastic.resolved.spec.kubernetes.version if elastic.resolved.spec.kubernetes else ""
    assert values["image"]["tag"].startswith(f"v{version}.")
    assert values["autoDiscovery"] == {"clusterName": "forge-elastic-eks"}
    assert values["extraArgs"] == {"enable-provisioning-requests": "true", "kube-api-content-type": "application/json"}
    assert values["nodeSelector"] == {"gpuforge.dev/node-group": "system"}  # off the GPU nodes it scales
    role = named(elastic, "forge-elastic-autoscaler-role")
    assert release.dependencies["values"] == [role.urn]  # the annotation is the role's ARN
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    subjects = [v for k, v in statement["Condition"]["StringEquals"].items() if k.endswith(":sub")]
    assert subjects == ["system:serviceaccount:kube-system:cluster-autoscaler"]
    # The release waits for the platform, which installs the ProvisioningRequest CRD it watches.
    crd = named(elastic, "forge-elastic-platform-provisioningrequests-crd")
    assert crd.urn in release.depends_on


def test_the_autoscaler_may_change_only_this_clusters_groups(elastic: Plan) -> None:
    inline = named(elastic, "forge-elastic-autoscaler-role-inline")
    statements = json.loads(inline.inputs["policy"])["Statement"]
    writes = [s for s in statements if "autoscaling:SetDesiredCapacity" in s["Action"]]
    assert writes == [
        {
            "Effect": "Allow",
            "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/forge-elastic-eks": "owned"}},
        }
    ]
    attachments = elastic.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    assert not [r for r in attachments if "autoscaler" in r.name]  # no managed policy: only the scoped one


def test_kueue_asks_the_autoscaler_for_an_admitted_workloads_nodes(elastic: Plan) -> None:
    objects = {(m["kind"], m["metadata"]["name"]): m for m in manifests(elastic)}
    check = objects[("AdmissionCheck", ELASTIC_CHECK)]
    assert check["spec"]["controllerName"] == PROVISIONING_CONTROLLER
    assert check["spec"]["parameters"] == {
        "apiGroup": "kueue.x-k8s.io",
        "kind": "ProvisioningRequestConfig",
        "name": ELASTIC_CHECK,
    }
    config = objects[("ProvisioningRequestConfig", ELASTIC_CHECK)]
    assert config["spec"] == {"provisioningClassName": PROVISIONING_CLASS, "managedResources": ["nvidia.com/gpu"]}
    for team in ("llm", "research"):
        queue = objects[("ClusterQueue", team)]["spec"]
        assert queue["admissionChecksStrategy"] == {
            "admissionChecks": [{"name": ELASTIC_CHECK, "onFlavors": ["gpu-h100"]}]
        }
    # Kueue sets up its provisioning controller only where the CRD is served when it starts.
    (kueue,) = [r for r in elastic.by_type(RELEASE) if r.inputs["name"] == "kueue"]
    assert named(elastic, "forge-elastic-platform-provisioningrequests-crd").urn in kueue.depends_on


def test_every_new_object_passes_its_schema(elastic: Plan) -> None:
    version = elastic.resolved.spec.kubernetes.version if elastic.resolved.spec.kubernetes else ""
    kinds = set()
    for obj in manifests(elastic):
        if is_crd(obj):
            validate(obj)
        else:
            kubernetes_validate.validate(obj, f"{version}.0", strict=True)
        kinds.add(obj["kind"])
    assert {"ProvisioningRequestConfig", "AdmissionCheck", "CustomResourceDefinition", "ClusterRole"} <= kinds


def test_a_provisioning_config_outside_the_crd_is_refused() -> None:
    # The check above can fail: a field the upstream CRD does not declare.
    bad = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "x"},
        "spec": {"provisioningClassName": PROVISIONING_CLASS, "managedResource": ["nvidia.com/gpu"]},
    }
    with pytest.raises(Exception, match="managedResource"):
        validate(bad)


def test_the_cost_is_a_range_from_min_to_max(elastic: Plan) -> None:
    assert elastic.cost is not None
    (train,) = [line for line in elastic.cost.lines if line.name == "train"]
    assert train.monthly_min_usd == 0 and train.monthly_usd is not None and train.monthly_usd > 0
    assert "0-8 x p5.48xlarge" in train.detail


def _elastic_staging(**train: Any) -> dict[str, Any]:
    data = load_stack("staging").cluster
    group = {k: v for k, v in data["node_groups"]["train"].items() if k not in ("count", "spares")}
    return {**data, "node_groups": {**data["node_groups"], "train": {**group, **train}}}


def test_an_elastic_group_in_a_capacity_block_is_still_refused() -> None:
    with pytest.raises(SpecError) as caught:
        resolve(_elastic_staging(scaling={"min": 0, "max": 9}))
    messages = {i.path: i.message for i in caught.value.issues}
    assert "is paid for whether nodes run or not" in messages["cluster.node_groups[train].scaling"]


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        outputs = dict(args.inputs)
        if args.typ == "aws:iam/role:Role":
            outputs["arn"] = f"arn:aws:iam::123456789012:role/{args.name}"
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": "123456789012", "arn": "arn:aws:iam::123456789012:user/x", "userId": "x"}
        return {}


@pytest.fixture
def autoscaler() -> ClusterAutoscaler:
    pulumi.runtime.set_mocks(_Mocks(), preview=False)
    return ClusterAutoscaler(
        "c",
        ClusterAutoscalerArgs(
            cluster="c-eks",
            region="us-west-2",
            kubernetes_version="1.31",
            oidc_provider_arn="arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/X",
            oidc_issuer="https://oidc.eks.us-west-2.amazonaws.com/id/X",
        ),
    )


@pulumi.runtime.test
def test_the_component_scopes_its_role_to_its_cluster(autoscaler: ClusterAutoscaler) -> pulumi.Output[Any]:
    def check(arn: str) -> None:
        assert arn == "arn:aws:iam::123456789012:role/c-role"
        policy = json.loads(autoscaler_policy("c-eks", "us-west-2", "123456789012"))
        (describe,) = [s for s in policy["Statement"] if s["Action"] == ["eks:DescribeNodegroup"]]
        assert describe["Resource"] == "arn:aws:eks:us-west-2:123456789012:nodegroup/c-eks/*"

    return autoscaler.role_arn.apply(check)


@pulumi.runtime.test
def test_the_component_picks_the_image_of_the_control_planes_minor(autoscaler: ClusterAutoscaler) -> pulumi.Output[Any]:
    releases = [c for c in getattr(autoscaler, "_childResources", set()) if isinstance(c, pulumi.CustomResource)]
    release = next(r for r in releases if type(r).__name__ == "Release")

    def check(values: dict[str, Any]) -> None:
        assert values["image"]["tag"] == load_charts().chart("cluster_autoscaler").images_by_kubernetes["1.31"]
        assert values["awsRegion"] == "us-west-2"

    return release.values.apply(check)  # type: ignore[attr-defined]


def test_a_cluster_of_fixed_groups_gets_no_autoscaler_and_no_check(staging: Plan) -> None:
    """staging's GPU group is fixed on a Capacity Block: nothing of the above is declared there."""
    names = {r.inputs.get("name") for r in staging.by_type(RELEASE)}
    assert "cluster-autoscaler" not in names
    assert not staging.by_type("aws:autoscaling/tag:Tag")
    kinds = {m["kind"] for m in manifests(staging)}
    assert not kinds & {"AdmissionCheck", "ProvisioningRequestConfig", "CustomResourceDefinition"}
    for queue in (m for m in manifests(staging) if m["kind"] == "ClusterQueue"):
        assert "admissionChecksStrategy" not in queue["spec"]
