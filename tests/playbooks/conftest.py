"""Fixtures for the playbook tests: a cached Debian 12 root file system and baked copies of it."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuforge.nodes.bake import PlaybookResult, rootfs_inventory, run_playbook
from tests.standins.containers import ContainerSources
from tests.standins.repo import StandinSources
from tests.support import skip_or_fail

from . import rootfs
from .profiles import EFA_P5, IB_8RAIL, image_slurm_vars, profile_vars


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root: debootstrap and the chroot connection run as root (CI runs as root)"
    for tool in ("debootstrap", "chroot"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (apt-get install debootstrap; .ci/run installs it)"
    return None


@pytest.fixture(scope="session")
def rootfs_tarball() -> Path:
    reason = _skip_reason()
    if reason:
        skip_or_fail(reason)
    start = time.monotonic()
    tarball, built = rootfs.build_tarball()
    print(f"\nrootfs tarball {'built' if built else 'reused'} in {time.monotonic() - start:.1f}s: {tarball}")
    return tarball


@dataclass
class Baked:
    """A root file system after a check-mode run (optional), a bake and a second bake."""

    path: Path
    host_vars: dict[str, Any]
    check: PlaybookResult | None
    first: PlaybookResult
    second: PlaybookResult


def _bake(
    tarball: Path, workdir: Path, profile: dict[str, Any], sources: StandinSources, *, check_first: bool
) -> Baked:
    path = rootfs.extract(tarball, workdir / "rootfs")
    host_vars = profile_vars(profile, sources)
    inventory = rootfs_inventory(path, host_vars)
    check = run_playbook("bake-image.yml", inventory, check=True) if check_first else None
    start = time.monotonic()
    first = run_playbook("bake-image.yml", inventory)
    mid = time.monotonic()
    second = run_playbook("bake-image.yml", inventory)
    print(f"\nbake {profile['gpuforge_fabric']}: first {mid - start:.1f}s, second {time.monotonic() - mid:.1f}s")
    rootfs.keep_downloads(path)
    return Baked(path=path, host_vars=host_vars, check=check, first=first, second=second)


@pytest.fixture(scope="module")
def efa_rootfs(
    rootfs_tarball: Path,
    standin_sources: StandinSources,
    container_sources: ContainerSources,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Baked]:
    workdir = tmp_path_factory.mktemp("efa")
    # prod's p5 training group of its Slurm cluster: the image carries enroot for it.
    profile = {**EFA_P5, **image_slurm_vars("train", container_sources)}
    yield _bake(rootfs_tarball, workdir, profile, standin_sources, check_first=False)
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def ib_rootfs(
    rootfs_tarball: Path, standin_sources: StandinSources, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Baked]:
    workdir = tmp_path_factory.mktemp("ib")
    # A check-mode run first, on the untouched root file system: it must pass and change nothing.
    yield _bake(rootfs_tarball, workdir, IB_8RAIL, standin_sources, check_first=True)
    shutil.rmtree(workdir, ignore_errors=True)


# The site's IPoIB interface LNet's o2ib network runs on (the spec's lnet_interfaces in the booted tests' site
# Lustre), with an address on the site's storage network, as a DGX H100's storage port has.
IPOIB_INTERFACE = "ibp170s0f0"  # a DGX H100's first storage port (catalog network_ports)
IPOIB_ADDRESS = "10.64.9.101/32"


@pytest.fixture(scope="session")
def ipoib_interface() -> Iterator[str]:
    """The IPoIB interface for the booted machines, which share the host's network namespace (so one interface
    serves both): a bridge with no ports (this host's kernel has no dummy or IPoIB driver), which is all the
    stand-in lnetctl asks of an o2ib interface, an IPv4 address. Removed at the end of the session."""
    import subprocess

    if subprocess.run(["ip", "link", "show", IPOIB_INTERFACE], capture_output=True).returncode == 0:
        skip_or_fail(f"{IPOIB_INTERFACE} already exists on this host: not this session's to configure")
    for command in (f"link add {IPOIB_INTERFACE} type bridge", f"addr add {IPOIB_ADDRESS} dev {IPOIB_INTERFACE}",
                    f"link set {IPOIB_INTERFACE} up"):  # fmt: skip
        subprocess.run(["ip", *command.split()], check=True, capture_output=True, timeout=30)
    try:
        yield IPOIB_INTERFACE
    finally:
        subprocess.run(["ip", "link", "del", IPOIB_INTERFACE], check=False, capture_output=True, timeout=30)
