"""The real engine through Pulumi's Automation API: preview, up, destroy, outputs.

The program is the repository's own (work_dir = project root, Pulumi.yaml there, stack files in
stacks/), and every policy pack under policies/<pack>/PulumiPolicy.yaml is attached to preview
and up, as `pulumi preview --policy-pack policies/<pack>` would. The Automation API drives the
`pulumi` CLI, so without it on PATH these commands stop with the install step instead.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from gpuforge.plan.stacks import Project, find_project

INSTALL_URL = "https://www.pulumi.com/docs/install/"


class PulumiMissing(RuntimeError):
    def __init__(self) -> None:
        super().__init__(
            "the Pulumi CLI is not on PATH: `gpuforge preview|up|destroy|outputs` drive the real engine "
            f"through it. Install it ({INSTALL_URL}, e.g. `curl -fsSL https://get.pulumi.com | sh`), "
            "log in to a backend (`pulumi login` or `pulumi login --local`), then retry. "
            "`gpuforge plan` works without it."
        )


def pulumi_cli() -> str | None:
    return shutil.which("pulumi")


def policy_packs(project: Project) -> list[str]:
    """Every directory under the project's policies/ with a PulumiPolicy.yaml, as `--policy-pack`
    paths (`gpuforge init` scaffolds the three packs into a new repository)."""
    return sorted(str(p.parent) for p in (project.root / "policies").glob("*/PulumiPolicy.yaml"))


def select_stack(stack: str, project: Project) -> Any:
    """The named stack of the project's program (created on first use), or PulumiMissing."""
    if pulumi_cli() is None:
        raise PulumiMissing()
    from pulumi import automation as auto

    return auto.create_or_select_stack(stack_name=stack, work_dir=str(project.root))


def preview(stack: str, on_output: Callable[[str], Any] = print, project: Project | None = None) -> Any:
    project = project or find_project()
    return select_stack(stack, project).preview(policy_packs=policy_packs(project), on_output=on_output, diff=True)


def up(stack: str, on_output: Callable[[str], Any] = print, project: Project | None = None) -> Any:
    project = project or find_project()
    return select_stack(stack, project).up(policy_packs=policy_packs(project), on_output=on_output)


def destroy(stack: str, on_output: Callable[[str], Any] = print, project: Project | None = None) -> Any:
    return select_stack(stack, project or find_project()).destroy(on_output=on_output)


def outputs(stack: str, project: Project | None = None) -> dict[str, Any]:
    return {key: value.value for key, value in select_stack(stack, project or find_project()).outputs().items()}
