"""The on-prem and hybrid stacks, planned once per session (offline, under the mock monitor)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuforge.plan.engine import plan_stack
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


# The site Prometheus of hybrid_monitored (monitoring.server kind site_host).
SITE_PROMETHEUS = ("mon-01", "10.72.1.5")


@pytest.fixture(scope="session")
def hybrid_monitored(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """stacks/Pulumi.hybrid.yaml with the lab's monitoring on a site host (mon-01)."""
    root = Path(__file__).resolve().parents[2]
    stack = yaml.safe_load((root / "stacks" / "Pulumi.hybrid.yaml").read_text())
    lab = yaml.safe_load((root / "stacks" / "Pulumi.onprem-lab.yaml").read_text())
    monitoring = lab["config"]["gpuforge:cluster"]["monitoring"]
    host, address = SITE_PROMETHEUS
    monitoring["server"] = {"kind": "site_host", "host": host, "address": address}
    stack["config"]["gpuforge:cluster"]["monitoring"] = monitoring
    stack["config"].update({k: v for k, v in lab["config"].items() if k.endswith("alertSmtpPassword")})
    path = tmp_path_factory.mktemp("stack") / "Pulumi.hybrid-monitored.yaml"
    path.write_text(yaml.safe_dump(stack, sort_keys=False))
    return plan_stack(path)
