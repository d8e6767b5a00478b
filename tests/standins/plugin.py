"""The ``standin_sources`` fixture: the stand-in package sources, built and served once per session."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.support import skip_or_fail

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
