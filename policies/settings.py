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

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from components.spec.errors import SpecError, SpecIssue

from .rules import PACKS, REGISTRY, Rule, Violation

POLICY_KEY = "gpuforge:policy"
CLUSTER_KEY = "gpuforge:cluster"
RULE_ID_PATTERN = r"^(security|redundancy|power|wiring)-[a-z0-9]+(-[a-z0-9]+)+$"
LevelSetting = Literal["mandatory", "advisory", "disabled"]
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "string": (str,),
}


def _known_rule(rule_id: str) -> str:
    if rule_id not in REGISTRY:
        raise ValueError(f"unknown rule {rule_id!r}; `gpuforge policies` lists the rule ids")
    return rule_id


class Waiver(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: str = Field(pattern=RULE_ID_PATTERN, description="The rule id waived, e.g. security-bucket-versioning.")
    resource: str = Field(min_length=1, description="The resource's name or its full URN.")
    reason: str = Field(min_length=10, description="Why, and the ticket that tracks the fix.")
    expires: date = Field(description="Last day the waiver holds (YYYY-MM-DD); from the next day it is a violation.")

    @field_validator("rule")
    @classmethod
    def _rule_known(cls, value: str) -> str:
        return _known_rule(value)

    def matches(self, violation: Violation) -> bool:
        return self.rule == violation.rule and self.resource in (violation.urn, resource_name(violation.urn))

    def expired(self, today: date) -> bool:
        return today > self.expires


class PolicySettings(BaseModel):
    """Enforcement levels, rule parameters and waivers of one stack."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    levels: dict[str, LevelSetting] = Field(
        default_factory=dict,
        description="Enforcement per rule id or per pack (security, redundancy, power, wiring): mandatory, advisory or "
        "disabled. Default: each rule's level for the environment (mandatory in prod, advisory in dev).",
    )
    params: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Rule parameters keyed by rule id (see `gpuforge policies`)."
    )
    waivers: list[Waiver] = Field(default_factory=list, description="Accepted violations, each with an expiry.")

    @field_validator("levels")
    @classmethod
    def _level_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if key not in PACKS:
                _known_rule(key)
        return value

    @model_validator(mode="after")
    def _param_values(self) -> PolicySettings:
        for rule_id, values in self.params.items():
            rule = REGISTRY.get(rule_id)
            if rule is None:
                raise ValueError(f"params: unknown rule {rule_id!r}; `gpuforge policies` lists the rule ids")
            for name, value in values.items():
                spec = rule.params.get(name)
                if spec is None:
                    known = ", ".join(rule.params) or "none"
                    raise ValueError(f"params[{rule_id}]: {rule_id} has no parameter {name!r} (known: {known})")
                types = _JSON_TYPES.get(str(spec.schema.get("type")), (object,))
                if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                    raise ValueError(f"params[{rule_id}].{name}: expected {spec.schema.get('type')}, got {value!r}")
        return self


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


def _path(loc: tuple[int | str, ...]) -> str:
    path = "policy"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) or "-" in str(part) else f".{part}"
    return path


def parse_policy(data: Any, source: str = "") -> PolicySettings:
    """Validate a `gpuforge:policy` value; every problem named by its field path (SpecError)."""
    if data is None:
        return PolicySettings()
    try:
        return PolicySettings.model_validate(data)
    except ValidationError as exc:
        issues = []
        for error in exc.errors(include_url=False):
            message = error["msg"].removeprefix("Value error, ")
            fix = "remove it" if error["type"] == "extra_forbidden" else ""
            if error["type"] == "extra_forbidden":
                message = "unknown field (known: levels, params, waivers)"
            elif error["type"] == "literal_error":
                fix = "use mandatory, advisory or disabled"
            elif error["type"].startswith("date"):
                fix = "write the date as YYYY-MM-DD"
            issues.append(SpecIssue(_path(tuple(error["loc"])), message, fix))
        raise SpecError(issues, source) from None


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
    schema["properties"]["params"]["propertyNames"] = {"enum": [i for i in ids if REGISTRY[i].params]}
    defs["Waiver"]["properties"]["rule"]["enum"] = ids
    return schema, defs
