"""The pack adapters on the engine's path: policies built by gpuforge.policy.engine, called with
pulumi-policy's own ResourceValidationArgs / StackValidationArgs, properties wrapped in its
unknown-checking proxy (as the analyzer wraps them)."""

from __future__ import annotations

import ast
from datetime import date
from pathlib import Path

import pytest
from policy_fixtures import Case, load_cases, urn
from pulumi_policy import (
    EnforcementLevel,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.policy import PolicyCustomTimeouts
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from gpuforge.policy.engine import build_policies, build_policy, pack_kwargs
from gpuforge.policy.rules import PACKS, REGISTRY, Resource
from gpuforge.policy.settings import PolicySettings, Settings, Waiver

ROOT = Path(__file__).resolve().parents[2]
CASES = [c for rule_id in sorted(REGISTRY) for c in load_cases(rule_id)]
TODAY = date(2026, 1, 15)


def _opts(r: Resource) -> PolicyResourceOptions:
    return PolicyResourceOptions(r.protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], r.parent)


def resource_args(r: Resource, config: dict | None = None) -> ResourceValidationArgs:
    return ResourceValidationArgs(
        r.type, unknown_checking_proxy(dict(r.inputs)), r.urn, r.name, _opts(r), None, config or {}
    )


def stack_args(resources: list[Resource], config: dict | None = None) -> StackValidationArgs:
    """PolicyResources linked like the analyzer links them: parent, dependencies and property dependencies
    as objects."""
    policy_resources = {
        r.urn: PolicyResource(
            r.type, unknown_checking_proxy(dict(r.inputs)), r.urn, r.name, _opts(r), None, None, [], {}
        )
        for r in resources
    }
    for r in resources:
        pr = policy_resources[r.urn]
        pr.parent = policy_resources.get(r.parent) if r.parent else None
        pr.property_dependencies = {k: [policy_resources[u] for u in v] for k, v in r.dependencies.items()}
        pr.dependencies = [policy_resources[u] for u in r.depends_on]
        if r.provider:
            provider = policy_resources[r.provider]
            pr.provider = PolicyProviderResource(provider.resource_type, provider.props, provider.urn, provider.name)
    return StackValidationArgs(list(policy_resources.values()), config or {})


def run_engine(case_rule: str, resources: list[Resource], settings: Settings, config: dict | None = None) -> set[str]:
    policy = build_policy(REGISTRY[case_rule], settings, TODAY)
    reported: list[tuple[str, str | None]] = []

    def report(message: str, urn: str | None = None) -> None:
        reported.append((message, urn))

    if isinstance(policy, ResourceValidationPolicy):
        for r in resources:
            policy.validate(resource_args(r, config), report)
    else:
        assert isinstance(policy, StackValidationPolicy)
        policy.validate(stack_args(resources, config), report)
    assert all(m and u for m, u in reported)
    return {u for _, u in reported if u}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_engine_path_reports_exactly_the_expected_resources(case: Case) -> None:
    settings = Settings(case.environment, PolicySettings())
    assert run_engine(case.rule, case.resources, settings, dict(case.params)) == case.failing


def test_enforcement_levels_follow_environment_and_overrides() -> None:
    prod = {p.name: p for p in build_policies("redundancy", Settings("prod", PolicySettings()))}
    dev = {p.name: p for p in build_policies("redundancy", Settings("dev", PolicySettings()))}
    assert prod["redundancy-nodegroup-spares"].enforcement_level == EnforcementLevel.MANDATORY
    assert dev["redundancy-nodegroup-spares"].enforcement_level == EnforcementLevel.ADVISORY
    assert dev["redundancy-lustre-persistent"].enforcement_level == EnforcementLevel.DISABLED
    overridden = PolicySettings(levels={"redundancy": "advisory", "redundancy-lustre-backup": "disabled"})
    built = {p.name: p for p in build_policies("redundancy", Settings("prod", overridden))}
    assert built["redundancy-nodegroup-spares"].enforcement_level == EnforcementLevel.ADVISORY
    assert built["redundancy-lustre-backup"].enforcement_level == EnforcementLevel.DISABLED


def test_policy_kinds_and_config_schema() -> None:
    for pack in PACKS:
        for policy in build_policies(pack, Settings("prod", PolicySettings())):
            rule = REGISTRY[policy.name]
            expected = ResourceValidationPolicy if rule.kind == "resource" else StackValidationPolicy
            assert isinstance(policy, expected)
            if rule.params:
                assert policy.config_schema is not None
                assert set(policy.config_schema.properties) == set(rule.params)
            else:
                assert policy.config_schema is None


def test_pack_kwargs_build_without_serving() -> None:
    kwargs = pack_kwargs("security", Settings("prod", PolicySettings()))
    assert kwargs["name"] == "gpuforge-security"
    assert {p.name for p in kwargs["policies"]} == {r.id for r in REGISTRY.values() if r.pack == "security"}


@pytest.mark.parametrize("pack", PACKS)
def test_pack_main_builds_the_pack_and_only_there(pack: str) -> None:
    main = ROOT / "policy-packs" / pack / "__main__.py"
    tree = ast.parse(main.read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "PolicyPack"]
    assert len(calls) == 1
    assert "runtime:" in (ROOT / "policy-packs" / pack / "PulumiPolicy.yaml").read_text()
    for module in (ROOT / "gpuforge" / "policy").rglob("*.py"):
        if module.name != "__main__.py":
            assert "PolicyPack(" not in module.read_text().replace("`PolicyPack(", ""), module


def test_unknown_values_during_preview_are_not_judged() -> None:
    lt = Resource(
        urn("aws:ec2/launchTemplate:LaunchTemplate", "lt"),
        "aws:ec2/launchTemplate:LaunchTemplate",
        "lt",
        {"metadataOptions": {"httpTokens": UNKNOWN_STRING_VALUE, "httpPutResponseHopLimit": 1}},
    )
    settings = Settings("prod", PolicySettings())
    assert run_engine("security-launchtemplate-imdsv2", [lt], settings) == set()
    # A config resource whose bucket id is unknown still links through its property dependency.
    bucket = Resource(urn("aws:s3/bucket:Bucket", "b"), "aws:s3/bucket:Bucket", "b", {})
    versioning = Resource(
        urn("aws:s3/bucketVersioning:BucketVersioning", "bv"),
        "aws:s3/bucketVersioning:BucketVersioning",
        "bv",
        {"bucket": UNKNOWN_STRING_VALUE, "versioningConfiguration": {"status": "Enabled"}},
        dependencies={"bucket": (bucket.urn,)},
    )
    assert run_engine("security-bucket-versioning", [bucket, versioning], settings) == set()
    assert run_engine("security-bucket-versioning", [bucket], settings) == {bucket.urn}


def test_waivers_in_the_engine() -> None:
    case = load_cases("security-bucket-versioning")[0]
    none_urn = urn("aws:s3/bucket:Bucket", "none")
    reason = "legacy bucket, migrating (OPS-42)"
    held = Settings(
        "prod",
        PolicySettings(waivers=[Waiver(rule=case.rule, resource="none", reason=reason, expires=date(2026, 12, 31))]),
    )
    assert run_engine(case.rule, case.resources, held) == case.failing - {none_urn}
    lapsed = Settings(
        "prod",
        PolicySettings(waivers=[Waiver(rule=case.rule, resource=none_urn, reason=reason, expires=date(2025, 12, 31))]),
    )
    assert run_engine(case.rule, case.resources, lapsed) == case.failing
