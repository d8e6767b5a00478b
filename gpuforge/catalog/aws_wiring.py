"""AWS wiring facts (data/aws_wiring.yaml), typed: the service-linked roles a key policy must name,
the endpoint services private subnets need, EKS add-on versions, VPN tunnel options, Lustre ports.

Components build from these and the wiring rules check against the same values:
``load_aws_wiring().service_linked_role_arn("autoscaling", "123456789012")``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from gpuforge.catalog.models import load_data_file

AWS_WIRING_FILE = Path(__file__).resolve().parent / "data" / "aws_wiring.yaml"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServiceLinkedRole(_Frozen):
    path: str  # IAM path and name under role/, possibly ending in * (one role per resource)
    source: str


class KmsFacts(_Frozen):
    key_use_actions: tuple[str, ...]
    grant_condition_key: str
    logs_context_key: str
    source: str


class TrustSourceKeys(_Frozen):
    services: tuple[str, ...]  # service principals whose AssumeRole carries aws:SourceAccount/SourceArn
    without_source_keys: tuple[str, ...]  # service principals that never send them (EC2 instance profiles)
    source: str


class PrivateEndpoints(_Frozen):
    services: tuple[str, ...]
    source: str


class EksAddon(_Frozen):
    version: str  # pinned: an add-on without a version floats to whatever EKS defaults to on each create
    source: str
    tracks_kubernetes_minor: bool = False  # built per Kubernetes minor (kube-proxy): the cluster's must match
    gpu_tolerations: tuple[str, ...] | None = None  # path in the configuration of a GPU DaemonSet's tolerations
    min_version_efa_only: str | None = None
    min_version_network_policy: str | None = None
    configuration: dict[str, Any] | None = None
    service_account: str | None = None  # namespace/name of the add-on's IRSA service account
    policy_arn: str | None = None


class FsxCsiController(_Frozen):
    service_account: str  # namespace/name the chart creates for the controller
    actions: tuple[str, ...]  # on the stack's file systems' ARNs only
    left_out: tuple[str, ...]  # the docs' actions only dynamic provisioning needs
    source: str


class EfaPod(_Frozen):
    node_hugepages_2mi: int  # 2 MiB pages an EFA node pre-allocates
    pod_hugepages_2mi_mib: int  # what a training pod requests of them
    source: str


class EksFacts(_Frozen):
    addons: dict[str, EksAddon]
    source: str
    imds_tags: str
    standard_ami_type: str
    gpu_ami_type: str
    efa_pod: EfaPod


class VpnTunnel(_Frozen):
    ike_versions: tuple[str, ...]
    phase1_dh_group_numbers: tuple[int, ...]
    phase2_dh_group_numbers: tuple[int, ...]
    phase1_encryption_algorithms: tuple[str, ...]
    phase2_encryption_algorithms: tuple[str, ...]
    phase1_integrity_algorithms: tuple[str, ...]
    phase2_integrity_algorithms: tuple[str, ...]
    log_retention_days: int
    state_period_seconds: int
    state_alarm_periods: int
    state_source: str
    source: str


class LustreFacts(_Frozen):
    ports: tuple[tuple[int, int], ...]
    root_squash: str
    efa_client_interfaces: dict[str, int]  # instance type -> EFA devices on LNet's efa network
    efa_client_interfaces_multi_card: int
    efa_client_interfaces_single_card: int
    efa_client_peer_credits: int
    efa_connection_limit: int  # EFA connections per file system, all clients together
    # LNet dynamic peer discovery on EFA clients (how the client learns the servers' efa NIDs from the tcp
    # NID the mount names), and the UDSP priority that makes LNet prefer the efa network.
    efa_client_discovery: bool
    efa_client_udsp_priority: int
    source: str
    lnet_source: str

    def efa_interfaces_for(self, instance_type: str | None, network_cards: int) -> int:
        """EFA devices an FSx client of this instance type configures (FSx's per-type default)."""
        if instance_type in self.efa_client_interfaces:
            return self.efa_client_interfaces[instance_type]
        return self.efa_client_interfaces_multi_card if network_cards > 1 else self.efa_client_interfaces_single_card


class CapacityBlocks(_Frozen):
    placement_group: str
    source: str
    # EC2 starts terminating a block's instances this long before its end (issue 12).
    terminate_before_end_minutes: int = 30
    # The group scales to 0 this long before the end, so Slurm/Kubernetes drain before EC2 terminates.
    scale_down_before_end_minutes: int = 40
    # The plan and the diff warn when a block ends within this many days.
    warn_days_before_end: int = 3
    window_source: str = ""


class VcpuQuota(_Frozen):
    code: str  # Service Quotas code (service ec2)
    name: str
    families: tuple[str, ...]  # instance family prefixes counted against it (p5.48xlarge -> "p")


class OnDemandQuotas(_Frozen):
    quotas: tuple[VcpuQuota, ...]
    source: str

    def for_type(self, instance_type: str) -> VcpuQuota | None:
        """The On-Demand vCPU quota an instance type counts against (longest family prefix wins)."""
        family = instance_type.split(".", 1)[0]
        hits = [(len(f), q) for q in self.quotas for f in q.families if family.startswith(f)]
        return max(hits, key=lambda hit: hit[0])[1] if hits else None


class InstanceStore(_Frozen):
    nvme_model: str  # the NVMe controller model of instance-store volumes
    source: str


class EfsMountHelper(_Frozen):
    package: str  # the .deb ./build-deb.sh builds (amazon-efs-utils)
    version: str
    url: str  # the release tarball production builds the package from
    sha256: str
    fstype: str  # the fstab type the helper serves (mount -t efs)
    tls_option: str  # the helper's option that tunnels NFS through TLS
    source: str
    production: str  # how production nodes get the package


class EfsFacts(_Frozen):
    nfs_options: str  # the NFS mount options AWS recommends for EFS (NFSv4.1), passed on by the mount helper
    source: str
    mount_helper: EfsMountHelper


class AwsWiring(_Frozen):
    service_linked_roles: dict[str, ServiceLinkedRole]
    kms: KmsFacts
    trust_source_keys: TrustSourceKeys
    private_endpoints: PrivateEndpoints
    eks: EksFacts
    vpn_tunnel: VpnTunnel
    lustre: LustreFacts
    capacity_blocks: CapacityBlocks
    on_demand_quotas: OnDemandQuotas
    instance_store: InstanceStore
    efs: EfsFacts
    fsx_csi_controller: FsxCsiController

    def service_linked_role_arn(self, key: str, account: str, partition: str = "aws") -> str:
        return f"arn:{partition}:iam::{account}:role/{self.service_linked_roles[key].path}"


def version_tuple(version: str) -> tuple[int, ...]:
    """v1.20.1-eksbuild.3 -> (1, 20, 1): add-on versions compare by their numeric release."""
    core = version.lstrip("v").split("-", 1)[0]
    return tuple(int(p) for p in core.split(".") if p.isdigit())


def partition_of(region: str) -> str:
    """The ARN partition of a region (aws, aws-cn, aws-us-gov)."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


@lru_cache(maxsize=1)
def load_aws_wiring() -> AwsWiring:
    return load_data_file(AWS_WIRING_FILE, AwsWiring)
