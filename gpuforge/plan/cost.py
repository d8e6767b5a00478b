"""Monthly on-demand cost estimate, read off the plan's component facts and the catalog's price table.

Works on plan resources or their JSON form alike (anything with type, name and inputs), so
`gpuforge diff` can estimate a plan JSON written by an older revision that had no cost in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuforge.catalog import PriceTable

NODE_GROUP = "gpuforge:aws:GpuNodeGroup"
LUSTRE = "gpuforge:aws:LustreFileSystem"
OBJECT_STORE = "gpuforge:aws:ObjectStore"
CLUSTER = "gpuforge:index:TrainingCluster"
GIB_TO_GB = 1.073741824  # FSx capacity is provisioned in GiB and priced per GB-month


@dataclass(frozen=True)
class CostLine:
    kind: str  # node_group | file_system | bucket
    name: str
    detail: str
    monthly_usd: float | None  # None: not priced (no row in the table, or size unknown)
    basis: str
    verified: bool


@dataclass
class CostEstimate:
    region: str | None
    price_region: str
    currency: str
    discount_fraction: float
    lines: list[CostLine] = field(default_factory=list)
    not_counted: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        """The priced lines only: see `unpriced` for what it leaves out."""
        return round(sum(line.monthly_usd or 0.0 for line in self.lines), 2)

    @property
    def unpriced(self) -> list[str]:
        """Node groups and file systems the table has no price for (buckets: size unknown)."""
        return [line.name for line in self.lines if line.monthly_usd is None and line.kind != "bucket"]

    @property
    def caveats(self) -> list[str]:
        """What a reader must know before trusting the total: said wherever the total is shown."""
        at_on_demand = [line.name for line in self.lines if "priced at on-demand" in line.basis]
        unverified = sorted({line.name for line in self.lines if line.monthly_usd is not None and not line.verified})
        caveats = list(self.warnings)
        if at_on_demand:
            caveats.append(f"priced at on-demand rates though bought otherwise: {', '.join(at_on_demand)}")
        if unverified:
            caveats.append(f"unverified price rows (check before budgeting): {', '.join(unverified)}")
        return caveats

    def to_json(self) -> dict[str, Any]:
        return {
            "total_monthly_usd": self.total,
            "region": self.region,
            "price_region": self.price_region,
            "currency": self.currency,
            "discount_fraction": self.discount_fraction,
            "lines": [asdict(line) for line in self.lines],
            "not_counted": self.not_counted,
            "warnings": self.warnings,
            "unpriced": self.unpriced,
            "caveats": self.caveats,
        }


def _field(resource: Any, name: str) -> Any:
    return resource.get(name) if isinstance(resource, Mapping) else getattr(resource, name)


def estimate_cost(resources: Iterable[Any], prices: PriceTable) -> CostEstimate:
    """Per node group (count + spares, every hour of the month), per file system (provisioned
    capacity) and per bucket (contents unknown: listed, not priced)."""
    items = [(str(_field(r, "type")), str(_field(r, "name")), dict(_field(r, "inputs") or {})) for r in resources]
    cluster = next((inputs for type_, _, inputs in items if type_ == CLUSTER), {})
    region = cluster.get("region")
    keep = 1.0 - prices.discount_fraction
    estimate = CostEstimate(
        region=region,
        price_region=prices.region,
        currency=prices.currency,
        discount_fraction=prices.discount_fraction,
        not_counted=list(prices.not_counted),
    )
    if region and region != prices.region:
        estimate.warnings.append(
            f"prices are {prices.region} list prices; the stack runs in {region}: override catalog.prices for it"
        )
    for type_, name, inputs in items:
        if type_ == NODE_GROUP:
            estimate.lines.append(_node_group_line(inputs, prices, keep))
        elif type_ == LUSTRE:
            estimate.lines.append(_lustre_line(name, inputs, prices, keep))
        elif type_ == OBJECT_STORE:
            estimate.lines.append(
                CostLine(
                    "bucket",
                    name,
                    f"{inputs.get('purpose', '?')} bucket",
                    None,
                    "size unknown to the plan"
                    + (f"; S3 Standard {prices.s3_standard.gb_month_usd} USD/GB-month" if prices.s3_standard else ""),
                    prices.s3_standard.verified if prices.s3_standard else False,
                )
            )
    if estimate.unpriced:
        estimate.warnings.append(
            f"no price for: {', '.join(estimate.unpriced)}: left out of the total (add rows under catalog.prices)"
        )
    return estimate


def _node_group_line(inputs: dict[str, Any], prices: PriceTable, keep: float) -> CostLine:
    instance_type = str(inputs.get("instanceType"))
    nodes = int(inputs.get("count", 0)) + int(inputs.get("spares", 0))
    name = str(inputs.get("nodeGroup", "?"))
    detail = f"{nodes} x {instance_type} ({inputs.get('count', 0)} + {inputs.get('spares', 0)} spare)"
    scaling = inputs.get("scaling")
    if isinstance(scaling, dict):  # elastic: priced as if it ran its max around the clock (the worst case)
        detail = f"{scaling.get('min', 0)}-{nodes} x {instance_type} (elastic; priced at its max of {nodes})"
    price = prices.instance(instance_type)
    if price is None:
        return CostLine("node_group", name, detail, None, f"no on-demand price for {instance_type}", False)
    capacity = inputs.get("capacity", "on_demand")
    note = "" if capacity in ("on_demand", "capacity_reservation") else f"; {capacity} priced at on-demand"
    monthly = round(nodes * price.hourly_usd * prices.hours_per_month * keep, 2)
    basis = f"{price.hourly_usd} USD/h x {prices.hours_per_month:g} h ({price.as_of}){note}"
    return CostLine("node_group", name, detail, monthly, basis, price.verified)


def _lustre_line(name: str, inputs: dict[str, Any], prices: PriceTable, keep: float) -> CostLine:
    deployment = str(inputs.get("deploymentType"))
    per_unit = inputs.get("perUnitStorageThroughput")
    capacity_gib = float(inputs.get("capacityGib", 0))
    tier = f"{deployment} at {per_unit} MB/s/TiB" if per_unit else deployment
    detail = f"{capacity_gib:,.0f} GiB {tier}"
    price = prices.lustre(deployment, int(per_unit) if per_unit else None)
    if price is None:
        return CostLine("file_system", name, detail, None, f"no price for FSx {tier}", False)
    monthly = round(capacity_gib * GIB_TO_GB * price.gb_month_usd * keep, 2)
    return CostLine(
        "file_system", name, detail, monthly, f"{price.gb_month_usd} USD/GB-month ({price.as_of})", price.verified
    )
