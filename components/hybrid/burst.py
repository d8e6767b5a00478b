"""BurstCapacity: AWS burst nodes lend their GPUs to the site's teams through one Kueue cohort.

The site's GpuPlatform gives every team a ClusterQueue in cohort `gpuforge` with a flavor per GPU
model (`gpu-h100` selects `gpuforge.dev/gpu-model: H100`). Burst nodes carry the same labels (plus
`gpuforge.dev/location: aws`), so the same flavor selects them. This component adds a ClusterQueue
in that cohort holding the burst GPUs as nominal quota and admitting no namespace itself: a pure
lender. Teams borrow it when their own quota is used up, and reclaim-within-cohort preemption gives
it back. Team quotas (guarantees) never count burst GPUs: burst groups can scale to zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.k8s.labels import NODE_LABEL_GPU_MODEL, NODE_LABEL_GROUP, NODE_LABEL_LOCATION
from components.k8s.platform import COHORT, GPU_RESOURCE, flavor_name


@dataclass(frozen=True)
class BurstPool:
    node_group: str
    gpu_model: str
    nodes: int
    gpus_per_node: int
    cpus_per_node: int
    memory_mib_per_node: int


def burst_node_labels(pool: BurstPool) -> dict[str, str]:
    """Labels a burst node registers with (kubelet --node-labels from /etc/gpuforge/node.json)."""
    return {NODE_LABEL_GROUP: pool.node_group, NODE_LABEL_GPU_MODEL: pool.gpu_model, NODE_LABEL_LOCATION: "aws"}


def burst_queue_spec(pools: list[BurstPool]) -> dict[str, Any]:
    by_model: dict[str, list[BurstPool]] = {}
    for pool in pools:
        by_model.setdefault(pool.gpu_model, []).append(pool)
    flavors = []
    for model, group in sorted(by_model.items()):
        flavors.append(
            {
                "name": flavor_name(model),
                "resources": [
                    {"name": "cpu", "nominalQuota": sum(p.nodes * p.cpus_per_node for p in group)},
                    {"name": "memory", "nominalQuota": f"{sum(p.nodes * p.memory_mib_per_node for p in group)}Mi"},
                    {"name": GPU_RESOURCE, "nominalQuota": sum(p.nodes * p.gpus_per_node for p in group)},
                ],
            }
        )
    return {
        # No namespaceSelector: the queue admits nothing itself, it only lends to the cohort.
        "cohort": COHORT,
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU_RESOURCE], "flavors": flavors}],
    }


@dataclass(frozen=True)
class BurstCapacityArgs:
    region: str
    pools: list[BurstPool]
    kueue_api_version: str
    kueue: pulumi.Resource | None = None  # the Kueue release whose CRDs the queue needs


class BurstCapacity(pulumi.ComponentResource):
    def __init__(self, name: str, args: BurstCapacityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            "gpuforge:hybrid:BurstCapacity",
            name,
            {
                "region": args.region,
                "cohort": COHORT,
                "gpus": sum(p.nodes * p.gpus_per_node for p in args.pools),
                "nodeGroups": {p.node_group: burst_node_labels(p) for p in args.pools},
            },
            opts,
        )
        queue = f"burst-{args.region}"
        k8s.apiextensions.CustomResource(
            f"{name}-cq",
            api_version=args.kueue_api_version,
            kind="ClusterQueue",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=queue),
            spec=burst_queue_spec(args.pools),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.kueue] if args.kueue else []),
        )
        self.register_outputs({"clusterQueue": queue, "cohort": COHORT})
