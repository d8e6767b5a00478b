"""One package, `gpuforge`, with its data: gpuforge/assets (templates, playbooks, monitoring) and
gpuforge/catalog/data ship as they are; the repository's example stacks and workflows, which `gpuforge
init` copies, ship inside the wheel as gpuforge/assets/{stacks,workflows,policy_packs}
(gpuforge/assets/__init__.py finds them there). Metadata is in pyproject.toml."""

import runpy
from pathlib import Path

from setuptools import find_packages, setup

REPOSITORY_FILES: dict[str, str] = runpy.run_path("gpuforge/assets/__init__.py")["REPOSITORY_FILES"]
COPIED = {f"gpuforge.assets.{name}": path for name, path in REPOSITORY_FILES.items()}


def files_under(top: str) -> list[str]:
    """Every file below `top`, relative to it (symlinks followed: the wheel holds plain files)."""
    return sorted(
        p.relative_to(top).as_posix()
        for p in Path(top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".retry")
    )


setup(
    packages=[*find_packages(include=["gpuforge", "gpuforge.*"]), *COPIED],
    package_dir=COPIED,
    package_data={
        # Data directories are not packages: name their files from the package above them.
        "gpuforge.assets": [f"{d}/{f}" for d in ("templates", "playbooks", "monitoring", "crds")
                            for f in files_under(f"gpuforge/assets/{d}")],
        "gpuforge.catalog": [f"data/{f}" for f in files_under("gpuforge/catalog/data")],
        **{name: files_under(path) for name, path in COPIED.items()},
    },
)
