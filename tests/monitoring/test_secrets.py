"""Receiver secrets: read with require_secret into Secrets Manager (AWS), never in the plan or its report."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpuforge.plan import engine
from gpuforge.plan.engine import SECRET, plan_stack
from gpuforge.plan.stacks import load_stack
from gpuforge.review.report import markdown_plan
from tests.support import planned

VALUE = "https://hooks.slack.com/services/T0000/B0000/s3cr3t-s1ack-t0ken"


def test_a_set_secret_reaches_secrets_manager_but_never_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The URL as `pulumi config set --secret` hands it to the program (decrypted; a stack file refuses it in
    clear text, so it is put into the loaded config)."""
    stack = load_stack("prod")
    with_url = replace(stack, config={**stack.config, "gpuforge:alertSlackUrl": VALUE})
    monkeypatch.setattr(engine, "load_stack", lambda *_: with_url)
    plan = plan_stack("prod")
    versions = {
        r.name: r
        for r in plan.resources
        if r.type == "aws:secretsmanager/secretVersion:SecretVersion" and "alert-secrets" in r.name
    }
    assert set(versions) == {
        "forge-prod-alert-secrets-oncall-routing-key",
        "forge-prod-alert-secrets-platform-channel-url",
    }
    assert all(v.inputs["secretString"] == SECRET for v in versions.values())
    secrets = {
        r.inputs["name"]: r
        for r in plan.resources
        if r.type == "aws:secretsmanager/secret:Secret" and "/alertmanager/" in r.inputs["name"]
    }
    assert set(secrets) == {
        "gpuforge/forge-prod/alertmanager/oncall-routing-key",
        "gpuforge/forge-prod/alertmanager/platform-channel-url",
    }
    assert all(s.inputs["kmsKeyId"] and s.protect and s.inputs["recoveryWindowInDays"] == 30 for s in secrets.values())
    for text in (json.dumps(plan.to_json()), markdown_plan(plan)):
        assert "s3cr3t" not in text
    assert "s3cr3t" not in json.dumps(plan.outputs)


def test_the_monitoring_nodes_read_exactly_the_alert_secrets() -> None:
    """prod runs Alertmanager on its services group: that group's role, and no other, reads the receiver
    secrets, scoped to their ARNs and the cluster key; the wiring rule agrees on the plan."""
    plan = planned("prod")
    secrets = {
        r.urn
        for r in plan.by_type("aws:secretsmanager/secret:Secret")
        if r.inputs["name"].startswith("gpuforge/forge-prod/alertmanager/")
    }
    readers = [
        r
        for r in plan.by_type("aws:iam/rolePolicy:RolePolicy")
        if secrets & set(r.dependencies.get("policy", ()))
    ]
    assert [r.name for r in readers] == ["forge-prod-alert-secrets-read"]
    (reader,) = readers
    urn = "urn:pulumi:prod::gpuforge::gpuforge:aws:"
    assert reader.dependencies["role"] == [f"{urn}GpuNodeGroup$aws:iam/role:Role::forge-prod-services-role"]
    key = f"{urn}ClusterKey$aws:kms/key:Key::forge-prod-kms-key"
    assert set(reader.dependencies["policy"]) == secrets | {key}
    statements = json.loads(reader.inputs["policy"])["Statement"]
    assert [s["Action"] for s in statements] == [["secretsmanager:GetSecretValue"], ["kms:Decrypt"]]
    assert len(statements[0]["Resource"]) == len(secrets) == 2
    assert not any("*" in arn for s in statements for arn in s["Resource"])
    assert plan.policy is not None
    assert "wiring-alert-secrets-reader" in plan.policy.levels
    assert "wiring-alert-secrets-reader" not in plan.policy.rule_ids()
