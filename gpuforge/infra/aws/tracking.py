"""TrackingServer: what the MLflow tracking server of cluster.tracking needs from AWS (docs/tracking.md).

- Its three secrets, generated here and kept in Secrets Manager under the cluster key: the database user's
  password, the basic-auth admin's, and the key that signs the basic-auth app's CSRF tokens. The services node
  reads them with its instance role (the secret_store role); they never reach user data, the plan or the
  stack's outputs (only their ARNs do).
- Its bucket access, scoped to the prefix: the server proxies every artifact (`--artifacts-destination`), so its
  node's role may read, write and delete under `<bucket>/<prefix>/` and list that prefix, and nothing else in the
  bucket (placement.py keeps the bucket out of the group's bucket-wide grants).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_random as random

from gpuforge.catalog.tokens import TRACKING_SERVER
from gpuforge.spec.cluster import ClusterSpec
from gpuforge.spec.tracking import NodeGroupTrackingServer, tracking_secret_names


@dataclass(frozen=True, kw_only=True)
class TrackingServerArgs:
    cluster: str
    server_role: pulumi.Input[str]  # the services group's instance role name
    node_group: str  # its key in node_groups: recorded, so wiring-flows-security-groups finds role tracking
    bucket_arn: pulumi.Input[str]
    bucket_name: pulumi.Input[str]
    prefix: str  # cluster.tracking.artifacts.prefix: no leading or trailing '/'
    kms_key_arn: pulumi.Input[str]  # the cluster key: it encrypts the secrets and the bucket (SSE-KMS)
    protected: bool


def artifacts_policy(bucket_arn: str, prefix: str, kms_key_arn: str, secret_arns: list[str]) -> dict[str, Any]:
    """The tracking server's grants: objects under the prefix, listing within it (s3:prefix condition, Amazon S3
    User Guide, "Bucket policy examples: Allow listing only objects under a prefix"), the cluster key for SSE-KMS
    objects (GenerateDataKey to write, Decrypt to read; Amazon S3 User Guide, "Using server-side encryption with
    AWS KMS keys"), and its own secrets."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ArtifactsUnderPrefix",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                "Resource": f"{bucket_arn}/{prefix}/*",
            },
            {
                "Sid": "ListPrefix",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": bucket_arn,
                "Condition": {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}},
            },
            {
                "Sid": "ClusterKey",
                "Effect": "Allow",
                "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                "Resource": kms_key_arn,
            },
            {"Sid": "OwnSecrets", "Effect": "Allow", "Action": ["secretsmanager:GetSecretValue"],
             "Resource": sorted(secret_arns)},
        ],
    }


def tracking_placement(spec: ClusterSpec) -> tuple[str | None, str | None]:
    """(the node group the server runs on, the key of its bucket in storage.object_stores); (None, None) when the
    stack has no tracking server on a node group."""
    tracking = spec.tracking
    if tracking is None or not isinstance(tracking.server, NodeGroupTrackingServer):
        return None, None
    return tracking.server.node_group, tracking.artifacts.bucket


class TrackingServer(pulumi.ComponentResource):
    secret_arns: dict[str, pulumi.Output[str]]
    policy: aws.iam.RolePolicy  # the services role's grants, for a reader of the component
    artifacts_destination: pulumi.Output[str]

    def __init__(self, name: str, args: TrackingServerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TRACKING_SERVER, name, {"cluster": args.cluster, "nodeGroup": args.node_group}, opts)
        child = pulumi.ResourceOptions(parent=self)
        # A rotation of a protected stack's secret keeps the old one recoverable (Secrets Manager's window).
        keep = pulumi.ResourceOptions(parent=self, protect=args.protected)
        self.secret_arns = {}
        for key, secret_name in tracking_secret_names(args.cluster).items():
            slug = key.replace("_", "-")
            password = random.RandomPassword(f"{name}-{slug}", length=32, special=False, opts=child)
            secret = aws.secretsmanager.Secret(
                f"{name}-{slug}-secret",
                name=secret_name,
                kms_key_id=args.kms_key_arn,
                recovery_window_in_days=30 if args.protected else 0,
                opts=keep,
            )
            aws.secretsmanager.SecretVersion(
                f"{name}-{slug}-value",
                secret_id=secret.id,
                secret_string=password.result,  # a secret output of pulumi_random: never shown
                opts=child,
            )
            self.secret_arns[key] = secret.arn
        arns = [self.secret_arns[k] for k in sorted(self.secret_arns)]
        policy = pulumi.Output.all(args.bucket_arn, args.kms_key_arn, *arns).apply(
            lambda v: json.dumps(artifacts_policy(v[0], args.prefix, v[1], list(v[2:])))
        )
        self.policy = aws.iam.RolePolicy(f"{name}-artifacts", role=args.server_role, policy=policy, opts=child)
        self.artifacts_destination = pulumi.Output.concat("s3://", args.bucket_name, "/", args.prefix)
        self.register_outputs({"secretArns": self.secret_arns, "artifactsDestination": self.artifacts_destination})
