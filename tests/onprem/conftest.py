"""The on-prem and hybrid stacks, planned once per session (offline, under the mock monitor)."""

from __future__ import annotations

import pytest

from gpuforge.plan import Plan, plan_stack


@pytest.fixture(scope="session")
def lab() -> Plan:
    return plan_stack("onprem-lab")


@pytest.fixture(scope="session")
def hybrid() -> Plan:
    return plan_stack("hybrid")
