"""Object-store access for training pods on EKS: one IAM role per team, trusted only for that team's
service account through the cluster's OIDC provider, allowed only the cluster's buckets and key; the
team's ServiceAccount carries the role; Kueue admits multi-node jobs all or nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

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


def test_role_policy_grants_only_the_clusters_buckets_and_key(staging: Plan) -> None:
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
        grants: dict[str, set[str]] = {}
        for statement in json.loads(policy.inputs["policy"])["Statement"]:
            assert statement["Effect"] == "Allow"
            for action in statement["Action"]:
                grants.setdefault(action, set()).update(statement["Resource"])
        assert grants == {
            "s3:ListBucket": set(data + writable),
            "s3:GetObject": {f"{a}/*" for a in data + writable},
            "s3:PutObject": {f"{a}/*" for a in writable},
            "s3:AbortMultipartUpload": {f"{a}/*" for a in writable},
            "kms:Decrypt": {key},
            "kms:GenerateDataKey": {key},
        }
    # Nothing else is attached to the team roles.
    attached = staging.by_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    assert not [a for a in attached if "-irsa-" in a.inputs["role"]]


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
