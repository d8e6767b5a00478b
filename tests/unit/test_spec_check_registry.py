"""Spec checks carry an id and a level like the policy rules: every problem `resolve` reports names the
registered check that found it, and docs/spec.md's table lists exactly the registered checks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpuforge.spec import SpecError, resolve
from gpuforge.spec.loader import parse_yaml, read_stack_text
from gpuforge.spec.registry import REGISTRY, checks_table

ROOT = Path(__file__).resolve().parents[2]
INVALID = sorted((ROOT / "tests" / "fixtures" / "stacks" / "invalid").glob("*.yaml"))


def cluster_of(path: Path) -> Any:
    """The stack's cluster spec, or None when the file itself does not load (the loader's problems,
    before any check runs)."""
    try:
        document = parse_yaml(read_stack_text(path), str(path))
    except SpecError:
        return None
    config = document.get("config", {}) if isinstance(document, dict) else {}
    return config.get("gpuforge:cluster")


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_every_problem_names_a_registered_check(path: Path) -> None:
    data = cluster_of(path)
    if data is None:
        pytest.skip("the file does not load: no spec check runs")
    try:
        resolve(data, str(path))
    except SpecError as error:
        unregistered = [f"{issue.path}: {issue.message}" for issue in error.issues if issue.check not in REGISTRY]
        assert not unregistered, unregistered


def test_the_invalid_fixtures_exercise_several_checks() -> None:
    """Tagging is per check, not one blanket id: the fixtures' problems come from several checks."""
    found: set[str] = set()
    for path in INVALID:
        data = cluster_of(path)
        if data is None:
            continue
        try:
            resolve(data, str(path))
        except SpecError as error:
            found |= {issue.check for issue in error.issues}
    assert {"spec-models", "spec-catalog", "spec-placement", "spec-storage-lustre", "spec-software"} <= found, found


def test_check_ids_read_like_policy_rule_ids_and_levels_are_known() -> None:
    for check in REGISTRY.values():
        assert re.fullmatch(r"spec(-[a-z]+)+", check.id), check.id
        assert check.level in ("error", "warning")
        assert check.summary.endswith(".")


def test_the_docs_list_every_check() -> None:
    docs = (ROOT / "docs" / "spec.md").read_text()
    assert checks_table() in docs, f"docs/spec.md's Checks table is stale; replace it with:\n{checks_table()}"
