"""Shared fixtures: plans are pure functions of the stack file, so each is evaluated once."""

from __future__ import annotations

from functools import cache

import pytest

from gpuforge.plan import Plan, plan_stack


@cache
def planned(stack: str) -> Plan:
    return plan_stack(stack)


@pytest.fixture
def dev_plan() -> Plan:
    return planned("dev")


@pytest.fixture
def prod_plan() -> Plan:
    return planned("prod")

