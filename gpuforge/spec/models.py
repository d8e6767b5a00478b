"""The whole cluster spec in one import: every section's models, from the modules that define them.

The spec is split by section (placement, network, node groups, storage, software, image pipeline,
kubernetes, scheduler, monitoring, site); `cluster.py` puts the sections together as `ClusterSpec`.
Import a name from here or from its section's module."""

from __future__ import annotations

from .base import (
    SpecModel,
)
from .cluster import (
    ClusterSpec,
)
from .fields import (
    ABSOLUTE_PATH,
    KUBERNETES_ORCHESTRATORS,
    LOG_RETENTION_DAYS,
    MAX_NODES_PER_GROUP,
    NAME_PATTERN,
    Environment,
    Fabric,
    Name,
    NodeRole,
    Orchestrator,
    Port,
    check_log_retention,
    parse_cidr,
    parse_ipv4,
)
from .image_pipeline import (
    CRON_SCHEDULE,
    SSM_PARAMETER_PATTERN,
    UBUNTU_2204_SSM,
    UBUNTU_2404_SSM,
    ImagePipelineSpec,
    ReadParameter,
    WrittenParameter,
)
from .kubernetes import (
    IAM_PRINCIPAL_ARN,
    RESERVED_NAMESPACES,
    AccessEntry,
    EksAccessPolicy,
    KubernetesSpec,
    KubernetesVersion,
    Platform,
    PodsReady,
    Team,
)
from .monitoring import (
    Monitoring,
)
from .network import (
    DEFAULT_TIER_PREFIX,
    TIERS,
    IngressRule,
    Network,
    SubnetTier,
    Tier,
)
from .node_group import (
    AMI_ID,
    DLAMI_2404_SSM,
    DLAMI_SSM,
    RESERVATION_ID,
    Capacity,
    CapacityBlock,
    CapacityReservation,
    Image,
    NodeGroup,
    OnDemand,
    RootVolume,
    Spot,
    default_image_parameter,
    image_os,
)
from .placement import (
    AUTOSCALING_ROLE_DESCRIPTION,
    AwsPlacement,
    HybridPlacement,
    OnPremPlacement,
    Placement,
)
from .power import (
    Power,
)
from .scheduler import (
    SchedulerSpec,
)
from .site import (
    HybridSpec,
    Site,
)
from .software import (
    DRIVER_BRANCH,
    Software,
)
from .storage import (
    S3_EVENTS,
    DataRepositoryAssociation,
    FsxDeployment,
    FsxLustre,
    Lifecycle,
    MetadataConfig,
    ObjectStore,
    ParallelFs,
    S3Event,
    Storage,
    Workload,
)
from .tags import (
    GPUFORGE_TAGS,
    TAG_KEY_MAX,
    TAG_VALUE_MAX,
    TAGS_MAX,
    check_tags,
)

__all__ = [
    "ABSOLUTE_PATH",
    "AMI_ID",
    "AUTOSCALING_ROLE_DESCRIPTION",
    "CRON_SCHEDULE",
    "DEFAULT_TIER_PREFIX",
    "DLAMI_2404_SSM",
    "DLAMI_SSM",
    "DRIVER_BRANCH",
    "GPUFORGE_TAGS",
    "IAM_PRINCIPAL_ARN",
    "KUBERNETES_ORCHESTRATORS",
    "LOG_RETENTION_DAYS",
    "MAX_NODES_PER_GROUP",
    "NAME_PATTERN",
    "RESERVATION_ID",
    "RESERVED_NAMESPACES",
    "S3_EVENTS",
    "SSM_PARAMETER_PATTERN",
    "TAGS_MAX",
    "TAG_KEY_MAX",
    "TAG_VALUE_MAX",
    "TIERS",
    "UBUNTU_2204_SSM",
    "UBUNTU_2404_SSM",
    "AccessEntry",
    "AwsPlacement",
    "Capacity",
    "CapacityBlock",
    "CapacityReservation",
    "ClusterSpec",
    "DataRepositoryAssociation",
    "EksAccessPolicy",
    "Environment",
    "Fabric",
    "FsxDeployment",
    "FsxLustre",
    "HybridPlacement",
    "HybridSpec",
    "Image",
    "ImagePipelineSpec",
    "IngressRule",
    "KubernetesSpec",
    "KubernetesVersion",
    "Lifecycle",
    "MetadataConfig",
    "Monitoring",
    "Name",
    "Network",
    "NodeGroup",
    "NodeRole",
    "ObjectStore",
    "OnDemand",
    "OnPremPlacement",
    "Orchestrator",
    "ParallelFs",
    "Placement",
    "Platform",
    "PodsReady",
    "Port",
    "Power",
    "ReadParameter",
    "RootVolume",
    "S3Event",
    "SchedulerSpec",
    "Site",
    "Software",
    "SpecModel",
    "Spot",
    "Storage",
    "SubnetTier",
    "Team",
    "Tier",
    "Workload",
    "WrittenParameter",
    "check_log_retention",
    "check_tags",
    "default_image_parameter",
    "image_os",
    "parse_cidr",
    "parse_ipv4",
]
