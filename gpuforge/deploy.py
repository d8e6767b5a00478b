"""The real engine through Pulumi's Automation API: preview, up, destroy, outputs.

The program is the repository's own (work_dir = project root, Pulumi.yaml there, stack files in
stacks/), and every policy pack under policies/<pack>/PulumiPolicy.yaml is attached to preview
and up, as `pulumi preview --policy-pack policies/<pack>` would. The Automation API drives the
`pulumi` CLI, so without it on PATH these commands stop with the install step instead.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuforge.plan.stacks import PROJECT_ROOT

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


def policy_packs(root: Path = PROJECT_ROOT) -> list[str]:
    """Every directory under policies/ with a PulumiPolicy.yaml, as `--policy-pack` paths."""
    return sorted(str(p.parent) for p in (root / "policies").glob("*/PulumiPolicy.yaml"))


def select_stack(stack: str, root: Path = PROJECT_ROOT) -> Any:
    """The named stack of the local program (created on first use), or PulumiMissing."""
    if pulumi_cli() is None:
        raise PulumiMissing()
    from pulumi import automation as auto

    return auto.create_or_select_stack(stack_name=stack, work_dir=str(root))


def preview(stack: str, on_output: Callable[[str], Any] = print, root: Path = PROJECT_ROOT) -> Any:
    return select_stack(stack, root).preview(policy_packs=policy_packs(root), on_output=on_output, diff=True)


def up(stack: str, on_output: Callable[[str], Any] = print, root: Path = PROJECT_ROOT) -> Any:
    return select_stack(stack, root).up(policy_packs=policy_packs(root), on_output=on_output)


def destroy(stack: str, on_output: Callable[[str], Any] = print, root: Path = PROJECT_ROOT) -> Any:
    return select_stack(stack, root).destroy(on_output=on_output)


def outputs(stack: str, root: Path = PROJECT_ROOT) -> dict[str, Any]:
    return {key: value.value for key, value in select_stack(stack, root).outputs().items()}
