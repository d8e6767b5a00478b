"""Packages and their data, including the non-Python assets: templates/, playbooks/, the example
stacks and the workflows ship inside the wheel as components/bundled/<name> (components/assets.py
finds them there), so an installed gpuforge needs no checkout. Metadata is in pyproject.toml."""

import runpy
from pathlib import Path

from setuptools import find_namespace_packages, setup

ASSETS: dict[str, str] = runpy.run_path("components/assets.py")["ASSETS"]
BUNDLED = {f"components.bundled.{name}": path for name, path in ASSETS.items()}
DATA = ("*.json", "*.yaml", "*.yml", "*.j2")


def files_under(top: str) -> list[str]:
    """Every file below `top`, relative to it (symlinks followed: the wheel holds plain files)."""
    return sorted(
        p.relative_to(top).as_posix()
        for p in Path(top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".retry")
    )


setup(
    # Namespace packages too: the policy packs (policies/<pack>/) have no __init__.py.
    packages=[*find_namespace_packages(include=["gpuforge*", "components*", "policies*"]), *BUNDLED],
    package_dir=BUNDLED,
    package_data={
        "": list(DATA),
        "components.catalog.data": ["*"],
        **{name: files_under(path) for name, path in BUNDLED.items()},
    },
)
