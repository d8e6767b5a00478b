"""Shared fixtures: plans are pure functions of the stack file, so each is evaluated once."""

from __future__ import annotations

import pytest

from gpuforge.plan.model import Plan
from tests.support import planned

# For any test directory: booted machines (machine_pool, two_machines) and the stand-in package
# sources (standin_sources) the production install tasks are pointed at in tests; the production task
# coverage of the session (which tasks ran, which were skipped and why), printed at its end.
pytest_plugins = ["tests.machines.plugin", "tests.standins.plugin", "tests.taskcoverage.plugin"]


@pytest.fixture
def dev_plan() -> Plan:
    return planned("dev")


@pytest.fixture
def prod_plan() -> Plan:
    return planned("prod")

