"""The kubernetes section: the EKS control plane, who may reach it, and the GPU platform with its teams."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from .base import SpecModel
from .errors import described_pattern
from .fields import Name, check_log_retention, parse_cidr
from .limits import eks_public_cidrs_problem

IAM_PRINCIPAL_ARN = described_pattern(
    r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/.+$",
    "an IAM role or user ARN",
    "arn:aws:iam::123456789012:role/ml-admins",
)


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
