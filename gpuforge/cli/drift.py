"""`gpuforge drift STACK`: the nodes whose driver, NCCL or EFA installer differ from what the stack pins, or whose
kernel differs from their group's, read from the software-versions collector's series in Prometheus
(gpuforge/nodes/drift.py compares)."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from gpuforge.cli.common import fail
from gpuforge.console import err, out
from gpuforge.spec import SpecError

if TYPE_CHECKING:
    from gpuforge.nodes.drift import DriftReport

QUERY_TIMEOUT_S = 30


def query_prometheus(url: str, query: str) -> Any:
    """GET <url>/api/v1/query?query=... and its JSON; OSError (urllib's errors) when there is no answer."""
    address = url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(address, timeout=QUERY_TIMEOUT_S) as response:
        return json.load(response)


def drift(
    stack: Annotated[str, typer.Argument(help="A stack name in stacks/ (dev, prod, ...).", show_default=False)],
    prometheus: Annotated[
        str | None,
        typer.Option(
            "--prometheus",
            help="The stack's Prometheus (http(s)://host:9090, e.g. through an SSH tunnel): queried for "
            "gpuforge_node_software_info.",
        ),
    ] = None,
    series: Annotated[
        Path | None,
        typer.Option(
            "--series",
            help="A saved answer of Prometheus' HTTP API instead "
            "(GET /api/v1/query?query=gpuforge_node_software_info).",
        ),
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print {stack, nodes, drifted, differences: [{instance, node_group, component, found, expected}], "
            "not_compared} on stdout.",
        ),
    ] = False,
) -> None:
    """The nodes whose software differs from what the stack pins, from what each node reports (the
    software-versions textfile collector: gpuforge_node_software_info, labelled with the node's instance and
    node_group by Prometheus).

    Compared per node group, with the pins the stack's inventory gives it (`gpuforge inventory STACK`): the
    NVIDIA driver's branch (software.nvidia_driver_branch) and the NCCL package
    (<software.nccl_version>-1+cuda<software.nccl_cuda_version>) on GPU groups, the EFA installer
    (software.efa_installer_version) on EFA groups; a pinned component a node does not report is drift; a
    node whose kernel differs from the one most of its group runs is named too. Nodes of no node group of the
    stack (controllers, monitoring hosts) are listed as not compared.

    Examples: `gpuforge drift prod --prometheus http://localhost:9090`;
    `gpuforge drift onprem-lab --series software.json --json`.

    Exit 0 when no node drifted, 1 when one did or Prometheus did not answer, 2 for a bad option, file or spec."""
    from gpuforge.nodes.drift import (
        SOFTWARE_SERIES,
        SeriesFormatError,
        find_drift,
        parse_query_result,
        pins_from_inventory,
    )
    from gpuforge.nodes.inventory import build_inventory

    if (prometheus is None) == (series is None):
        raise typer.BadParameter("give one of --prometheus URL or --series FILE", param_hint="--prometheus/--series")
    if prometheus is not None and urllib.parse.urlsplit(prometheus).scheme not in ("http", "https"):
        raise typer.BadParameter(f"{prometheus!r}: expected an http(s):// URL", param_hint="--prometheus")
    try:
        pins = pins_from_inventory(build_inventory(stack, source="plan"))
    except SpecError as error:
        fail(error)
    if series is not None:
        try:
            document = json.loads(series.read_text())
        except (OSError, ValueError) as error:
            raise typer.BadParameter(f"{series}: {error}", param_hint="--series") from None
    else:
        assert prometheus is not None
        try:
            document = query_prometheus(prometheus, SOFTWARE_SERIES)
        except (OSError, ValueError) as error:
            err.print(f"[bold red]no answer[/]: {escape(prometheus)}: {escape(str(error))}", highlight=False)
            raise typer.Exit(1) from None
    try:
        nodes = parse_query_result(document)
    except SeriesFormatError as error:
        where = str(series) if series is not None else prometheus
        err.print(f"[bold red]not the software series[/]: {escape(str(where))}: {escape(str(error))}", highlight=False)
        raise typer.Exit(2) from None
    report = find_drift(nodes, pins)
    if json_out:
        sys.stdout.write(json.dumps({"stack": stack, **report.to_json()}, indent=2) + "\n")
    else:
        print_report(stack, report)
    if report.differences:
        raise typer.Exit(1)


def print_report(stack: str, report: DriftReport) -> None:
    if not report.nodes:
        out.print(
            f"drift {escape(stack)}: no node reports its software (is the software-versions collector installed, "
            "node_textfile_collectors_software, and node_exporter scraped?)",
            highlight=False,
            soft_wrap=True,
        )
    elif not report.differences:
        out.print(f"drift {escape(stack)}: {len(report.nodes)} node(s) run what the stack pins", highlight=False)
    else:
        table = Table("node group", "node", "component", "found", "expected", title=f"drift {stack}")
        for d in report.differences:
            found = escape(d.found) if d.found is not None else "[yellow](not reported)[/]"
            table.add_row(escape(d.node_group), escape(d.instance), d.component, found, escape(d.expected))
        out.print(table)
        drifted = len({d.instance for d in report.differences})
        out.print(f"{drifted} of {len(report.nodes)} node(s) drifted", highlight=False)
    if report.not_compared:
        out.print(
            f"not compared (no node group of the stack's: controllers, monitoring hosts): "
            f"{escape(', '.join(report.not_compared))}",
            highlight=False,
            soft_wrap=True,
        )


def register(app: typer.Typer) -> None:
    app.command()(drift)
