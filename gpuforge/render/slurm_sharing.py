"""How a shared Slurm cluster divides its nodes among jobs and teams: each partition's defaults per GPU and
billing weights (from the catalog's node hardware), and whether running jobs may be preempted.

A job that names no CPUs or memory gets its GPUs' share of the node (DefCpuPerGPU, DefMemPerCPU), not the
whole node's memory, so two 1-GPU jobs run side by side on a shared node (docs/slurm.md, "Sharing a node").
Where a partition holds node groups of different hardware, the smallest share is the default: a job sized by
it fits on every node of the partition.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpuforge.spec.preemption import Preemption

# The QOS slurmdbd gives every job that names none (sacctmgr(1)): with preempt/qos it preempts the scavenger.
DEFAULT_QOS = "normal"
# QOS priorities, scaled by PriorityWeightQOS: the scavenger's jobs rank below every normal job.
NORMAL_QOS_PRIORITY = 100
SCAVENGER_QOS_PRIORITY = 0


@dataclass(frozen=True)
class NodeShape:
    """What a node line says a node has (NodeHardware: CPUs, RealMemory in MiB, GPUs)."""

    cpus: int
    real_memory: int
    gpus: int


def partition_sharing(shapes: Iterable[NodeShape]) -> dict[str, Any]:
    """DefCpuPerGPU, DefMemPerCPU and TRESBillingWeights of a partition over nodes of these shapes."""
    nodes = list(shapes)
    mem_per_cpu = min(n.real_memory // n.cpus for n in nodes)
    gpu_nodes = [n for n in nodes if n.gpus]
    if not gpu_nodes:
        # A CPU partition bills CPUs: a node's memory weighs as its CPUs.
        return {"def_cpu_per_gpu": 0, "def_mem_per_cpu": mem_per_cpu,
                "billing_weights": f"CPU=1,Mem={_weight(1024 / mem_per_cpu)}G"}
    cpu_per_gpu = max(1, min(n.cpus // n.gpus for n in gpu_nodes))
    mem_per_gpu_gib = mem_per_cpu * cpu_per_gpu / 1024
    # A GPU's share of the CPUs and of the memory each bills as one GPU (PriorityFlags=MAX_TRES takes the largest).
    return {"def_cpu_per_gpu": cpu_per_gpu, "def_mem_per_cpu": mem_per_cpu,
            "billing_weights": f"CPU={_weight(1 / cpu_per_gpu)},Mem={_weight(1 / mem_per_gpu_gib)}G,GRES/gpu=1"}


def _weight(value: float) -> str:
    return f"{value:.4g}"


def preemption(spec: Preemption) -> dict[str, Any]:
    """PreemptType, PreemptMode and the QOS the slurm_dbd role keeps (docs/slurm.md, "Preemption")."""
    if spec.kind == "none":
        return {"type": "preempt/none", "mode": "OFF", "qos": []}
    return {
        "type": "preempt/qos",
        "mode": "REQUEUE",
        "qos": [
            {"name": spec.scavenger_qos, "priority": SCAVENGER_QOS_PRIORITY, "preempt": [],
             "preempt_mode": "requeue", "grace_time_s": spec.grace_time_s},
            {"name": DEFAULT_QOS, "priority": NORMAL_QOS_PRIORITY, "preempt": [spec.scavenger_qos],
             "preempt_mode": "cluster", "grace_time_s": 0},
        ],
    }
