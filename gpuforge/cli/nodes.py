"""Node commands: `gpuforge inventory`, `bake` and `check`. Registered on the main app by
gpuforge.cli; the work itself lives in inventory.py, bake.py and check.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

import typer
import yaml
from rich.markup import escape
from rich.table import Table

from gpuforge.console import err, out
from gpuforge.nodes.bake import EventHandler, PlaybookResult
from gpuforge.nodes.check import ALL_CHECKS, DrainMethod
from gpuforge.spec import SpecError

StackArg = Annotated[str, typer.Argument(help="A stack name in stacks/ (dev, prod, ...).", show_default=False)]
TargetOpt = Annotated[
    str,
    typer.Option(
        "--target",
        help="hosts: the stack's nodes over SSH (AWS: the aws_ec2 plugin finds each ASG's instances); "
        "rootfs:PATH: a root file system through the chroot connection, as an image build does.",
    ),
]
NodeGroupOpt = Annotated[
    str | None, typer.Option("--node-group", help="With rootfs: whose variables to apply (default: the first).")
]
LimitOpt = Annotated[str | None, typer.Option("--limit", help="Ansible host pattern to restrict the run to.")]
InventoryOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--inventory",
        "-i",
        help="Extra inventory (hosts file, directory or aws_ec2 plugin config) merged over the stack's "
        "groups and variables; repeatable. Put hosts in `ng_<group>` (see `gpuforge inventory STACK`).",
    ),
]
UserOpt = Annotated[str | None, typer.Option("--user", "-u", help="SSH user (ansible --user).")]
PrivateKeyOpt = Annotated[
    Path | None, typer.Option("--private-key", help="SSH private key file (ansible --private-key).")
]
ForksOpt = Annotated[int | None, typer.Option("--forks", min=1, help="Hosts run in parallel (ansible --forks).")]
FloorOpt = Annotated[
    float, typer.Option("--floor-fraction", help="Bus bandwidth floor as a fraction of the catalog's reference.")
]


def _usage_error(message: str) -> typer.Exit:
    err.print(f"[bold red]error[/]: {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


class OutputsSource(StrEnum):
    """Where `gpuforge inventory` reads the stack's outputs (shown as choices in --help)."""

    auto = "auto"
    stack = "stack"
    plan = "plan"


def inventory(
    stack: StackArg,
    source: Annotated[
        OutputsSource,
        typer.Option(
            help="stack: the deployed stack's outputs (Pulumi CLI); plan: the offline plan; auto: stack when "
            "the Pulumi CLI has it, else plan."
        ),
    ] = OutputsSource.auto,
    floor_fraction: FloorOpt = 0.8,
    aws_ec2: Annotated[
        bool, typer.Option("--aws-ec2", help="Print the amazon.aws.aws_ec2 plugin config that fills each group.")
    ] = False,
) -> None:
    """Print the Ansible inventory (YAML) for a stack: groups per node group (ng_*) and role (role_*),
    with fabric, instance type, GPU count and NCCL settings as group vars."""
    from gpuforge.nodes.inventory import ENGINE_ONLY, aws_ec2_inventory, build_inventory, engine_only_values

    origin: Literal["auto", "stack", "plan"] = source.value
    try:
        with err.status(f"reading the outputs of {stack} ({origin}) ..."):
            document = (
                aws_ec2_inventory(stack, source=origin)
                if aws_ec2
                else build_inventory(stack, source=origin, floor_fraction=floor_fraction)
            )
    except (SpecError, RuntimeError) as error:
        raise _usage_error(error.report() if isinstance(error, SpecError) else str(error)) from None
    if not aws_ec2 and document["all"]["vars"].get("gpuforge_outputs_source") == "plan":
        unknown = engine_only_values(document)
        detail = (
            f"; {len(unknown)} value(s) only the deployed stack knows read {ENGINE_ONLY!r} "
            f"({', '.join(sorted({path.rsplit('.', 2)[-2] for path in unknown}))})"
            if unknown
            else ""
        )
        err.print(
            f"[yellow]warning[/]: stack {escape(stack)}: outputs from the offline plan, not a deployed stack"
            f"{escape(detail)}. Deploy it (pulumi up) and use --source stack for the real values.",
            highlight=False,
            soft_wrap=True,
        )
    sys.stdout.write(yaml.safe_dump(document, sort_keys=False))


def _recap(result: PlaybookResult) -> None:
    table = Table("host", "ok", "changed", "failed", "unreachable", "skipped", title=f"{result.playbook}: summary")
    for host, ok, changed, failed, unreachable, skipped in result.summary_rows():
        table.add_row(
            escape(host),
            str(ok),
            str(changed),
            f"[red]{failed}[/]" if failed else "0",
            f"[red]{unreachable}[/]" if unreachable else "0",
            str(skipped),
        )
    out.print(table)
    for failure in result.failures:
        err.print(f"[red]failed[/] {escape(failure.host)}: {escape(failure.task)}: {escape(failure.message)}")


@contextmanager
def _progress(json_out: bool, title: str) -> Iterator[EventHandler | None]:
    """The event handler for a run: none for --json, a live table on a terminal, lines in a log."""
    from gpuforge.nodes.progress import LiveProgress, line_printer

    if json_out:
        yield None
    elif out.is_terminal:
        with LiveProgress(out, title) as live:
            yield live.handle
    else:
        yield line_printer(out.print)


def bake(
    stack: StackArg,
    target: TargetOpt = "hosts",
    node_group: NodeGroupOpt = None,
    inventory_files: InventoryOpt = None,
    user: UserOpt = None,
    private_key: PrivateKeyOpt = None,
    extra_vars: Annotated[
        list[str] | None,
        typer.Option("--extra-vars", "-e", help="KEY=VALUE, a YAML/JSON mapping or @FILE; repeatable, later wins."),
    ] = None,
    forks: ForksOpt = None,
    limit: LimitOpt = None,
    check: Annotated[bool, typer.Option("--check", help="Ansible check mode: report what would change.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the run as JSON: per-host counts, failures.")] = False,
) -> None:
    """Run the playbooks through ansible-runner: site.yml on live nodes over SSH, or bake-image.yml into a
    root file system. Live progress per host and role, then ok/changed/failed/unreachable per host.
    Exit 1 when a host failed or no host matched, 2 on a usage mistake."""
    from gpuforge.nodes.bake import NoHostsMatched, parse_extra_vars
    from gpuforge.nodes.bake import bake as run_bake

    try:
        extravars = parse_extra_vars(extra_vars or [])
        with _progress(json_out, f"gpuforge bake {stack}") as on_event:
            result = run_bake(
                stack,
                target=target,
                check=check,
                limit=limit,
                node_group=node_group,
                on_event=on_event,
                extravars=extravars,
                inventory_files=inventory_files or [],
                user=user,
                private_key=private_key,
                forks=forks,
            )
    except NoHostsMatched as error:
        if json_out:
            nothing = {"ok": False, "hosts": {}, "failures": [], "reason": str(error)}
            sys.stdout.write(json.dumps(nothing, indent=2) + "\n")
        else:
            err.print(f"[bold red]error[/]: {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    except (SpecError, FileNotFoundError, ValueError) as error:
        raise _usage_error(error.report() if isinstance(error, SpecError) else str(error)) from None
    if json_out:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        _recap(result)
    if not result.ok:
        raise typer.Exit(1)


def check(
    stack: StackArg,
    target: TargetOpt = "hosts",
    node_group: NodeGroupOpt = None,
    checks: Annotated[str, typer.Option(help="Comma-separated: " + ",".join(ALL_CHECKS))] = ",".join(ALL_CHECKS),
    dcgm_level: Annotated[int, typer.Option(help="dcgmi diag run level (1 quick ... 4 long).", min=1, max=4)] = 2,
    floor_fraction: FloorOpt = 0.8,
    limit: LimitOpt = None,
    drain: Annotated[str, typer.Option(help="How failing nodes are drained: none, slurm or kubernetes.")] = "none",
    execute_drain: Annotated[bool, typer.Option(help="Run the drain commands (default: print them).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    inventory_files: InventoryOpt = None,
    user: UserOpt = None,
    private_key: PrivateKeyOpt = None,
    forks: ForksOpt = None,
) -> None:
    """Health and fabric acceptance: GPUs and driver, DCGM diagnostics, NVLink, XID errors, EFA or
    InfiniBand ports, and nccl-tests bus bandwidth against the catalog's floor. Exit 1 names failing
    nodes and their reasons, or says that no host was checked (zero hosts checked is not a pass)."""
    from gpuforge.nodes.check import check as run_check

    selected = tuple(c.strip() for c in checks.split(",") if c.strip())
    unknown = sorted(set(selected) - set(ALL_CHECKS))
    if unknown:
        raise _usage_error(f"--checks: unknown {', '.join(unknown)}; use {', '.join(ALL_CHECKS)}")
    if drain not in ("none", "slurm", "kubernetes"):
        raise _usage_error(f"--drain {drain}: use none, slurm or kubernetes")
    method: DrainMethod = drain  # type: ignore[assignment]
    try:
        with _progress(json_out, f"gpuforge check {stack}") as on_event:
            report = run_check(
                stack,
                target=target,
                node_group=node_group,
                checks=selected,
                dcgm_level=dcgm_level,
                floor_fraction=floor_fraction,
                limit=limit,
                drain=method,
                execute_drain=execute_drain,
                on_event=on_event,
                inventory_files=inventory_files or [],
                user=user,
                private_key=private_key,
                forks=forks,
            )
    except (SpecError, FileNotFoundError, ValueError) as error:
        raise _usage_error(error.report() if isinstance(error, SpecError) else str(error)) from None
    if json_out:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        _recap(report.playbook)
        for node in report.nodes:
            status = "[green]healthy[/]" if node.healthy else "[red]FAILING[/]"
            out.print(f"{escape(node.host)}: {status}")
            for problem in node.problems:
                out.print(f"  - {escape(problem)}")
        where = "on the Slurm controller " if drain == "slurm" else ""
        for command in report.drain_commands:
            out.print((f"ran {where}" if execute_drain else "drain with: ") + " ".join(command))
        if report.drain is not None and not report.drain.ok:
            _recap(report.drain)
        if report.reason:
            err.print(f"[bold red]not ok[/]: {escape(report.reason)}", highlight=False, soft_wrap=True)
    if not report.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(inventory)
    app.command()(bake)
    app.command()(check)
