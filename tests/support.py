"""Helpers shared by test modules."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest

from gpuforge.plan.engine import plan_stack
from gpuforge.plan.model import Plan

# The onprem-lab site run as the site's Kubernetes cluster (stacks/Pulumi.onprem-lab.yaml is Slurm):
# the tests of the site-Kubernetes path plan this one.
ONPREM_K8S = str(Path(__file__).resolve().parent / "fixtures" / "stacks" / "Pulumi.onprem-k8s.yaml")
# A Kubernetes site bursting through Kueue MultiKueue (stacks/Pulumi.hybrid.yaml is the Slurm burst): the
# tests of the MultiKueue path plan this one.
HYBRID_MULTIKUEUE = str(Path(__file__).resolve().parent / "fixtures" / "stacks" / "Pulumi.hybrid-multikueue.yaml")


@cache
def planned(stack: str) -> Plan:
    """A stack's offline plan, evaluated once per test session (a plan is a pure function of the stack file)."""
    return plan_stack(stack)


def skip_unless_ci(missing: bool, reason: str) -> pytest.MarkDecorator:
    """Skip where a tool is missing on a developer's machine; in CI (CI=true, which .ci/run
    has installed everything for) run anyway, so a missing install step fails loudly."""
    return pytest.mark.skipif(missing and not os.environ.get("CI"), reason=reason)


def skip_or_fail(reason: str) -> None:
    """Inside a test or fixture: skip on a developer's machine, fail in CI (where .ci/run installed it)."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must provide it (see .ci/run)")
    pytest.skip(reason)
