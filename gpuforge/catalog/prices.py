"""On-demand price table (data/prices.yaml): typed rows with their date and source.

Part of the catalog so a stack overrides it like any other fact
(``catalog: {prices: {instances: {p5.48xlarge: {hourly_usd: 40.0}}, discount_fraction: 0.2}}``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat

PRICES_FILE = "gpuforge/catalog/data/prices.yaml"
_PATH = Path(__file__).resolve().parent / "data" / "prices.yaml"


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    as_of: str = "override"
    source: str = "per-stack override"
    verified: bool = True  # an override is the stack owner's own figure


class InstancePrice(_Row):
    hourly_usd: NonNegativeFloat


class StoragePrice(_Row):
    gb_month_usd: NonNegativeFloat


class LustrePrice(BaseModel):
    """Scratch types: one gb_month_usd; persistent types: a rate per per-unit throughput."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gb_month_usd: NonNegativeFloat | None = None
    as_of: str = "override"
    source: str = "per-stack override"
    verified: bool = True
    per_unit_throughput: dict[int, StoragePrice] = Field(default_factory=dict)

    def rate(self, per_unit_throughput: int | None) -> StoragePrice | None:
        if per_unit_throughput is not None and per_unit_throughput in self.per_unit_throughput:
            return self.per_unit_throughput[per_unit_throughput]
        if self.gb_month_usd is not None:
            return StoragePrice(
                gb_month_usd=self.gb_month_usd, as_of=self.as_of, source=self.source, verified=self.verified
            )
        return None


class CapacityBlockTerms(BaseModel):
    """The lengths a Capacity Block is sold in: whole days up to one limit, whole weeks up to the next."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    daily_up_to_days: int = Field(gt=0)
    weekly_up_to_days: int = Field(gt=0)
    source: str = "per-stack override"

    def billed_days(self, days: float) -> int | None:
        """The shortest block that covers *days* of running; None when no block is that long."""
        whole = max(1, math.ceil(days - 1e-9))
        if whole <= self.daily_up_to_days:
            return whole
        weeks = math.ceil(whole / 7) * 7
        return weeks if weeks <= self.weekly_up_to_days else None


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str
    currency: str = "USD"
    hours_per_month: float = 730
    discount_fraction: float = Field(default=0.0, ge=0, lt=1)
    instances: dict[str, InstancePrice] = Field(default_factory=dict)
    rds_instances: dict[str, InstancePrice] = Field(default_factory=dict)  # by DB instance class, Single-AZ
    reservations: dict[str, InstancePrice] = Field(default_factory=dict)  # Capacity Block effective hourly rate
    capacity_block_terms: CapacityBlockTerms | None = None
    fsx_lustre: dict[str, LustrePrice] = Field(default_factory=dict)
    s3_standard: StoragePrice | None = None
    not_counted: tuple[str, ...] = ()
    billed_not_priced: dict[str, str] = Field(default_factory=dict)  # resource type -> what AWS bills for it

    def instance(self, instance_type: str) -> InstancePrice | None:
        return self.instances.get(instance_type)

    def reservation(self, instance_type: str) -> InstancePrice | None:
        return self.reservations.get(instance_type)

    def database(self, instance_class: str) -> InstancePrice | None:
        return self.rds_instances.get(instance_class)

    def lustre(self, deployment_type: str, per_unit_throughput: int | None) -> StoragePrice | None:
        entry = self.fsx_lustre.get(deployment_type)
        return entry.rate(per_unit_throughput) if entry else None


@lru_cache(maxsize=1)
def read_prices() -> dict[str, Any]:
    """The raw document without its `_source` note (cached; callers must not mutate it)."""
    with _PATH.open(encoding="utf-8") as f:
        doc: dict[str, Any] = yaml.safe_load(f)
    return {k: v for k, v in doc.items() if not k.startswith("_")}


def prices_source() -> str:
    with _PATH.open(encoding="utf-8") as f:
        return str(yaml.safe_load(f).get("_source", "")).strip()
