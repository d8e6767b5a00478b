"""JupyterHub and batchspawner as the jupyterhub role installs them (data/notebooks.yaml), typed: the pinned
packages with their sources, the proxy's Debian package and API port, and pip's constraints."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, model_validator

from gpuforge.catalog.models import load_data_file

NOTEBOOKS_FILE = Path(__file__).resolve().parent / "data" / "notebooks.yaml"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PackagePin(_Frozen):
    version: str
    source: str


class Proxy(_Frozen):
    package: str
    command: str
    source: str


class NotebooksCatalog(_Frozen):
    packages: dict[str, PackagePin]
    proxy: Proxy
    venv_packages: tuple[str, ...]
    proxy_api_port: int
    proxy_api_source: str
    constraints: dict[str, str]

    @model_validator(mode="after")
    def _pins_are_constrained(self) -> NotebooksCatalog:
        # The constraints are the lock: a pinned package outside it, or at another version, is a stale lock.
        for name, pin in self.packages.items():
            if self.constraints.get(name) != pin.version:
                raise ValueError(f"packages.{name} {pin.version} is not in constraints at that version "
                                 f"({self.constraints.get(name)}): resolve the set again")
        return self

    def requirements(self) -> list[str]:
        """The packages pip installs, `name==version`."""
        return [f"{name}=={pin.version}" for name, pin in self.packages.items()]

    def constraint_lines(self) -> list[str]:
        """pip's constraints file, one `name==version` a line."""
        return [f"{name}=={version}" for name, version in sorted(self.constraints.items())]


@lru_cache(maxsize=1)
def load_notebooks() -> NotebooksCatalog:
    return load_data_file(NOTEBOOKS_FILE, NotebooksCatalog)
