"""The node groups section: a cloud node group's instances, size, capacity source, image and orchestrator."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, field_validator, model_validator

from .base import SpecModel
from .capacity import EffectiveUpdateStrategy, Scaling, UpdateStrategy
from .errors import described_pattern
from .fields import MAX_NODES_PER_GROUP, Fabric, NodeRole, Orchestrator, ReadParameter

AMI_ID = described_pattern(
    r"^ami-[0-9a-f]{8,17}$",
    "an AMI id: ami- and 8 to 17 hex digits",
    "ami-0123456789abcdef0",
)


RESERVATION_ID = described_pattern(
    r"^cr-[0-9a-f]{8,17}$", "a capacity reservation id: cr- and 8 to 17 hex digits", "cr-0123456789abcdef0"
)


class OnDemand(SpecModel):
    type: Literal["on_demand"] = Field(description="Plain on-demand capacity.")


class CapacityReservation(SpecModel):
    type: Literal["capacity_reservation"] = Field(description="Launch into an On-Demand Capacity Reservation.")
    reservation_id: str = Field(pattern=RESERVATION_ID, description="The reservation id, cr-...")
    instance_count: int | None = Field(
        default=None,
        ge=1,
        description="The reservation's size as bought (optional). When set, validate and plan check that the "
        "count + spares of every group launching into it fit; preflight checks it against AWS either way.",
    )
    placement_group: str | None = Field(
        default=None,
        description="The cluster placement group the reservation was created in, if any: instances launch into "
        "it. Without one the group uses no placement group (a new one cannot hold reserved capacity).",
    )


class CapacityBlock(SpecModel):
    type: Literal["capacity_block"] = Field(description="Launch into an EC2 Capacity Block for ML.")
    reservation_id: str = Field(pattern=RESERVATION_ID, description="The capacity block's reservation id.")
    instance_type: str = Field(description="The block's instance type, as purchased; must be the group's.")
    instance_count: int = Field(
        ge=1, le=MAX_NODES_PER_GROUP, description="Instances in the block; the group's count + spares must fit."
    )
    # strict=False: a YAML timestamp is text (YAML 1.2, as Pulumi reads it) and is parsed here, the
    # way the JSON Schema's `format: date-time` judges it.
    start: datetime = Field(
        strict=False,
        description="When the block starts, with its zone, e.g. 2026-12-01T11:30:00Z.",
    )
    end: datetime = Field(
        strict=False,
        description="When the block ends, with its zone: 11:30 UTC, when every block ends, e.g. "
        "2026-12-15T11:30:00Z. Its instances are "
        "terminated shortly before; the group scales to 0 ahead of that.",
    )

    @field_validator("start", "end", mode="before")
    @classmethod
    def _timestamp_text(cls, value: Any) -> Any:
        if not isinstance(value, str | datetime):
            raise ValueError(f"got {value!r}; expected a UTC time written like 2026-12-01T11:30:00Z")
        return value

    @field_validator("start", "end")
    @classmethod
    def _with_zone(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"{value.isoformat()} has no time zone; write it in UTC with a Z, like 2026-12-01T11:30:00Z"
            )
        return value


class Spot(SpecModel):
    type: Literal["spot"] = Field(description="Spot capacity: interruptible, not for multi-node training.")
    max_price: str | None = Field(default=None, description="Maximum hourly price; default the on-demand price.")


Capacity = Annotated[OnDemand | CapacityReservation | CapacityBlock | Spot, Field(discriminator="type")]
# Reserved capacity: bought ahead for one instance type in one AZ, paid for whether nodes run or not, and
# sized to the groups' count + spares, so it has no room for one node more (an ODCR or a Capacity Block).
ReservedCapacity = CapacityReservation | CapacityBlock
# Their capacity `type`s, for plan inputs that carry the type as text (the diff, the policy rules).
RESERVED_CAPACITY: tuple[str, ...] = tuple(
    get_args(model.model_fields["type"].annotation)[0] for model in (CapacityReservation, CapacityBlock)
)


class RootVolume(SpecModel):
    size_gib: int = Field(default=200, ge=20, le=16384, description="Root EBS volume size in GiB.")
    type: Literal["gp3", "io2"] = Field(default="gp3", description="EBS volume type.")
    device_name: str = Field(
        default="/dev/sda1", description="Root device name of the image (/dev/sda1 Ubuntu, /dev/xvda AL2023)."
    )


DLAMI_SSM = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
# Slurm groups default to the Ubuntu 24.04 build of the same AMI: 22.04's slurm-wlm (21.08) has no dynamic
# nodes, 24.04's (23.11) has (catalog slurm.distributions, slurm.minimum). The parameter name is the DLAMI's
# name less "deep", "learning" and "ami" (docs.aws.amazon.com/dlami/latest/devguide/find-dlami-id.html).
DLAMI_2404_SSM = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"
_UBUNTU_RELEASE = re.compile(r"ubuntu(?:-|/server/)(\d{2}\.\d{2})(?:/|$)")


def image_os(ssm_parameter: str) -> str | None:
    """The distribution an AMI parameter names (the DLAMI's and Canonical's carry it: ubuntu-22.04,
    ubuntu/server/24.04), as the catalog keys it ("ubuntu-24.04"); None when the name does not say."""
    match = _UBUNTU_RELEASE.search(ssm_parameter)
    return f"ubuntu-{match.group(1)}" if match else None


def default_image_parameter(orchestrator: str) -> str:
    """The AMI parameter of a group that names no image."""
    return DLAMI_2404_SSM if orchestrator == "slurm" else DLAMI_SSM


class Image(SpecModel):
    ami_id: str | None = Field(default=None, pattern=AMI_ID, description="A fixed AMI id.")
    ssm_parameter: ReadParameter | None = Field(
        default=None,
        description="An SSM parameter holding the AMI id, resolved at launch. Default: the AWS Deep Learning "
        "Base OSS NVIDIA driver AMI for Ubuntu 22.04 (Ubuntu 24.04 for orchestrator: slurm, whose packaged "
        "Slurm is recent enough), when ami_id is not set.",
    )
    pipeline: bool = Field(
        default=False,
        description="Use the AMI the cluster's image_pipeline bakes (resolve:ssm:<image_pipeline.ssm_parameter> "
        "at launch). Needs the image_pipeline section.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> Image:
        if sum((bool(self.ami_id), bool(self.ssm_parameter), self.pipeline)) > 1:
            raise ValueError("set one of ami_id, ssm_parameter or pipeline: true, not several")
        return self

    def image_id(self, orchestrator: str) -> str:
        """The launch template's image id for a group of *orchestrator*; a pipeline image resolves through
        ResolvedNodeGroup.image_id."""
        if self.pipeline:
            raise ValueError("a pipeline image needs the cluster's parameter: use ResolvedNodeGroup.image_id")
        return self.ami_id or f"resolve:ssm:{self.ssm_parameter or default_image_parameter(orchestrator)}"


class NodeGroup(SpecModel):
    instance_type: str = Field(description="EC2 instance type (AWS) from the catalog, e.g. p5.48xlarge.")
    count: int | None = Field(
        default=None,
        ge=0,
        le=MAX_NODES_PER_GROUP,
        description="A fixed group: active nodes the workload uses, always running. Set count or scaling.",
    )
    scaling: Scaling | None = Field(
        default=None,
        description="An elastic group instead of count: min to max nodes following the queue (AWS placement, "
        "orchestrator slurm, scaled by gpuforge-lifecycle; not in a reservation or Capacity Block).",
    )
    spares: int = Field(default=0, ge=0, le=MAX_NODES_PER_GROUP, description="Hot spares kept running beside them.")
    update_strategy: UpdateStrategy | None = Field(
        default=None,
        description="How a changed image or launch template replaces running nodes: drain (Slurm drains each "
        "node, waits for its jobs, then replaces it; ParallelCluster's DRAIN) or instance_refresh (the Auto "
        "Scaling group replaces instances). Default: drain for orchestrator slurm, instance_refresh for none; "
        "EKS managed groups roll by themselves.",
    )
    role: NodeRole = Field(default="training", description="training, login or services.")
    fabric: Fabric = Field(
        default="none", description="Node interconnect: efa (AWS), infiniband or roce (on-prem), none."
    )
    efa_interfaces: int | None = Field(
        default=None, ge=1, description="EFA interfaces per node; default the instance type's maximum."
    )
    availability_zone: str | None = Field(
        default=None, description="Pin the group to one AZ. Required for EFA: its traffic does not cross AZs."
    )
    placement: Literal["cluster", "spread", "none"] | None = Field(
        default=None, description="Placement group strategy; default cluster for EFA groups, none otherwise."
    )
    capacity: Capacity = Field(default_factory=lambda: OnDemand(type="on_demand"), description="Capacity source.")
    root_volume: RootVolume = Field(default_factory=RootVolume, description="Encrypted root EBS volume.")
    image: Image = Field(default_factory=Image, description="Machine image (baked by playbooks/bake-image.yml).")
    orchestrator: Orchestrator = Field(
        default="none",
        description="Who schedules work on these nodes: eks (an EKS managed node group; needs the cluster's "
        "kubernetes section), kubernetes (hybrid: burst nodes join the site's cluster), slurm (the Slurm "
        "playbooks), or none (plain instances).",
    )
    renamed_from: str | None = Field(
        default=None,
        description="The group's previous key, when it was renamed: its Pulumi resources keep their identity "
        "(aliases), so no resource is deleted and no node is terminated outright. The nodes carry the group's key "
        "(launch template user data and tags, Slurm node names), so each one is still replaced through the "
        "group's update_strategy (drain: its jobs finish first), as `gpuforge diff` shows under nodes that roll. "
        "Remove it once the rename is deployed everywhere.",
    )

    @model_validator(mode="after")
    def _count_or_scaling(self) -> NodeGroup:
        if self.count is None and self.scaling is None:
            raise ValueError(
                "neither count nor scaling is set; set count: N for a fixed group, or scaling: {min: 0, max: N} "
                "for an elastic one"
            )
        if self.count is not None and self.scaling is not None:
            raise ValueError(
                f"both count ({self.count}) and scaling are set; remove count for an elastic group, or scaling for "
                "a fixed one"
            )
        return self

    @model_validator(mode="after")
    def _spares_fit(self) -> NodeGroup:
        if self.count is not None and self.spares > self.count and self.count > 0:
            raise ValueError(f"spares ({self.spares}) exceed count ({self.count}); spares back up active nodes")
        return self

    @property
    def placement_strategy(self) -> str:
        """Capacity Blocks are already placed together and take no placement group; an ODCR places
        instances in the placement group it was created in, or in none (ParallelCluster
        ec2_validators; data/aws_wiring.yaml capacity_blocks)."""
        if self.placement is not None:
            return self.placement
        if self.capacity.type == "capacity_block":
            return "none"
        if self.capacity.type == "capacity_reservation":
            return "cluster" if self.capacity.placement_group else "none"
        return "cluster" if self.fabric == "efa" else "none"

    @property
    def reservation(self) -> ReservedCapacity | None:
        """The ODCR or Capacity Block the group launches into, if any (see ReservedCapacity)."""
        return self.capacity if isinstance(self.capacity, CapacityReservation | CapacityBlock) else None

    @property
    def is_reserved(self) -> bool:
        """Launches into reserved capacity: scaling it in leaves paid capacity idle, and a replacement
        node has no room to launch before the old one goes."""
        return self.reservation is not None

    @property
    def reservation_placement_group(self) -> str | None:
        """The existing placement group to launch into (an ODCR's own), instead of creating one."""
        return self.capacity.placement_group if self.capacity.type == "capacity_reservation" else None

    @property
    def is_elastic(self) -> bool:
        return self.scaling is not None

    @property
    def active_nodes(self) -> int:
        """Nodes the workload can use at most: count, or an elastic group's max (cost, power, GPUs and
        quotas plan the worst case)."""
        return self.scaling.max if self.scaling is not None else (self.count or 0)

    @property
    def min_nodes(self) -> int:
        """The fewest nodes running: count + spares for a fixed group, scaling.min for an elastic one."""
        return self.scaling.min if self.scaling is not None else self.total_nodes

    @property
    def max_nodes(self) -> int:
        return self.total_nodes

    @property
    def total_nodes(self) -> int:
        """The most nodes the group can run (instances launched, spares included)."""
        return self.active_nodes + self.spares

    @property
    def nodes_text(self) -> str:
        """The size as the plan, summary and diff print it: 64+2, or 0-4 for an elastic group."""
        if self.scaling is not None:
            return f"{self.scaling.min}-{self.scaling.max}"
        return f"{self.count}+{self.spares}"

    @property
    def effective_update_strategy(self) -> EffectiveUpdateStrategy:
        """How a changed image or launch template reaches the nodes, once the default is applied."""
        if self.orchestrator == "eks":
            return "eks_managed"
        if self.update_strategy is not None:
            return self.update_strategy
        return "drain" if self.orchestrator == "slurm" else "instance_refresh"
