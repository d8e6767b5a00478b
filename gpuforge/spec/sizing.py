"""Parallel file system sizing: capacity and throughput from the workload, on valid steps.

Throughput of FSx for Lustre is capacity (TiB) x per-unit throughput (MB/s/TiB), so the
capacity a workload needs is its throughput divided by the per-unit rate, then rounded up
to the deployment type's next valid capacity step (the catalog holds the steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuforge.catalog import Catalog

from .errors import SpecIssue
from .models import FsxLustre

GIB_PER_TIB = 1024
MB_PER_GIB = 1073.741824  # 2**30 bytes in decimal megabytes, as FSx quotes MB/s


@dataclass(frozen=True)
class LustreSizing:
    capacity_gib: int
    per_unit_throughput: int | None  # MB/s/TiB sent to the API (PERSISTENT only)
    throughput_mbps: float  # what the capacity delivers
    required_mbps: float  # what the workload asks for (0 without a workload)
    derived: bool  # capacity came from the workload, not the spec

    @property
    def capacity_tib(self) -> float:
        return self.capacity_gib / GIB_PER_TIB


def required_throughput_mbps(fs: FsxLustre, training_gpus: int) -> float:
    if fs.workload is None:
        return 0.0
    read = training_gpus * fs.workload.read_mbps_per_gpu
    checkpoint = fs.workload.checkpoint_gib * MB_PER_GIB / fs.workload.checkpoint_window_s
    return max(read, checkpoint)


def size_lustre(fs: FsxLustre, training_gpus: int, catalog: Catalog) -> tuple[LustreSizing | None, list[SpecIssue]]:
    path = "cluster.storage.parallel_fs"
    rules = catalog.fsx_lustre(fs.deployment_type)
    persistent = fs.deployment_type.startswith("PERSISTENT")
    issues: list[SpecIssue] = []

    per_unit = fs.per_unit_storage_throughput
    allowed = rules.per_unit_throughputs
    if persistent and per_unit is None:
        issues.append(
            SpecIssue(
                f"{path}.per_unit_storage_throughput",
                f"{fs.deployment_type} needs a per-unit throughput",
                f"set it to one of {', '.join(map(str, allowed))} MB/s/TiB",
            )
        )
    elif per_unit is not None and not persistent:
        issues.append(
            SpecIssue(
                f"{path}.per_unit_storage_throughput",
                f"{fs.deployment_type} has a fixed throughput",
                "remove per_unit_storage_throughput, or use a PERSISTENT deployment type",
            )
        )
    elif per_unit is not None and per_unit not in allowed:
        issues.append(
            SpecIssue(
                f"{path}.per_unit_storage_throughput",
                f"{per_unit} MB/s/TiB is not offered for {fs.deployment_type}",
                f"use one of {', '.join(map(str, allowed))}",
            )
        )
    if fs.efa and not rules.efa_supported:
        return None, []  # checks.py reports EFA on a type without it; there is no EFA capacity rule to size on
    if fs.capacity_gib is None and fs.workload is None:
        issues.append(
            SpecIssue(
                f"{path}.capacity_gib",
                "neither a capacity nor a workload to size from is given",
                f"set capacity_gib ({rules.valid_capacities_description()}) or describe the workload",
            )
        )
    if issues:
        return None, issues

    rate = per_unit if per_unit is not None else rules.baseline_throughput_per_tib
    if rate is None:  # a catalog override removed the scratch baseline
        return None, [
            SpecIssue(
                f"{path}.deployment_type",
                f"the catalog has no throughput for {fs.deployment_type}",
                "restore fsx_lustre.<type>.baseline_throughput_per_tib in the catalog",
            )
        ]
    required = required_throughput_mbps(fs, training_gpus)
    if fs.capacity_gib is not None:
        capacity = fs.capacity_gib
        if not rules.is_valid_capacity(capacity, per_unit, fs.efa):
            suggestion = rules.next_valid_capacity(capacity, per_unit, fs.efa)
            issues.append(
                SpecIssue(
                    f"{path}.capacity_gib",
                    f"{capacity} GiB is not a valid {fs.deployment_type}"
                    f"{' EFA' if fs.efa else ''} capacity ({rules.valid_capacities_description()})",
                    f"use {suggestion} GiB",
                )
            )
            return None, issues
        delivered = capacity / GIB_PER_TIB * rate
        if delivered < required:
            needed = rules.next_valid_capacity(_capacity_for(required, rate, fs), per_unit, fs.efa)
            issues.append(
                SpecIssue(
                    f"{path}.capacity_gib",
                    f"{capacity} GiB delivers {delivered:,.0f} MB/s but the workload needs {required:,.0f} MB/s",
                    f"use at least {needed} GiB, or remove capacity_gib to derive it",
                )
            )
            return None, issues
        return LustreSizing(capacity, per_unit, delivered, required, derived=False), []

    capacity = rules.next_valid_capacity(_capacity_for(required, rate, fs), per_unit, fs.efa)
    return LustreSizing(capacity, per_unit, capacity / GIB_PER_TIB * rate, required, derived=True), []


def _capacity_for(required_mbps: float, rate: float, fs: FsxLustre) -> int:
    for_throughput = required_mbps / rate * GIB_PER_TIB
    for_data = fs.workload.dataset_gib if fs.workload else 0
    return max(1, math.ceil(max(for_throughput, for_data)))
