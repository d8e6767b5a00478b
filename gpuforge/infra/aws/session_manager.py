"""Session Manager preferences: how people reach the cluster's nodes when login access is SSM.

Without a preferences document a session runs as `ssm-user`, which the SSM agent makes a passwordless
sudoer, logs nothing and is encrypted only by TLS. The document `SSM-SessionManagerRunShell` is the
account's and region's preferences (Session Manager User Guide, "Start a default shell session by
specifying the default session document in IAM policies"); gpuforge declares it with:

- Run As on: a session runs as the Linux user named by the principal's `SSMSessionRunAs` tag (each
  cluster user's IAM user or role carries their scheduler.users name; an administrator's names `ubuntu`),
  and as `nobody` otherwise, whose shell (nologin) ends the session: an untagged principal gets no shell
  rather than a sudoer ("Turn on Run As support for Linux and macOS managed nodes");
- the session data encrypted with the cluster key (kmsKeyId), on top of TLS ("Turn on KMS key encryption
  of session data");
- every session's input and output streamed to a CloudWatch Logs group encrypted with the cluster key,
  refused by the agent if the group were not encrypted (cloudWatchEncryptionEnabled);
- idle sessions closed after 20 minutes.

The nodes' roles need, beside AmazonSSMManagedInstanceCore, kms:Decrypt on the session key and
logs:PutLogEvents on the group ("Step 2: Verify or add instance permissions for Session Manager").
One document per account and region: two clusters in one account and region share it (the last one
deployed wins); keep environments in accounts of their own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

DOCUMENT_NAME = "SSM-SessionManagerRunShell"
RUN_AS_DEFAULT_USER = "nobody"  # exists on every Linux node; its nologin shell ends an untagged session
IDLE_TIMEOUT_MINUTES = "20"
LOG_RETENTION_DAYS = 365  # a year of who ran what on the cluster


def log_group_name(cluster: str) -> str:
    return f"/gpuforge/{cluster}/ssm-sessions"


def preferences(log_group: str, kms_key_arn: str) -> dict[str, Any]:
    """The Session document's content (Session Manager User Guide, "Session document schema")."""
    return {
        "schemaVersion": "1.0",
        "description": "gpuforge: Session Manager preferences (Run As, encrypted sessions and logs)",
        "sessionType": "Standard_Stream",
        "inputs": {
            "s3BucketName": "",
            "s3KeyPrefix": "",
            "s3EncryptionEnabled": True,
            "cloudWatchLogGroupName": log_group,
            "cloudWatchEncryptionEnabled": True,
            "cloudWatchStreamingEnabled": True,
            "kmsKeyId": kms_key_arn,
            "runAsEnabled": True,
            "runAsDefaultUser": RUN_AS_DEFAULT_USER,
            "idleSessionTimeout": IDLE_TIMEOUT_MINUTES,
            "shellProfile": {"linux": "cd ~ && exec bash -l", "windows": ""},
        },
    }


def node_session_policy(log_group_arn: str, kms_key_arn: str) -> dict[str, Any]:
    """What a node's role needs for encrypted, logged sessions: write its streams to the group, check that
    the group is encrypted (DescribeLogGroups takes no resource-level permission), decrypt session data."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "SessionLogs",
                "Effect": "Allow",
                "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                "Resource": [f"{log_group_arn}:*"],
            },
            {"Sid": "SessionLogGroups", "Effect": "Allow", "Action": ["logs:DescribeLogGroups"], "Resource": "*"},
            {"Sid": "SessionKey", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [kms_key_arn]},
        ],
    }


@dataclass
class SessionManagerPreferencesArgs:
    cluster: str
    kms_key_arn: pulumi.Input[str]
    node_role_names: dict[str, pulumi.Input[str]]  # who: the role of each SSM-managed instance
    renamed_from: dict[str, str] = field(default_factory=dict)  # a renamed node group -> its old name
    protected: bool = False
    tags: dict[str, str] = field(default_factory=dict)


class SessionManagerPreferences(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: SessionManagerPreferencesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpuforge:aws:SessionManagerPreferences", name, {"cluster": args.cluster}, opts)
        child = pulumi.ResourceOptions(parent=self)
        logs = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=log_group_name(args.cluster),
            retention_in_days=LOG_RETENTION_DAYS,
            kms_key_id=args.kms_key_arn,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, protect=args.protected),
        )
        aws.ssm.Document(
            f"{name}-document",
            name=DOCUMENT_NAME,
            document_type="Session",
            document_format="JSON",
            content=pulumi.Output.all(logs.name, args.kms_key_arn).apply(
                lambda v: json.dumps(preferences(v[0], v[1]), indent=2)
            ),
            tags=args.tags,
            opts=child,
        )
        policy = pulumi.Output.all(logs.arn, args.kms_key_arn).apply(
            lambda v: json.dumps(node_session_policy(v[0], v[1]))
        )
        for who, role in sorted(args.node_role_names.items()):
            # A renamed group keeps its policy: the old name becomes an alias.
            old = args.renamed_from.get(who)
            aliases = [pulumi.Alias(name=f"{name}-{old}")] if old else None
            aws.iam.RolePolicy(f"{name}-{who}", role=role, policy=policy,
                               opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(aliases=aliases)))
        self.log_group_name = logs.name
        self.register_outputs({"logGroup": logs.name})
