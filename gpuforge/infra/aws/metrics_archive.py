"""MetricsArchive: an Amazon Managed Service for Prometheus workspace that the stack's Prometheus writes every
sample to (monitoring.remote_write: {kind: amp}), so losing the services node loses no history.

Prometheus signs the writes with SigV4 as its node's instance role; that role is granted aps:RemoteWrite on
this workspace and nothing else. The workspace is encrypted at rest with an AWS owned key (AMP's default): a
customer managed key would need a key policy granting the aps service principal, which the cluster key does
not have.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from gpuforge.catalog.tokens import CLUSTER_TAG


@dataclass(frozen=True)
class MetricsArchiveArgs:
    cluster: str
    writer_role: pulumi.Input[str]  # the monitoring node group's instance role name
    protected: bool


def remote_write_policy(workspace_arn: str) -> dict[str, Any]:
    """aps:RemoteWrite on one workspace (Service Authorization Reference, Amazon Managed Service for
    Prometheus: RemoteWrite takes the workspace resource type)."""
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["aps:RemoteWrite"], "Resource": workspace_arn}],
    }


def remote_write_url(prometheus_endpoint: str) -> str:
    """The workspace's remote write URL: its Prometheus endpoint (ending in /) + api/v1/remote_write."""
    return f"{prometheus_endpoint.rstrip('/')}/api/v1/remote_write"


class MetricsArchive(pulumi.ComponentResource):
    workspace_arn: pulumi.Output[str]
    url: pulumi.Output[str]

    def __init__(self, name: str, args: MetricsArchiveArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuforge:aws:MetricsArchive", name, {"cluster": args.cluster}, opts)
        # The history it keeps is the point: protected in production (policy redundancy-stateful-protected).
        workspace = aws.amp.Workspace(
            f"{name}-workspace",
            alias=f"gpuforge-{args.cluster}",
            tags={CLUSTER_TAG: args.cluster},
            opts=pulumi.ResourceOptions(parent=self, protect=args.protected),
        )
        aws.iam.RolePolicy(
            f"{name}-remote-write",
            role=args.writer_role,
            policy=workspace.arn.apply(lambda arn: json.dumps(remote_write_policy(arn))),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.workspace_arn = workspace.arn
        self.url = workspace.prometheus_endpoint.apply(remote_write_url)
        self.register_outputs({"workspaceArn": self.workspace_arn, "url": self.url})
