"""`gpuforge capacity` for people: a terminal table (one column per node type) and Markdown for a PR, each
followed by the basis of every figure and the assumptions. The JSON is CapacityPlan.to_json()."""

from __future__ import annotations

from collections.abc import Callable

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpuforge.plan.capacity import ASSUMPTIONS, CapacityPlan, Estimate, Figure

LABELS = {  # figure -> (its name, its header in the terminal's table; None: only in bases, JSON, Markdown)
    "peak_tflops_per_gpu": ("peak dense TFLOPS per GPU", "TFLOPS"),
    "mfu": ("MFU", "MFU"),
    "gpu_hours": ("GPU-hours", "GPU-h"),
    "nodes": ("nodes", "nodes"),
    "days": ("days", "days"),
    "node_hours": ("node-hours", None),
    "cost_on_demand": ("cost, on-demand", "on-demand"),
    "cost_reserved": ("cost, Capacity Block", "block"),
    "energy_it_kwh": ("energy, IT (kWh)", None),
    "energy_facility_kwh": ("energy, facility (kWh)", "kWh"),
    "peak_facility_kw": ("peak facility power (kW)", "peak kW"),
    "budget_share": ("share of power budget", "budget"),
}
TABLE_NOTE = "block: a Capacity Block; kWh: facility energy (IT x PUE); peak kW: facility power; budget: its share"


def format_figure(figure: Figure) -> str:
    if figure.unit == "fraction":
        return f"{figure.value:.0%}" if figure.value >= 0.1 else f"{figure.value:.1%}"
    if figure.unit == "USD":
        return f"${figure.value:,.0f}"
    if figure.unit in ("nodes",):
        return f"{figure.value:,.0f}"
    if figure.unit == "days":
        return f"{figure.value:,.1f}"
    if figure.unit == "TFLOPS":
        return f"{figure.value:,.1f}"
    if figure.unit == "kW":
        return f"{figure.value:,.1f}"
    if figure.unit == "FLOP":
        return f"{figure.value:.3g}"
    return f"{figure.value:,.0f}"


def compact_figure(figure: Figure) -> str:
    """The table's short form (2.48M, $6.80M, 745k): a terminal fits a dozen columns of node types."""
    if figure.unit in ("fraction", "TFLOPS", "days", "FLOP", "nodes") or abs(figure.value) < 10_000:
        return format_figure(figure)
    money = "$" if figure.unit == "USD" else ""
    if abs(figure.value) >= 1e6:
        return f"{money}{figure.value / 1e6:,.2f}M"
    return f"{money}{figure.value / 1e3:,.0f}k"


def _headline(plan: CapacityPlan) -> str:
    w, f = plan.workload, plan.facility
    given = f"by a {w.days:g}-day deadline" if w.days is not None else f"on {w.nodes} nodes"
    where = f"stack {f.stack}" if f.stack else "no stack (catalog PUE, no power budget)"
    site = f" (its site's server models: PUE {f.site.pue:g})" if f.site is not None else ""
    return f"{format_figure(w.flops)} FLOP in {w.precision}, {given}; {where}, PUE {f.pue:g}{site}"


def _columns(plan: CapacityPlan) -> list[str]:
    return [key for key in LABELS if any(key in e.figures for e in plan.estimated)]


def _cells(estimate: Estimate, columns: list[str], form: Callable[[Figure], str] = format_figure) -> list[str]:
    return [form(estimate.figures[key]) if key in estimate.figures else "-" for key in columns]


def _bases(estimate: Estimate) -> list[str]:
    return [f"{LABELS[key][0]}: {figure.basis}" for key, figure in estimate.figures.items()] + list(estimate.notes)


def console_capacity(plan: CapacityPlan) -> RenderableType:
    parts: list[RenderableType] = [Text(_headline(plan), style="bold")]
    w = plan.workload
    parts.append(Text(f"FLOPs: {w.flops.basis}"))
    if plan.estimated:
        columns = [key for key in _columns(plan) if LABELS[key][1] is not None]
        table = Table(show_header=True, header_style="bold", box=box.SIMPLE_HEAD, caption=TABLE_NOTE)
        table.add_column("node type", no_wrap=True)
        table.add_column("GPUs", no_wrap=True)
        for key in columns:
            table.add_column(LABELS[key][1] or key, justify="right", no_wrap=True)
        for e in plan.estimated:
            table.add_row(e.node_type, f"{e.gpus_per_node}x{e.gpu}", *_cells(e, columns, compact_figure))
        parts.append(table)
    for e in plan.estimates:
        if e.skipped:
            parts.append(Text.from_markup(f"[yellow]{escape(e.node_type)}[/]: not estimated: {escape(e.skipped)}"))
    for e in plan.estimated:
        if e.over_budget:
            parts.append(Text.from_markup(f"[red]{escape(e.node_type)}[/]: the run's peak power exceeds the budget"))
    parts.append(Text("where each figure comes from:", style="bold"))
    for e in plan.estimated:
        parts.append(Text(f"{e.node_type}:"))
        parts += [Text(f"  - {line}") for line in _bases(e)]
    parts.append(Text("assumptions:", style="bold"))
    parts += [Text(f"  - {line}") for line in ASSUMPTIONS]
    return Group(*parts)


def markdown_capacity(plan: CapacityPlan) -> str:
    lines = ["## Capacity", "", _headline(plan), "", f"FLOPs: {plan.workload.flops.basis}", ""]
    if plan.estimated:
        columns = _columns(plan)
        lines += ["| node type | " + " | ".join(LABELS[key][0] for key in columns) + " |"]
        lines += ["|---|" + "---:|" * len(columns)]
        lines += [
            f"| {e.node_type} ({e.gpus_per_node} x {e.gpu}) | " + " | ".join(_cells(e, columns)) + " |"
            for e in plan.estimated
        ]
        lines.append("")
    for e in plan.estimates:
        if e.skipped:
            lines.append(f"- **{e.node_type}** not estimated: {e.skipped}")
    for e in plan.estimated:
        if e.over_budget:
            lines.append(f"- **{e.node_type}**: the run's peak power exceeds the budget")
    lines += ["", "<details><summary>Where each figure comes from</summary>", ""]
    for e in plan.estimated:
        lines.append(f"**{e.node_type}**")
        lines.append("")
        lines += [f"- {line}" for line in _bases(e)]
        lines.append("")
    lines += ["</details>", "", "Assumptions:", ""] + [f"- {line}" for line in ASSUMPTIONS]
    return "\n".join(lines) + "\n"
