"""IAM documents the components share."""

from __future__ import annotations

import json
from typing import Any

from gpuforge.catalog.aws_wiring import load_aws_wiring, partition_of

STS_AUDIENCE = "sts.amazonaws.com"


def assume_role_policy(
    service: str,
    actions: tuple[str, ...] = ("sts:AssumeRole",),
    *,
    source_account: str | None = None,
    source_arn: str | None = None,
) -> str:
    """Trust policy letting one AWS service (e.g. ec2.amazonaws.com) assume a role.

    `source_account`/`source_arn` bind the trust to this account's own resources, so the service
    cannot be made to assume the role for someone else's (IAM User Guide, "The confused deputy
    problem"); services that set those keys on AssumeRole get them (security-iam-trust-confused-deputy)."""
    statement: dict[str, Any] = {
        "Effect": "Allow",
        "Principal": {"Service": service},
        "Action": actions[0] if len(actions) == 1 else list(actions),
    }
    if (source_account or source_arn) and service in load_aws_wiring().trust_source_keys.without_source_keys:
        # The service never sends the keys: the condition would keep it from ever assuming the role.
        raise ValueError(f"{service} assumes roles without aws:SourceAccount/SourceArn; trust it unconditioned")
    condition: dict[str, Any] = {}
    if source_account:
        condition["StringEquals"] = {"aws:SourceAccount": source_account}
    if source_arn:
        condition["ArnLike"] = {"aws:SourceArn": source_arn}
    if condition:
        statement["Condition"] = condition
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def service_account_trust_policy(oidc_provider_arn: str, issuer: str, namespace: str, service_account: str) -> str:
    """Trust policy for IAM roles for service accounts (IRSA): only the one Kubernetes service
    account, through the cluster's OIDC provider, with a token minted for STS.

    `issuer` is the provider's URL; the condition keys take it without the scheme
    (EKS user guide, "Assign IAM roles to Kubernetes service accounts")."""
    host = issuer.removeprefix("https://")
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": oidc_provider_arn},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": {
                        "StringEquals": {
                            f"{host}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                            f"{host}:aud": STS_AUDIENCE,
                        }
                    },
                }
            ],
        }
    )


def bucket_access_policy(read: list[str], write: list[str], kms_key_arn: str) -> dict[str, Any]:
    """Least privilege: list and read the data buckets, also write the checkpoint/artifact ones,
    and use the cluster key that encrypts them: the node roles of Slurm groups, whose nodes run every
    team's jobs (EKS teams get `team_bucket_policy`, their prefix only)."""
    everything = read + write
    statements: list[dict[str, Any]] = [
        {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": everything},
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"{a}/*" for a in everything]},
        {"Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": [kms_key_arn]},
    ]
    if write:
        statements.append(
            {
                "Effect": "Allow",
                "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
                "Resource": [f"{a}/*" for a in write],
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def team_bucket_policy(team: str, read: list[str], write: list[str], kms_key_arn: str) -> dict[str, Any]:
    """One team's share of the buckets (issue 25): list and read the data buckets whole (shared datasets);
    in the checkpoint/artifact buckets list, read and write only under the `<team>/` prefix, so no team
    reads or overwrites another's checkpoints; and use the cluster key. ListBucket is scoped with the
    s3:prefix condition key, objects by ARN (S3 User Guide, "Example: Allow a user to list and access objects
    under their prefix"; Service Authorization Reference, Amazon S3: s3:prefix on ListBucket)."""
    prefix = team_prefix(team)
    statements: list[dict[str, Any]] = [
        {"Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": [kms_key_arn]},
    ]
    if read:
        statements += [
            {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": list(read)},
            {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"{a}/*" for a in read]},
        ]
    if write:
        statements += [
            {
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": list(write),
                "Condition": {"StringLike": {"s3:prefix": [prefix, f"{prefix}*"]}},
            },
            {
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
                "Resource": [f"{a}/{prefix}*" for a in write],
            },
        ]
    return {"Version": "2012-10-17", "Statement": statements}


def team_prefix(team: str) -> str:
    """The key prefix a team owns in the write buckets."""
    return f"{team}/"


def fsx_csi_controller_policy(file_system_arns: list[str]) -> dict[str, Any]:
    """The FSx CSI controller's actions on the stack's own file systems only (data/aws_wiring.yaml
    fsx_csi_controller: the driver's install docs' list, less what only dynamic provisioning needs)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": list(load_aws_wiring().fsx_csi_controller.actions),
                "Resource": list(file_system_arns),
            }
        ],
    }


def secret_read_policy(secret_arns: list[str], kms_key_arn: str) -> dict[str, Any]:
    """Read exactly these Secrets Manager secrets, and decrypt with the customer key that encrypts them
    (Secrets Manager User Guide, "Authentication and access control": GetSecretValue on the secret, and
    kms:Decrypt on its key when the key is not the AWS managed aws/secretsmanager)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["secretsmanager:GetSecretValue"], "Resource": list(secret_arns)},
            {"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [kms_key_arn]},
        ],
    }


def lifecycle_policy(cluster: str) -> dict[str, Any]:
    """What gpuforge-lifecycle on the Slurm controller calls (docs/lifecycle.md): read the groups, their
    instances and launch template versions (Describe* take no resource-level permissions), and change
    only this cluster's groups: Auto Scaling supports the aws:ResourceTag condition on SetDesiredCapacity
    and TerminateInstanceInAutoScalingGroup (Service Authorization Reference, Amazon EC2 Auto Scaling)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "autoscaling:DescribeAutoScalingGroups",
                    "ec2:DescribeInstances",
                    "ec2:DescribeLaunchTemplateVersions",
                ],
                "Resource": "*",
            },
            {
                "Effect": "Allow",
                "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:ResourceTag/gpuforge:cluster": cluster}},
            },
        ],
    }


def cluster_key_policy(account: str, region: str, *, fsx_data_repositories: bool = False) -> dict[str, Any]:
    """The cluster key's policy (KMS has no default that services can use):

    - the account root, so IAM policies decide for the account's own roles (node, replication,
      DataSync, EKS cluster, service-account roles: each one's IAM policy names this key);
    - EC2 Auto Scaling's service-linked role, which launches every node (Auto Scaling groups and EKS
      managed node groups alike) with root volumes encrypted by this key: key use, and CreateGrant
      only for grants to AWS resources (EBS attaching the volume);
    - CloudWatch Logs, for the flow-log and control-plane log groups, only under this account's
      log groups' encryption context;
    - with data repository associations, FSx's per-file-system S3 access service-linked roles, which
      read and write the SSE-KMS buckets.
    Sources: data/aws_wiring.yaml (service_linked_roles, kms)."""

    facts = load_aws_wiring()
    kms = facts.kms
    partition = partition_of(region)
    use = list(kms.key_use_actions)
    statements: list[dict[str, Any]] = [
        {
            "Sid": "AccountRootIamPolicies",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
            "Action": "kms:*",
            "Resource": "*",
        },
        {
            "Sid": "AutoScalingServiceLinkedRoleUse",
            "Effect": "Allow",
            "Principal": {"AWS": facts.service_linked_role_arn("autoscaling", account, partition)},
            "Action": use,
            "Resource": "*",
        },
        {
            "Sid": "AutoScalingServiceLinkedRoleGrants",
            "Effect": "Allow",
            "Principal": {"AWS": facts.service_linked_role_arn("autoscaling", account, partition)},
            "Action": "kms:CreateGrant",
            "Resource": "*",
            "Condition": {"Bool": {kms.grant_condition_key: "true"}},
        },
        {
            "Sid": "CloudWatchLogsLogGroups",
            "Effect": "Allow",
            "Principal": {"Service": f"logs.{region}.amazonaws.com"},
            "Action": ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            "Resource": "*",
            "Condition": {"ArnLike": {kms.logs_context_key: f"arn:{partition}:logs:{region}:{account}:log-group:*"}},
        },
    ]
    if fsx_data_repositories:
        # One role per file system, named after its id: match the pattern, in this account only.
        statements.append(
            {
                "Sid": "FsxS3AccessServiceLinkedRoles",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": use,
                "Resource": "*",
                "Condition": {
                    "StringEquals": {"aws:PrincipalAccount": account},
                    "ArnLike": {"aws:PrincipalArn": facts.service_linked_role_arn("fsx_s3_access", account, partition)},
                },
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def tls_only_bucket_policy(bucket_arn: str) -> dict[str, Any]:
    """Deny every request to the bucket that does not arrive over TLS (S3 User Guide, "Security best
    practices for Amazon S3"; checked by security-bucket-tls-only)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [bucket_arn, f"{bucket_arn}/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }
