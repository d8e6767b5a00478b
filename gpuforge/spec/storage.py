"""The storage section: the parallel file system (FSx for Lustre, sized from the workload) and object stores."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import SpecModel
from .fields import ABSOLUTE_PATH, Name

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


class Storage(SpecModel):
    parallel_fs: ParallelFs | None = Field(default=None, description="The shared parallel file system.")
    object_stores: dict[Name, ObjectStore] = Field(default_factory=dict, description="Buckets keyed by name.")
