"""What `resolve` returns: the spec with every fact the components, renderers and rules need (catalog
rows, sizes, addresses), derived once. Keyword-only, so a new field cannot shift the others."""

from __future__ import annotations

from dataclasses import dataclass

from gpuforge.catalog import Catalog, InstanceType

from .models import KUBERNETES_ORCHESTRATORS, ClusterSpec, NodeGroup
from .resolved_scheduler import ResolvedScheduler
from .resolved_site import ResolvedSite
from .sizing import LustreSizing
from .subnets import Subnets


@dataclass(frozen=True, kw_only=True)
class ResolvedNodeGroup:
    name: str
    spec: NodeGroup
    instance: InstanceType
    azs: tuple[str, ...]  # where its instances may launch
    efa_interfaces: int  # per node; 0 without EFA
    node_power_kw: float
    image_parameter: str | None = None  # the image pipeline's SSM parameter, for image: {pipeline: true}

    @property
    def gpus_per_node(self) -> int:
        return self.instance.gpu_count

    @property
    def image_id(self) -> str:
        """The launch template's image id: the pipeline's parameter, or what the spec's image names."""
        if self.image_parameter is not None:
            return f"resolve:ssm:{self.image_parameter}"
        return self.spec.image.image_id(self.spec.orchestrator)


@dataclass(frozen=True, kw_only=True)
class ResolvedSpec:
    spec: ClusterSpec
    catalog: Catalog
    subnets: Subnets
    node_groups: dict[str, ResolvedNodeGroup]
    lustre: LustreSizing | None
    lustre_az: str | None
    pue: float
    site: ResolvedSite | None = None  # onprem and hybrid placements
    image_build_az: str | None = None  # where the image pipeline's build instance runs (compute tier)
    scheduler: ResolvedScheduler | None = None  # the Slurm cluster (scheduler section)
    pue_source: str = ""  # where `pue` comes from: the stack, the site, or the catalog's cloud figure

    @property
    def training_gpus(self) -> int:
        return sum(
            g.spec.active_nodes * g.gpus_per_node for g in self.node_groups.values() if g.spec.role == "training"
        )

    @property
    def kubernetes_node_groups(self) -> dict[str, ResolvedNodeGroup]:
        """Groups whose nodes join the Kubernetes cluster (the platform and Kueue count them)."""
        return {n: g for n, g in self.node_groups.items() if g.spec.orchestrator in KUBERNETES_ORCHESTRATORS}
