"""The cluster spec: what an environment needs, independent of where it is placed.

Every user-facing model forbids unknown fields and describes each field, so the generated
JSON Schema teaches the YAML in an editor. Rules that need the hardware catalog live in
`checks.py`; the models only hold what can be judged from the spec alone. Each section is a
module of its own (network.py, node_group.py, storage.py, ...); this one puts them together."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from .base import SpecModel
from .fields import Environment, Name
from .image_pipeline import ImagePipelineSpec
from .kubernetes import KubernetesSpec
from .monitoring import Monitoring
from .network import Network
from .node_group import NodeGroup
from .placement import Placement
from .power import Power
from .scheduler import SchedulerSpec
from .site import HybridSpec, Site
from .software import Software
from .storage import Storage
from .tags import check_tags


class ClusterSpec(SpecModel):
    name: Name = Field(description="Cluster name; prefixes every resource.")
    environment: Environment = Field(description="dev, staging or prod: prod protects stateful resources.")
    placement: Placement = Field(description="Where the cluster runs: aws, onprem or hybrid.")
    tags: dict[str, str] = Field(
        default_factory=dict,
        description="Tags on every resource: keys up to 128 characters (not aws:...), values up to 256.",
    )
    network: Network | None = Field(default=None, description="VPC and its segmentation (aws and hybrid).")
    node_groups: dict[Name, NodeGroup] = Field(
        default_factory=dict,
        description="Cloud node groups keyed by a stable name (aws; hybrid burst groups). On-premises hosts "
        "are declared in site.hosts.",
    )
    site: Site | None = Field(default=None, description="The on-premises site model (onprem and hybrid).")
    hybrid: HybridSpec | None = Field(
        default=None, description="Site-to-cloud link, burst and object storage sync (hybrid placement)."
    )
    storage: Storage = Field(default_factory=Storage, description="Parallel file system and object stores.")
    power: Power = Field(default_factory=Power, description="Power budget and efficiency.")
    software: Software = Field(default_factory=Software, description="Node software versions.")
    kubernetes: KubernetesSpec | None = Field(
        default=None,
        description="Kubernetes control plane and GPU platform, for node groups with orchestrator: eks.",
    )
    scheduler: SchedulerSpec | None = Field(
        default=None,
        description="The Slurm cluster users submit jobs to: controller, accounting, partitions of node groups "
        "(orchestrator: slurm), login nodes, users and containers.",
    )
    image_pipeline: ImagePipelineSpec | None = Field(
        default=None,
        description="EC2 Image Builder pipeline that runs playbooks/bake-image.yml and publishes the AMI id to "
        "an SSM parameter (aws placement); node groups use it with image: {pipeline: true}.",
    )
    monitoring: Monitoring | None = Field(
        default=None,
        description="Prometheus and Alertmanager: where they run, retention, receivers, the power budget watched.",
    )
    catalog: dict[str, Any] = Field(
        default_factory=dict,
        description="Overrides of catalog entries for this stack, keyed like the catalog's data files.",
    )

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str]) -> dict[str, str]:
        return check_tags(value)

    @property
    def region(self) -> str | None:
        return getattr(self.placement, "region", None)

    @property
    def protected(self) -> bool:
        """Stateful resources are protected and retained in production."""
        return self.environment == "prod"
