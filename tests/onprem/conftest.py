"""The on-prem and hybrid stacks, planned once per session (offline, under the mock monitor)."""

from __future__ import annotations

import pytest

from gpuforge.plan.model import Plan
from tests.support import ONPREM_K8S, planned


@pytest.fixture(scope="session")
def lab() -> Plan:
    return planned("onprem-lab")


@pytest.fixture(scope="session")
def lab_k8s() -> Plan:
    """The same site as a Kubernetes cluster (tests/fixtures/stacks/Pulumi.onprem-k8s.yaml)."""
    return planned(ONPREM_K8S)


@pytest.fixture(scope="session")
def hybrid() -> Plan:
    return planned("hybrid")
