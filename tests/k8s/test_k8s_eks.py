"""The EKS control plane and its node groups, as a reviewer reads them in the staging plan."""

from __future__ import annotations

from typing import Any

import pytest

from gpuforge.plan.model import Plan, PlanResource
from gpuforge.plan.stacks import load_stack
from gpuforge.spec import SpecError, resolve


def one(plan: Plan, type_: str, name_suffix: str = "") -> PlanResource:
    found = [r for r in plan.by_type(type_) if r.name.endswith(name_suffix)]
    assert len(found) == 1, [r.name for r in found]
    return found[0]


def test_control_plane_is_private_encrypted_and_logs_everything(staging: Plan) -> None:
    cluster = one(staging, "aws:eks/cluster:Cluster").inputs
    vpc = cluster["vpcConfig"]
    assert vpc["endpointPrivateAccess"] is True
    assert vpc["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in vpc
    assert cluster["encryptionConfig"]["resources"] == ["secrets"]
    assert cluster["encryptionConfig"]["provider"]["keyArn"].endswith("forge-staging-kms-key")
    assert sorted(cluster["enabledClusterLogTypes"]) == sorted(
        ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    )
    assert cluster["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False}
    assert cluster["version"] == "1.33"
    # Control-plane interfaces in the private management tier, one per AZ.
    assert sorted(vpc["subnetIds"]) == [
        "forge-staging-net-management-us-east-1a-id",
        "forge-staging-net-management-us-east-1b-id",
    ]


def test_cluster_role_is_least_privilege(staging: Plan) -> None:
    attached = {
        r.name: r.inputs["policyArn"]
        for r in staging.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.name.startswith("forge-staging-eks-")
    }
    # The cluster role, and one IRSA role per controller that calls AWS (never the node role). The FSx CSI
    # controller calls none: the stack's file system is a static volume, nothing is provisioned.
    assert attached == {
        "forge-staging-eks-cluster-policy": "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
        "forge-staging-eks-vpc-cni-role-policy": "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    }
    node_policies = {
        r.inputs["policyArn"].rsplit("/", 1)[1]
        for r in staging.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.name.startswith(("forge-staging-train-", "forge-staging-system-"))
    }
    assert node_policies == {
        "AmazonSSMManagedInstanceCore",
        "AmazonEKSWorkerNodePolicy",
        "AmazonEC2ContainerRegistryPullOnly",
    }
    kms = one(staging, "aws:iam/rolePolicy:RolePolicy", "-eks-secrets-kms").inputs
    assert '"kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"' in kms["policy"]
    assert '"Resource": ["arn:aws:kms:mock:123456789012:forge-staging-kms-key"]' in kms["policy"]


def test_oidc_provider_and_access_entries(staging: Plan) -> None:
    oidc = one(staging, "aws:iam/openIdConnectProvider:OpenIdConnectProvider").inputs
    assert oidc["clientIdLists"] == ["sts.amazonaws.com"]
    assert oidc["url"].startswith("https://oidc.eks.")
    scopes = {
        r.inputs["principalArn"].rsplit("/", 1)[1]: (r.inputs["policyArn"].rsplit("/", 1)[1], r.inputs["accessScope"])
        for r in staging.by_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    }
    assert scopes == {
        # whoever runs `up` (the IAM identity behind its session; the mock's) installs the platform
        "mock-deployer": ("AmazonEKSClusterAdminPolicy", {"type": "cluster"}),
        "ml-platform-admins": ("AmazonEKSClusterAdminPolicy", {"type": "cluster"}),
        "llm-engineers": ("AmazonEKSEditPolicy", {"type": "namespace", "namespaces": ["llm-pretrain"]}),
    }


def test_log_group_has_retention_and_cluster_name(staging: Plan) -> None:
    logs = one(staging, "aws:cloudwatch/logGroup:LogGroup", "-eks-logs").inputs
    cluster = one(staging, "aws:eks/cluster:Cluster").inputs
    assert logs["name"] == f"/aws/eks/{cluster['name']}/cluster"
    assert logs["retentionInDays"] == 365


def test_gpu_group_is_an_eks_managed_node_group_on_the_shared_template(staging: Plan) -> None:
    ng = one(staging, "aws:eks/nodeGroup:NodeGroup", "-train-ng").inputs
    assert ng["capacityType"] == "CAPACITY_BLOCK"
    assert ng["amiType"] == "AL2023_x86_64_NVIDIA"
    # A Capacity Block group: min 0 so the scheduled actions can empty it before the block ends; created at
    # desired 0 (nothing launches before the block is active) and `pulumi up` leaves it to the schedule
    # (docs/lifecycle.md).
    assert ng["scalingConfig"] == {"minSize": 0, "maxSize": 9, "desiredSize": 0}
    assert ng["labels"] == {"gpuforge.dev/node-group": "train", "gpuforge.dev/gpu-model": "H100"}
    assert ng["launchTemplate"]["id"] == "forge-staging-train-lt-id"
    assert not staging.by_type("aws:autoscaling/group:Group"), "EKS groups have no self-managed ASG"
    lt = one(staging, "aws:ec2/launchTemplate:LaunchTemplate", "-train-lt").inputs
    assert lt["metadataOptions"]["httpTokens"] == "required"
    assert lt["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert "iamInstanceProfile" not in lt and "imageId" not in lt  # EKS refuses / supplies them
    # A Capacity Block is already placed together: no placement group (ParallelCluster ec2_validators).
    assert "placement" not in lt and not staging.by_type("aws:ec2/placementGroup:PlacementGroup")
    assert lt["metadataOptions"]["instanceMetadataTags"] == "disabled"  # EKS tag keys hold "/"
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    target = lt["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target["capacityReservationId"] == "cr-0b2c3d4e5f6a78901"
    ebs = lt["blockDeviceMappings"][0]
    assert ebs["deviceName"] == "/dev/xvda" and ebs["ebs"]["encrypted"] == "true"
    nics = lt["networkInterfaces"]
    assert len(nics) == 33 and sum(n.get("interfaceType") == "efa-only" for n in nics) == 32
    # Nodes carry the cluster security group beside the tier and EFA groups.
    assert "forge-staging-eks-cluster-cluster-sg" in nics[0]["securityGroups"]


def _layout(lt: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(n["networkCardIndex"], n["deviceIndex"], n.get("interfaceType")) for n in lt["networkInterfaces"]]


def test_efa_launch_template_is_the_asg_paths_template(staging: Plan, prod: Plan) -> None:
    """prod (ASG path) and staging (EKS path) both run p5.48xlarge with 32 EFA: one function
    builds both templates, so the EFA layout and the metadata hardening are the same."""
    eks_lt = one(staging, "aws:ec2/launchTemplate:LaunchTemplate", "-train-lt").inputs
    asg_lt = one(prod, "aws:ec2/launchTemplate:LaunchTemplate", "-train-lt").inputs
    assert _layout(eks_lt) == _layout(asg_lt)
    # The same hardening; only IMDS tags differ (EKS's tag keys are invalid as metadata tags).
    differs = {"instanceMetadataTags"}
    assert {k: v for k, v in eks_lt["metadataOptions"].items() if k not in differs} == {
        k: v for k, v in asg_lt["metadataOptions"].items() if k not in differs
    }
    assert "iamInstanceProfile" in asg_lt and "placement" not in asg_lt  # ASG path: profile, placement on the ASG


def test_staging_exports_the_cluster(staging: Plan) -> None:
    kube = one(staging, "gpuforge:index:TrainingCluster").outputs["kubernetes"]
    assert kube["clusterName"] == "forge-staging-eks"
    assert kube["teamNamespaces"] == {"llm": "llm-pretrain", "research": "research"}


def _spec(**kubernetes: Any) -> dict[str, Any]:
    data = load_stack("staging").cluster
    data = {**data, "kubernetes": {**data["kubernetes"], **kubernetes}}
    return data


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"endpoint": "public"}, "cluster.kubernetes", "public endpoint needs public_access_cidrs"),
        (
            {"endpoint": "public", "public_access_cidrs": ["0.0.0.0/0"]},
            "cluster.kubernetes.public_access_cidrs",
            "whole internet",
        ),
        (
            {"platform": {"teams": {"team-a": {"gpu_quota": {"H100": 48}}, "team-b": {"gpu_quota": {"H100": 24}}}}},
            "cluster.kubernetes.platform.teams",
            "add up to 72 GPUs",
        ),
        (
            {"platform": {"teams": {"team-a": {"gpu_quota": {"H100": 12}}}}},
            "cluster.kubernetes.platform.teams[team-a].gpu_quota[H100]",
            "not a whole number of H100 nodes",
        ),
        (
            {"platform": {"teams": {"team-a": {"gpu_quota": {"B200": 8}}}}},
            "cluster.kubernetes.platform.teams[team-a].gpu_quota[B200]",
            "no Kubernetes node group has B200",
        ),
    ],
)
def test_kubernetes_spec_errors_name_the_field(change: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve(_spec(**change))
    assert any(i.path == path and words in i.message for i in caught.value.issues), caught.value.report()


def test_orchestrator_eks_needs_a_kubernetes_section() -> None:
    # (staging's monitoring runs on the Prometheus operator, which needs the kubernetes section too)
    data = {k: v for k, v in load_stack("staging").cluster.items() if k not in ("kubernetes", "monitoring")}
    with pytest.raises(SpecError) as caught:
        resolve(data)
    paths = {i.path for i in caught.value.issues}
    assert paths == {"cluster.node_groups[train].orchestrator", "cluster.node_groups[system].orchestrator"}
