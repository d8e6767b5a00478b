"""Plan summary, read off the components' properties (the facts the spec resolved)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpuforge.catalog.tokens import CLUSTER, HOST, NODE_GROUP, SITE
from gpuforge.catalog.tokens import LUSTRE_COMPONENT as LUSTRE
from gpuforge.plan.model import PlanResource
from gpuforge.spec.power import GroupLoad, facility_power_kw


@dataclass(frozen=True)
class Summary:
    resources: int
    node_groups: int
    nodes: int
    spare_nodes: int
    gpus: int
    efa_interfaces: int
    parallel_fs_tib: float
    parallel_fs_throughput_mbps: float
    power_kw: float
    power_budget_kw: float | None
    monthly_cost_usd: float | None = None  # on-demand estimate (gpuforge.plan.cost); None: not priced


def group_loads(resources: Iterable[PlanResource]) -> list[GroupLoad]:
    return [
        GroupLoad(r.inputs["nodeGroup"], r.inputs["count"], r.inputs["spares"], r.inputs["nodePowerKw"])
        for r in resources
        if r.type == NODE_GROUP
    ]


def cluster_power(resources: Iterable[PlanResource]) -> dict[str, Any]:
    cluster = next((r for r in resources if r.type == CLUSTER), None)
    return dict(cluster.inputs.get("power", {})) if cluster else {}


def site_power(resources: Iterable[PlanResource]) -> tuple[float, float | None]:
    """On-premises facility kW (each site's PUE x its IT load: hosts, fabric switches, equipment) and
    the sites' budgets (None: no site)."""
    sites = {r.inputs["site"]: r.inputs for r in resources if r.type == SITE}
    kw = sum(site["pue"] * site["itKw"] for site in sites.values())
    return kw, (sum(s["budgetKw"] for s in sites.values()) if sites else None)


def summarize(resources: list[PlanResource]) -> Summary:
    groups = [r.inputs for r in resources if r.type == NODE_GROUP]
    hosts = [r.inputs for r in resources if r.type == HOST]
    lustre = [r.inputs for r in resources if r.type == LUSTRE]
    power = cluster_power(resources)
    onprem_kw, onprem_budget = site_power(resources)
    budget = power.get("budgetKw")
    if onprem_budget is not None:  # hybrid: the cloud's budget and the site's, against both loads
        budget = (budget or 0) + onprem_budget
    return Summary(
        resources=sum(1 for r in resources if r.custom),
        node_groups=len(groups) + len({h["pool"] for h in hosts}),
        nodes=sum(g["count"] for g in groups) + len(hosts),
        spare_nodes=sum(g["spares"] for g in groups),
        gpus=sum(g["count"] * g["gpusPerNode"] for g in groups) + sum(h["gpusPerNode"] for h in hosts),
        efa_interfaces=sum(g["count"] * g["efaInterfacesPerNode"] for g in groups),
        parallel_fs_tib=round(sum(f["capacityGib"] for f in lustre) / 1024, 3),
        parallel_fs_throughput_mbps=round(sum(f["throughputMbps"] for f in lustre), 1),
        power_kw=round(
            facility_power_kw(group_loads(resources), power.get("pue", 1.0), power.get("spareDrawFraction", 1.0))
            + onprem_kw,
            2,
        ),
        power_budget_kw=budget,
    )
