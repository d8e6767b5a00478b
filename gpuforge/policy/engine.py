"""The adapter from plain rules to pulumi-policy, for `pulumi preview --policy-pack policies/<pack>`.

Each resource rule becomes a ResourceValidationPolicy, each stack rule a StackValidationPolicy.
Levels come from the environment and the stack's `gpuforge:policy` settings (read through
pulumi.Config: the engine hands policy packs the stack's config), and `--policy-pack-config` still
overrides them per policy, with rule parameters as each policy's config properties.

Waived violations are not reported to the engine (it has no "waived" level); an expired waiver
reports the violation at the rule's level.

The engine wraps properties in an unknown-checking proxy that raises on values unknown during
preview; `plain()` turns them into plain data with `UNKNOWN` in their place, which rules skip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from gpuforge.spec.config_keys import POLICY_KEY

from .rules import UNKNOWN, Resource, Rule, RuleContext, Stack, Violation, rules_for
from .settings import PolicySettings, Settings, parse_policy

LEVELS: dict[str, EnforcementLevel] = {
    "mandatory": EnforcementLevel.MANDATORY,
    "advisory": EnforcementLevel.ADVISORY,
    "disabled": EnforcementLevel.DISABLED,
}
PACK_DESCRIPTIONS = {
    "security": "gpuforge security baseline: IMDSv2, encryption, no public exposure, least-privilege IAM, EKS.",
    "redundancy": "gpuforge redundancy: spares, EFA single-AZ placement, multi-AZ services, durable storage.",
    "power": "gpuforge power: cluster budget with PUE and spares, rack budgets, A/B feed N+N with derate.",
    "wiring": "gpuforge wiring: what no schema sees between resources (key policies and the roles that use "
    "the key, routes, endpoints, add-ons, ordering, selectors and labels, taints and tolerations, quotas), so a "
    "planned cluster also works when deployed.",
}


def _get(container: Any, key: Any) -> Any:
    try:
        return container[key]
    except UnknownValueError:
        return UNKNOWN


def plain(value: Any) -> Any:
    """Proxied (or plain) properties as plain dicts and lists, unknown values as UNKNOWN."""
    if isinstance(value, str | bytes):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(_get(value, k)) for k in value}
    if isinstance(value, Sequence):
        return [plain(_get(value, i)) for i in range(len(value))]
    return value


def resource_from_args(args: ResourceValidationArgs) -> Resource:
    return Resource(
        urn=args.urn,
        type=args.resource_type,
        name=args.name,
        inputs=plain(args.props),
        parent=args.opts.parent if args.opts else None,
        protect=bool(args.opts.protect) if args.opts else False,
    )


def resource_from_policy_resource(r: PolicyResource) -> Resource:
    parent = r.parent.urn if r.parent is not None else (r.opts.parent if r.opts else None)
    return Resource(
        urn=r.urn,
        type=r.resource_type,
        name=r.name,
        inputs=plain(r.props),
        parent=parent,
        protect=bool(r.opts.protect) if r.opts else False,
        dependencies={k: tuple(d.urn for d in v) for k, v in (r.property_dependencies or {}).items()},
        depends_on=tuple(d.urn for d in (r.dependencies or [])),
        provider=r.provider.urn if r.provider is not None else None,
    )


def _reporter(
    settings: Settings, report_violation: ReportViolation, today: date | None
) -> Callable[[Iterable[Violation]], None]:
    def report(found: Iterable[Violation]) -> None:
        day = today or date.today()
        for v in found:
            waiver = settings.waiver_for(v)
            if waiver is not None and not waiver.expired(day):
                continue
            suffix = f" [waiver expired {waiver.expires}: {waiver.reason}]" if waiver is not None else ""
            report_violation(v.message + suffix, v.urn)

    return report


def config_schema(rule: Rule) -> PolicyConfigSchema | None:
    if not rule.params:
        return None
    return PolicyConfigSchema(
        properties={
            name: {**p.schema, "description": p.description, "default": p.default} for name, p in rule.params.items()
        }
    )


def build_policy(rule: Rule, settings: Settings, today: date | None = None) -> Policy:
    level = LEVELS[settings.level(rule)]
    description = f"{rule.why} Fix: {rule.fix}."

    if rule.kind == "resource":

        def validate_resource(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
            if args.resource_type not in rule.types:
                return
            ctx = RuleContext(settings.environment, settings.params(rule, args.get_config()))
            _reporter(settings, report_violation, today)(rule.check(resource_from_args(args), ctx))

        return ResourceValidationPolicy(
            name=rule.id,
            description=description,
            validate=validate_resource,
            enforcement_level=level,
            config_schema=config_schema(rule),
            remediation_steps=rule.fix,
            tags=[rule.pack],
        )

    def validate_stack(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        ctx = RuleContext(settings.environment, settings.params(rule, args.get_config()))
        stack = Stack(resource_from_policy_resource(r) for r in args.resources)
        _reporter(settings, report_violation, today)(rule.check(stack, ctx))

    return StackValidationPolicy(
        name=rule.id,
        description=description,
        validate=validate_stack,
        enforcement_level=level,
        config_schema=config_schema(rule),
        remediation_steps=rule.fix,
        tags=[rule.pack],
    )


def build_policies(pack: str, settings: Settings, today: date | None = None) -> list[Policy]:
    return [build_policy(rule, settings, today) for rule in rules_for(pack)]


def settings_from_pulumi() -> Settings:
    """The stack's environment and gpuforge:policy, as the engine hands stack config to a pack.
    Without stack config (a pack run outside a stack) it assumes prod: fail closed."""
    import pulumi

    config = pulumi.Config("gpuforge")
    cluster = config.get_object("cluster") or {}
    policy = config.get_object("policy")
    environment = cluster.get("environment") if isinstance(cluster, Mapping) else None
    return Settings(str(environment or "prod"), parse_policy(policy, POLICY_KEY) if policy else PolicySettings())


def pack_kwargs(pack: str, settings: Settings | None = None) -> dict[str, Any]:
    """Arguments for `PolicyPack(**pack_kwargs(...))` in policies/<pack>/__main__.py."""
    settings = settings or settings_from_pulumi()
    return {
        "name": f"gpuforge-{pack}",
        "policies": build_policies(pack, settings),
        "description": PACK_DESCRIPTIONS[pack],
        "enforcement_level": EnforcementLevel.MANDATORY,
    }
