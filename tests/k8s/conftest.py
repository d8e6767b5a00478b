"""The staging stack plans an EKS cluster with the platform; plan it once for the module."""

from __future__ import annotations

import pytest

from gpuforge.plan.model import Plan
from tests.support import planned


@pytest.fixture(scope="session")
def staging() -> Plan:
    return planned("staging")


@pytest.fixture(scope="session")
def prod() -> Plan:
    return planned("prod")
