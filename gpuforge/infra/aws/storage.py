"""Stateful storage: the cluster's KMS key, FSx for Lustre, and S3 object stores.

Everything here is encrypted with a customer-managed key where the service allows it, and
protected (and retained on delete, for buckets) in production.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.spec.models import FsxLustre
from gpuforge.spec.models import ObjectStore as ObjectStoreSpec
from gpuforge.spec.sizing import LustreSizing

from .iam import assume_role_policy, cluster_key_policy, tls_only_bucket_policy


def backup_days(spec: FsxLustre, protected: bool) -> int | None:
    """Automatic backup retention: the spec's, else a week for a protected (prod) PERSISTENT file system."""
    if not spec.deployment_type.startswith("PERSISTENT"):
        return None
    if spec.backup_retention_days is not None:
        return spec.backup_retention_days
    return 7 if protected else None


def stateful(opts: pulumi.ResourceOptions, protected: bool) -> pulumi.ResourceOptions:
    """Options for data-holding resources: protected and retained on delete in production."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=protected, retain_on_delete=protected))


def autoscaling_service_linked_role(name: str, opts: pulumi.ResourceOptions) -> aws.iam.ServiceLinkedRole:
    """EC2 Auto Scaling's service-linked role, which an account gets only with its first Auto Scaling group, while
    the cluster key's policy names it before any group exists (hashicorp/terraform-provider-aws#28644: created
    through the API, the role must be declared; where it exists already, import it or leave it to its owner).
    Kept on destroy: every Auto Scaling group of the account launches through it."""
    service = load_aws_wiring().service_linked_roles["autoscaling"].path.split("/")[1]
    return aws.iam.ServiceLinkedRole(
        f"{name}-autoscaling-role",
        aws_service_name=service,
        description="EC2 Auto Scaling (gpuforge: named by the cluster key's policy)",
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True)),
    )


class ClusterKey(pulumi.ComponentResource):
    """A rotating customer-managed KMS key for one region of the cluster, with the key policy the
    services that use it need (`cluster_key_policy`): without one, Auto Scaling cannot launch a node
    whose root volume it encrypts."""

    arn: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        region: str,
        protected: bool,
        fsx_data_repositories: bool = False,
        autoscaling_role: pulumi.Resource | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpuforge:aws:ClusterKey", name, {"fsxDataRepositories": fsx_data_repositories}, opts)
        child = pulumi.ResourceOptions(parent=self)
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id
        key = aws.kms.Key(
            f"{name}-key",
            description=f"{name}: encrypts volumes, file systems, buckets and log groups",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            policy=account.apply(
                lambda acct: json.dumps(cluster_key_policy(acct, region, fsx_data_repositories=fsx_data_repositories))
            ),
            # KMS refuses a policy naming a principal that does not exist (MalformedPolicyDocumentException):
            # the key waits for Auto Scaling's service-linked role where the stack creates it.
            opts=pulumi.ResourceOptions.merge(
                stateful(child, protected),
                pulumi.ResourceOptions(depends_on=[autoscaling_role] if autoscaling_role is not None else None),
            ),
        )
        aws.kms.Alias(f"{name}-alias", name=f"alias/{name}", target_key_id=key.key_id, opts=child)
        self.arn = key.arn
        self.register_outputs({"arn": key.arn})


@dataclass(frozen=True)
class LustreFileSystemArgs:
    spec: FsxLustre
    sizing: LustreSizing
    subnet_id: pulumi.Input[str]
    security_group_ids: list[pulumi.Input[str]]
    kms_key_arn: pulumi.Input[str]
    buckets: dict[str, pulumi.Input[str]] = field(default_factory=dict)  # object store key -> bucket name
    protected: bool = False


class LustreFileSystem(pulumi.ComponentResource):
    dns_name: pulumi.Output[str]
    mount_name: pulumi.Output[str]
    file_system_id: pulumi.Output[str]
    arn: pulumi.Output[str]  # what the FSx CSI controller's role is scoped to

    def __init__(self, name: str, args: LustreFileSystemArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec, sizing = args.spec, args.sizing
        super().__init__(
            "gpuforge:aws:LustreFileSystem",
            name,
            {
                "deploymentType": spec.deployment_type,
                "capacityGib": sizing.capacity_gib,
                "perUnitStorageThroughput": sizing.per_unit_throughput,
                "throughputMbps": sizing.throughput_mbps,
                "requiredThroughputMbps": sizing.required_mbps,
                "sizedFromWorkload": sizing.derived,
                "efa": spec.efa,
            },
            opts,
        )
        child = pulumi.ResourceOptions(parent=self)
        persistent = spec.deployment_type.startswith("PERSISTENT")
        fs = aws.fsx.LustreFileSystem(
            f"{name}-fs",
            deployment_type=spec.deployment_type,
            storage_capacity=sizing.capacity_gib,
            per_unit_storage_throughput=sizing.per_unit_throughput,
            subnet_ids=args.subnet_id,  # pulumi-aws 7 takes the single subnet as a string
            security_group_ids=args.security_group_ids,
            # FSx takes a customer key only for PERSISTENT types; SCRATCH is encrypted with the service key.
            kms_key_id=args.kms_key_arn if persistent else None,
            file_system_type_version="2.15",
            data_compression_type="LZ4",
            # Root on a client is nobody on the file system (FSx for Lustre User Guide, "Lustre root
            # squash"): a pod that escapes to its node cannot rewrite every team's checkpoints.
            root_squash_configuration=aws.fsx.LustreFileSystemRootSquashConfigurationArgs(
                root_squash=load_aws_wiring().lustre.root_squash
            ),
            efa_enabled=spec.efa or None,
            metadata_configuration=(
                aws.fsx.LustreFileSystemMetadataConfigurationArgs(mode=spec.metadata.mode, iops=spec.metadata.iops)
                if spec.metadata
                else None
            ),
            automatic_backup_retention_days=backup_days(spec, args.protected),
            copy_tags_to_backups=True if persistent else None,
            tags={"Name": name},
            opts=stateful(child, args.protected),
        )
        for key, dra in spec.data_repository_associations.items():
            bucket = args.buckets[dra.object_store]
            aws.fsx.DataRepositoryAssociation(
                f"{name}-dra-{key}",
                file_system_id=fs.id,
                file_system_path=dra.file_system_path,
                data_repository_path=pulumi.Output.concat("s3://", bucket, "/", dra.prefix),
                batch_import_meta_data_on_create=True,
                s3=aws.fsx.DataRepositoryAssociationS3Args(
                    auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(
                        events=list(dra.import_events)
                    )
                    if dra.import_events
                    else None,
                    auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(
                        events=list(dra.export_events)
                    )
                    if dra.export_events
                    else None,
                ),
                opts=child,
            )
        self.dns_name = fs.dns_name
        self.mount_name = fs.mount_name
        self.file_system_id = fs.id
        self.arn = fs.arn
        self.register_outputs({"dnsName": fs.dns_name, "mountName": fs.mount_name, "fileSystemId": fs.id})


@dataclass(frozen=True)
class ObjectStoreArgs:
    spec: ObjectStoreSpec
    kms_key_arn: pulumi.Input[str]
    protected: bool = False
    replica_provider: aws.Provider | None = None  # in the replication region
    replica_kms_key_arn: pulumi.Input[str] | None = None  # required with replica_provider


class ObjectStore(pulumi.ComponentResource):
    bucket: pulumi.Output[str]
    arn: pulumi.Output[str]

    def __init__(self, name: str, args: ObjectStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec = args.spec
        super().__init__(
            "gpuforge:aws:ObjectStore",
            name,
            {"purpose": spec.purpose, "versioning": spec.versioning, "replicationRegion": spec.replication_region},
            opts,
        )
        child = pulumi.ResourceOptions(parent=self)
        bucket, versioning = self._secure_bucket(name, spec, args.kms_key_arn, stateful(child, args.protected))

        if spec.replication_region and args.replica_provider is not None and args.replica_kms_key_arn is not None:
            replica_opts = pulumi.ResourceOptions(parent=self, provider=args.replica_provider)
            replica, replica_versioning = self._secure_bucket(
                f"{name}-replica", spec, args.replica_kms_key_arn, stateful(replica_opts, args.protected)
            )
            # S3 refuses a replication rule until both buckets are versioned.
            ready = pulumi.ResourceOptions(parent=self, depends_on=[versioning, replica_versioning])
            self._replication(name, bucket, replica, args, args.replica_kms_key_arn, ready)
        self.bucket = bucket.bucket
        self.arn = bucket.arn
        self.register_outputs({"bucket": bucket.bucket, "arn": bucket.arn})

    def _secure_bucket(
        self,
        name: str,
        spec: ObjectStoreSpec,
        kms_key_arn: pulumi.Input[str] | None,
        opts: pulumi.ResourceOptions,
    ) -> tuple[aws.s3.Bucket, aws.s3.BucketVersioning]:
        bucket = aws.s3.Bucket(f"{name}-bucket", force_destroy=False, opts=opts)
        config = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=False, retain_on_delete=False))
        aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access-block",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=config,
        )
        # Refuse plain HTTP (S3 User Guide, "Security best practices for Amazon S3").
        aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=bucket.id,
            policy=bucket.arn.apply(lambda arn: json.dumps(tls_only_bucket_policy(arn))),
            opts=config,
        )
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=config,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-sse",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms" if spec.kms and kms_key_arn is not None else "AES256",
                        kms_master_key_id=kms_key_arn if spec.kms else None,
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=config,
        )
        versioning = aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
                status="Enabled" if spec.versioning else "Suspended"
            ),
            opts=config,
        )
        lifecycle = spec.lifecycle
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="gpuforge",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=lifecycle.abort_incomplete_multipart_days
                    ),
                    noncurrent_version_expiration=(
                        aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                            noncurrent_days=lifecycle.noncurrent_version_expiration_days
                        )
                        if lifecycle.noncurrent_version_expiration_days and spec.versioning
                        else None
                    ),
                    transitions=(
                        [
                            aws.s3.BucketLifecycleConfigurationRuleTransitionArgs(
                                days=lifecycle.transition_to_ia_days, storage_class="STANDARD_IA"
                            )
                        ]
                        if lifecycle.transition_to_ia_days
                        else None
                    ),
                    expiration=(
                        aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=lifecycle.expiration_days)
                        if lifecycle.expiration_days
                        else None
                    ),
                )
            ],
            opts=config,
        )
        return bucket, versioning

    @staticmethod
    def _replication(
        name: str,
        source: aws.s3.Bucket,
        replica: aws.s3.Bucket,
        args: ObjectStoreArgs,
        replica_kms_key_arn: pulumi.Input[str],
        child: pulumi.ResourceOptions,
    ) -> None:
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=child.parent)).account_id
        role = aws.iam.Role(
            f"{name}-replication-role",
            # Only S3 replicating this account's source bucket (confused-deputy prevention).
            assume_role_policy=pulumi.Output.all(account, source.arn).apply(
                lambda v: assume_role_policy("s3.amazonaws.com", source_account=v[0], source_arn=v[1])
            ),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-replication-policy",
            role=role.id,
            policy=pulumi.Output.all(source.arn, replica.arn, args.kms_key_arn, replica_kms_key_arn).apply(
                lambda a: json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Action": ["s3:GetReplicationConfiguration", "s3:ListBucket"],
                                "Resource": [a[0]],
                            },
                            {
                                "Effect": "Allow",
                                "Action": [
                                    "s3:GetObjectVersionForReplication",
                                    "s3:GetObjectVersionAcl",
                                    "s3:GetObjectVersionTagging",
                                ],
                                "Resource": [f"{a[0]}/*"],
                            },
                            {
                                "Effect": "Allow",
                                "Action": ["s3:ReplicateObject", "s3:ReplicateDelete", "s3:ReplicateTags"],
                                "Resource": [f"{a[1]}/*"],
                            },
                            {"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [a[2]]},
                            {"Effect": "Allow", "Action": ["kms:Encrypt", "kms:GenerateDataKey"], "Resource": [a[3]]},
                        ],
                    }
                )
            ),
            opts=child,
        )
        aws.s3.BucketReplicationConfig(
            f"{name}-replication",
            bucket=source.id,
            role=role.arn,
            rules=[
                aws.s3.BucketReplicationConfigRuleArgs(
                    id="replicate-all",
                    status="Enabled",
                    filter=aws.s3.BucketReplicationConfigRuleFilterArgs(prefix=""),
                    delete_marker_replication=aws.s3.BucketReplicationConfigRuleDeleteMarkerReplicationArgs(
                        status="Enabled"
                    ),
                    source_selection_criteria=aws.s3.BucketReplicationConfigRuleSourceSelectionCriteriaArgs(
                        sse_kms_encrypted_objects=aws.s3.BucketReplicationConfigRuleSourceSelectionCriteriaSseKmsEncryptedObjectsArgs(
                            status="Enabled"
                        )
                    ),
                    destination=aws.s3.BucketReplicationConfigRuleDestinationArgs(
                        bucket=replica.arn,
                        storage_class="STANDARD",
                        encryption_configuration=aws.s3.BucketReplicationConfigRuleDestinationEncryptionConfigurationArgs(
                            replica_kms_key_id=replica_kms_key_arn
                        ),
                    ),
                )
            ],
            opts=child,
        )
