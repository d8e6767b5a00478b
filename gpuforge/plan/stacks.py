"""Stack files and the Pulumi project they belong to.

gpuforge finds its project the way `pulumi` does: the nearest Pulumi.yaml at or above the current
directory (or above the stack file named by path), its `stackConfigDir` holding
Pulumi.<stack>.yaml files and its `main` the program. A team's own repository of stacks works the
same as this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.spec import SpecError, SpecIssue

CLUSTER_KEY = "gpuforge:cluster"
MANIFEST = "Pulumi.yaml"


@dataclass(frozen=True)
class Project:
    root: Path  # the directory holding Pulumi.yaml
    stack_dir: Path  # stackConfigDir: where Pulumi.<stack>.yaml files live
    program: Path  # the file `pulumi up` runs (main, else __main__.py)

    def stack_names(self) -> list[str]:
        files = self.stack_dir.glob("Pulumi.*.yaml")
        return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in files)


def find_project(start: Path | None = None) -> Project:
    """The project of the nearest Pulumi.yaml at or above `start` (default: the current directory)."""
    begin = (start or Path.cwd()).resolve()
    for directory in (begin, *begin.parents):
        if (directory / MANIFEST).is_file():
            return _read_project(directory)
    raise SpecError(
        [
            SpecIssue(
                "project",
                f"no {MANIFEST} in {begin} or any directory above it",
                "run gpuforge inside your stacks repository, or create one there with `gpuforge init`",
            )
        ]
    )


def _read_project(root: Path) -> Project:
    manifest = root / MANIFEST
    try:
        document = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise SpecError([SpecIssue("project", f"{manifest} is not readable YAML: {exc}", "fix its syntax")]) from None
    if not isinstance(document, dict):
        raise SpecError([SpecIssue("project", f"{manifest} is not a mapping", "see `gpuforge init` for one")])
    stack_dir = root / str(document.get("stackConfigDir") or ".")
    main = root / str(document.get("main") or ".")
    program = main / "__main__.py" if main.is_dir() else main
    return Project(root=root, stack_dir=stack_dir, program=program)


@dataclass(frozen=True)
class StackFile:
    name: str
    path: Path
    config: dict[str, Any]

    @property
    def cluster(self) -> Any:
        return self.config.get(CLUSTER_KEY)


def find_stack(stack: str | Path, project: Project | None = None) -> Path:
    """A stack name in the project's stack directory (dev -> stacks/Pulumi.dev.yaml) or a path to a
    stack file."""
    candidate = Path(stack)
    if candidate.suffix in (".yaml", ".yml") and candidate.exists():
        return candidate
    project = project or find_project()
    named = project.stack_dir / f"Pulumi.{stack}.yaml"
    if named.exists():
        return named
    known = ", ".join(project.stack_names()) or f"none yet in {project.stack_dir}"
    raise SpecError([SpecIssue("stack", f"no stack {str(stack)!r}", f"use one of: {known}; or a file path")])


def load_stack(stack: str | Path, project: Project | None = None) -> StackFile:
    path = find_stack(stack, project)
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise SpecError([SpecIssue("stack", f"not valid YAML: {exc}", "fix the YAML syntax")], str(path)) from None
    config = document.get("config") if isinstance(document, dict) else None
    if not isinstance(config, dict) or CLUSTER_KEY not in config:
        raise SpecError(
            [SpecIssue("config", f"no {CLUSTER_KEY} key", f"put the spec under config: {CLUSTER_KEY}:")], str(path)
        )
    name = path.name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")
    return StackFile(name, path, config)


def project_of(stack_file: StackFile) -> Project:
    """The project a stack file belongs to: the one above it, else the current directory's (a stack
    file kept elsewhere, e.g. a scratch copy, is planned with the current project's program)."""
    try:
        return find_project(stack_file.path.parent)
    except SpecError:
        return find_project()
