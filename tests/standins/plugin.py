"""The ``standin_sources`` and ``container_sources`` fixtures: the stand-in package sources, built and served
once per session."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.support import skip_or_fail

from . import containers
from .repo import StandinSources, build


@pytest.fixture(scope="session")
def standin_sources(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandinSources]:
    for tool, package in (("dpkg-deb", "dpkg-dev"), ("apt-ftparchive", "apt-utils"), ("gpg", "gnupg"), ("git", "git")):
        if shutil.which(tool) is None:
            skip_or_fail(f"{tool} not installed (apt-get install {package}; .ci/run installs it)")
    sources = build(tmp_path_factory.mktemp("standins") / "www")
    sources.serve()
    try:
        yield sources
    finally:
        sources.stop()


@pytest.fixture(scope="session")
def container_sources(tmp_path_factory: pytest.TempPathFactory) -> Iterator[containers.ContainerSources]:
    """enroot, pyxis (compiled here against libslurm-dev) and NVIDIA's container toolkit (containers.py)."""
    if missing := containers.tools_missing():
        packages = " ".join(missing)
        skip_or_fail(f"not installed: {packages} (apt-get install {packages}; .ci/run installs them)")
    sources = containers.build(tmp_path_factory.mktemp("container-standins") / "www")
    sources.serve()
    try:
        yield sources
    finally:
        sources.stop()
