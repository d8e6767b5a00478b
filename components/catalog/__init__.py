"""Hardware catalog: AWS instance types, GPUs, servers, power and FSx for Lustre rules, with sources.

Usage: ``load_catalog().instance_type("p5.48xlarge").max_efa_interfaces`` (cached without overrides).
"""

from components.catalog.models import (
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
    ServerModel,
    load_catalog,
)

__all__ = [
    "Accelerator",
    "CapacityRule",
    "Catalog",
    "CatalogError",
    "FsxLustreRules",
    "Gpu",
    "HostPower",
    "InstanceExtras",
    "InstanceType",
    "MetadataIopsRule",
    "NetworkCard",
    "ServerModel",
    "load_catalog",
]
