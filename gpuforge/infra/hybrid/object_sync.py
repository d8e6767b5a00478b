"""ObjectSync: object storage between the site's S3-compatible store and an S3 bucket, through
AWS DataSync (an agent on the site reaches the site's store; the task runs on a schedule).

The direction is stated, because it decides the bill: site_to_cloud moves data into AWS (ingress,
not charged); cloud_to_site is AWS data egress, charged per GB (over Direct Connect at the lower
DX rate). Credentials of the site store are stack secrets (`pulumi config set --secret`), read with
require_secret so they stay secret in state and plans; a store certified by a private CA hands
DataSync its CA chain (server_certificate), or the agent refuses the TLS handshake.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import pulumi
import pulumi_aws as aws

from gpuforge.infra.aws.iam import assume_role_policy
from gpuforge.spec.config_keys import SITE_S3_ACCESS_KEY, SITE_S3_SECRET_KEY
from gpuforge.spec.site import ObjectSync as ObjectSyncSpec


def egress_statement(sync: ObjectSyncSpec, bucket: str) -> str:
    if sync.direction == "site_to_cloud":
        return f"site {sync.site_bucket} -> s3 {bucket}: ingress into AWS (no transfer charge)"
    return f"s3 {bucket} -> site {sync.site_bucket}: AWS data egress (charged per GB)"


@dataclass(frozen=True)
class ObjectSyncArgs:
    sync: ObjectSyncSpec
    endpoint: str  # https://host[:port] of the site store
    bucket: str  # the S3 bucket's name (for the statement)
    bucket_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str]
    ca_certificate: str | None = None  # PEM chain of the private CA that certifies the store


class ObjectSync(pulumi.ComponentResource):
    def __init__(self, name: str, args: ObjectSyncArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        sync = args.sync
        statement = egress_statement(sync, args.bucket)
        super().__init__(
            "gpuforge:hybrid:ObjectSync",
            name,
            {
                "direction": sync.direction,
                "siteBucket": sync.site_bucket,
                "cloudStore": sync.cloud_store,
                "schedule": sync.schedule,
                "description": statement,
            },
            opts,
        )
        child = pulumi.ResourceOptions(parent=self)
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id
        role = aws.iam.Role(
            f"{name}-role",
            # Only DataSync acting for this account (DataSync User Guide, "Cross-service confused
            # deputy prevention").
            assume_role_policy=account.apply(
                lambda acct: assume_role_policy(
                    "datasync.amazonaws.com", source_account=acct, source_arn=f"arn:aws:datasync:*:{acct}:*"
                )
            ),
            opts=child,
        )
        policy = aws.iam.RolePolicy(
            f"{name}-bucket",
            role=role.id,
            policy=pulumi.Output.all(args.bucket_arn, args.kms_key_arn).apply(
                lambda v: json.dumps(_policy(v[0], v[1]))
            ),
            opts=child,
        )
        url = urlparse(args.endpoint)
        config = pulumi.Config("gpuforge")
        site = aws.datasync.LocationObjectStorage(
            f"{name}-site",
            agent_arns=[sync.agent_arn],
            server_hostname=url.hostname or "",
            server_port=url.port or 443,
            server_protocol="HTTPS",
            bucket_name=sync.site_bucket,
            access_key=config.require_secret(SITE_S3_ACCESS_KEY),
            secret_key=config.require_secret(SITE_S3_SECRET_KEY),
            server_certificate=args.ca_certificate,
            opts=child,
        )
        cloud = aws.datasync.S3Location(
            f"{name}-s3",
            s3_bucket_arn=args.bucket_arn,
            subdirectory=f"/{sync.site_bucket}",
            s3_config=aws.datasync.S3LocationS3ConfigArgs(bucket_access_role_arn=role.arn),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[policy])),
        )
        source, destination = (site, cloud) if sync.direction == "site_to_cloud" else (cloud, site)
        task = aws.datasync.Task(
            f"{name}-task",
            name=name,
            source_location_arn=source.arn,
            destination_location_arn=destination.arn,
            schedule=aws.datasync.TaskScheduleArgs(schedule_expression=sync.schedule),
            # Never delete at the destination what the source lost: a sync is not a backup's undo.
            options=aws.datasync.TaskOptionsArgs(
                verify_mode="ONLY_FILES_TRANSFERRED", preserve_deleted_files="PRESERVE"
            ),
            opts=child,
        )
        self.register_outputs({"taskArn": task.arn, "direction": sync.direction, "description": statement})


def _policy(bucket_arn: str, key_arn: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketMultipartUploads"],
                "Resource": bucket_arn,
            },
            {
                "Effect": "Allow",
                "Action": [
                    "s3:AbortMultipartUpload",
                    "s3:DeleteObject",
                    "s3:GetObject",
                    "s3:GetObjectTagging",
                    "s3:ListMultipartUploadParts",
                    "s3:PutObject",
                    "s3:PutObjectTagging",
                ],
                "Resource": f"{bucket_arn}/*",
            },
            {"Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": key_arn},
        ],
    }
