"""How much cluster a training run needs: `gpuforge capacity`'s arithmetic, figure by figure with its basis.

The model: a run costs FLOPs (6 x parameters x tokens, or given); a GPU delivers its peak dense
throughput at the run's precision (catalog) times the model FLOPs utilization (MFU: the catalog's
published figure for its generation, or the user's). From there, per node type: GPU-hours, nodes and
days (one given, the other derived), cost at the catalog's on-demand and Capacity Block rates, energy at
the node's maximum power times the PUE, and the run's peak facility power against the stack's budget.
Every figure carries the sentence that says where it comes from (`Figure.basis`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gpuforge.catalog import Catalog, CatalogError
from gpuforge.catalog.models import Precision

SECONDS_PER_DAY = 86_400
SIX_ND_BASIS = (
    "training FLOPs = 6 x N x D (forward and backward pass of a dense transformer: Kaplan et al. 2020, "
    "Scaling Laws for Neural Language Models, section 2.1; Hoffmann et al. 2022, Training Compute-Optimal "
    "Large Language Models)"
)
ASSUMPTIONS = (
    "wall time is compute at the MFU with no queueing, restarts, failed nodes or evaluation pauses: add "
    "margin by lowering --mfu or adding nodes",
    "energy and power at each node's maximum (the catalog's node power: GPU TDP x count + host share, or "
    "the server's rated maximum): an upper bound on what a run draws",
    "on-demand cost bills node-hours of the run only (per-second billing); a Capacity Block bills the "
    "whole block that covers the run",
)


@dataclass(frozen=True)
class Figure:
    """One number of the answer, its unit and where it comes from."""

    value: float
    unit: str
    basis: str

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit, "basis": self.basis}


@dataclass(frozen=True, kw_only=True)
class Workload:
    """The run as the user gave it, already checked (gpuforge/plan/capacity_input.py)."""

    flops: Figure
    precision: Precision
    mfu: float | None = None  # None: each GPU's catalog default
    days: float | None = None  # exactly one of days and nodes
    nodes: int | None = None


@dataclass(frozen=True, kw_only=True)
class Facility:
    """What the stack (or the catalog, without one) says about power: PUE and the budget."""

    pue: float
    pue_source: str
    budget_kw: float | None = None
    budget_source: str = ""
    stack: str | None = None
    site: Facility | None = None  # hybrid: the site's PUE and budget, for its server models

    def for_node(self, catalog: Catalog, node_type: str) -> Facility:
        """A server model of a hybrid stack runs on the site, under the site's PUE and budget."""
        return self.site if self.site is not None and node_type in catalog.data.servers else self

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "stack": self.stack,
            "pue": self.pue,
            "pue_source": self.pue_source,
            "budget_kw": self.budget_kw,
            "budget_source": self.budget_source or None,
        }
        return doc | ({"site": self.site.to_json()} if self.site is not None else {})


@dataclass(frozen=True, kw_only=True)
class Estimate:
    """The answer for one node type; `skipped` says why there is none."""

    node_type: str
    gpu: str = ""
    gpus_per_node: int = 0
    skipped: str = ""
    skipped_for: str = ""  # the option that would answer it (--precision, --mfu) or --node-type
    figures: dict[str, Figure] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def over_budget(self) -> bool:
        share = self.figures.get("budget_share")
        return share is not None and share.value > 1

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"node_type": self.node_type}
        if self.skipped:
            return doc | {"skipped": self.skipped, "skipped_for": self.skipped_for}
        return doc | {
            "gpu": self.gpu,
            "gpus_per_node": self.gpus_per_node,
            "figures": {name: figure.to_json() for name, figure in self.figures.items()},
            "over_budget": self.over_budget,
            "notes": list(self.notes),
        }


@dataclass(frozen=True, kw_only=True)
class CapacityPlan:
    workload: Workload
    facility: Facility
    estimates: list[Estimate]

    @property
    def estimated(self) -> list[Estimate]:
        return [e for e in self.estimates if not e.skipped]

    @property
    def nothing_fits(self) -> bool:
        """No node type answers within the budget (or none answers at all)."""
        return not self.estimated or all(e.over_budget for e in self.estimated)

    def to_json(self) -> dict[str, Any]:
        w = self.workload
        return {
            "workload": {
                "flops": w.flops.to_json(),
                "precision": w.precision,
                "mfu": w.mfu,
                "days": w.days,
                "nodes": w.nodes,
            },
            "facility": self.facility.to_json(),
            "assumptions": list(ASSUMPTIONS),
            "estimates": [e.to_json() for e in self.estimates],
        }


def training_flops(parameters: float, tokens: float) -> Figure:
    return Figure(
        6 * parameters * tokens, "FLOP", f"6 x {parameters:.4g} parameters x {tokens:.4g} tokens; {SIX_ND_BASIS}"
    )


def node_gpu(catalog: Catalog, node_type: str) -> tuple[str, int]:
    """The GPU model and count of an instance type or server model; CatalogError when it has none."""
    if node_type in catalog.data.servers:
        server = catalog.server(node_type)
        return server.gpu_model, server.gpu_count
    instance = catalog.instance_type(node_type)
    if instance.accelerator is None or instance.accelerator.name not in catalog.data.gpus:
        held = (
            f"{instance.accelerator.count} x {instance.accelerator.name}" if instance.accelerator else "no accelerator"
        )
        raise CatalogError(f"{node_type} has {held}: not a GPU of the catalog's gpus ({', '.join(catalog.data.gpus)})")
    return instance.accelerator.name, instance.accelerator.count


def comparable_node_types(catalog: Catalog) -> list[str]:
    """The node types a side-by-side compares: the curated training instance types and the server models."""
    return sorted(catalog.data.instance_extras) + sorted(catalog.data.servers)


def estimate(catalog: Catalog, workload: Workload, facility: Facility, node_type: str) -> Estimate:
    try:
        gpu_name, per_node = node_gpu(catalog, node_type)
    except CatalogError as error:
        return Estimate(node_type=node_type, skipped=str(error), skipped_for="--node-type")
    gpu = catalog.gpu(gpu_name)
    peak = gpu.dense_tflops.get(workload.precision)
    if peak is None:
        return Estimate(
            node_type=node_type,
            skipped=f"no peak dense {workload.precision} figure for {gpu_name} in the catalog (the GPU lacks the "
            f"precision, or add gpus.{gpu_name}.dense_tflops.{workload.precision} with its source via catalog "
            "overrides)",
            skipped_for="--precision",
        )
    if workload.mfu is not None:
        mfu = Figure(workload.mfu, "fraction", "given (--mfu)")
    elif gpu.mfu_default is not None:
        mfu = Figure(gpu.mfu_default, "fraction", f"catalog default for {gpu_name}: {gpu.mfu_source}")
    else:
        return Estimate(
            node_type=node_type,
            skipped=f"no published MFU for {gpu_name} in the catalog: pass --mfu (e.g. 0.35) or add "
            f"gpus.{gpu_name}.mfu_default with its mfu_source via catalog overrides",
            skipped_for="--mfu",
        )
    figures: dict[str, Figure] = {
        "peak_tflops_per_gpu": Figure(
            peak, "TFLOPS", f"{gpu_name} dense {workload.precision}: {gpu.dense_tflops_source}"
        ),
        "mfu": mfu,
    }
    delivered = peak * 1e12 * mfu.value
    gpu_seconds = workload.flops.value / delivered
    figures["gpu_hours"] = Figure(
        gpu_seconds / 3600,
        "GPU-h",
        f"{workload.flops.value:.4g} FLOP / ({peak:g} TFLOPS x {mfu.value:g} MFU) / 3600",
    )
    node_seconds = gpu_seconds / per_node
    if workload.nodes is not None:
        nodes = workload.nodes
        figures["nodes"] = Figure(nodes, "nodes", "given (--nodes)")
    else:
        assert workload.days is not None  # capacity_input guarantees one of them
        nodes = math.ceil(node_seconds / (workload.days * SECONDS_PER_DAY))
        figures["nodes"] = Figure(
            nodes,
            "nodes",
            f"GPU-hours / {per_node} GPUs per node / ({workload.days:g} days x 24 h), rounded up to whole nodes",
        )
    run_hours = node_seconds / nodes / 3600
    figures["days"] = Figure(run_hours / 24, "days", f"GPU-hours / ({nodes} nodes x {per_node} GPUs) / 24")
    node_hours = nodes * run_hours
    figures["node_hours"] = Figure(node_hours, "node-h", f"{nodes} nodes x {run_hours:.4g} h")
    notes = _cost(catalog, node_type, nodes, run_hours, figures)
    _power(catalog, facility.for_node(catalog, node_type), node_type, nodes, node_hours, figures)
    return Estimate(node_type=node_type, gpu=gpu_name, gpus_per_node=per_node, figures=figures, notes=tuple(notes))


def _power(
    catalog: Catalog, facility: Facility, node_type: str, nodes: int, node_hours: float, figures: dict[str, Figure]
) -> None:
    """Energy (IT, and x PUE) and the run's peak facility power against the budget, at the node's maximum."""
    node_kw = catalog.node_power_kw(node_type)
    power_basis = f"{node_kw:g} kW per {node_type} (catalog node power, at its maximum)"
    figures["energy_it_kwh"] = Figure(node_kw * node_hours, "kWh", f"{power_basis} x {node_hours:.4g} node-h")
    figures["energy_facility_kwh"] = Figure(
        node_kw * node_hours * facility.pue, "kWh", f"IT energy x PUE {facility.pue:g} ({facility.pue_source})"
    )
    peak_kw = nodes * node_kw * facility.pue
    figures["peak_facility_kw"] = Figure(peak_kw, "kW", f"{nodes} nodes x {power_basis} x PUE {facility.pue:g}")
    if facility.budget_kw is not None:
        figures["budget_share"] = Figure(
            peak_kw / facility.budget_kw,
            "fraction",
            f"peak facility power / {facility.budget_kw:g} kW ({facility.budget_source}); the run alone, the stack's "
            "own planned load is `gpuforge plan`'s",
        )


def _cost(catalog: Catalog, node_type: str, nodes: int, run_hours: float, figures: dict[str, Figure]) -> list[str]:
    prices = catalog.prices
    if node_type in catalog.data.servers:
        return [f"{node_type} is a server model (owned hardware): no hourly price"]
    if prices is None:
        return ["the catalog has no price table"]
    notes: list[str] = []
    on_demand = prices.instance(node_type)
    if on_demand is None:
        notes.append(
            f"no on-demand price for {node_type}: add prices.instances.{node_type}.hourly_usd via catalog overrides"
        )
    else:
        keep = 1 - prices.discount_fraction
        discount = f" x (1 - discount {prices.discount_fraction:g})" if prices.discount_fraction else ""
        figures["cost_on_demand"] = Figure(
            nodes * run_hours * on_demand.hourly_usd * keep,
            prices.currency,
            f"{nodes} nodes x {run_hours:.4g} h x {on_demand.hourly_usd:g}/h{discount} ({prices.region}, "
            f"{on_demand.as_of}{'' if on_demand.verified else ', unverified'}: {on_demand.source})",
        )
    reserved = prices.reservation(node_type)
    terms = prices.capacity_block_terms
    if reserved is None or terms is None:
        notes.append(f"no Capacity Block rate for {node_type} in the catalog (prices.reservations)")
        return notes
    block_days = terms.billed_days(run_hours / 24)
    if block_days is None:
        notes.append(
            f"no Capacity Block is {run_hours / 24:.1f} days long (at most {terms.weekly_up_to_days}): add nodes"
        )
        return notes
    figures["cost_reserved"] = Figure(
        nodes * block_days * 24 * reserved.hourly_usd,
        prices.currency,
        f"{nodes} nodes x a {block_days}-day Capacity Block x 24 h x {reserved.hourly_usd:g}/h ({reserved.as_of}"
        f"{'' if reserved.verified else ', unverified'}: {reserved.source}); block lengths: {terms.source}",
    )
    return notes


def plan_capacity(catalog: Catalog, workload: Workload, facility: Facility, node_types: list[str]) -> CapacityPlan:
    return CapacityPlan(
        workload=workload,
        facility=facility,
        estimates=[estimate(catalog, workload, facility, name) for name in node_types],
    )
