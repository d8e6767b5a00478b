"""Validate a stack before anything is declared: the cluster spec (models and catalog) and its
gpuforge:policy settings together, every problem at once, each with the stack-file line.

`check_stack` is what `gpuforge validate` and `gpuforge plan` both run first; `waiver_issues`
is the extra look `validate` takes at waivers (expired, or matching no resource of the plan).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from gpuforge.plan.model import PlanResource
from gpuforge.plan.stacks import StackFile
from gpuforge.policy.rules import REGISTRY
from gpuforge.policy.settings import Settings, resource_name, settings_from_config
from gpuforge.spec import ResolvedSpec, SpecError, SpecIssue, resolve
from gpuforge.spec.config_keys import CLUSTER_KEY, POLICY_KEY
from gpuforge.spec.errors import with_lines
from gpuforge.spec.secrets import withheld
from gpuforge.spec.suggest import suggestion


@dataclass(frozen=True)
class CheckedStack:
    stack: StackFile
    resolved: ResolvedSpec
    settings: Settings


def check_stack(stack_file: StackFile) -> CheckedStack:
    """The spec, the policy settings and the file's clear-text secrets, all checked; a SpecError lists
    every problem of all three."""
    source = str(stack_file.path)
    issues: list[SpecIssue] = []
    resolved = settings = None
    try:
        resolved = resolve(stack_file.cluster, source)
    except SpecError as error:
        issues += error.issues
    try:
        settings = settings_from_config(stack_file.config, source)
    except SpecError as error:
        issues += error.issues
    if issues or stack_file.secrets or resolved is None or settings is None:
        roots = {"cluster": stack_file.config.get(CLUSTER_KEY), "policy": stack_file.config.get(POLICY_KEY)}
        # Clear-text secrets are problems like any other, reported with the rest; no message quotes one.
        raise SpecError(with_lines(withheld(issues, list(stack_file.secrets)), roots), source)
    return CheckedStack(stack_file, resolved, settings)


def waiver_issues(settings: Settings, resources: list[PlanResource], today: date) -> list[SpecIssue]:
    """Waivers past their day, and waivers that name no resource the rule looks at."""
    issues = []
    names = sorted({r.name for r in resources})
    for i, waiver in enumerate(settings.policy.waivers):
        path = f"policy.waivers[{i}]"
        if waiver.expired(today):
            issues.append(
                SpecIssue(
                    f"{path}.expires",
                    f"expired on {waiver.expires}: the {waiver.rule} violation on {waiver.resource} counts again",
                    "fix the violation and remove the waiver, or extend expires with the reason it still holds",
                )
            )
        rule = REGISTRY[waiver.rule]
        candidates = [r for r in resources if rule.kind == "stack" or r.type in rule.types]
        if not any(waiver.resource in (r.urn, resource_name(r.urn), r.name) for r in candidates):
            checked = sorted({r.name for r in candidates})
            hint = suggestion(waiver.resource, checked or names)
            issues.append(
                SpecIssue(
                    f"{path}.resource",
                    f"{waiver.resource!r} matches no resource {waiver.rule} checks in this stack"
                    + (f" ({len(checked)} it checks)" if checked else " (it checks none here)"),
                    hint or "name a resource of `gpuforge plan` (its name or URN), or remove the waiver",
                )
            )
    return issues
