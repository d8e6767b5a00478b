"""`gpuforge usage STACK`: GPU-hours (and energy, where recorded) by account, team, user and partition over a
window, from slurmdbd's job records on the running controller (gpuforge/nodes/usage_query.py asks over SSH,
gpuforge/nodes/usage.py adds up)."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from gpuforge.cli.common import fail
from gpuforge.console import err, out
from gpuforge.spec import SpecError

if TYPE_CHECKING:
    from gpuforge.nodes.usage import Usage, UsageReport

DEFAULT_DAYS = 7
RELATIVE = re.compile(r"^(\d+)([dh])$")
WHEN_HELP = "An ISO 8601 date or time (2026-11-20, 2026-11-20T08:00, UTC unless it names an offset) or an age: 36h, 7d."


def parse_when(option: str, value: str, now: datetime) -> datetime:
    """*value* as an aware datetime: ISO 8601 (UTC when it names no offset) or an age before *now* (7d, 36h)."""
    relative = RELATIVE.match(value.strip())
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2)
        return now - (timedelta(days=amount) if unit == "d" else timedelta(hours=amount))
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        expected = WHEN_HELP[0].lower() + WHEN_HELP[1:]
        raise typer.BadParameter(f"{value!r}: expected {expected}", param_hint=option) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def usage(
    stack: Annotated[str, typer.Argument(help="A stack name in stacks/ (dev, prod, ...).", show_default=False)],
    since: Annotated[
        str | None, typer.Option("--since", help=f"Start of the window. {WHEN_HELP} Default: --until minus 7 days.")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help=f"End of the window. {WHEN_HELP} Default: now.")] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print {since, until, source, total, accounts, teams, users, rows: [{account, user, partition, jobs, "
            "gpu_hours, energy?}], energy: {recorded, plugin, note, pue, pue_source}} on stdout.",
        ),
    ] = False,
    inventory_files: Annotated[
        list[Path] | None,
        typer.Option(
            "--inventory",
            "-i",
            help="Extra inventory merged over the stack's (as `gpuforge check` takes it): where the stack's "
            "slurm_controller address is not the one to reach it by. Repeatable.",
        ),
    ] = None,
    user: Annotated[str | None, typer.Option("--user", "-u", help="SSH user (ansible --user).")] = None,
    private_key: Annotated[
        Path | None, typer.Option("--private-key", help="SSH private key file (ansible --private-key).")
    ] = None,
) -> None:
    """GPU-hours by account, team, user and partition over a window, read from slurmdbd's job records with sacct
    on the stack's Slurm controller (over SSH, as `gpuforge check --drain slurm` reaches it; sudo there).

    Each job counts GPUs allocated (AllocTRES gres/gpu) x the part of its run inside the window: a job
    that started before --since or still runs at --until counts only its hours in between; each run of a
    requeued job counts. A team (monitoring.slurm_teams) counts its accounts' jobs. Where the nodes record
    energy (an acct_gather_energy plugin: ConsumedEnergy in the job records) it adds kWh, cut to the window
    the same way, and facility kWh with the stack's PUE (and its source); where they do not, it says so
    instead of printing zero (the monitoring's team:gpu_energy_kwh:1h measures GPU energy from DCGM either
    way).

    Examples: `gpuforge usage prod`; `gpuforge usage prod --since 30d --json`;
    `gpuforge usage onprem-lab --since 2026-11-01 --until 2026-12-01 -u admin`.

    Exit 0 with the report, 1 when no controller gave the records (unreachable, accounting off, slurmdbd
    down: the reason is printed), 2 for a bad option or spec."""
    from gpuforge.nodes.inventory import build_inventory
    from gpuforge.nodes.usage import SacctFormatError
    from gpuforge.nodes.usage_query import UsageUnavailable, collect_usage
    from gpuforge.plan.stacks import load_stack
    from gpuforge.plan.validation import check_stack
    from gpuforge.spec.monitoring import slurm_account_teams

    now = datetime.now(UTC)
    end = parse_when("--until", until, now) if until else now
    start = parse_when("--since", since, now) if since else end - timedelta(days=DEFAULT_DAYS)
    if start >= end:
        raise typer.BadParameter(f"--since {start.isoformat()} is not before --until {end.isoformat()}")
    for path in inventory_files or []:
        if not path.exists():
            raise typer.BadParameter(f"{path}: no such file or directory", param_hint="--inventory")
    try:
        resolved = check_stack(load_stack(stack)).resolved
        inventory = build_inventory(stack)
    except SpecError as error:
        fail(error)
    try:
        with err.status(f"reading job records from {escape(stack)}'s Slurm controller over SSH (sacct) ..."):
            report = collect_usage(
                [inventory, *(inventory_files or [])],
                start,
                end,
                pue=resolved.pue,
                pue_source=resolved.pue_source,
                account_teams=slurm_account_teams(resolved.spec.monitoring) if resolved.spec.monitoring else None,
                user=user,
                private_key=private_key,
            )
    except (UsageUnavailable, SacctFormatError) as error:
        err.print(f"[bold red]no usage[/]: {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    if json_out:
        sys.stdout.write(json.dumps({"stack": stack, **report.to_json()}, indent=2) + "\n")
    else:
        print_report(stack, report)


def _figures(usage: Usage, report: UsageReport) -> list[str]:
    from gpuforge.nodes.usage import JOULES_PER_KWH

    cells = [str(usage.jobs), f"{usage.gpu_hours:,.2f}"]
    if report.energy_note is None:
        kwh = usage.energy_j / JOULES_PER_KWH
        cells += [f"{kwh:,.2f}", f"{kwh * report.energy.pue:,.2f}"]
    return cells


def print_report(stack: str, report: UsageReport) -> None:
    window = f"{report.since.astimezone(UTC):%Y-%m-%d %H:%M} to {report.until.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    energy_columns = ["kWh (IT)", "kWh (facility)"] if report.energy_note is None else []
    table = Table("account", "user", "partition", "jobs", "GPU-hours", *energy_columns,
                  title=f"usage {stack}: {window}")
    for (account, user, partition), row in sorted(report.rows.items()):
        table.add_row(escape(account), escape(user), escape(partition), *_figures(row, report))
    table.add_section()
    for account, row in sorted(report.accounts.items()):
        table.add_row(f"[bold]{escape(account)}[/]", "(all)", "(all)", *_figures(row, report))
    if report.teams:
        table.add_section()
    for team, row in sorted(report.teams.items()):
        table.add_row(f"[bold]team {escape(team)}[/]", "(all)", "(all)", *_figures(row, report))
    table.add_row("[bold]total[/]", "", "", *_figures(report.total, report))
    if report.total.jobs:
        out.print(table)
    else:
        out.print(f"usage {escape(stack)}: no job ran in {window}", highlight=False)
    if report.energy_note is not None:
        out.print(f"[yellow]{escape(report.energy_note)}[/]", highlight=False, soft_wrap=True)
    else:
        out.print(f"facility kWh = IT kWh x PUE {report.energy.pue} ({escape(report.energy.pue_source)}); "
                  f"{report.total.jobs_with_energy} of {report.total.jobs} job(s) carry energy",
                  highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command()(usage)
