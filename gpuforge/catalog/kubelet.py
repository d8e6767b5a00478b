"""The kubelet's reservation model (data/kubelet.yaml): a node's allocatable CPU and memory, which
Kueue quotas count and gpuforge's on-premises kubelet drop-in reserves."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from gpuforge.catalog.models import load_data_file

KUBELET_FILE = Path(__file__).resolve().parent / "data" / "kubelet.yaml"
NodeKind = Literal["eks", "onprem"]


class KubeletReservation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_reserved_percent_by_core: tuple[tuple[int, int | None, float], ...]
    memory_reserved_base_mib: int
    memory_reserved_per_pod_mib: int
    eviction_memory_mib: int
    max_pods: dict[str, int]

    def cpu_reserved_millicores(self, cpus: int) -> int:
        total = cpus * 1000
        reserved = 0.0
        for start, end, percent in self.cpu_reserved_percent_by_core:
            low, high = start * 1000, total if end is None else min(end * 1000, total)
            if total > low:
                reserved += (high - low) * percent / 100
        return int(reserved)

    def memory_reserved_mib(self, kind: NodeKind) -> int:
        return self.memory_reserved_per_pod_mib * self.max_pods[kind] + self.memory_reserved_base_mib

    def allocatable(self, cpus: int, memory_mib: int, kind: NodeKind) -> Allocatable:
        return Allocatable(
            cpu_millicores=cpus * 1000 - self.cpu_reserved_millicores(cpus),
            memory_mib=memory_mib - self.memory_reserved_mib(kind) - self.eviction_memory_mib,
        )


@dataclass(frozen=True)
class Allocatable:
    cpu_millicores: int
    memory_mib: int


@lru_cache(maxsize=1)
def load_kubelet_reservation() -> KubeletReservation:
    return load_data_file(KUBELET_FILE, KubeletReservation)
