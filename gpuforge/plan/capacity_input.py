"""What `gpuforge capacity` was given, checked all at once: each bad option is a SpecIssue naming the option,
the value, what was expected and the fix, so the command exits 2 with every problem and no traceback."""

from __future__ import annotations

import math
import re
from typing import get_args

from gpuforge.catalog import Catalog, CatalogError
from gpuforge.catalog.models import Precision
from gpuforge.plan.capacity import Facility, Figure, Workload, comparable_node_types, node_gpu, training_flops
from gpuforge.spec import ResolvedSpec, SpecError, SpecIssue

PRECISIONS: tuple[str, ...] = get_args(Precision)
_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
_QUANTITY = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9]*)?(?:e[+-]?[0-9]+)?)\s*([kmbgtp]?)\s*$", re.IGNORECASE)
MAX_DAYS = 3650  # ten years: a longer "deadline" is a typo (hours or minutes given as days)


def parse_quantity(text: str) -> float | None:
    """70B, 2T, 8.4e23, 1_000_000: a positive finite number, or None."""
    match = _QUANTITY.match(text)
    if match is None:
        return None
    value = float(match.group(1).replace("_", "")) * _SUFFIXES.get(match.group(2).lower(), 1)
    return value if math.isfinite(value) and value > 0 else None


def _quantity(option: str, text: str | None, example: str, issues: list[SpecIssue]) -> float | None:
    if text is None:
        return None
    value = parse_quantity(text)
    if value is None:
        issues.append(
            SpecIssue(
                option,
                f"{text!r} is not a positive number: expected digits with an optional exponent or suffix "
                "(K, M, B = billion, T = trillion)",
                f"{option} {example}",
            )
        )
    return value


def check_workload(
    *,
    params: str | None,
    tokens: str | None,
    flops: str | None,
    precision: str,
    mfu: float | None,
    days: float | None,
    nodes: int | None,
) -> Workload:
    issues: list[SpecIssue] = []
    n = _quantity("--params", params, "70B", issues)
    d = _quantity("--tokens", tokens, "2T", issues)
    total = _quantity("--flops", flops, "8.4e23", issues)
    if flops is not None and (params is not None or tokens is not None):
        issues.append(
            SpecIssue(
                "--flops",
                "given with --params/--tokens: one model, two sizes",
                "give --flops or both --params and --tokens",
            )
        )
    elif flops is None and (params is None or tokens is None):
        missing = " and ".join(o for o, v in (("--params", params), ("--tokens", tokens)) if v is None)
        issues.append(
            SpecIssue(
                missing.split(" and ")[0],
                f"the run's size needs {missing}",
                "--params 70B --tokens 2T, or --flops 8.4e23",
            )
        )
    if precision not in PRECISIONS:
        issues.append(
            SpecIssue(
                "--precision", f"{precision!r} is not a precision the catalog rates", f"one of {', '.join(PRECISIONS)}"
            )
        )
    if mfu is not None and not (math.isfinite(mfu) and 0 < mfu <= 1):
        issues.append(SpecIssue("--mfu", f"{mfu:g} is not a fraction of peak: expected 0 < MFU <= 1", "--mfu 0.4"))
    if (days is None) == (nodes is None):
        issues.append(
            SpecIssue(
                "--days",
                "give a deadline or a node count, exactly one" + (" (both given)" if days is not None else ""),
                "--days 30 or --nodes 64",
            )
        )
    if days is not None and not (math.isfinite(days) and 0 < days <= MAX_DAYS):
        issues.append(SpecIssue("--days", f"{days:g} is not a deadline: expected 0 < days <= {MAX_DAYS}", "--days 30"))
    if nodes is not None and nodes < 1:
        issues.append(SpecIssue("--nodes", f"{nodes} is not a node count: expected a whole number >= 1", "--nodes 64"))
    if issues:
        raise SpecError(issues)
    if total is not None:
        figure = Figure(total, "FLOP", "given (--flops)")
    else:
        assert n is not None and d is not None
        figure = training_flops(n, d)
    return Workload(flops=figure, precision=precision, mfu=mfu, days=days, nodes=nodes)  # type: ignore[arg-type]


def check_node_types(
    catalog: Catalog, node_type: str | None, compare: bool, resolved: ResolvedSpec | None
) -> list[str]:
    """The node types to estimate: --node-type, all of them (--compare), or the stack's training groups."""
    if compare and node_type is not None:
        raise SpecError([SpecIssue("--compare", "given with --node-type", "give one node type or --compare")])
    if compare:
        return comparable_node_types(catalog)
    if node_type is None:
        from_stack = _stack_node_types(resolved) if resolved is not None else []
        if from_stack:
            return from_stack
        raise SpecError(
            [
                SpecIssue(
                    "--node-type",
                    "no node type: none given"
                    + (" and the stack has no training node group" if resolved is not None else ""),
                    "--node-type p5.48xlarge (an instance type or server model of the catalog), or --compare",
                )
            ]
        )
    try:
        node_gpu(catalog, node_type)
    except CatalogError as error:
        raise SpecError(
            [
                SpecIssue(
                    "--node-type",
                    str(error),
                    "a GPU instance type or server model: p5.48xlarge, p4de.24xlarge, dgx-h100",
                )
            ]
        ) from None
    return [node_type]


def _stack_node_types(resolved: ResolvedSpec) -> list[str]:
    types = {g.spec.instance_type for g in resolved.node_groups.values() if g.spec.role == "training"}
    if resolved.site is not None:
        types |= {h.spec.model for h in resolved.site.hosts.values() if h.server.gpu_count}
    return sorted(types)


def facility_of(catalog: Catalog, resolved: ResolvedSpec | None, stack: str | None) -> Facility:
    if resolved is None:
        return Facility(
            pue=catalog.pue_default, pue_source=f"catalog default, no stack: {catalog.data.host_power.pue_source}"
        )
    spec = resolved.spec
    site = None
    if spec.site is not None:
        site = Facility(
            pue=spec.site.power.pue,
            pue_source=f"site {spec.site.name}'s measured PUE (site.power.pue)",
            budget_kw=spec.site.power.budget_kw,
            budget_source=f"site {spec.site.name}'s power.budget_kw",
            stack=stack,
        )
    budget, source = spec.power.budget_kw, "the stack's power.budget_kw"
    if spec.placement.kind == "onprem" and site is not None:  # one facility: the site (resolve picked its PUE)
        if budget is None:
            budget, source = site.budget_kw, site.budget_source
        site = None
    return Facility(
        pue=resolved.pue,
        pue_source=resolved.pue_source,
        budget_kw=budget,
        budget_source=source if budget is not None else "",
        stack=stack,
        site=site,
    )
