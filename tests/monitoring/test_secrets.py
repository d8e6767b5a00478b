"""Receiver secrets: read with require_secret into Secrets Manager (AWS), never in the plan or its report."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from gpuforge.plan.engine import SECRET, plan_stack
from gpuforge.plan.stacks import load_stack
from gpuforge.review.report import markdown_plan

VALUE = "https://hooks.slack.com/services/T0000/B0000/s3cr3t-s1ack-t0ken"


def test_a_set_secret_reaches_secrets_manager_but_never_the_plan(tmp_path: Path) -> None:
    config = yaml.safe_load(load_stack("prod").path.read_text())["config"]
    config["gpuforge:alertSlackUrl"] = VALUE  # as `pulumi config set --secret` decrypts it
    path = tmp_path / "Pulumi.prod-secret.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    plan = plan_stack(path)
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
