"""What every rule shares: the resource view, violations, rule metadata and the registry.

A rule is a plain function. A resource rule looks at one resource (`fn(resource, ctx)`), a stack
rule at all of them (`fn(stack, ctx)`); both yield `Violation(rule, urn, message)`. The same
functions run offline (`gpuforge plan`, over the plan's resources) and in the engine (the pack
adapter in gpuforge/policy/engine.py turns pulumi-policy's arguments into `Resource`s).

Values the engine cannot know during preview arrive as `UNKNOWN`; rules never flag an unknown
value (the engine checks the resolved value again during `pulumi up`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gpuforge.catalog.tokens import CLUSTER

Level = Literal["mandatory", "advisory", "disabled"]
Environment = Literal["dev", "staging", "prod"]
ENVIRONMENTS: tuple[Environment, ...] = ("dev", "staging", "prod")
PACKS = ("security", "redundancy", "power", "wiring")

# Default levels per environment.
STANDARD: Mapping[str, Level] = {"prod": "mandatory", "staging": "mandatory", "dev": "advisory"}
PROD_ONLY: Mapping[str, Level] = {"prod": "mandatory", "staging": "advisory", "dev": "disabled"}

# Component types whose inputs carry the spec's facts.
RACK = "gpuforge:onprem:Rack"


class _Unknown:
    """A value the engine cannot know during preview."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()


def is_unknown(value: Any) -> bool:
    return value is UNKNOWN


@dataclass(frozen=True)
class Violation:
    rule: str
    urn: str
    message: str


@dataclass(frozen=True)
class Resource:
    """One resource as a rule sees it: the plan's record or the engine's, reduced to plain data."""

    urn: str
    type: str
    name: str
    inputs: Mapping[str, Any]
    parent: str | None = None
    protect: bool = False
    # property name -> URNs of the resources that property's value came from
    dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # every resource this one waits for (explicit depends_on and property dependencies)
    depends_on: tuple[str, ...] = ()
    provider: str | None = None  # the URN of the provider resource it is created through

    def get(self, *path: str | int, default: Any = None) -> Any:
        """inputs[a][b]...; `default` where a step is missing, UNKNOWN where a step is unknown."""
        value: Any = self.inputs
        for step in path:
            if is_unknown(value):
                return UNKNOWN
            value = _step(value, step, default)
            if value is default:
                return default
        return value


def _step(value: Any, step: str | int, default: Any) -> Any:
    if isinstance(step, int):
        ok = isinstance(value, list | tuple) and -len(value) <= step < len(value)
        return value[step] if ok else default
    return value[step] if isinstance(value, Mapping) and step in value else default


class Stack:
    """All resources of a stack, with the lookups stack rules need."""

    def __init__(self, resources: Iterable[Resource]) -> None:
        self.resources = list(resources)
        self.by_urn = {r.urn: r for r in self.resources}

    def of_type(self, *types: str) -> list[Resource]:
        return [r for r in self.resources if r.type in types]

    def children(self, parent: Resource, *types: str) -> list[Resource]:
        return [r for r in self.resources if r.parent == parent.urn and (not types or r.type in types)]

    def cluster(self) -> Resource | None:
        return next(iter(self.of_type(CLUSTER)), None)

    def refers_to(self, resource: Resource, prop: str, target: Resource, *identities: str) -> bool:
        """Whether resource.inputs[prop] points at target: by the engine's property dependencies
        when it recorded them, else by value (the target's id, name or one of `identities` of its
        inputs, e.g. the bucket name)."""
        deps = resource.dependencies.get(prop)
        if deps:
            return target.urn in deps
        value = resource.get(prop)
        if value is None or is_unknown(value):
            return False
        known = {target.name, str(target.get("id") or ""), str(target.get("arn") or "")}
        known |= {str(target.get(i)) for i in identities if isinstance(target.get(i), str)}
        known.discard("")
        return str(value) in known


@dataclass(frozen=True)
class RuleContext:
    environment: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def prod(self) -> bool:
        return self.environment == "prod"

    def param(self, name: str) -> Any:
        return self.params[name]


@dataclass(frozen=True)
class Param:
    """A rule's tunable, settable in gpuforge:policy.params and in --policy-pack-config."""

    default: Any
    schema: Mapping[str, Any]
    description: str


ResourceCheck = Callable[[Resource, RuleContext], Iterable[Violation]]
StackCheck = Callable[[Stack, RuleContext], Iterable[Violation]]


@dataclass(frozen=True)
class Rule:
    id: str
    pack: str
    why: str
    fix: str
    levels: Mapping[str, Level]
    kind: Literal["resource", "stack"]
    check: Callable[..., Iterable[Violation]]
    types: tuple[str, ...] = ()
    params: Mapping[str, Param] = field(default_factory=dict)

    def level(self, environment: str) -> Level:
        return self.levels.get(environment, self.levels["prod"])

    def defaults(self) -> dict[str, Any]:
        return {k: p.default for k, p in self.params.items()}

    def run(self, resources: Iterable[Resource], ctx: RuleContext) -> list[Violation]:
        """Run the rule over a stack's resources (what `gpuforge plan` does)."""
        if self.kind == "stack":
            return list(self.check(Stack(resources), ctx))
        return [v for r in resources if r.type in self.types for v in self.check(r, ctx)]


REGISTRY: dict[str, Rule] = {}
PARAM_SCHEMA_KEYWORDS = frozenset(
    {"type", "items", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "description"}
)


def _schema_keywords(schema: Mapping[str, Any]) -> set[str]:
    items = schema.get("items")
    return set(schema) | (_schema_keywords(items) if isinstance(items, Mapping) else set())


def _register(rule: Rule) -> None:
    parts = rule.id.split("-")
    if rule.pack not in PACKS or parts[0] != rule.pack or len(parts) < 3:
        raise ValueError(f"rule id {rule.id!r} must read <area>-<resource>-<rule> with area one of {PACKS}")
    if rule.id in REGISTRY:
        raise ValueError(f"rule {rule.id} registered twice")
    for name, param in rule.params.items():
        # gpuforge/policy/settings.py checks parameters against these keywords; any other would be skipped.
        unknown = _schema_keywords(param.schema) - PARAM_SCHEMA_KEYWORDS
        if unknown:
            raise ValueError(f"rule {rule.id} parameter {name}: unsupported schema keywords {sorted(unknown)}")
    REGISTRY[rule.id] = rule


def resource_rule(
    id: str,
    *,
    types: Iterable[str],
    why: str,
    fix: str,
    levels: Mapping[str, Level] = STANDARD,
    params: Mapping[str, Param] | None = None,
) -> Callable[[ResourceCheck], ResourceCheck]:
    def wrap(fn: ResourceCheck) -> ResourceCheck:
        _register(Rule(id, id.split("-")[0], why, fix, levels, "resource", fn, tuple(types), params or {}))
        return fn

    return wrap


def stack_rule(
    id: str,
    *,
    why: str,
    fix: str,
    levels: Mapping[str, Level] = STANDARD,
    params: Mapping[str, Param] | None = None,
) -> Callable[[StackCheck], StackCheck]:
    def wrap(fn: StackCheck) -> StackCheck:
        _register(Rule(id, id.split("-")[0], why, fix, levels, "stack", fn, (), params or {}))
        return fn

    return wrap


# --- value helpers ----------------------------------------------------------------------------


def truthy(value: Any) -> bool:
    """Pulumi sends some booleans as strings ("true"); both count."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True


def falsy_explicit(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "false"
    return value is False


def as_list(value: Any) -> list[Any]:
    if value is None or is_unknown(value):
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def policy_document(value: Any) -> Mapping[str, Any] | None:
    """An IAM policy document given as JSON text or as an object; None when unknown or unparsable."""
    if is_unknown(value) or value is None:
        return None
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, Mapping) else None
    return value if isinstance(value, Mapping) else None


def violations(rule: str, urn: str, messages: Iterable[str]) -> Iterator[Violation]:
    for message in messages:
        yield Violation(rule, urn, message)
