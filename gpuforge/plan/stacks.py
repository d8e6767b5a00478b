"""Stack files and the Pulumi project they belong to.

gpuforge finds its project the way `pulumi` does: the nearest Pulumi.yaml at or above the current
directory (or above the stack file named by path), its `stackConfigDir` holding
Pulumi.<stack>.yaml files and its `main` the program. A team's own repository of stacks works the
same as this one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuforge.spec import SpecError, SpecIssue
from gpuforge.spec.config_keys import CLUSTER_KEY
from gpuforge.spec.loader import parse_yaml, read_stack_text
from gpuforge.spec.secrets import ClearTextSecret, clear_text_secrets
from gpuforge.spec.suggest import did_you_mean, suggestion

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
    raise ProjectNotFound(begin)


class ProjectNotFound(SpecError):
    """No Pulumi.yaml at or above a directory: the user is outside a project, which is no spec problem
    and is reported as what it is."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        fix = "run gpuforge inside your stacks repository, or create one there with `gpuforge init`"
        super().__init__([SpecIssue("project", f"no {MANIFEST} at or above {directory}", fix)])

    def report(self) -> str:
        issue = self.issues[0]
        return f"{issue.message}; fix: {issue.fix}"


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
    # Clear-text secrets of the file as read: check_stack reports them beside every other problem.
    secrets: tuple[ClearTextSecret, ...] = field(default=(), repr=False)

    @property
    def cluster(self) -> Any:
        return self.config.get(CLUSTER_KEY)


def find_stack(stack: str | Path, project: Project | None = None) -> Path:
    """A stack name in the project's stack directory (dev -> stacks/Pulumi.dev.yaml) or a path to a
    stack file."""
    candidate = Path(stack)
    try:
        if candidate.suffix in (".yaml", ".yml") and candidate.exists():
            return candidate
    except (OSError, ValueError):  # a name no file system takes (NUL bytes, too long)
        pass
    project = project or find_project()
    named = project.stack_dir / f"Pulumi.{stack}.yaml"
    try:
        if named.exists():
            return named
    except (OSError, ValueError):
        pass
    if candidate.suffix in (".yaml", ".yml") or "/" in str(stack):
        raise SpecError([SpecIssue("stack", f"no file {str(stack)!r}", "check the path")])
    names = project.stack_names()
    known = ", ".join(names) or f"none yet in {project.stack_dir}"
    hint = suggestion(str(stack), names)
    raise SpecError([SpecIssue("stack", f"no stack {str(stack)!r}", hint or f"use one of: {known}; or a file path")])


def load_stack(stack: str | Path, project: Project | None = None) -> StackFile:
    """Read a stack file through the one YAML reader (gpuforge/spec/loader.py); a SpecError names
    the file for anything wrong with it (encoding, syntax, duplicate keys, shape)."""
    path = find_stack(stack, project)
    return stack_from_text(read_stack_text(path), path)


def stack_from_text(text: str, path: Path) -> StackFile:
    """A stack file's text, parsed and checked for its shape (config: gpuforge:cluster: ...)."""
    source = str(path)
    document = parse_yaml(text, source)
    if document is None:
        raise SpecError([SpecIssue("file", "is empty", f"write the stack as config: {CLUSTER_KEY}: ...")], source)
    if not isinstance(document, dict):
        raise SpecError(
            [SpecIssue("file", f"holds {_kind(document)}, not a mapping", f"write it as config: {CLUSTER_KEY}: ...")],
            source,
        )
    config = document.get("config")
    if not isinstance(config, dict):
        fix = f"put the spec under config: {CLUSTER_KEY}:"
        if config is None:
            near = did_you_mean("config", [str(k) for k in document])
            problem = "no config key" + (f"; {near[0]!r} looks like it" if near else "")
            fix = f"rename {near[0]} to config" if near else fix
        else:
            problem = f"config holds {_kind(config)}, not a mapping"
        raise SpecError([SpecIssue("config", problem, fix)], source)
    if CLUSTER_KEY not in config:
        near = did_you_mean(CLUSTER_KEY, [str(k) for k in config])
        raise SpecError(
            [
                SpecIssue(
                    "config",
                    f"no {CLUSTER_KEY} key" + (f"; {near[0]!r} looks like it" if near else ""),
                    f"rename {near[0]} to {CLUSTER_KEY}" if near else f"put the spec under config: {CLUSTER_KEY}:",
                )
            ],
            source,
        )
    name = path.name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")
    return StackFile(name, path, config, tuple(clear_text_secrets(config)))


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "text"
    return f"a {type(value).__name__}"


def project_of(stack_file: StackFile) -> Project:
    """The project a stack file belongs to: the one above it, else the current directory's (a stack
    file kept elsewhere, e.g. a scratch copy, is planned with the current project's program)."""
    try:
        return find_project(stack_file.path.parent)
    except SpecError:
        return find_project()


def stack_summary(stack: str) -> dict[str, str | None]:
    """Name, placement kind, AWS region and environment as the stack file states them (unvalidated:
    what a CI matrix needs to pick credentials and a GitHub environment)."""
    raw = load_stack(stack).cluster
    cluster: dict[str, Any] = raw if isinstance(raw, dict) else {}
    placement: dict[str, Any] = cluster["placement"] if isinstance(cluster.get("placement"), dict) else {}

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) else None

    return {
        "stack": stack,
        "placement": text(placement.get("kind")),
        "region": text(placement.get("region")),
        "environment": text(cluster.get("environment")),
    }
