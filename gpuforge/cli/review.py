"""Review and deployment commands: `gpuforge diff`, and `preview|up|destroy|outputs` through the
Automation API. Registered on the main app by gpuforge.cli (kept apart so cli.py stays small)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markdown import Markdown
from rich.markup import escape

from gpuforge.cli.common import write_output
from gpuforge.console import err, out

StackArg = Annotated[str, typer.Argument(help="A stack name in stacks/ (dev, prod, ...).", show_default=False)]


def diff(
    base: Annotated[str, typer.Argument(help="Base side: a plan JSON file or a git revision (main, HEAD~1, a SHA).")],
    head: Annotated[str, typer.Argument(help="Head side: a plan JSON file or a git revision.")],
    stack: Annotated[str | None, typer.Option("--stack", "-s", help="Stack to plan at a git revision.")] = None,
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the diff as JSON here ('-': stdout).")] = None,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Write the diff as Markdown (a PR comment).")
    ] = None,
    fail_on_data_loss: Annotated[
        bool, typer.Option(help="Exit 1 when the change deletes or replaces a bucket, file system or key.")
    ] = False,
    fail_on_compute_loss: Annotated[
        bool,
        typer.Option(
            help="Exit 1 when the change terminates nodes outright (a node group deleted or replaced, an instance "
            "type changed), not when nodes roll through their group's update strategy."
        ),
    ] = False,
) -> None:
    """GPU-aware diff of two plans: resources created/updated/replaced/deleted, GPUs and nodes, nodes
    that roll or are terminated, power and cost deltas, storage, policy results, and data-loss warnings.
    Exit 0, or 1 with --fail-on-data-loss / --fail-on-compute-loss when the change does that; 2 when a
    side cannot be read."""
    from gpuforge.review.diff import DiffError, diff_plans, load_side, render_markdown

    try:
        # Planning a git revision takes a while (a worktree, the whole program): say so on stderr.
        with err.status(f"loading {base} and {head}" + (f" (stack {stack})" if stack else "") + " ..."):
            base_plan, base_label = load_side(base, stack)
            head_plan, head_label = load_side(head, stack)
    except DiffError as error:
        err.print(f"[bold red]cannot diff[/]: {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    result = diff_plans(base_plan, head_plan, base_label, head_label)
    text = render_markdown(result)
    if json_file is not None and str(json_file) == "-":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        out.print(Markdown(text))
        if json_file is not None:
            write_output(json_file, json.dumps(result.to_json(), indent=2) + "\n")
    if markdown is not None:
        write_output(markdown, text, announce=json_file is None or str(json_file) != "-")
    if fail_on_data_loss and result.risks:
        raise typer.Exit(1)
    if fail_on_compute_loss and result.nodes_terminated:
        err.print(
            f"[bold red]compute loss[/]: {result.nodes_terminated} nodes ({result.gpus_terminated} GPUs) terminated",
            highlight=False,
        )
        raise typer.Exit(1)


def _engine(action: str, stack: str) -> Any:
    from gpuforge import deploy

    try:
        if action == "outputs":
            return deploy.outputs(stack)
        return getattr(deploy, action)(
            stack, on_output=lambda line: out.print(line, end="", markup=False, highlight=False)
        )
    except deploy.PulumiMissing as error:
        err.print(f"[bold red]{action}[/]: {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except Exception as error:  # the Automation API raises CommandError subclasses with the CLI's stderr
        from pulumi.automation import CommandError

        if isinstance(error, CommandError):
            err.print(f"[bold red]{action} failed[/]: {escape(str(error))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
        raise


def preview(stack: StackArg) -> None:
    """`pulumi preview` of the stack with every policy pack in policies/ attached (needs the Pulumi CLI)."""
    _engine("preview", stack)


def up(stack: StackArg) -> None:
    """`pulumi up` of the stack with the policy packs attached (needs the Pulumi CLI and credentials)."""
    _engine("up", stack)


def destroy(
    stack: StackArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """`pulumi destroy` of the stack. Protected resources (prod data) make it fail, by design."""
    from gpuforge import deploy

    if deploy.pulumi_cli() is None:  # say so before asking, not after the user typed yes
        err.print(f"[bold red]destroy[/]: {escape(str(deploy.PulumiMissing()))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    if not yes:
        typer.confirm(f"Destroy every resource of stack {stack!r}?", abort=True)
    _engine("destroy", stack)


def outputs(stack: StackArg) -> None:
    """The stack's outputs as JSON (what `gpuforge bake` turns into an inventory)."""
    sys.stdout.write(json.dumps(_engine("outputs", stack), indent=2, default=str) + "\n")


def register(app: typer.Typer) -> None:
    for command in (diff, preview, up, destroy, outputs):
        app.command()(command)
