"""The booted Slurm cluster, one per test session: shared by every module of tests/slurm that boots it
(the cluster's proof in test_slurm_cluster.py, containers for jobs in test_slurm_containers.py, the node
lifecycle in test_slurm_lifecycle.py)."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator

import pytest

from tests.machines import MachinePool
from tests.standins.containers import ContainerSources
from tests.standins.imds import stand_in_imds

from .cluster import CLOUD_INSTANCE, SLURM_IMAGE, SlurmCluster, build_cluster, ports_taken
from .failover import FailoverCluster


@pytest.fixture(scope="session")
def slurm_cluster(machine_pool: MachinePool, container_sources: ContainerSources) -> Iterator[SlurmCluster]:
    if taken := ports_taken():
        pytest.fail(
            f"Slurm ports {taken} are already in use on this host (the machines share its network): "
            "a leftover Slurm cluster or daemon holds them; see `ss -ltnp` and stop it first"
        )
    start = time.monotonic()
    machines = machine_pool.group("slurm", 5, SLURM_IMAGE)
    print(f"\nslurm machines booted in {time.monotonic() - start:.1f}s")
    with stand_in_imds(CLOUD_INSTANCE) as imds:
        cluster = build_cluster(machines, container_sources, imds)
        assert cluster.first.ok, [f"{f.host} {f.task}: {f.message}" for f in cluster.first.failures]
        yield cluster


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test on the booted cluster reports the daemons' logs and the cluster's state with its
    failure (in CI the machines are gone by the time anyone looks)."""
    report = yield
    funcargs = getattr(item, "funcargs", {})
    cluster = funcargs.get("slurm_cluster") or funcargs.get("slurm_failover")
    if report.failed and isinstance(cluster, (SlurmCluster, FailoverCluster)):
        report.sections.append(("slurm cluster diagnostics", cluster.diagnostics()))
    return report
