"""Stack files: find one by name in stacks/ or by path, and read its config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.spec import SpecError, SpecIssue
from components.spec.loader import parse_yaml, read_stack_text
from components.spec.suggest import did_you_mean, suggestion

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CLUSTER_KEY = "gpuforge:cluster"


@dataclass(frozen=True)
class StackFile:
    name: str
    path: Path
    config: dict[str, Any]

    @property
    def cluster(self) -> Any:
        return self.config.get(CLUSTER_KEY)


def find_stack(stack: str | Path, root: Path = PROJECT_ROOT) -> Path:
    """A stack name found in stacks/ (dev -> stacks/Pulumi.dev.yaml) or a path to a stack file."""
    candidate = Path(stack)
    named = root / "stacks" / f"Pulumi.{stack}.yaml"
    try:
        if candidate.suffix in (".yaml", ".yml") and candidate.exists():
            return candidate
        if named.exists():
            return named
    except (OSError, ValueError):  # a name no file system takes (NUL bytes, too long)
        pass
    known = sorted(
        p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (root / "stacks").glob("Pulumi.*.yaml")
    )
    if candidate.suffix in (".yaml", ".yml") or "/" in str(stack):
        raise SpecError([SpecIssue("stack", f"no file {str(stack)!r}", "check the path")])
    hint = suggestion(str(stack), known)
    raise SpecError(
        [SpecIssue("stack", f"no stack {str(stack)!r}", hint or f"use one of {', '.join(known)} or a file path")]
    )


def load_stack(stack: str | Path, root: Path = PROJECT_ROOT) -> StackFile:
    """Read a stack file through the one YAML reader (components/spec/loader.py); a SpecError names
    the file for anything wrong with it (encoding, syntax, duplicate keys, shape)."""
    path = find_stack(stack, root)
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
    return StackFile(name, path, config)


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "text"
    return f"a {type(value).__name__}"
