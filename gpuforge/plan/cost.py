"""Monthly cost estimate (on-demand; Capacity Blocks at their own rate), read off the plan's component facts and
the catalog's price table.

Works on plan resources or their JSON form alike (anything with type, name and inputs), so
`gpuforge diff` can estimate a plan JSON written by an older revision that had no cost in it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from gpuforge.catalog import PriceTable
from gpuforge.catalog.tokens import CLUSTER, EFS, INSTANCE, NODE_GROUP, OBJECT_STORE
from gpuforge.catalog.tokens import LUSTRE_COMPONENT as LUSTRE
from gpuforge.catalog.tokens import RDS_INSTANCE as DATABASE

GIB_TO_GB = 1.073741824  # FSx capacity is provisioned in GiB and priced per GB-month
# Billed by what they hold, which the plan cannot know: listed with their rate, never in the total.
SIZE_UNKNOWN = ("bucket", "efs")


@dataclass(frozen=True)
class CostLine:
    kind: str  # node_group | instance | database | file_system | efs | bucket
    name: str
    detail: str
    monthly_usd: float | None  # None: not priced (no row in the table, or size unknown); elastic: at its max
    basis: str
    verified: bool
    monthly_min_usd: float | None = None  # an elastic group at its min (None: a fixed size, monthly_usd)

    @property
    def floor(self) -> float | None:
        return self.monthly_min_usd if self.monthly_min_usd is not None else self.monthly_usd


@dataclass
class CostEstimate:
    region: str | None
    price_region: str
    currency: str
    discount_fraction: float
    lines: list[CostLine] = field(default_factory=list)
    not_counted: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    not_priced_resources: list[str] = field(default_factory=list)  # declared, billed, no price: "2 x NAT ..."

    @property
    def total(self) -> float:
        """The priced lines, elastic groups at their max: see `unpriced` for what it leaves out."""
        return round(sum(line.monthly_usd or 0.0 for line in self.lines), 2)

    @property
    def total_min(self) -> float:
        """The same with elastic groups at their min (what runs while the queue is empty)."""
        return round(sum(line.floor or 0.0 for line in self.lines), 2)

    @property
    def unpriced(self) -> list[str]:
        """What the plan declares and the table has no price for (size-unknown storage is listed apart)."""
        return [line.name for line in self.lines if line.monthly_usd is None and line.kind not in SIZE_UNKNOWN]

    @property
    def size_unknown(self) -> list[str]:
        return [line.name for line in self.lines if line.kind in SIZE_UNKNOWN]

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
            "total_min_monthly_usd": self.total_min,
            "region": self.region,
            "price_region": self.price_region,
            "currency": self.currency,
            "discount_fraction": self.discount_fraction,
            "lines": [asdict(line) for line in self.lines],
            "not_counted": self.not_counted,
            "not_priced_resources": self.not_priced_resources,
            "warnings": self.warnings,
            "unpriced": self.unpriced,
            "size_unknown": self.size_unknown,
            "caveats": self.caveats,
        }


def _field(resource: Any, name: str) -> Any:
    return resource.get(name) if isinstance(resource, Mapping) else getattr(resource, name)


def estimate_cost(resources: Iterable[Any], prices: PriceTable) -> CostEstimate:
    """Every resource the plan declares that AWS bills by the hour or by size: per node group (count +
    spares every hour of the month; an elastic group from its min to its max), per single instance
    (controllers, bastion), per database, per Lustre file system (provisioned capacity); EFS and
    buckets are billed by what they hold, unknown to the plan: listed with their rate, not priced."""
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
        elif type_ == INSTANCE:
            estimate.lines.append(_instance_line(name, inputs, prices, keep))
        elif type_ == DATABASE:
            estimate.lines.append(_database_line(name, inputs, prices, keep))
        elif type_ == EFS:
            estimate.lines.append(
                CostLine("efs", name, "EFS, elastic", None, "billed per GB stored; size unknown to the plan", False)
            )
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
    declared = Counter(type_ for type_, _, _ in items if type_ in prices.billed_not_priced)
    estimate.not_priced_resources = [
        f"{count} x {prices.billed_not_priced[type_]}" for type_, count in sorted(declared.items())
    ]
    if estimate.unpriced:
        estimate.warnings.append(
            f"no price for: {', '.join(estimate.unpriced)}: left out of the total (add their rows under "
            "catalog.prices: instances, rds_instances, fsx_lustre)"
        )
    return estimate


def _node_group_line(inputs: dict[str, Any], prices: PriceTable, keep: float) -> CostLine:
    instance_type = str(inputs.get("instanceType"))
    nodes = int(inputs.get("count", 0)) + int(inputs.get("spares", 0))
    name = str(inputs.get("nodeGroup", "?"))
    detail = f"{nodes} x {instance_type} ({inputs.get('count', 0)} + {inputs.get('spares', 0)} spare)"
    scaling = inputs.get("scaling")
    least = int(scaling.get("min", 0)) if isinstance(scaling, dict) else None
    if least is not None:  # elastic: min nodes run around the clock, up to max while the queue asks
        detail = f"{least}-{nodes} x {instance_type} (elastic: {least} always, up to {nodes} while jobs wait)"
    capacity = inputs.get("capacity", "on_demand")
    if capacity == "capacity_block":  # before the on-demand row: a block's type may have none (p5e)
        block = _capacity_block_line(name, inputs, prices, nodes)
        if block is not None:
            return block
    price = prices.instance(instance_type)
    if price is None:
        return CostLine("node_group", name, detail, None, f"no on-demand price for {instance_type}", False)
    note = "" if capacity in ("on_demand", "capacity_reservation") else f"; {capacity} priced at on-demand"
    if capacity == "capacity_block":
        note += f" (no Capacity Block rate for {instance_type} in catalog.prices.reservations, or no block window)"
    hourly = price.hourly_usd * prices.hours_per_month * keep
    basis = f"{price.hourly_usd} USD/h x {prices.hours_per_month:g} h ({price.as_of}){note}"
    floor = round(least * hourly, 2) if least is not None else None
    return CostLine("node_group", name, detail, round(nodes * hourly, 2), basis, price.verified, floor)


def _capacity_block_line(name: str, inputs: dict[str, Any], prices: PriceTable, nodes: int) -> CostLine | None:
    """A Capacity Block group at the catalog's Capacity Block rate: AWS bills every instance of the block for its
    whole window, up front, whatever the group runs. A block longer than a month shows a month of it, like the
    other lines; discount_fraction (a savings plan or discount on on-demand rates) is not applied to it. None
    when the catalog has no rate for the type or the plan carries no window (a plan from before the field)."""
    instance_type = str(inputs.get("instanceType"))
    rate = prices.reservation(instance_type)
    window = inputs.get("capacityWindow")
    if rate is None or not isinstance(window, dict):
        return None
    start, end = (datetime.fromisoformat(str(window[key]).replace("Z", "+00:00")) for key in ("start", "end"))
    block_hours = (end - start).total_seconds() / 3600
    billed = int(inputs.get("capacityBlockInstances") or nodes)
    hours = min(block_hours, prices.hours_per_month)
    block_total = billed * rate.hourly_usd * block_hours
    detail = f"{billed} x {instance_type} (Capacity Block {window['start']} to {window['end']}, {block_hours:g} h)"
    basis = (
        f"Capacity Block rate {rate.hourly_usd} USD/h ({rate.as_of}) x {billed} instance(s) in the block x "
        f"{hours:g} h{' (a month of the block)' if hours < block_hours else ''}; the block costs "
        f"{block_total:,.2f} USD up front for its {block_hours:g} h; discount_fraction not applied"
    )
    return CostLine("node_group", name, detail, round(billed * rate.hourly_usd * hours, 2), basis, rate.verified)


def _instance_line(name: str, inputs: dict[str, Any], prices: PriceTable, keep: float) -> CostLine:
    instance_type = str(inputs.get("instanceType"))
    price = prices.instance(instance_type)
    if price is None:
        basis = f"no on-demand price for {instance_type}"
        return CostLine("instance", name, f"1 x {instance_type}", None, basis, False)
    monthly = round(price.hourly_usd * prices.hours_per_month * keep, 2)
    basis = f"{price.hourly_usd} USD/h x {prices.hours_per_month:g} h ({price.as_of})"
    return CostLine("instance", name, f"1 x {instance_type}", monthly, basis, price.verified)


def _database_line(name: str, inputs: dict[str, Any], prices: PriceTable, keep: float) -> CostLine:
    """An RDS instance: the class's hourly rate, twice for Multi-AZ ("billed per DB instance-hour for both
    the primary and standby instances", Amazon RDS User Guide, Multi-AZ DB instances), storage apart."""
    instance_class = str(inputs.get("instanceClass"))
    copies = 2 if inputs.get("multiAz") else 1
    detail = f"{instance_class}{' Multi-AZ' if copies == 2 else ''}, {inputs.get('allocatedStorage', '?')} GiB"
    price = prices.database(instance_class)
    if price is None:
        return CostLine("database", name, detail, None, f"no RDS price for {instance_class}", False)
    monthly = round(copies * price.hourly_usd * prices.hours_per_month * keep, 2)
    basis = f"{copies} x {price.hourly_usd} USD/h x {prices.hours_per_month:g} h ({price.as_of}); storage not counted"
    return CostLine("database", name, detail, monthly, basis, price.verified)


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
