"""Spec problems, reported all at once in words written for the person editing the YAML."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError
from pydantic_core import ErrorDetails

ROOT = "cluster"
# Fields whose keys are user-chosen names: shown as node_groups[train], not node_groups.train.
MAP_FIELDS = frozenset(
    {
        "node_groups",
        "object_stores",
        "data_repository_associations",
        "tags",
        "cidrs",
        "tiers",
        "teams",
        "access_entries",
        "gpu_quota",
        # the site model (components/spec/site.py)
        "racks",
        "hosts",
        "hcas",
        "mounts",
        "buckets",
        "partitions",
        "subnet_managers",
        # the scheduler (components/spec/scheduler.py); partitions is listed above
        "accounts",
        "users",
    }
)


@dataclass(frozen=True)
class SpecIssue:
    path: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" + (f"; fix: {self.fix}" if self.fix else "")


class SpecError(Exception):
    """The spec cannot be planned. Carries every problem found, never only the first."""

    def __init__(self, issues: Sequence[SpecIssue], source: str = "") -> None:
        self.issues = list(issues)
        self.source = source
        super().__init__(self.report())

    def report(self) -> str:
        where = f" in {self.source}" if self.source else ""
        lines = [f"{len(self.issues)} problem(s){where}:"]
        lines += [f"  - {issue}" for issue in self.issues]
        return "\n".join(lines)


def field_path(loc: Iterable[int | str], data: object) -> str:
    """Turn a pydantic error location into `cluster.node_groups[train].instance_type`.

    Discriminated unions insert their tag (`aws`, `on_demand`) into the location; those
    parts are not keys of the user's data, so walking the data alongside drops them.
    """
    path = ROOT
    parent_field: str | int | None = None
    for part in loc:
        # pydantic marks an invalid map key as a trailing "[key]": the key itself is the field.
        if part == "[key]" or (isinstance(data, dict) and part not in data and _is_union_tag(part, data)):
            continue
        keyed = parent_field in MAP_FIELDS or isinstance(part, int)
        path += f"[{part}]" if keyed else f".{part}"
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            data = None
        parent_field = part
    return path


def _is_union_tag(part: int | str, data: dict[str, object]) -> bool:
    return part in (data.get("kind"), data.get("type"))


def _fix_for(error: ErrorDetails) -> str:
    kind = error["type"]
    ctx = error.get("ctx", {})
    if kind == "extra_forbidden":
        return "remove it (check the spelling against schemas/cluster.schema.json)"
    if kind == "missing":
        return "add it"
    if kind in ("literal_error", "union_tag_invalid"):
        return f"use one of {ctx.get('expected', ctx.get('expected_tags', ''))}"
    if kind == "string_pattern_mismatch":
        return f"match {ctx.get('pattern')}"
    return ""


def issues_from_validation_error(exc: ValidationError, data: object) -> list[SpecIssue]:
    issues = []
    for error in exc.errors(include_url=False):
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        elif error["type"] == "string_pattern_mismatch":
            message = f"{error['input']!r} has the wrong form"
        loc = tuple(error["loc"])
        if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
            loc += (str(error.get("ctx", {}).get("discriminator", "kind")).strip("'"),)
        issues.append(SpecIssue(field_path(loc, data), message, _fix_for(error)))
    return issues
