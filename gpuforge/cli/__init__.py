"""The gpuforge command line.

Exit codes: 0 success, 1 the plan or check found a blocking problem, 2 the input is
invalid (the report names every field at fault; no traceback for a user's mistake).

The command modules import their engines inside each command, on purpose: `gpuforge --help`, shell
completion and a mistyped command answer without importing the Pulumi SDKs and Ansible (seconds).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.markup import escape

from gpuforge.cli import metal, nodes, preflight, render, review
from gpuforge.console import err, out
from gpuforge.spec import SpecError

app = typer.Typer(
    help="Infrastructure as code for AI training clusters.\n\n"
    "Start with `gpuforge plan dev`: it validates stacks/Pulumi.dev.yaml, evaluates the real Pulumi "
    "program offline (no cloud credentials, no Pulumi CLI) and prints what would be created.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
    pretty_exceptions_show_locals=False,
)

StackArg = Annotated[
    str, typer.Argument(help="A stack name in stacks/ (dev, prod, ...) or a path to a stack file.", show_default=False)
]


def _print_version(value: bool) -> None:
    if value:
        from gpuforge import __version__

        out.print(f"gpuforge {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Infrastructure as code for AI training clusters."""


def fail(error: SpecError) -> NoReturn:
    err.print("[bold red]invalid spec[/]: " + escape(error.report()), highlight=False, soft_wrap=True)
    raise typer.Exit(2)


@app.command()
def validate(
    stack: StackArg,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print {valid, stack, problems: [{path, message, fix, line}]} on stdout.")
    ] = False,
) -> None:
    """Validate a stack: the cluster spec (models and catalog), its gpuforge:policy settings, and its
    waivers (expired, or matching no resource of the offline plan). Exit 0 valid, 2 not."""
    from datetime import date

    from gpuforge.plan.stacks import load_stack
    from gpuforge.plan.validation import check_stack, waiver_issues

    try:
        stack_file = load_stack(stack)
        checked = check_stack(stack_file)
        if checked.settings.policy.waivers:
            from gpuforge.plan.engine import run_program
            from gpuforge.plan.stacks import project_of

            resources, _ = run_program(stack_file, project_of(stack_file).program)
            issues = waiver_issues(checked.settings, resources, date.today())
            if issues:
                raise SpecError(issues, str(stack_file.path))
    except SpecError as error:
        if json_out:
            sys.stdout.write(json.dumps(_validation_json(str(stack), error)) + "\n")
            raise typer.Exit(2) from None
        fail(error)
    if json_out:
        sys.stdout.write(json.dumps(_validation_json(str(stack_file.path), None)) + "\n")
        return
    resolved = checked.resolved
    groups = ", ".join(
        f"{n} ({g.spec.nodes_text if g.spec.is_elastic else g.spec.count}x {g.spec.instance_type})"
        for n, g in resolved.node_groups.items()
    )
    hosts = f"{len(resolved.site.hosts)} site hosts" if resolved.site is not None else ""
    out.print(f"[green]valid[/]: {escape(str(stack_file.path))} — {escape(', '.join(p for p in (groups, hosts) if p))}")


def _validation_json(stack: str, error: SpecError | None) -> dict[str, object]:
    problems = [asdict(issue) for issue in error.issues] if error is not None else []
    return {"valid": error is None, "stack": error.source if error is not None and error.source else stack,
            "problems": problems}


@app.command()
def plan(
    stack: StackArg,
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the plan as JSON here ('-': stdout).")] = None,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Write a Markdown plan for a PR.")] = None,
    tree: Annotated[bool, typer.Option(help="Print the resource tree.")] = True,
) -> None:
    """Plan a stack offline: the real program under Pulumi's mock monitor, no credentials needed."""
    from gpuforge.plan.engine import plan_stack
    from gpuforge.review.report import console_plan, markdown_plan

    try:
        result = plan_stack(stack)
    except SpecError as error:
        fail(error)
    if json_file is not None and str(json_file) == "-":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
        raise typer.Exit(1 if result.policy is not None and result.policy.blocking else 0)
    out.print(console_plan(result, tree=tree))
    if json_file is not None:
        json_file.write_text(json.dumps(result.to_json(), indent=2) + "\n")
        out.print(f"wrote {json_file}")
    if markdown is not None:
        markdown.write_text(markdown_plan(result))
        out.print(f"wrote {markdown}")
    if result.policy is not None and result.policy.blocking:
        rules = ", ".join(sorted(result.policy.rule_ids("mandatory")))
        err.print(f"[bold red]blocked[/]: mandatory policy violations ({escape(rules)})", highlight=False)
        raise typer.Exit(1)


@app.command()
def policies(
    json_out: Annotated[bool, typer.Option("--json", help="Print the rules as JSON.")] = False,
) -> None:
    """List every policy rule: id, pack, default level per environment, and why (docs/policies.md)."""
    from gpuforge.plan.policy_check import rules_json, rules_table

    if json_out:
        sys.stdout.write(json.dumps(rules_json(), indent=2) + "\n")
    else:
        out.print(rules_table())


@app.command()
def schema(
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Print the JSON Schema of a stack file (what schemas/cluster.schema.json holds)."""
    from gpuforge.plan.schema import render_schema

    text = render_schema()
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)


DEPLOY_ORDER = {"dev": 0, "staging": 1, "prod": 2}


@app.command()
def stacks(
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object per stack (a CI matrix).")] = False,
) -> None:
    """List the project's stacks (Pulumi.<stack>.yaml in its stackConfigDir) in deploy order (dev,
    staging, prod): placement, region and environment, read from each stack file without planning it."""
    from gpuforge.plan.stacks import find_project, stack_summary

    try:
        rows = sorted(
            (stack_summary(name) for name in find_project().stack_names()),
            key=lambda row: (DEPLOY_ORDER.get(row["environment"] or "", 1), row["stack"]),
        )
    except SpecError as error:
        fail(error)
    if json_out:
        sys.stdout.write(json.dumps(rows) + "\n")
        return
    for row in rows:
        out.print(
            f"{row['stack']:<16} {row['placement'] or '?':<8} {row['region'] or '-':<12} {row['environment'] or '?'}",
            highlight=False,
        )


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(help="Where to create the project (default: here).")] = Path("."),
    name: Annotated[str | None, typer.Option(help="The Pulumi project name (default: the directory's).")] = None,
) -> None:
    """Start a repository of stacks: Pulumi.yaml, the program, stacks/Pulumi.dev.yaml, the schema,
    policy packs, the review/deploy workflows and a requirements.txt that installs this gpuforge the way
    it was installed (an index pin, a VCS commit, or the wheel, copied into wheels/). Existing files are kept."""
    from gpuforge.scaffold import scaffold

    done = scaffold(directory, name)
    for relative in done.written:
        out.print(f"[green]wrote[/] {escape(str(directory / relative))}", highlight=False)
    for relative in done.kept:
        out.print(f"[yellow]kept[/]  {escape(str(directory / relative))} (already there)", highlight=False)
    out.print(f"requirements.txt installs {escape(done.source.requirement)}", highlight=False)
    if done.source.warning:
        err.print(f"[yellow]warning[/]: {escape(done.source.warning)}", highlight=False, soft_wrap=True)
    out.print(
        f"next: cd {escape(str(directory))} && python -m venv .venv && .venv/bin/pip install -r requirements.txt "
        "&& .venv/bin/gpuforge plan dev",
        highlight=False,
    )


review.register(app)  # diff, preview, up, destroy, outputs
nodes.register(app)  # inventory, bake, check
preflight.register(app)  # preflight
app.add_typer(render.app, name="render")  # render slurm, render monitoring
app.add_typer(metal.app, name="metal")  # metal inventory, check, power, boot (Redfish)

