"""Every rule against its fixtures: the exact set of failing URNs, plain function and engine path."""

from __future__ import annotations

import pytest
from policy_fixtures import Case, fixture_path, load_cases

from gpuforge.policy.rules import REGISTRY, RuleContext
from gpuforge.policy.rules.base import STANDARD

ALL_CASES = [case for rule_id in sorted(REGISTRY) for case in load_cases(rule_id)]


@pytest.mark.parametrize("rule_id", sorted(REGISTRY))
def test_every_rule_has_passing_and_failing_fixtures(rule_id: str) -> None:
    assert fixture_path(rule_id).exists(), f"write {fixture_path(rule_id)}"
    cases = load_cases(rule_id)
    rule = REGISTRY[rule_id]
    assert any(c.failing for c in cases), "no fixture that must fail"
    checked = [
        r.urn
        for c in cases
        for r in c.resources
        if (rule.kind == "stack" or r.type in rule.types) and r.urn not in c.failing
    ]
    assert checked or any(not c.failing for c in cases), "no fixture that must pass"


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_rule_fails_exactly_the_expected_resources(case: Case) -> None:
    rule = REGISTRY[case.rule]
    ctx = RuleContext(case.environment, {**rule.defaults(), **case.params})
    found = rule.run(case.resources, ctx)
    assert {v.urn for v in found} == case.failing
    assert all(v.rule == rule.id for v in found)
    # Messages say what, where and how to fix: they name the resource and give an instruction.
    for v in found:
        name = v.urn.rsplit("::", 1)[-1]
        assert v.message.startswith(f"{name}:") or name in v.message
        assert ";" in v.message, v.message


def test_rule_ids_follow_area_resource_rule() -> None:
    for rule_id, rule in REGISTRY.items():
        area, *rest = rule_id.split("-")
        assert area == rule.pack and len(rest) >= 2
        assert rule.why and rule.fix
        assert set(rule.levels) >= {"prod", "dev"}


def test_default_levels_are_mandatory_in_prod_and_never_mandatory_in_dev() -> None:
    for rule in REGISTRY.values():
        assert rule.level("prod") == "mandatory", rule.id
        assert rule.level("dev") in ("advisory", "disabled"), rule.id
    assert STANDARD["dev"] == "advisory"


def test_packs_cover_the_issue() -> None:
    packs = {r.pack for r in REGISTRY.values()}
    assert packs == {"security", "redundancy", "power", "wiring"}
    expected = {
        "security-launchtemplate-imdsv2",
        "security-volume-encrypted",
        "security-compute-no-public-ip",
        "security-securitygroup-open-ingress",
        "security-bucket-public-access-block",
        "security-bucket-encryption",
        "security-bucket-versioning",
        "security-lustre-kms",
        "security-iam-no-wildcard-admin",
        "security-eks-endpoint-private",
        "security-eks-secrets-encryption",
        "security-eks-control-plane-logs",
        "redundancy-nodegroup-spares",
        "redundancy-efa-single-az",
        "redundancy-nodegroup-multi-az",
        "redundancy-lustre-persistent",
        "redundancy-lustre-backup",
        "redundancy-bucket-checkpoint-replication",
        "redundancy-stateful-protected",
        "power-cluster-budget",
        "power-rack-feed-redundancy",
        "wiring-daemonset-gpu-nodes",
        "wiring-kueue-flavor-nodes",
        "wiring-release-crd-order",
        "wiring-kueue-quota-allocatable",
        "wiring-kueue-frameworks",
        "wiring-kueue-metrics",
        "wiring-networkpolicy-site-store",
        "wiring-node-taints-registration",
        "wiring-multikueue-dispatch",
        "wiring-kms-key-policy",
        "wiring-launchtemplate-eks-imds-tags",
        "wiring-placementgroup-capacity",
        "wiring-eks-nodegroup-reserved-update",
        "wiring-network-private-endpoints",
        "wiring-securitygroup-lustre-ports",
        "wiring-vpc-site-routes",
        "wiring-eks-addons",
        "wiring-eks-platform-order",
        "wiring-eks-fsx-csi-role",
        "wiring-eks-fsx-csi-role-scope",
        "wiring-eks-team-bucket-prefix",
        "wiring-eks-node-role-buckets",
        "wiring-eks-nodegroup-ami-match",
        "wiring-asg-az-rebalance",
        "wiring-asg-wait-for-capacity",
        "wiring-asg-health-check",
        "wiring-datasync-server-certificate",
        "wiring-alert-secrets-reader",
        "wiring-slurm-burst-ports",
        "wiring-slurm-burst-credentials",
    }
    assert expected <= set(REGISTRY)


def test_docs_cover_every_rule() -> None:
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    text = (docs / "policies.md").read_text() + (docs / "wiring.md").read_text()
    for rule_id, rule in REGISTRY.items():
        assert f"`{rule_id}`" in text, rule_id
        assert rule.why in text, rule_id
