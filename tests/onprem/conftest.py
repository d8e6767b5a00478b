"""The on-prem and hybrid stacks, planned once per session (offline, under the mock monitor)."""

from __future__ import annotations

import pytest

from gpuforge.plan.model import Plan
from tests.support import HYBRID_MULTIKUEUE, ONPREM_K8S, planned


@pytest.fixture(scope="session")
def lab() -> Plan:
    return planned("onprem-lab")


@pytest.fixture(scope="session")
def lab_k8s() -> Plan:
    """The same site as a Kubernetes cluster (tests/fixtures/stacks/Pulumi.onprem-k8s.yaml)."""
    return planned(ONPREM_K8S)


@pytest.fixture(scope="session")
def hybrid() -> Plan:
    """A Kubernetes site bursting through MultiKueue (tests/fixtures/stacks/Pulumi.hybrid-multikueue.yaml)."""
    return planned(HYBRID_MULTIKUEUE)


@pytest.fixture(scope="session")
def hybrid_slurm() -> Plan:
    """stacks/Pulumi.hybrid.yaml: the site's Slurm controller with cloud partitions."""
    return planned("hybrid")
