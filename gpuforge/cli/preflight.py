"""`gpuforge preflight STACK`: ask AWS, before `pulumi up`, what would make the deploy fail
(gpuforge/preflight.py does the asking)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from gpuforge.cli.common import fail
from gpuforge.console import err, out
from gpuforge.spec import SpecError

if TYPE_CHECKING:  # botocore loads only when preflight runs, not on every command
    from gpuforge.preflight import PreflightReport


def preflight(
    stack: Annotated[str, typer.Argument(help="A stack name in stacks/ or a path to a stack file.")],
    json_out: Annotated[
        bool, typer.Option("--json", help="Print {ok, problems, unchecked, checked} on stdout.")
    ] = False,
) -> None:
    """Check the stack against AWS with your credentials: reservations and Capacity Blocks (type, AZ,
    state, window, and the size against every group launching into one), the On-Demand vCPU quota per
    instance family, each group's AMI in the region, and the account's Auto Scaling service-linked role the
    cluster key names. A check AWS does not answer is listed as unchecked. Exit 0 when nothing would fail,
    1 on a finding or when nothing could be checked (no credentials, or none of the permissions: said once),
    2 for a spec error."""
    from gpuforge.preflight import preflight_stack

    try:
        report = preflight_stack(stack)
    except SpecError as error:
        fail(error)
    if json_out:
        sys.stdout.write(json.dumps(report.to_json()) + "\n")
    else:
        for finding in report.problems:
            out.print(f"[red]problem[/] {escape(str(finding))}", highlight=False)
        if report.identity or report.checked:
            for finding in report.unchecked:
                out.print(f"[yellow]unchecked[/] {escape(str(finding))}", highlight=False)
        for line in report.checked:
            out.print(f"[green]checked[/] {escape(line)}", highlight=False)
        out.print(f"preflight {escape(report.stack)} ({escape(report.region or 'no region')}): {_verdict(report)}",
                  highlight=False)
    if not report.ok:
        raise typer.Exit(1)


def _verdict(report: PreflightReport) -> str:
    if report.problems:
        return f"[red]{len(report.problems)} problem(s)[/]"
    reason = report.nothing_checked
    if reason is not None:
        fix = f"; fix: {report.unchecked[0].fix}" if not report.identity else ""
        return f"[red]nothing checked[/]: {escape(reason)}{escape(fix)}"
    unchecked = f", {len(report.unchecked)} unchecked" if report.unchecked else ""
    return f"[green]ok[/] ({len(report.checked)} checked{unchecked})"


def pin_images(
    stack: Annotated[str, typer.Argument(help="A stack name in stacks/ or a path to a stack file.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the AMIs; leave the stack file as it is.")] = False,
) -> None:
    """Resolve each group's image parameter (the Deep Learning AMI's, or the image pipeline's) to its AMI
    id now, and write it into the stack file as image.ami_id, so every launch, spare and replacement boots
    the same image and a newer one arrives only as a reviewed change. Needs AWS credentials.
    Exit 0 when written, 1 when a parameter or AMI cannot be resolved (nothing written), 2 for a spec error."""
    from gpuforge.pin import PinError, pin_stack

    try:
        pins = pin_stack(stack, dry_run=dry_run)
    except SpecError as error:
        fail(error)
    except PinError as error:
        err.print(f"[red]nothing pinned[/]\n{escape(str(error))}", highlight=False)
        raise typer.Exit(1) from None
    for pin in pins:
        out.print(f"{escape(pin.group)}: {escape(pin.parameter)} -> {pin.ami_id}", highlight=False)
    verb = "would pin" if dry_run else "pinned"
    out.print(f"{verb} {len(pins)} group(s)" + ("" if pins else ": every image is pinned already"))


def register(app: typer.Typer) -> None:
    app.command()(preflight)
    app.command("pin-images")(pin_images)
