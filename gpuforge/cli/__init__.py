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
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from gpuforge.cli import capacity, day_two, drift, metal, nodes, preflight, render, review, usage
from gpuforge.cli.common import cannot_write, fail, write_output
from gpuforge.console import err, out
from gpuforge.spec import SpecError

if TYPE_CHECKING:
    from gpuforge.plan.policy_check import PolicyReport

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


@app.command()
def validate(
    stack: StackArg,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print {valid, deploys, stack, problems: [{path, message, fix, line}], policies: [...]} on stdout.",
        ),
    ] = False,
    spec_only: Annotated[
        bool,
        typer.Option(
            "--spec-only", help="Check the file and spec only, without evaluating the program or the policy packs."
        ),
    ] = False,
) -> None:
    """Will this stack deploy? Checks the stack file, the cluster spec (models and catalog), its
    gpuforge:policy settings and waivers, that no secret is in clear text anywhere in the file (by key or
    by shape), then evaluates the program offline and runs the policy packs, as `pulumi preview
    --policy-pack` would. Every problem at once, no secret quoted. Exit 0 when it deploys, 1 when a
    mandatory policy blocks it, 2 when the spec is invalid. `gpuforge plan STACK` runs the same checks and
    prints the whole plan."""
    from datetime import date

    from gpuforge.plan.policy_check import check_plan
    from gpuforge.plan.secrets import stack_secrets
    from gpuforge.plan.stacks import load_stack
    from gpuforge.plan.validation import check_stack, waiver_issues

    report: PolicyReport | None = None
    try:
        stack_file = load_stack(stack)
        checked = check_stack(stack_file)
        if not spec_only:
            from gpuforge.plan.engine import run_program
            from gpuforge.plan.stacks import project_of

            resources, _ = run_program(stack_file, project_of(stack_file).program)
            issues = waiver_issues(checked.settings, resources, date.today())
            if issues:
                raise SpecError(issues, str(stack_file.path))
            report = check_plan(resources, stack_file.config, str(stack_file.path))
        unset = [s for s in stack_secrets(checked.resolved, stack_file.config) if s.state != "set"]
    except SpecError as error:
        if json_out:
            sys.stdout.write(json.dumps(_validation_json(str(stack), error, None)) + "\n")
            raise typer.Exit(2) from None
        fail(error)
    blocked = report is not None and report.blocking
    if json_out:
        document = _validation_json(str(stack_file.path), None, report)
        document["secrets_unset"] = [secret.to_json(stack_file.name) for secret in unset]
        sys.stdout.write(json.dumps(document) + "\n")
        raise typer.Exit(1 if blocked else 0)
    resolved = checked.resolved
    groups = ", ".join(
        f"{n} ({g.spec.nodes_text if g.spec.is_elastic else g.spec.count}x {g.spec.instance_type})"
        for n, g in resolved.node_groups.items()
    )
    hosts = f"{len(resolved.site.hosts)} site hosts" if resolved.site is not None else ""
    out.print(
        f"[green]spec valid[/]: {escape(str(stack_file.path))} — {escape(', '.join(p for p in (groups, hosts) if p))}"
    )
    for secret in unset:  # `pulumi up` fails without them; the offline checks read a placeholder
        out.print(
            f"[yellow]before up[/]: {escape(secret.config_key)} is {secret.state} in the stack file "
            f"({escape(secret.used_by)}): {escape(secret.command(stack_file.name))}",
            highlight=False,
            soft_wrap=True,
        )
    if report is None:
        out.print(
            f"policy packs not run (--spec-only): `gpuforge validate {escape(stack)}` without it says whether it "
            "deploys",
            highlight=False,
        )
        return
    _print_policy_verdict(report, stack, secrets_unset=len(unset))
    if blocked:
        raise typer.Exit(1)


def _print_policy_verdict(report: PolicyReport, stack: str, secrets_unset: int) -> None:
    counts = ", ".join(f"{len(report.by_level(level))} {level}" for level in ("mandatory", "advisory", "waived"))
    out.print(f"policies ({escape(report.environment)}): {report.rules_run} rules, {counts}", highlight=False)
    for finding in report.by_level("mandatory"):
        out.print(f"  [red]{escape(finding.rule)}[/] {escape(finding.message)}", highlight=False, soft_wrap=True)
    if report.blocking:
        rules = ", ".join(sorted(report.rule_ids("mandatory")))
        err.print(f"[bold red]blocked[/]: mandatory policy violations ({escape(rules)})", highlight=False)
    else:
        advisory = len(report.by_level("advisory"))
        listed = f" ({advisory} advisory: `gpuforge plan {escape(stack)}` lists them)" if advisory else ""
        then = f", once the {secrets_unset} secret(s) above are set" if secrets_unset else ""
        out.print(f"[green]deploys[/]: no mandatory policy blocks it{then}{listed}", highlight=False)


def _validation_json(stack: str, error: SpecError | None, report: PolicyReport | None) -> dict[str, object]:
    problems = [asdict(issue) for issue in error.issues] if error is not None else []
    return {
        "valid": error is None,
        # None: not known (--spec-only); false: an invalid spec or a mandatory policy blocks it
        "deploys": False if error is not None else (None if report is None else not report.blocking),
        "stack": error.source if error is not None and error.source else stack,
        "problems": problems,
        "policies": [finding.to_json() for finding in report.findings] if report is not None else None,
    }


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
        write_output(json_file, json.dumps(result.to_json(), indent=2) + "\n")
    if markdown is not None:
        write_output(markdown, markdown_plan(result))
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
        write_output(output, text, announce=False)


DEPLOY_ORDER = {"dev": 0, "staging": 1, "prod": 2}


@app.command()
def stacks(
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object per stack (a CI matrix).")] = False,
) -> None:
    """List the project's stacks (`Pulumi.<stack>.yaml` in its stackConfigDir) in deploy order (dev,
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

    try:
        done = scaffold(directory, name)
    except OSError as exc:
        cannot_write(directory, exc)
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
day_two.register(app)  # status, ssh
capacity.register(app)  # capacity
usage.register(app)  # usage
drift.register(app)  # drift
app.add_typer(render.app, name="render")  # render slurm, render monitoring
app.add_typer(metal.app, name="metal")  # metal inventory, check, power, boot (Redfish)

