"""NVIDIA's reference rail-optimized fabrics (data/fabric_reference.yaml): the designs the site's per-tier
fabric checks are held to, and the source the checks' messages cite."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gpuforge.catalog.models import load_data_file

FABRIC_REFERENCE_FILE = Path(__file__).resolve().parent / "data" / "fabric_reference.yaml"


class ReferenceDesign(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    scalable_units: int
    nodes: int
    leaves: int
    spines: int
    cores: int
    reserved_leaf_ports: int  # leaf ports per rail leaf of one SU the UFM appliances take


class FabricReference(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    secondary: bool
    switch_ports: int
    su_nodes: int
    rails: int
    designs: tuple[ReferenceDesign, ...]


@lru_cache(maxsize=1)
def load_fabric_reference() -> FabricReference:
    return load_data_file(FABRIC_REFERENCE_FILE, FabricReference)
