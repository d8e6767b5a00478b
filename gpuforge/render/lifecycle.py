"""What the controller's lifecycle program (gpuforge/nodes/lifecycle.py) is told: the fabric gate's floors
per instance type, from the catalog (gpuforge/catalog/data/fabric_gate.yaml and the EFA ceiling)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from gpuforge.catalog import load_catalog
from gpuforge.catalog.models import DATA_DIR
from gpuforge.spec.reservations import RECURRENCE_PERIODS
from gpuforge.spec.scheduler import SchedulerSpec

GATE_FILE = DATA_DIR / "fabric_gate.yaml"


@dataclass(frozen=True)
class GateFloors:
    message_bytes: int
    single_node_gbps: float | None
    two_node_gbps: float | None


@cache
def _gate_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(GATE_FILE.read_text(encoding="utf-8"))
    return data


def gate_floors(instance_type: str, catalog: Any = None) -> GateFloors:
    """The busbw a new node of *instance_type* must reach (GB/s): the gate's fraction of the reference."""
    data = _gate_data()
    fraction = float(data["fraction"])
    catalog = catalog or load_catalog()
    single = (data.get("single_node") or {}).get(instance_type)
    pair = (data.get("two_node") or {}).get(instance_type)
    pair_reference = pair["busbw_gbps"] if pair else catalog.instance_type(instance_type).efa_ceiling_gbps

    def floor(reference: float | None) -> float | None:
        return None if reference is None else round(float(reference) * fraction, 3)

    return GateFloors(
        message_bytes=int(data["message_bytes"]),
        single_node_gbps=floor(single["busbw_gbps"] if single else None),
        two_node_gbps=floor(pair_reference),
    )


@dataclass(frozen=True)
class SiteFabricFloors:
    """The acceptance playbook's floors for a site's compute fabric (fabric_gate.yaml `site`)."""

    rail_gbps: float  # ib_write_bw per rail, Gb/s
    busbw_gbps: float | None  # all_reduce_perf across nodes, GB/s; None: no published figure for the rate


def site_fabric_floors(rate_gbps: int, rails: int) -> SiteFabricFloors:
    """Per rail: the gate's site rail_fraction of the link rate; across nodes: rails x the per-NIC busbw of
    the rate x the gate's fraction."""
    data = _gate_data()
    site = data["site"]
    per_nic = (site.get("busbw_per_nic") or {}).get(rate_gbps)
    busbw = round(rails * float(per_nic["busbw_gbps"]) * float(data["fraction"]), 3) if per_nic else None
    return SiteFabricFloors(rail_gbps=round(rate_gbps * float(site["rail_fraction"]), 3), busbw_gbps=busbw)


GATE_PARTITION = "gpuforge-gate"


def maintenance_windows(sched: SchedulerSpec, group: str) -> list[dict[str, Any]]:
    """The maintenance windows (scheduler.reservations) that cover *group*: inside one, gpuforge-lifecycle drains
    the group's outdated nodes for a rolling update; outside, it waits (docs/lifecycle.md, "Rolling updates")."""
    windows = []
    for name, resv in sched.reservations.items():
        window = resv.window()
        if resv.kind != "maintenance" or group not in resv.node_groups or window is None:
            continue
        period = RECURRENCE_PERIODS.get(resv.recurrence or "")
        windows.append({"name": name, "start": f"{window[0]:%Y-%m-%dT%H:%M:%S}Z",
                        "end": f"{window[1]:%Y-%m-%dT%H:%M:%S}Z",
                        "period_s": int(period.total_seconds()) if period else None})
    return windows


def lifecycle_config(resolved: Any, partitions: dict[str, list[str]]) -> dict[str, Any] | None:
    """``slurm_config.lifecycle`` for the controller's gpuforge-lifecycle (docs/lifecycle.md): every cloud
    node group of the Slurm cluster, fixed or elastic, with its partitions and the fabric gate's floors
    for its instance type (GPU groups). None when no group runs in an Auto Scaling group.

    partitions: node group -> the partitions that hold it.
    """
    sched = resolved.scheduler
    cloud = {name: group for name, group in sched.groups.items() if group.cloud}
    if not cloud:
        return None
    groups: dict[str, Any] = {}
    for name, group in cloud.items():
        node_group = resolved.spec.node_groups[name]
        instance_type = group.instance_type or ""
        gpus = resolved.catalog.instance_type(instance_type).gpu_count
        floors = gate_floors(instance_type, resolved.catalog)
        groups[name] = {
            "partitions": partitions.get(name, []),
            "instance_type": instance_type,
            "elastic": node_group.is_elastic,
            "min": node_group.min_nodes,
            "max": node_group.max_nodes,
            "scaledown_idle_minutes": node_group.scaling.scaledown_idle_minutes if node_group.scaling else 10,
            # A gated node registers drained and is admitted once it passes; the program finds it by its
            # name, <group>-<instance id>, which the node takes at boot (gpuforge/nodes/instance_name.py).
            "gate": {
                "single_node_floor_gbps": floors.single_node_gbps,
                "two_node_floor_gbps": floors.two_node_gbps,
                "message_bytes": floors.message_bytes,
                "nccl_tests": "/opt/nccl-tests/build/all_reduce_perf",
                "gpus": gpus,
            }
            if gpus
            else None,
            "maintenance_windows": maintenance_windows(sched.spec, name),
        }
    return {
        "cluster": resolved.spec.name,
        "region": resolved.spec.placement.region,
        "endpoint_url": None,
        "rolling_batch": 1,
        "rolling_outside_windows": sched.spec.rolling_updates_outside_windows,
        "gate_partition": GATE_PARTITION,
        "groups": groups,
    }
