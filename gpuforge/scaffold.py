"""`gpuforge init`: a new repository of stacks, laid out as this one is.

What it writes is what `pulumi` and gpuforge need to find each other: Pulumi.yaml (the project:
its stacks in stacks/, a Python program in .venv), the program, a first dev stack, the stack
file's JSON Schema for editors, the policy packs `pulumi preview --policy-pack` loads, and the
review and deploy workflows. Existing files are never overwritten.

requirements.txt installs gpuforge the way the running one was installed (PEP 610's direct_url.json
of the installed distribution): an index pin, a VCS commit, a URL, or a local wheel, which is copied
into wheels/ so the repository's CI installs the same file. The workflows install with
`pip install -r requirements.txt`, as `init`'s next step does.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

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
    source: InstallSource


@dataclass(frozen=True)
class InstallSource:
    """How requirements.txt installs gpuforge: the line, a local wheel to carry along, a warning."""

    requirement: str
    wheel: Path | None = None  # copied to wheels/<name>; the requirement names it relative to the repository
    warning: str | None = None  # the source is on this machine only: CI cannot install from it


def install_source(distribution: str = "gpuforge") -> InstallSource:
    """Where the installed gpuforge came from (pip records it in direct_url.json, PEP 610); an
    installation from an index records nothing, and is pinned to its version there."""
    # A checkout's build leaves a gpuforge.egg-info beside the code, which shadows the installed record
    # when run from there: the record pip wrote wins.
    found = list(metadata.distributions(name=distribution))
    dist = next((d for d in found if d.read_text("direct_url.json")), found[0])
    recorded = dist.read_text("direct_url.json")
    if not recorded:
        return InstallSource(f"gpuforge=={dist.version}")
    info = json.loads(recorded)
    url = str(info["url"])
    if "vcs_info" in info:
        vcs = info["vcs_info"]
        return InstallSource(f"gpuforge @ {vcs['vcs']}+{url}@{vcs['commit_id']}")
    if not url.startswith("file:"):
        return InstallSource(f"gpuforge @ {url}")
    path = Path(unquote(urlparse(url).path))
    if path.suffix == ".whl" and path.is_file():
        return InstallSource(f"./wheels/{path.name}", wheel=path)
    return InstallSource(
        f"gpuforge @ {url}",
        warning=f"gpuforge was installed from {path}, which only this machine has: requirements.txt names it, "
        "so CI cannot install it. Publish a wheel to your package index and pin gpuforge==VERSION, or build "
        "one (pip wheel --no-deps) and run init again with it installed",
    )


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
    source = install_source()
    files: dict[str, Callable[[], str]] = {
        "Pulumi.yaml": lambda: project_manifest(project),
        "__main__.py": lambda: PROGRAM,
        "requirements.txt": lambda: source.requirement + "\n",
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
    if source.wheel is not None:
        relative = f"wheels/{source.wheel.name}"
        if (directory / relative).exists():
            kept.append(relative)
        else:
            (directory / "wheels").mkdir(exist_ok=True)
            shutil.copyfile(source.wheel, directory / relative)
            written.append(relative)
    return Scaffolded(written, kept, source)



