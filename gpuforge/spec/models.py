"""The cluster spec: what an environment needs, independent of where it is placed.

Every user-facing model forbids unknown fields and describes each field, so the generated
JSON Schema teaches the YAML in an editor. Rules that need the hardware catalog live in
`checks.py`; the models here only hold what can be judged from the spec alone.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from .base import SpecModel
from .capacity import EffectiveUpdateStrategy, Scaling, UpdateStrategy
from .errors import described_pattern
from .limits import (
    cron_problem,
    eks_public_cidrs_problem,
    read_parameter_problem,
    refusing,
    written_parameter_problem,
)

NAME_PATTERN = described_pattern(
    r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$",
    "a name of 2 to 32 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen",
    "train-h100",
)
MAX_NODES_PER_GROUP = 4096  # beyond one EC2 Auto Scaling group's practical size; split the group


def parse_cidr(value: str, example: str) -> ipaddress.IPv4Network:
    """An IPv4 CIDR block, or a ValueError that says what to write: the network a block with host
    bits set falls in, the IPv4 form for an IPv6 block (every address field of the spec is IPv4:
    VPCs, subnets, security group rules and routes are planned in IPv4)."""
    try:
        network = ipaddress.ip_network(value, strict=False)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a CIDR block; write it like {example}") from exc
    if network.version != 4:
        raise ValueError(f"{value} is an IPv6 block and this field is IPv4; write an IPv4 CIDR like {example}")
    if str(network) != value.strip():
        if "/" not in value:
            raise ValueError(f"{value!r} has no prefix length; write the block like {network} or {example}")
        raise ValueError(
            f"{value} has host bits set: the /{network.prefixlen} network it falls in is {network}; write {network}"
            + (f" (or {value.split('/')[0]}/{_smallest_prefix(value)} for a smaller block)" if _smallest_prefix(value)
               > network.prefixlen else "")
        )
    return network


def _smallest_prefix(value: str) -> int:
    """The shortest prefix at which the address in `value` is a network address (10.40.1.0 -> 24)."""
    address = int(ipaddress.IPv4Address(value.split("/")[0]))
    return 32 - ((address & -address).bit_length() - 1) if address else 0


def parse_ipv4(value: str, what: str) -> str:
    """An IPv4 address, or a ValueError saying how to write it."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an IP address; write the {what} like 10.10.0.11") from exc
    if address.version != 4:
        raise ValueError(f"{value} is an IPv6 address and the {what} is IPv4; write an IPv4 address like 10.10.0.11")
    return value


Name = Annotated[str, Field(pattern=NAME_PATTERN)]
Environment = Literal["dev", "staging", "prod"]
Fabric = Literal["efa", "infiniband", "roce", "none"]
NodeRole = Literal["training", "login", "services"]
# Who schedules work on a group's nodes. `eks` makes the group an EKS managed node group
# (AWS placement); `kubernetes` joins the site's Kubernetes cluster (hybrid burst groups);
# `slurm` leaves the nodes to the Slurm playbooks; `none`: plain instances.
Orchestrator = Literal["eks", "kubernetes", "slurm", "none"]
# Orchestrators whose nodes join a Kubernetes cluster, so the platform and Kueue count them.
KUBERNETES_ORCHESTRATORS: tuple[Orchestrator, ...] = ("eks", "kubernetes")


# --- placement -------------------------------------------------------------------------


AUTOSCALING_ROLE_DESCRIPTION = (
    "EC2 Auto Scaling's service-linked role (AWSServiceRoleForAutoScaling), which the cluster key's policy names: "
    "KMS refuses a key policy naming a role that does not exist, and an account gets this one only with its first "
    "Auto Scaling group. create: the stack declares it (aws.iam.ServiceLinkedRole, the key waits for it, kept on "
    "destroy); existing: the account has it already (another stack of the account created it, or `aws iam "
    "create-service-linked-role --aws-service-name autoscaling.amazonaws.com`). One stack per account creates it; "
    "`gpuforge preflight` says which this account needs."
)


class AwsPlacement(SpecModel):
    kind: Literal["aws"] = Field(description="Place the cluster in one AWS region.")
    region: str = Field(description="AWS region, e.g. us-east-1. No default: it is the environment's choice.")
    autoscaling_service_linked_role: Literal["create", "existing"] = Field(
        default="create", description=AUTOSCALING_ROLE_DESCRIPTION
    )


class OnPremPlacement(SpecModel):
    kind: Literal["onprem"] = Field(description="Place the cluster on a site's bare metal.")
    site: Name = Field(description="Site name, as declared in the site model.")


class HybridPlacement(SpecModel):
    kind: Literal["hybrid"] = Field(description="An on-premises site that bursts into one AWS region.")
    site: Name = Field(description="Site name, as declared in the site model.")
    region: str = Field(description="AWS region the burst node groups run in.")
    autoscaling_service_linked_role: Literal["create", "existing"] = Field(
        default="create", description=AUTOSCALING_ROLE_DESCRIPTION
    )


Placement = Annotated[AwsPlacement | OnPremPlacement | HybridPlacement, Field(discriminator="kind")]


# --- network ---------------------------------------------------------------------------

Tier = Literal["ingress", "management", "compute", "storage"]
TIERS: tuple[Tier, ...] = ("ingress", "management", "compute", "storage")
DEFAULT_TIER_PREFIX: dict[Tier, int] = {"compute": 18, "management": 22, "storage": 22, "ingress": 24}


class SubnetTier(SpecModel):
    prefix_length: int | None = Field(
        default=None,
        ge=16,
        le=28,
        description="Prefix length of each per-AZ subnet, planned from the VPC CIDR. "
        "Defaults: compute /18, management /22, storage /22, ingress /24.",
    )
    cidrs: dict[str, str] | None = Field(
        default=None,
        description="Explicit subnet CIDR per availability zone, instead of planning from prefix_length.",
    )

    @field_validator("cidrs")
    @classmethod
    def _cidrs_parse(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for az, cidr in (value or {}).items():
            try:
                parse_cidr(cidr, example="10.0.0.0/20")
            except ValueError as exc:
                raise ValueError(f"{az}: {exc}") from None
        return value


Port = Annotated[int, Field(ge=1, le=65535)]
# CloudWatch Logs accepts only these retention periods (PutRetentionPolicy retentionInDays).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                      3288, 3653)


def check_log_retention(days: int) -> int:
    if days not in LOG_RETENTION_DAYS:
        nearest = min(LOG_RETENTION_DAYS, key=lambda d: (abs(d - days), d))
        raise ValueError(
            f"got {days}; CloudWatch Logs keeps logs for one of {', '.join(map(str, LOG_RETENTION_DAYS))} days; "
            f"use {nearest}"
        )
    return days


class IngressRule(SpecModel):
    cidr: str = Field(description="Source CIDR allowed in, e.g. an office or VPN range.")
    ports: list[Port] = Field(
        min_length=1, description="TCP ports (1-65535) opened to that CIDR on the ingress tier."
    )
    description: str = Field(description="Why this opening exists; shown in the security group rule.")

    @field_validator("cidr")
    @classmethod
    def _cidr_parse(cls, value: str) -> str:
        parse_cidr(value, example="203.0.113.0/24")
        return value


class Network(SpecModel):
    cidr: str = Field(description="VPC CIDR block, e.g. 10.20.0.0/16.")
    availability_zones: list[str] = Field(
        min_length=1,
        max_length=6,
        description="AZs the network spans. EFA node groups pin one of them; login and services span all.",
    )
    tiers: dict[Tier, SubnetTier] = Field(
        default_factory=dict,
        description="Per-tier subnet plan (ingress, management, compute, storage). Omitted tiers use defaults.",
    )
    nat: Literal["per_az", "single", "none"] = Field(
        default="per_az",
        description="NAT gateways for private egress: one per AZ (resilient), a single one (cheap), or none.",
    )
    s3_gateway_endpoint: bool = Field(default=True, description="Route S3 traffic through a free gateway endpoint.")
    flow_logs: bool = Field(default=True, description="VPC flow logs to CloudWatch Logs.")
    flow_log_retention_days: int = Field(
        default=90, ge=1, le=3653, description="Flow log retention in days: a CloudWatch Logs period (1, 3, 5, "
        "7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653)."
    )
    allowed_ingress: list[IngressRule] = Field(
        default_factory=list,
        description="Explicit openings into the ingress tier. None by default: reach nodes through SSM.",
    )

    @model_validator(mode="after")
    def _private_egress(self) -> Network:
        if self.nat == "none" and not self.s3_gateway_endpoint:
            raise ValueError(
                "nat: none leaves S3 reachable only through the gateway endpoint (ECR serves image layers "
                "from S3); set s3_gateway_endpoint: true or choose nat: single/per_az"
            )
        return self

    @field_validator("cidr")
    @classmethod
    def _vpc_cidr(cls, value: str) -> str:
        net = parse_cidr(value, example="10.20.0.0/16")
        if not 16 <= net.prefixlen <= 24:
            raise ValueError(f"{value} has prefix /{net.prefixlen}; AWS VPCs take /16 to /24")
        return value

    @field_validator("flow_log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        return check_log_retention(value)

    @field_validator("availability_zones")
    @classmethod
    def _unique_azs(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("availability zones repeat; list each once")
        return value

    def tier(self, tier: Tier) -> SubnetTier:
        return self.tiers.get(tier, SubnetTier())


# --- node groups -----------------------------------------------------------------------


AMI_ID = described_pattern(
    r"^ami-[0-9a-f]{8,17}$",
    "an AMI id: ami- and 8 to 17 hex digits",
    "ami-0123456789abcdef0",
)

DRIVER_BRANCH = described_pattern(
    r"^\d{3}$",
    "a three-digit driver branch in quotes",
    "'580'",
)

CRON_SCHEDULE = described_pattern(
    r"^cron\((\S+\s+){5}\S+\)$",
    "an EventBridge cron expression with six fields",
    "cron(0 4 ? * SUN *)",
)

IAM_PRINCIPAL_ARN = described_pattern(
    r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/.+$",
    "an IAM role or user ARN",
    "arn:aws:iam::123456789012:role/ml-admins",
)


RESERVATION_ID = described_pattern(
    r"^cr-[0-9a-f]{8,17}$", "a capacity reservation id: cr- and 8 to 17 hex digits", "cr-0123456789abcdef0"
)
ABSOLUTE_PATH = described_pattern(
    r"^/[A-Za-z0-9_./-]*$", "an absolute path of letters, digits and _ . - /", "/datasets"
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


CronSchedule = Annotated[str, Field(pattern=CRON_SCHEDULE), AfterValidator(refusing(cron_problem))]
ReadParameter = Annotated[str, AfterValidator(refusing(read_parameter_problem))]


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


# --- storage ---------------------------------------------------------------------------

FsxDeployment = Literal["SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"]


class Workload(SpecModel):
    read_mbps_per_gpu: float = Field(
        default=0, ge=0, le=10_000, description="Sustained read rate each training GPU needs, MB/s."
    )
    checkpoint_gib: float = Field(default=0, ge=0, le=10_000_000, description="Size of one full checkpoint, GiB.")
    checkpoint_window_s: float = Field(
        default=300, gt=0, le=86_400, description="Seconds within which a checkpoint must be written."
    )
    dataset_gib: float = Field(default=0, ge=0, le=100_000_000, description="Data the file system must hold, GiB.")


class MetadataConfig(SpecModel):
    mode: Literal["AUTOMATIC", "USER_PROVISIONED"] = Field(description="Metadata IOPS provisioning mode.")
    iops: int | None = Field(default=None, ge=1, le=1_000_000, description="Metadata IOPS when USER_PROVISIONED.")

    @model_validator(mode="after")
    def _iops_with_mode(self) -> MetadataConfig:
        if self.mode == "USER_PROVISIONED" and self.iops is None:
            raise ValueError("mode USER_PROVISIONED needs iops (1500, 3000, 6000, 12000 or a multiple of 12000)")
        if self.mode == "AUTOMATIC" and self.iops is not None:
            raise ValueError("iops is only set with mode USER_PROVISIONED")
        return self


S3Event = Literal["NEW", "CHANGED", "DELETED"]
S3_EVENTS: tuple[S3Event, ...] = ("NEW", "CHANGED", "DELETED")


class DataRepositoryAssociation(SpecModel):
    file_system_path: str = Field(pattern=ABSOLUTE_PATH, description="Directory in Lustre, e.g. /datasets.")
    object_store: str = Field(description="Key of an object store in storage.object_stores.")
    prefix: str = Field(default="", description="Prefix inside that bucket.")
    import_events: list[S3Event] = Field(
        default_factory=lambda: list(S3_EVENTS), description="S3 events imported into Lustre."
    )
    export_events: list[S3Event] = Field(
        default_factory=list, description="Lustre changes exported to S3 (checkpoints: NEW, CHANGED)."
    )


class FsxLustre(SpecModel):
    kind: Literal["fsx_lustre"] = Field(description="Amazon FSx for Lustre.")
    deployment_type: FsxDeployment = Field(description="SCRATCH_1/2 (not replicated) or PERSISTENT_1/2.")
    capacity_gib: int | None = Field(
        default=None,
        gt=0,
        le=100_000_000,
        description="Storage capacity in GiB; derived from the workload when omitted.",
    )
    per_unit_storage_throughput: int | None = Field(
        default=None,
        ge=1,
        le=100_000, description="MB/s per TiB (PERSISTENT only); the catalog lists the allowed values."
    )
    workload: Workload | None = Field(default=None, description="What the training job needs, to size from.")
    availability_zone: str | None = Field(
        default=None, description="AZ of the file system; default the AZ of the first pinned training group."
    )
    metadata: MetadataConfig | None = Field(default=None, description="Metadata configuration (PERSISTENT_2).")
    efa: bool = Field(default=False, description="EFA-enabled Lustre (PERSISTENT_2 only, set at creation).")
    data_repository_associations: dict[Name, DataRepositoryAssociation] = Field(
        default_factory=dict, description="Links from Lustre directories to object stores, keyed by name."
    )
    backup_retention_days: int | None = Field(
        default=None,
        ge=0,
        le=90,
        description="Daily automatic backups kept this many days (PERSISTENT only; 0 turns them off). "
        "Default: 7 in prod, off elsewhere.",
    )

    @model_validator(mode="after")
    def _backups_need_persistent(self) -> FsxLustre:
        if self.backup_retention_days and not self.deployment_type.startswith("PERSISTENT"):
            raise ValueError(
                f"backup_retention_days: {self.deployment_type} file systems take no automatic backups; "
                "use PERSISTENT_2, or export checkpoints to S3 with a data repository association"
            )
        return self


ParallelFs = Annotated[FsxLustre, Field(discriminator="kind")]


class Lifecycle(SpecModel):
    noncurrent_version_expiration_days: int | None = Field(
        default=30, ge=1, le=36_500, description="Delete noncurrent versions after this many days."
    )
    abort_incomplete_multipart_days: int = Field(
        default=7, ge=1, le=36_500, description="Abort stale multipart uploads."
    )
    transition_to_ia_days: int | None = Field(
        default=None, ge=30, le=36_500, description="Move current objects to STANDARD_IA after this many days."
    )
    expiration_days: int | None = Field(
        default=None, ge=1, le=36_500, description="Expire current objects after N days."
    )

    @model_validator(mode="after")
    def _expire_after_transition(self) -> Lifecycle:
        # S3 refuses a rule whose expiration comes on or before its transition.
        expire, move = self.expiration_days, self.transition_to_ia_days
        if expire is not None and move is not None and expire <= move:
            raise ValueError(
                f"expiration_days ({expire}) must come after transition_to_ia_days ({move}): S3 refuses to "
                f"expire objects before they move to STANDARD_IA; raise expiration_days above {move} or drop "
                "the transition"
            )
        return self


class ObjectStore(SpecModel):
    purpose: Literal["data", "checkpoints", "artifacts"] = Field(description="What the bucket holds.")
    versioning: bool = Field(default=True, description="Keep object versions (required for replication).")
    lifecycle: Lifecycle = Field(default_factory=Lifecycle, description="Lifecycle rules.")
    replication_region: str | None = Field(default=None, description="Replicate to a bucket in this region.")
    kms: bool = Field(default=True, description="SSE-KMS with the cluster key (else SSE-S3).")


# AWS tag limits (Tagging AWS resources, "Tag naming limits and requirements").
TAG_KEY_MAX, TAG_VALUE_MAX, TAGS_MAX = 128, 256, 50
GPUFORGE_TAGS = ("gpuforge:cluster", "gpuforge:environment")  # set on every resource (gpuforge/infra/aws/placement.py)
_TAG_CHARS = re.compile(r"^[\w .:/=+\-@]*$")


def check_tags(tags: dict[str, str]) -> dict[str, str]:
    problems = []
    for key, value in tags.items():
        if key.lower().startswith("aws:"):
            problems.append(f"{key!r}: keys starting with aws: are reserved for AWS; drop the prefix")
        elif key in GPUFORGE_TAGS:
            problems.append(f"{key!r}: gpuforge sets this tag itself; remove it")
        if not 1 <= len(key) <= TAG_KEY_MAX:
            problems.append(f"{key[:40]!r}...: a key is 1 to {TAG_KEY_MAX} characters; shorten it")
        if len(value) > TAG_VALUE_MAX:
            problems.append(f"{key!r}: the value has {len(value)} characters; AWS allows {TAG_VALUE_MAX}")
        for text in (key, value):
            if not _TAG_CHARS.match(text):
                bad = sorted({c for c in text if not _TAG_CHARS.match(c)})
                problems.append(f"{key!r}: {', '.join(map(repr, bad))} is not allowed in AWS tags "
                                "(letters, digits, spaces and _ . : / = + - @)")
    if len(tags) > TAGS_MAX - len(GPUFORGE_TAGS) - 1:
        problems.append(f"{len(tags)} tags; AWS allows {TAGS_MAX} per resource and gpuforge sets 3 (with Name); "
                        f"keep at most {TAGS_MAX - len(GPUFORGE_TAGS) - 1}")
    if problems:
        raise ValueError("; ".join(problems))
    return tags


class Storage(SpecModel):
    parallel_fs: ParallelFs | None = Field(default=None, description="The shared parallel file system.")
    object_stores: dict[Name, ObjectStore] = Field(default_factory=dict, description="Buckets keyed by name.")


# --- power and software ----------------------------------------------------------------


class Power(SpecModel):
    budget_kw: float | None = Field(
        default=None, gt=0, le=1_000_000, description="Facility power budget for the cluster, kW."
    )
    pue: float | None = Field(
        default=None, ge=1.0, le=3.0, description="Power usage effectiveness; default the catalog's average."
    )
    spare_draw_fraction: float = Field(
        default=1.0, ge=0, le=1, description="Share of full power a spare draws (1.0: spares run hot)."
    )


class Software(SpecModel):
    nvidia_driver_branch: str = Field(default="580", pattern=DRIVER_BRANCH, description="Datacenter driver branch.")
    nccl_version: str = Field(default="2.27.7", description="NCCL version baked into nodes.")
    nccl_cuda_version: str = Field(
        default="12.9",
        pattern=r"^[0-9]+\.[0-9]+$",
        description="CUDA version of the NCCL build the nodes install (libnccl2=<nccl_version>-1+cuda<this>, from "
        "NVIDIA's CUDA repository) and of the CUDA toolkit nccl-tests is built with; the pair must be one the "
        "catalog lists (catalog.nccl.builds).",
    )
    aws_ofi_nccl_version: str = Field(default="1.16.3", description="aws-ofi-nccl plugin version (EFA).")
    efa_installer_version: str = Field(default="1.43.1", description="EFA installer version (EFA).")


# --- image pipeline ----------------------------------------------------------------------

# Canonical's public SSM parameter for the current Ubuntu 22.04 LTS amd64 AMI (22.04 AMIs are
# published under ebs-gp2; 24.04 and later under ebs-gp3).
UBUNTU_2204_SSM = "/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id"
UBUNTU_2404_SSM = "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"
SSM_PARAMETER_PATTERN = described_pattern(
    r"^/[A-Za-z0-9_.\-/]{1,1000}$",
    "an SSM parameter name: a path starting with / of letters, digits and _ . - /",
    "/gpuforge/prod/gpu-node-ami",
)


# A parameter gpuforge writes may not be under /aws or /ssm (ReadParameter above may: AWS's public ones).
WrittenParameter = Annotated[
    str, Field(pattern=SSM_PARAMETER_PATTERN), AfterValidator(refusing(written_parameter_problem))
]


class ImagePipelineSpec(SpecModel):
    parent_image_ssm_parameter: ReadParameter = Field(
        default=UBUNTU_2204_SSM,
        pattern=SSM_PARAMETER_PATTERN,
        description="SSM parameter holding the parent AMI id the bake starts from. Default: Canonical's "
        "Ubuntu 22.04 LTS amd64 parameter.",
    )
    build_instance_type: str = Field(
        default="c7i.4xlarge",
        description="EC2 instance type that runs the bake (no GPU needed: the driver is built with DKMS); "
        "must be in the catalog and offered in the cluster's region.",
    )
    root_volume_gib: int = Field(
        default=100, ge=20, le=16384, description="Root volume of the baked AMI in GiB (encrypted, cluster key)."
    )
    schedule: CronSchedule | None = Field(
        default=None,
        description="Image Builder cron expression (six fields, UTC), e.g. cron(0 4 ? * SUN *); the pipeline "
        "then rebuilds when the parent image or the playbooks changed. None: build on demand only.",
    )
    ssm_parameter: WrittenParameter | None = Field(
        default=None,
        description="SSM parameter the pipeline writes the baked AMI id to; node groups with image: "
        "{pipeline: true} launch from it. Default: /gpuforge/<cluster>/gpu-node-ami.",
    )
    extra_vars: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Extra Ansible variables for bake-image.yml (e.g. dcgm_exporter_binary_url); they override "
        "the ones derived from the spec.",
    )


    def parameter_for(self, cluster: str) -> str:
        return self.ssm_parameter or f"/gpuforge/{cluster}/gpu-node-ami"


# --- kubernetes --------------------------------------------------------------------------

KubernetesVersion = Literal["1.31", "1.32", "1.33"]
EksAccessPolicy = Literal[
    "AmazonEKSClusterAdminPolicy", "AmazonEKSAdminPolicy", "AmazonEKSEditPolicy", "AmazonEKSViewPolicy"
]
# Namespaces the platform owns (gpuforge/infra/k8s); a team namespace may not take one.
RESERVED_NAMESPACES = frozenset(
    {
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "gpu-operator",
        "kueue-system",
        "node-feature-discovery",
        "nvidia-network-operator",
    }
)


class AccessEntry(SpecModel):
    principal_arn: str = Field(
        pattern=IAM_PRINCIPAL_ARN,
        description="IAM role or user ARN allowed into the cluster, e.g. arn:aws:iam::123456789012:role/ml-admins.",
    )
    policy: EksAccessPolicy = Field(
        description="EKS access policy: AmazonEKSClusterAdminPolicy, AmazonEKSAdminPolicy, AmazonEKSEditPolicy "
        "or AmazonEKSViewPolicy.",
    )
    namespaces: list[Name] = Field(
        default_factory=list,
        description="Limit the policy to these namespaces; empty: the whole cluster.",
    )


class Team(SpecModel):
    namespace: Name | None = Field(default=None, description="The team's namespace; default the team's name.")
    gpu_quota: dict[str, Annotated[int, Field(le=1_000_000)]] = Field(
        min_length=1,
        description="GPUs the team may hold at once, per GPU model (H100, H200, ...): its Kueue ClusterQueue's "
        "nominal quota. Whole nodes' worth of CPU, memory and fabric devices come with it.",
    )

    @field_validator("gpu_quota")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        bad = [f"{model}: {gpus}" for model, gpus in value.items() if gpus <= 0]
        if bad:
            raise ValueError(f"quotas must be positive ({', '.join(bad)}); remove a model the team does not use")
        return value

    def namespace_for(self, team: str) -> str:
        return self.namespace or team


class PodsReady(SpecModel):
    """Kueue's all-or-nothing admission (waitForPodsReady): an admitted job must have all its pods
    running within the timeout, or Kueue evicts it, frees the quota and requeues it with backoff."""

    timeout_minutes: int = Field(
        default=10,
        ge=1,
        le=1440,
        description="Minutes an admitted job may take to get all its pods ready (image pulls of large training "
        "images included) before Kueue evicts and requeues it.",
    )
    block_admission: bool = Field(
        default=True,
        description="Admit one job at a time until its pods are ready, so two half-placed multi-node jobs cannot "
        "deadlock each other on the same nodes.",
    )
    requeue_limit: int | None = Field(
        default=5,
        ge=0,
        le=1000,
        description="Requeues after a pods-ready timeout before Kueue deactivates the job; null: requeue forever.",
    )
    requeue_backoff_base_seconds: int = Field(
        default=60, ge=1, le=86_400, description="First requeue backoff, seconds; it grows exponentially from there."
    )
    requeue_backoff_max_seconds: int = Field(
        default=3600, ge=1, le=604_800, description="Longest requeue backoff, seconds."
    )

    @model_validator(mode="after")
    def _backoff(self) -> PodsReady:
        if self.requeue_backoff_max_seconds < self.requeue_backoff_base_seconds:
            raise ValueError(
                f"requeue_backoff_max_seconds ({self.requeue_backoff_max_seconds}) is below "
                f"requeue_backoff_base_seconds ({self.requeue_backoff_base_seconds}); raise the maximum"
            )
        return self


class Platform(SpecModel):
    gpu_driver: Literal["preinstalled", "operator"] = Field(
        default="preinstalled",
        description="preinstalled: the image carries the NVIDIA driver and container toolkit (playbooks, or the "
        "EKS accelerated AMI), the GPU Operator leaves them alone; operator: the GPU Operator installs them.",
    )
    prometheus_operator: bool = Field(
        default=False,
        description="Install the Prometheus operator (kube-prometheus-stack, pinned in the catalog) in the cluster, "
        "in monitoring.server's namespace, and scrape dcgm-exporter through a ServiceMonitor (else through the "
        "service's prometheus.io annotations).",
    )
    teams: dict[Name, Team] = Field(
        default_factory=dict, description="Teams keyed by name: a namespace and Kueue queues with GPU quotas each."
    )
    parallel_fs_storage_class: bool = Field(
        default=True,
        description="Give every team namespace a claim (fsx-lustre) on the stack's parallel file system: a static "
        "PersistentVolume naming the file system (FSx CSI on AWS), never a storage class creating new ones.",
    )
    service_account: Name = Field(
        default="training",
        description="Service account created in every team namespace for training pods. On EKS it carries the "
        "team's IAM role (IRSA: the cluster's buckets and key, no node credentials).",
    )
    pods_ready: PodsReady = Field(
        default_factory=PodsReady,
        description="Kueue waitForPodsReady: multi-node jobs run whole or are evicted and requeued.",
    )

    @model_validator(mode="after")
    def _namespaces(self) -> Platform:
        seen: dict[str, str] = {}
        for name, team in self.teams.items():
            ns = team.namespace_for(name)
            if ns in RESERVED_NAMESPACES:
                raise ValueError(f"teams[{name}]: namespace {ns} is reserved for the platform; choose another")
            if ns in seen:
                raise ValueError(f"teams[{name}]: namespace {ns} is already team {seen[ns]}'s; give each its own")
            seen[ns] = name
        return self


class KubernetesSpec(SpecModel):
    version: KubernetesVersion = Field(default="1.33", description="Kubernetes minor version of the control plane.")
    endpoint: Literal["private", "public"] = Field(
        default="private",
        description="API server endpoint: private (reachable from the VPC only) or public (also from "
        "public_access_cidrs, never the whole internet).",
    )
    public_access_cidrs: list[str] = Field(
        default_factory=list, description="CIDRs allowed to reach a public endpoint, e.g. an office or VPN range."
    )
    access_entries: dict[Name, AccessEntry] = Field(
        default_factory=dict,
        description="IAM principals granted access, keyed by a stable name (EKS access entries; the creator "
        "gets no implicit admin).",
    )
    log_retention_days: int = Field(
        default=365, ge=1, le=3653, description="Retention of the control-plane logs (all five types), days: a "
        "CloudWatch Logs period (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, ...)."
    )
    platform: Platform = Field(default_factory=Platform, description="GPU platform on the cluster.")

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        return check_log_retention(value)

    @field_validator("public_access_cidrs")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            net = parse_cidr(cidr, example="203.0.113.0/24")
            if net.prefixlen == 0:
                raise ValueError(f"{cidr} opens the API server to the whole internet; list your own ranges")
        problem = eks_public_cidrs_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _one_entry_per_principal(self) -> KubernetesSpec:
        seen: dict[str, str] = {}
        for key, entry in self.access_entries.items():
            if entry.principal_arn in seen:
                raise ValueError(
                    f"access_entries[{key}]: {entry.principal_arn} already has "
                    f"access_entries[{seen[entry.principal_arn]}]; "
                    "EKS keeps one access entry per principal: merge them (one policy each, or one entry per role)"
                )
            seen[entry.principal_arn] = key
        return self

    @model_validator(mode="after")
    def _endpoint(self) -> KubernetesSpec:
        if self.endpoint == "public" and not self.public_access_cidrs:
            raise ValueError("a public endpoint needs public_access_cidrs; list the ranges allowed in, or use private")
        if self.endpoint == "private" and self.public_access_cidrs:
            raise ValueError("public_access_cidrs only apply to endpoint: public; remove them or set endpoint: public")
        return self


# --- cluster ---------------------------------------------------------------------------


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


# The site model and the monitoring section refer back to SpecModel and Name above, so they are imported last.
from .monitoring import Monitoring  # noqa: E402
from .scheduler import SchedulerSpec  # noqa: E402
from .site import HybridSpec, Site  # noqa: E402

ClusterSpec.model_rebuild()
