"""What the controller's lifecycle program (gpuforge/nodes/lifecycle.py) is told: the fabric gate's floors
per instance type, from the catalog (components/catalog/data/fabric_gate.yaml and the EFA ceiling)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from components.catalog import load_catalog

GATE_FILE = Path(__file__).resolve().parents[2] / "components" / "catalog" / "data" / "fabric_gate.yaml"


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
