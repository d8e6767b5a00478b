"""TrainingCluster: one environment's cluster, composed from a resolved spec.

The spec is placement-neutral; this picks the placement's builder. The component's own
properties carry the facts that policies read at the stack level (environment, power).
"""

from __future__ import annotations

from typing import Any

import pulumi

from gpuforge.catalog.tokens import CLUSTER
from gpuforge.infra.aws import build_aws_cluster
from gpuforge.infra.hybrid import build_hybrid_cluster
from gpuforge.infra.onprem import build_onprem_cluster
from gpuforge.spec import ResolvedSpec


def cluster_props(resolved: ResolvedSpec) -> dict[str, Any]:
    spec = resolved.spec
    return {
        "name": spec.name,
        "environment": spec.environment,
        "placement": spec.placement.kind,
        "region": spec.region,
        "power": {
            "budgetKw": spec.power.budget_kw,
            "pue": resolved.pue,
            "pueSource": resolved.pue_source,
            "spareDrawFraction": spec.power.spare_draw_fraction,
        },
        "software": {
            "nvidiaDriverBranch": spec.software.nvidia_driver_branch,
            "ncclVersion": spec.software.nccl_version,
            "ncclCudaVersion": spec.software.nccl_cuda_version,
            "awsOfiNcclVersion": spec.software.aws_ofi_nccl_version,
            "efaInstallerVersion": spec.software.efa_installer_version,
        },
    }


class TrainingCluster(pulumi.ComponentResource):
    outputs: dict[str, Any]

    def __init__(self, name: str, resolved: ResolvedSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        props = cluster_props(resolved)
        super().__init__(CLUSTER, name, props, opts)
        kind = resolved.spec.placement.kind
        build = {"aws": build_aws_cluster, "onprem": build_onprem_cluster, "hybrid": build_hybrid_cluster}[kind]
        self.outputs = {**build(name, resolved, self), "software": props["software"]}
        self.register_outputs(self.outputs)
