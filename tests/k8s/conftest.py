"""The staging stack plans an EKS cluster with the platform; plan it once for the module."""

from __future__ import annotations

import pytest

from gpuforge.plan import Plan, plan_stack


@pytest.fixture(scope="session")
def staging() -> Plan:
    return plan_stack("staging")


@pytest.fixture(scope="session")
def prod() -> Plan:
    return plan_stack("prod")
