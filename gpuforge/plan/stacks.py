"""Stack files: find one by name in stacks/ or by path, and read its config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.spec import SpecError, SpecIssue
from components.spec.secrets import clear_text_secrets

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
    if candidate.suffix in (".yaml", ".yml") and candidate.exists():
        return candidate
    named = root / "stacks" / f"Pulumi.{stack}.yaml"
    if named.exists():
        return named
    known = sorted(
        p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (root / "stacks").glob("Pulumi.*.yaml")
    )
    raise SpecError([SpecIssue("stack", f"no stack {str(stack)!r}", f"use one of {', '.join(known)} or a file path")])


def load_stack(stack: str | Path, root: Path = PROJECT_ROOT) -> StackFile:
    path = find_stack(stack, root)
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise SpecError([SpecIssue("stack", f"not valid YAML: {exc}", "fix the YAML syntax")], str(path)) from None
    config = document.get("config") if isinstance(document, dict) else None
    if not isinstance(config, dict) or CLUSTER_KEY not in config:
        raise SpecError(
            [SpecIssue("config", f"no {CLUSTER_KEY} key", f"put the spec under config: {CLUSTER_KEY}:")], str(path)
        )
    secrets = clear_text_secrets(config)
    if secrets:
        raise SpecError(secrets, str(path))
    name = path.name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")
    return StackFile(name, path, config)
