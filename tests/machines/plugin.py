"""pytest fixtures for booted machines; loaded for every test directory by tests/conftest.py.

    @pytest.fixture(scope="session")
    def slurm_nodes(machine_pool: MachinePool) -> Machines:
        return machine_pool.group("slurm", 3, SSH_IMAGE.derive("slurm", packages=("slurmd", "munge")))

Machines are shared by the whole session (the same prefix gives the same machines) and stopped when it
ends, also when a test or the session fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.support import skip_or_fail

from .boot import MachinePool, Machines
from .images import SSH_IMAGE


def machines_unavailable() -> str | None:
    """Why machines cannot boot here, or None."""
    if os.geteuid() != 0:
        return "needs root: systemd-nspawn and overlay mounts (CI runs as root)"
    for tool, package in (
        ("systemd-nspawn", "systemd-container"),
        ("debootstrap", "debootstrap"),
        ("ssh", "openssh-client"),
        ("ssh-keygen", "openssh-client"),
    ):
        if shutil.which(tool) is None:
            return f"{tool} not installed (apt-get install {package}; .ci/run installs it)"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that boots machines is marked slow: `-m "not slow"` must never boot them (nor hold the Slurm
    ports or the machines' addresses a booted run under its lock is using)."""
    unmarked = [
        item.nodeid
        for item in items
        if "machine_pool" in getattr(item, "fixturenames", ()) and item.get_closest_marker("slow") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "these tests boot machines (machine_pool) but are not marked slow; add "
            "`pytestmark = pytest.mark.slow` to their modules:\n  " + "\n  ".join(unmarked)
        )


@pytest.fixture(scope="session")
def machine_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MachinePool]:
    reason = machines_unavailable()
    if reason:
        skip_or_fail(reason)
    pool = MachinePool(tmp_path_factory.mktemp("machines"))
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(scope="session")
def two_machines(machine_pool: MachinePool) -> Machines:
    """Two plain Debian 12 machines with sshd (``node1``, ``node2``), for tests of the node roles."""
    return machine_pool.group("node", 2, SSH_IMAGE)
