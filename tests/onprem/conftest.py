"""The on-prem and hybrid stacks, planned once per session (offline, under the mock monitor)."""

from __future__ import annotations

import pytest

from gpuforge.plan.model import Plan
from tests.support import planned


@pytest.fixture(scope="session")
def lab() -> Plan:
    return planned("onprem-lab")


@pytest.fixture(scope="session")
def hybrid() -> Plan:
    return planned("hybrid")
