"""`gpuforge init`: a new repository of stacks, laid out as this one is.

What it writes is what `pulumi` and gpuforge need to find each other: Pulumi.yaml (the project:
its stacks in stacks/, a Python program in .venv), the program, a first dev stack, the stack
file's JSON Schema for editors, the policy packs `pulumi preview --policy-pack` loads, and the
review and deploy workflows. Existing files are never overwritten.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuforge import __version__
from gpuforge.assets import repository_dir
from gpuforge.plan.schema import render_schema
from gpuforge.policy.rules import PACKS

PROGRAM = '''"""The Pulumi program of this project (the cluster itself is gpuforge.infra.program)."""

from gpuforge.infra.program import main

main()
'''
GITIGNORE = ".venv/\n__pycache__/\nout/\n"


@dataclass(frozen=True)
class Scaffolded:
    written: list[str]
    kept: list[str]  # already there, left as they were


def project_manifest(name: str) -> str:
    return (
        f"name: {name}\n"
        "description: GPU training clusters declared per environment (stacks/Pulumi.<env>.yaml).\n"
        "runtime:\n"
        "  name: python\n"
        "  options:\n"
        "    toolchain: pip\n"
        "    virtualenv: .venv\n"
        "stackConfigDir: stacks\n"
    )


def _copy(source: Path) -> Callable[[], str]:
    return lambda: source.read_text(encoding="utf-8")


def scaffold(directory: Path, name: str | None = None) -> Scaffolded:
    """Write a new project into `directory` (created if missing)."""
    project = name or re.sub(r"[^A-Za-z0-9_.-]", "-", directory.resolve().name) or "clusters"
    packs = repository_dir("policy_packs")
    files: dict[str, Callable[[], str]] = {
        "Pulumi.yaml": lambda: project_manifest(project),
        "__main__.py": lambda: PROGRAM,
        "requirements.txt": lambda: f"gpuforge=={__version__}\n",
        ".gitignore": lambda: GITIGNORE,
        "stacks/Pulumi.dev.yaml": _copy(repository_dir("stacks") / "Pulumi.dev.yaml"),
        "schemas/cluster.schema.json": render_schema,
        **{f".github/workflows/{w}": _copy(repository_dir("workflows") / w) for w in ("review.yml", "deploy.yml")},
        **{
            f"policy-packs/{pack}/{file}": _copy(packs / pack / file)
            for pack in PACKS
            for file in ("PulumiPolicy.yaml", "__main__.py")
        },
    }
    written, kept = [], []
    for relative, content in files.items():
        target = directory / relative
        if target.exists():
            kept.append(relative)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content(), encoding="utf-8")
        written.append(relative)
    return Scaffolded(written, kept)



