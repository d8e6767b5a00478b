"""Object-store access for training pods on EKS: one IAM role per team, trusted only for that team's
service account through the cluster's OIDC provider, allowed only the cluster's buckets and key; the
team's ServiceAccount carries the role; Kueue admits multi-node jobs all or nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pulumi
import pulumi_aws as aws
import pytest
import yaml

from gpuforge.infra.aws.irsa import ServiceAccount, ServiceAccountRoles, ServiceAccountRolesArgs
from gpuforge.plan.model import Plan, PlanResource
from gpuforge.spec.models import Platform, PodsReady

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "k8s"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
TEAMS = {"llm": "llm-pretrain", "research": "research"}


def _irsa_roles(plan: Plan) -> dict[str, PlanResource]:
    return {r.name.removeprefix("forge-staging-irsa-"): r for r in plan.by_type(ROLE) if "-irsa-" in r.name}


def _oidc(plan: Plan) -> PlanResource:
    (oidc,) = plan.by_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    return oidc


def test_one_role_per_team_trusting_only_its_service_account(staging: Plan) -> None:
    roles = _irsa_roles(staging)
    assert set(roles) == set(TEAMS)
    oidc = _oidc(staging)
    issuer = oidc.inputs["url"].removeprefix("https://")
    for team, namespace in TEAMS.items():
        trust = json.loads(roles[team].inputs["assumeRolePolicy"])
        (statement,) = trust["Statement"]
        assert statement["Effect"] == "Allow"
        assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
        assert statement["Principal"] == {"Federated": staging.outputs["kubernetes"]["oidcProviderArn"]}
        assert statement["Condition"] == {
            "StringEquals": {
                f"{issuer}:sub": f"system:serviceaccount:{namespace}:training",
                f"{issuer}:aud": "sts.amazonaws.com",
            }
        }


def _grants(policy: PlanResource) -> dict[str, set[tuple[str, str]]]:
    """action -> {(resource, s3:prefix condition or "")} of a role policy's Allow statements."""
    grants: dict[str, set[tuple[str, str]]] = {}
    for statement in json.loads(policy.inputs["policy"])["Statement"]:
        assert statement["Effect"] == "Allow"
        assert set(statement) <= {"Effect", "Action", "Resource", "Condition"}
        prefixes = statement.get("Condition", {}).get("StringLike", {}).get("s3:prefix", [])
        assert set(statement.get("Condition", {})) <= {"StringLike"}
        for action in statement["Action"]:
            grants.setdefault(action, set()).update((r, ",".join(prefixes)) for r in statement["Resource"])
    return grants


def test_each_team_writes_and_reads_checkpoints_only_under_its_own_prefix(staging: Plan) -> None:
    """Issue 25 item 9: the data buckets are read whole (shared datasets); in the checkpoint/artifact buckets a
    team lists, reads and writes only `<team>/`, so no team overwrites or reads another's checkpoints."""
    stores = staging.outputs["objectStores"]
    data = [s["arn"] for s in stores.values() if s["purpose"] == "data"]
    writable = [s["arn"] for s in stores.values() if s["purpose"] in ("checkpoints", "artifacts")]
    assert data and writable
    key = staging.outputs["kmsKeyArn"]
    policies = {r.name: r for r in staging.by_type(ROLE_POLICY) if "-irsa-" in r.name}
    assert set(policies) == {f"forge-staging-irsa-{team}-buckets" for team in TEAMS}
    for team in TEAMS:
        policy = policies[f"forge-staging-irsa-{team}-buckets"]
        assert policy.inputs["role"] == f"forge-staging-irsa-{team}-id"
        own = {(f"{a}/{team}/*", "") for a in writable}
        assert _grants(policy) == {
            "s3:ListBucket": {(a, "") for a in data} | {(a, f"{team}/,{team}/*") for a in writable},
            "s3:GetObject": {(f"{a}/*", "") for a in data} | own,
            "s3:PutObject": own,
            "s3:AbortMultipartUpload": own,
            "kms:Decrypt": {(key, "")},
            "kms:GenerateDataKey": {(key, "")},
        }
        others = [t for t in TEAMS if t != team]
        text = policy.inputs["policy"]
        assert not [t for t in others if f"/{t}/" in text], f"{team}'s policy names another team's prefix"
    # Nothing else is attached to the team roles.
    attached = staging.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    assert not [a for a in attached if "-irsa-" in a.inputs["role"]]


def test_fsx_csi_controller_role_is_scoped_to_the_stacks_file_system(staging: Plan) -> None:
    """The FSx CSI controller's service account carries its own IRSA role (no fallback to the node's
    credentials), which may only describe and update the stack's own file system: no create, delete, tag,
    IAM or S3 action, and no "*" (aws-fsx-csi-driver docs/install.md lists those for dynamic provisioning)."""
    (fs,) = staging.by_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    (role,) = [r for r in staging.by_type(ROLE) if r.name == "forge-staging-fsx-csi-role"]
    trust = json.loads(role.inputs["assumeRolePolicy"])
    issuer = _oidc(staging).inputs["url"].removeprefix("https://")
    (statement,) = trust["Statement"]
    subject = statement["Condition"]["StringEquals"][f"{issuer}:sub"]
    assert subject == "system:serviceaccount:kube-system:fsx-csi-controller-sa"
    policies = [p for p in staging.by_type(ROLE_POLICY) if p.inputs["role"] == "forge-staging-fsx-csi-role-id"]
    (policy,) = policies
    fs_arn = "arn:aws:fsx:mock:123456789012:forge-staging-lustre-fs"
    assert policy.dependencies["policy"] == [fs.urn]  # the ARN is the file system's output
    assert _grants(policy) == {
        "fsx:DescribeFileSystems": {(fs_arn, "")},
        "fsx:UpdateFileSystem": {(fs_arn, "")},
    }
    attached = staging.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    assert not [a for a in attached if a.inputs["role"] == "forge-staging-fsx-csi-role"]
    releases = staging.by_type("kubernetes:helm.sh/v3:Release")
    (release,) = [r for r in releases if r.inputs["name"] == "aws-fsx-csi-driver"]
    annotations = release.inputs["values"]["controller"]["serviceAccount"]["annotations"]
    assert annotations == {"eks.amazonaws.com/role-arn": "arn:aws:iam:mock:123456789012:forge-staging-fsx-csi-role"}


def test_eks_node_roles_have_no_bucket_access(staging: Plan) -> None:
    # Pods reach the buckets through their team's role; the node role is open to every pod on the node.
    names = {r.name for r in staging.by_type(ROLE_POLICY)}
    assert not {n for n in names if n.endswith("-buckets") and "-irsa-" not in n}, names
    assert {f"forge-staging-irsa-{team}-buckets" for team in TEAMS} <= names


def test_service_account_carries_the_role_and_is_valid(staging: Plan) -> None:
    role_arns = staging.outputs["kubernetes"]["serviceAccountRoles"]
    assert role_arns == {team: f"arn:aws:iam:mock:123456789012:forge-staging-irsa-{team}" for team in TEAMS}
    # (Kueue's namespace holds the Capacity Block window's accounts, which carry no AWS role.)
    accounts = {
        r.inputs["metadata"]["namespace"]: r.inputs
        for r in staging.by_type(SERVICE_ACCOUNT)
        if r.inputs["metadata"]["namespace"] != "kueue-system"
    }
    assert set(accounts) == set(TEAMS.values())
    version = staging.resolved.spec.kubernetes.version if staging.resolved.spec.kubernetes else ""
    for team, namespace in TEAMS.items():
        sa = accounts[namespace]
        assert sa["metadata"]["name"] == "training"
        assert sa["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": role_arns[team]}
        kubernetes_validate.validate(sa, f"{version}.0", strict=True)


def _kueue_config(plan: Plan) -> tuple[dict[str, Any], dict[str, Any]]:
    (kueue,) = [r for r in plan.by_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kueue"]
    values = kueue.inputs["values"]
    return values, yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])


def test_kueue_admits_multi_node_jobs_whole(staging: Plan) -> None:
    values, config = _kueue_config(staging)
    # The chart's own default configuration (charts/kueue/values.yaml at v0.14.4, verbatim): the string
    # replaces it whole, so every default key and framework is carried over.
    chart = yaml.safe_load((FIXTURES / "charts" / "kueue-v0.14.4-values.yaml").read_text())
    default = yaml.safe_load(chart["managerConfig"]["controllerManagerConfigYaml"])
    assert set(default) <= set(config)
    assert set(default["integrations"]["frameworks"]) <= set(config["integrations"]["frameworks"])
    assert values["enablePrometheus"] is bool(
        staging.resolved.spec.kubernetes and staging.resolved.spec.kubernetes.platform.prometheus_operator
    )
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta1" and config["kind"] == "Configuration"
    assert config["waitForPodsReady"] == {
        "enable": True,
        "timeout": "10m",
        "blockAdmission": True,
        "requeuingStrategy": {
            "timestamp": "Eviction",
            "backoffLimitCount": 5,
            "backoffBaseSeconds": 60,
            "backoffMaxSeconds": 3600,
        },
    }
    # The string replaces the chart's whole default configuration: its essentials are kept.
    assert config["leaderElection"]["leaderElect"] is True and config["webhook"] == {"port": 9443}
    assert "batch/job" in config["integrations"]["frameworks"]
    # Jobs without a queue label are managed, in team namespaces only (never kube-system or Kueue's own).
    assert config["manageJobsWithoutQueueName"] is True
    assert config["managedJobsNamespaceSelector"]["matchExpressions"] == [
        {"key": "gpuforge.dev/team", "operator": "Exists"},
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-system"]},
    ]
    assert config["resources"] == {"excludeResourcePrefixes": ["hugepages-"]}


def test_pods_ready_comes_from_the_spec() -> None:
    from gpuforge.infra.k8s.platform import kueue_manager_config

    spec = Platform.model_validate({"pods_ready": {"timeout_minutes": 30, "requeue_limit": None}})
    ready = kueue_manager_config(spec.pods_ready, "kueue-system")["waitForPodsReady"]
    assert ready["timeout"] == "30m" and ready["requeuingStrategy"]["backoffLimitCount"] is None
    with pytest.raises(ValueError, match="requeue_backoff_max_seconds"):
        PodsReady(requeue_backoff_base_seconds=600, requeue_backoff_max_seconds=60)


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", {**args.inputs, "arn": f"arn:aws:iam::111122223333:role/{args.name}"}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


@pytest.fixture
def team_roles() -> ServiceAccountRoles:
    pulumi.runtime.set_mocks(_Mocks(), preview=False)
    return ServiceAccountRoles(
        "irsa",
        ServiceAccountRolesArgs(
            oidc_provider_arn="arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/X",
            oidc_issuer="https://oidc.eks.us-east-1.amazonaws.com/id/X",
            service_accounts={
                "llm": ServiceAccount("llm-pretrain", "training"),
                "research": ServiceAccount("research", "training"),
            },
            kms_key_arn="arn:aws:kms:us-east-1:111122223333:key/k",
            read_bucket_arns=["arn:aws:s3:::data"],
            write_bucket_arns=["arn:aws:s3:::ckpt", "arn:aws:s3:::artifacts"],
        ),
    )


@pulumi.runtime.test
def test_a_teams_policy_covers_only_its_prefix(team_roles: ServiceAccountRoles) -> pulumi.Output[Any]:
    """The component on its own under Pulumi's mocks: every object a team may write or read in a write bucket
    lies under its prefix, the listing is conditioned on it, and the data bucket is read-only."""
    policies = [c for c in getattr(team_roles, "_childResources", set()) if isinstance(c, aws.iam.RolePolicy)]
    assert len(policies) == 2

    def check(values: list[Any]) -> None:
        by_team = {name.removeprefix("irsa-").removesuffix("-buckets"): json.loads(doc) for name, doc in values}
        assert set(by_team) == {"llm", "research"}
        for team, doc in by_team.items():
            for statement in doc["Statement"]:
                actions, resources = set(statement["Action"]), statement["Resource"]
                if actions & {"s3:PutObject", "s3:AbortMultipartUpload"}:
                    assert resources == [f"arn:aws:s3:::ckpt/{team}/*", f"arn:aws:s3:::artifacts/{team}/*"]
                if "s3:ListBucket" in actions and "arn:aws:s3:::ckpt" in resources:
                    assert statement["Condition"] == {"StringLike": {"s3:prefix": [f"{team}/", f"{team}/*"]}}
                if "arn:aws:s3:::data/*" in resources:
                    assert actions == {"s3:GetObject"}
            assert len([s for s in doc["Statement"] if "s3:PutObject" in s["Action"]]) == 1

    return pulumi.Output.all(*[pulumi.Output.all(p._name, p.policy) for p in policies]).apply(check)
