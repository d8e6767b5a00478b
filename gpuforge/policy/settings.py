"""Policy settings: the `gpuforge:policy` key of a stack file, beside `gpuforge:cluster`.

    gpuforge:policy:
      levels:                         # per rule id, or per pack (security, redundancy, power, wiring)
        security-bucket-versioning: advisory
      params:                         # per rule id: the rule's tunables (gpuforge policies lists them)
        redundancy-nodegroup-spares: {nodes_per_spare: 16}
      waivers:
        - rule: security-securitygroup-open-ingress
          resource: forge-prod-net-ingress-in-ssh     # resource name or full URN
          reason: vendor bastion until the VPN lands (OPS-1234)
          expires: 2026-09-30

Levels default per environment (each rule's `levels`): mandatory in prod, advisory in dev.
A waiver turns a matching violation into `waived` until its expiry date; from that day on the
violation counts again at its level, its message naming the expired waiver.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from gpuforge.spec.config_keys import CLUSTER_KEY, POLICY_KEY
from gpuforge.spec.errors import SpecError, SpecIssue, issues_from_validation_error
from gpuforge.spec.models import SpecModel
from gpuforge.spec.suggest import shown, suggestion, unusual_characters

from .rules import PACKS, REGISTRY, Rule, Violation

LevelSetting = Literal["mandatory", "advisory", "disabled"]


def _unknown_rule(rule_id: str, path: str, packs: bool = False) -> list[SpecIssue]:
    """An issue when rule_id names no rule (nor pack, where packs may be named)."""
    if rule_id in REGISTRY or (packs and rule_id in PACKS):
        return []
    what = "rule or pack" if packs else "rule"
    hint = suggestion(rule_id, [*PACKS, *REGISTRY] if packs else list(REGISTRY))
    fix = hint or (f"use a pack ({', '.join(PACKS)}) or " if packs else "use ")
    fix += "" if hint else "a rule id from `gpuforge policies`"
    return [SpecIssue(path, f"unknown {what} {rule_id!r}" + unusual_characters(rule_id), fix)]


class Waiver(SpecModel):
    rule: str = Field(description="The rule id waived, e.g. security-bucket-versioning.")
    resource: str = Field(min_length=1, description="The resource's name or its full URN.")
    reason: str = Field(min_length=10, description="Why, and the ticket that tracks the fix.")
    # strict=False: a YAML date is text (YAML 1.2, as Pulumi reads it) and is parsed here, the same
    # way the JSON Schema's `format: date` and check-jsonschema judge it.
    expires: date = Field(
        strict=False, description="Last day the waiver holds (YYYY-MM-DD); from the next day it is a violation."
    )

    @field_validator("expires", mode="before")
    @classmethod
    def _date_text(cls, value: Any) -> Any:
        if not isinstance(value, str | date):
            raise ValueError(f"got {shown(value)}; expected a date written YYYY-MM-DD")
        return value

    def matches(self, violation: Violation) -> bool:
        return self.rule == violation.rule and self.resource in (violation.urn, resource_name(violation.urn))

    def expired(self, today: date) -> bool:
        return today > self.expires


class PolicySettings(SpecModel):
    """Enforcement levels, rule parameters and waivers of one stack."""

    levels: dict[str, LevelSetting] = Field(
        default_factory=dict,
        description="Enforcement per rule id or per pack (security, redundancy, power, wiring): mandatory, advisory or "
        "disabled. Default: each rule's level for the environment (mandatory in prod, advisory in dev).",
    )
    params: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Rule parameters keyed by rule id (see `gpuforge policies`)."
    )
    waivers: list[Waiver] = Field(default_factory=list, description="Accepted violations, each with an expiry.")


@dataclass(frozen=True)
class Settings:
    """What a run of the packs needs: the environment and the stack's policy settings."""

    environment: str
    policy: PolicySettings

    def level(self, rule: Rule) -> str:
        return self.policy.levels.get(rule.id) or self.policy.levels.get(rule.pack) or rule.level(self.environment)

    def params(self, rule: Rule, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        merged = {**rule.defaults(), **self.policy.params.get(rule.id, {})}
        merged.update({k: v for k, v in (overrides or {}).items() if k in rule.params})
        return merged

    def waiver_for(self, violation: Violation) -> Waiver | None:
        return next((w for w in self.policy.waivers if w.matches(violation)), None)


def resource_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


_JSON_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "integer": ((int,), "a whole number"),
    "number": ((int, float), "a number"),
    "boolean": ((bool,), "true or false"),
    "array": ((list,), "a list"),
    "string": ((str,), "text"),
}


def schema_problem(value: Any, schema: Mapping[str, Any]) -> str:
    """What is wrong with value under a rule parameter's JSON Schema ('' when it conforms).

    Rule parameters use a small part of JSON Schema (type, items, bounds, enum); a keyword
    outside it is refused when the rule registers (gpuforge/policy/rules/base.py), so none is skipped."""
    kind = schema.get("type")
    if kind is not None:
        types, words = _JSON_TYPES[str(kind)]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"got {shown(value)}; expected {words}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"got {shown(value)}; expected a finite number"
    if "enum" in schema and value not in schema["enum"]:
        return f"got {shown(value)}; expected one of {', '.join(map(str, schema['enum']))}"
    bounds = (
        ("minimum", lambda v, b: v >= b, "at least"),
        ("maximum", lambda v, b: v <= b, "at most"),
        ("exclusiveMinimum", lambda v, b: v > b, "more than"),
        ("exclusiveMaximum", lambda v, b: v < b, "less than"),
    )
    for keyword, ok, words in bounds:
        if keyword in schema and isinstance(value, int | float) and not ok(value, schema[keyword]):
            return f"got {shown(value)}; expected {words} {schema[keyword]}"
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problem = schema_problem(item, schema["items"])
            if problem:
                return f"item {i}: {problem}"
    return ""


def _param_issues(params: Any) -> list[SpecIssue]:
    """Each rule parameter against its rule's own schema, at policy.params[rule].name."""
    if not isinstance(params, Mapping):
        return []  # the model reports the type
    issues = []
    for rule_id, values in params.items():
        path = f"policy.params[{rule_id}]"
        rule = REGISTRY.get(str(rule_id))
        if rule is None:
            issues += _unknown_rule(str(rule_id), path)
            continue
        if not isinstance(values, Mapping):
            continue  # the model reports the type
        for name, value in values.items():
            param = rule.params.get(name)
            if param is None:
                known = ", ".join(rule.params) or "none"
                hint = suggestion(name, list(rule.params))
                issues.append(
                    SpecIssue(f"{path}.{name}", f"{rule_id} has no parameter {name!r} (its parameters: {known})",
                              hint.replace("did you mean", "rename it to").rstrip("?") if hint else "remove it")
                )
                continue
            problem = schema_problem(value, param.schema)
            if problem:
                issues.append(
                    SpecIssue(
                        f"{path}.{name}",
                        f"{problem} ({name}: {param.description})",
                        f"set a value that fits, or remove it for the default {shown(param.default)}",
                    )
                )
    return issues


def _level_issues(levels: Any) -> list[SpecIssue]:
    if not isinstance(levels, Mapping):
        return []
    return [i for key in levels for i in _unknown_rule(str(key), f"policy.levels[{key}]", packs=True)]


def _waiver_rule_issues(waivers: Any) -> list[SpecIssue]:
    if not isinstance(waivers, list):
        return []
    return [
        issue
        for i, waiver in enumerate(waivers)
        if isinstance(waiver, Mapping) and isinstance(waiver.get("rule"), str)
        for issue in _unknown_rule(waiver["rule"], f"policy.waivers[{i}].rule")
    ]


def parse_policy(data: Any, source: str = "") -> PolicySettings:
    """Validate a `gpuforge:policy` value; every problem named by its field path (SpecError).
    Rule ids, parameters (against each rule's own schema) and waivers are all checked here, so a
    stack that validates cannot fail later in a rule."""
    if data is None:
        return PolicySettings()
    issues: list[SpecIssue] = []
    settings = None
    try:
        settings = PolicySettings.model_validate(data)
    except ValidationError as exc:
        issues += issues_from_validation_error(exc, data, root="policy", model=PolicySettings)
    if isinstance(data, Mapping):
        issues += _level_issues(data.get("levels")) + _param_issues(data.get("params"))
        issues += _waiver_rule_issues(data.get("waivers"))
    if issues or settings is None:
        raise SpecError(issues, source)
    return settings


def settings_from_config(config: Mapping[str, Any], source: str = "") -> Settings:
    """Settings from a stack file's config mapping (gpuforge:cluster environment + gpuforge:policy)."""
    cluster = config.get(CLUSTER_KEY)
    environment = cluster.get("environment") if isinstance(cluster, Mapping) else None
    return Settings(str(environment or "prod"), parse_policy(config.get(POLICY_KEY), source))


def policy_json_schema(ref_template: str = "#/$defs/{model}") -> tuple[dict[str, Any], dict[str, Any]]:
    """(schema of gpuforge:policy, its $defs), with the rule ids spelled out for editors."""
    schema = PolicySettings.model_json_schema(ref_template=ref_template)
    defs = schema.pop("$defs", {})
    ids = sorted(REGISTRY)
    schema["properties"]["levels"]["propertyNames"] = {"enum": [*PACKS, *ids]}
    schema["properties"]["params"] = {
        **{k: v for k, v in schema["properties"]["params"].items() if k not in ("additionalProperties",)},
        "properties": {
            rule_id: {
                "type": "object",
                "properties": {
                    name: {**param.schema, "description": param.description}
                    for name, param in REGISTRY[rule_id].params.items()
                },
                "additionalProperties": False,
            }
            for rule_id in ids
            if REGISTRY[rule_id].params
        },
        "additionalProperties": False,
    }
    defs["Waiver"]["properties"]["rule"]["enum"] = ids
    return schema, defs
