"""`gpuforge capacity [STACK]`: how much cluster a training run needs (gpuforge/plan/capacity.py does the
arithmetic, gpuforge/review/capacity_report.py the telling)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuforge.cli.common import fail, write_output
from gpuforge.console import out
from gpuforge.spec import SpecError, SpecIssue

if TYPE_CHECKING:
    from gpuforge.spec import ResolvedSpec


def capacity(
    stack: Annotated[
        str | None,
        typer.Argument(
            help="A stack (name in stacks/ or path): its PUE, power budget, catalog overrides (prices, GPU figures) "
            "and, without --node-type, its training node types. Without it: the catalog's PUE and no budget.",
            show_default=False,
        ),
    ] = None,
    params: Annotated[
        str | None, typer.Option("--params", help="Model parameters N: 70B, 7e10 (suffixes K, M, B, T).")
    ] = None,
    tokens: Annotated[str | None, typer.Option("--tokens", help="Training tokens D: 2T, 1.5e12.")] = None,
    flops: Annotated[
        str | None, typer.Option("--flops", help="Total training FLOPs instead of --params/--tokens: 8.4e23.")
    ] = None,
    precision: Annotated[
        str, typer.Option("--precision", help="The Tensor Core precision the run computes in: tf32, bf16, fp16, fp8.")
    ] = "bf16",
    mfu: Annotated[
        float | None,
        typer.Option(
            "--mfu",
            help="Model FLOPs utilization, 0-1. Default: the catalog's published figure for the GPU's "
            "generation, cited in the answer (docs/capacity.md lists them); GPUs without one need it.",
        ),
    ] = None,
    days: Annotated[
        float | None, typer.Option("--days", help="Deadline in days: how many nodes finish by then.")
    ] = None,
    nodes: Annotated[
        int | None, typer.Option("--nodes", help="Node count: how many days the run takes on them.")
    ] = None,
    node_type: Annotated[
        str | None,
        typer.Option("--node-type", help="An instance type or server model of the catalog (p5.48xlarge, dgx-h100)."),
    ] = None,
    compare: Annotated[
        bool,
        typer.Option("--compare", help="Side by side for the catalog's GPU node types (training instances, servers)."),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the estimate as JSON on stdout.")] = False,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Write the estimate as Markdown (for a PR).")
    ] = None,
) -> None:
    """How much cluster a training run needs. From the run's FLOPs (6 x N x D: Kaplan et al. 2020, Hoffmann
    et al. 2022; or --flops), the GPU's peak dense throughput at --precision (catalog) and the MFU, for a
    deadline (--days: nodes) or a node count (--nodes: days): GPU-hours, node-hours, cost at the catalog's
    on-demand and Capacity Block rates, energy (IT and x PUE) and the run's peak facility power against the
    stack's power budget. Every figure says where it comes from.

    Example: `gpuforge capacity --params 70B --tokens 2T --node-type p5.48xlarge --days 30` (8.4e23 FLOPs
    over the H100's dense bf16 TFLOPS x MFU: GPU-hours, then the nodes that finish in 30 days). `--compare`
    puts the catalog's node types side by side. Exit 0 with an answer, 1 when no node type fits the power
    budget, 2 for bad input."""
    from gpuforge.catalog import load_catalog
    from gpuforge.plan.capacity import plan_capacity
    from gpuforge.plan.capacity_input import check_node_types, check_workload, facility_of
    from gpuforge.review.capacity_report import console_capacity, markdown_capacity

    try:
        workload = check_workload(
            params=params, tokens=tokens, flops=flops, precision=precision, mfu=mfu, days=days, nodes=nodes
        )
        resolved = _resolved(stack) if stack is not None else None
        catalog = resolved.catalog if resolved is not None else load_catalog()
        node_types = check_node_types(catalog, node_type, compare, resolved)
    except SpecError as error:
        fail(error)
    plan = plan_capacity(catalog, workload, facility_of(catalog, resolved, stack), node_types)
    if not compare and not plan.estimated:  # the type asked for cannot answer: the user's input to change
        fail(SpecError([SpecIssue(e.skipped_for, e.skipped) for e in plan.estimates]))
    if json_out:
        sys.stdout.write(json.dumps(plan.to_json(), indent=2) + "\n")
    else:
        out.print(console_capacity(plan), highlight=False)
    if markdown is not None:
        write_output(markdown, markdown_capacity(plan), announce=not json_out)
    if plan.nothing_fits:
        raise typer.Exit(1)


def _resolved(stack: str) -> ResolvedSpec:
    from gpuforge.plan.stacks import load_stack
    from gpuforge.plan.validation import check_stack

    return check_stack(load_stack(stack)).resolved


def register(app: typer.Typer) -> None:
    app.command()(capacity)
