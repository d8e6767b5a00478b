"""Login through SSM Session Manager is secure by default on the prod plan: the account's preferences
document (SSM-SessionManagerRunShell) turns on Run As with an unprivileged default user, encrypts session
data with the cluster key and streams sessions to a log group encrypted with it; every SSM-managed node
role may write that log and decrypt that key. The wiring rule passes on the plan and fails on it once the
document or a role's grant is gone (fixtures: tests/policies/fixtures/wiring/wiring-ssm-session-preferences.yaml)."""

from __future__ import annotations

import json

from gpuforge.infra.aws.session_manager import RUN_AS_DEFAULT_USER
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.policy.rules import REGISTRY, Resource, RuleContext
from tests.support import planned

RULE = "wiring-ssm-session-preferences"
SSM_CORE = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"


def _of(plan_resources: list, type_: str) -> list:
    return [r for r in plan_resources if r.type == type_]


def test_prod_declares_secure_session_preferences() -> None:
    plan = planned("prod")
    (key,) = [r for r in _of(plan.resources, "aws:kms/key:Key") if r.name == "forge-prod-kms-key"]
    key_arn = f"arn:aws:kms:mock:123456789012:{key.name}"
    (document,) = _of(plan.resources, "aws:ssm/document:Document")
    assert (document.inputs["name"], document.inputs["documentType"]) == ("SSM-SessionManagerRunShell", "Session")
    inputs = json.loads(document.inputs["content"])["inputs"]
    assert inputs["runAsEnabled"] is True and inputs["runAsDefaultUser"] == RUN_AS_DEFAULT_USER == "nobody"
    assert inputs["kmsKeyId"] == key_arn
    assert inputs["cloudWatchEncryptionEnabled"] is True and inputs["cloudWatchStreamingEnabled"] is True
    (logs,) = [r for r in _of(plan.resources, "aws:cloudwatch/logGroup:LogGroup") if "ssm-sessions" in r.name]
    assert logs.inputs["name"] == inputs["cloudWatchLogGroupName"] == "/gpuforge/forge-prod/ssm-sessions"
    assert logs.inputs["kmsKeyId"] == key_arn and logs.protect  # prod keeps its audit trail

    # Every SSM-managed role (node groups, controllers) writes the log and decrypts the session key.
    roles = {
        a.inputs["role"] for a in _of(plan.resources, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs.get("policyArn") == SSM_CORE and "image" not in a.name
    }
    granted = {}
    for policy in _of(plan.resources, "aws:iam/rolePolicy:RolePolicy"):
        doc = json.loads(policy.inputs["policy"])
        actions = {a for st in doc["Statement"] for a in st["Action"]}
        if {"logs:PutLogEvents", "kms:Decrypt"} <= actions and key_arn in policy.inputs["policy"]:
            granted[policy.inputs["role"]] = policy.name
    assert roles and roles <= set(granted), roles - set(granted)


def _check(resources: list[Resource]) -> list[str]:
    rule = REGISTRY[RULE]
    return [v.urn.rsplit("::", 1)[-1] for v in rule.run(resources, RuleContext("prod", rule.defaults()))]


def test_the_rule_passes_on_prod_and_fails_without_the_document_or_a_grant() -> None:
    resources = to_rule_resources(planned("prod").resources)
    assert _check(resources) == []
    no_document = [r for r in resources if r.type != "aws:ssm/document:Document"]
    assert _check(no_document) == ["forge-prod-slurm"]
    no_grant = [r for r in resources if r.name != "forge-prod-ssm-sessions-login"]
    assert _check(no_grant) == ["forge-prod-login-role"]
