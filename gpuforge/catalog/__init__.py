"""Hardware catalog: AWS instance types, GPUs, servers, power and FSx for Lustre rules, with sources.

Usage: ``load_catalog().instance_type("p5.48xlarge").max_efa_interfaces`` (cached without overrides).
Pinned Helm charts of the GPU platform: ``load_charts().chart("kueue").version``.
"""

from gpuforge.catalog.charts import ChartPin, Charts, ImagePin, load_charts
from gpuforge.catalog.models import (
    Accelerator,
    CapacityRule,
    Catalog,
    CatalogError,
    FsxLustreRules,
    Gpu,
    HostPower,
    InstanceExtras,
    InstanceType,
    MetadataIopsRule,
    NetworkCard,
    NetworkPort,
    ServerModel,
    load_catalog,
)
from gpuforge.catalog.prices import PriceTable

__all__ = [
    "Accelerator",
    "CapacityRule",
    "Catalog",
    "CatalogError",
    "ChartPin",
    "Charts",
    "FsxLustreRules",
    "Gpu",
    "HostPower",
    "ImagePin",
    "InstanceExtras",
    "InstanceType",
    "MetadataIopsRule",
    "NetworkCard",
    "NetworkPort",
    "PriceTable",
    "ServerModel",
    "load_catalog",
    "load_charts",
]
