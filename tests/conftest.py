"""Shared fixtures: plans are pure functions of the stack file, so each is evaluated once."""

from __future__ import annotations

import pytest

from gpuforge.plan.model import Plan
from tests.support import planned

# Booted machines (systemd-nspawn) for any test directory: the machine_pool and two_machines fixtures.
pytest_plugins = ["tests.machines.plugin"]


@pytest.fixture
def dev_plan() -> Plan:
    return planned("dev")


@pytest.fixture
def prod_plan() -> Plan:
    return planned("prod")

