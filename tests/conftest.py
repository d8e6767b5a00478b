"""Shared fixtures: plans are pure functions of the stack file, so each is evaluated once."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuforge.plan.model import Plan
from tests.installed import build_wheel
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


@pytest.fixture(scope="session")
def gpuforge_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout, once per session: the tests that install it only read it."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))
