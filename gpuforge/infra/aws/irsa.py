"""ServiceAccountRoles: one IAM role per team for its training pods on EKS (IAM roles for service
accounts), so pods reach the cluster's object stores without the node role.

- each role trusts only the cluster's OIDC provider, for exactly
  `system:serviceaccount:<team namespace>:<service account>` with audience sts.amazonaws.com;
- each role's one inline policy is its team's share of the buckets (`team_bucket_policy`): read the
  data buckets, list, read and write checkpoints and artifacts only under the `<team>/` prefix,
  Decrypt/GenerateDataKey on the cluster key; nothing else (wiring-eks-team-bucket-prefix keeps it so).

The placement passes `role_arns` to GpuPlatform as the `eks.amazonaws.com/role-arn` annotation of
each team's ServiceAccount; the EKS pod identity webhook does the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pulumi
import pulumi_aws as aws

from .iam import service_account_trust_policy, team_bucket_policy

ROLE_ARN_ANNOTATION = "eks.amazonaws.com/role-arn"


@dataclass(frozen=True)
class ServiceAccount:
    namespace: str
    name: str


@dataclass(frozen=True)
class ServiceAccountRolesArgs:
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]  # the provider URL (https://oidc.eks.<region>.amazonaws.com/id/...)
    service_accounts: dict[str, ServiceAccount]  # team -> its namespace and service account
    kms_key_arn: pulumi.Input[str]
    read_bucket_arns: list[pulumi.Input[str]] = field(default_factory=list)
    write_bucket_arns: list[pulumi.Input[str]] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)


class ServiceAccountRoles(pulumi.ComponentResource):
    role_arns: dict[str, pulumi.Output[str]]  # team -> role ARN

    def __init__(self, name: str, args: ServiceAccountRolesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            "gpuforge:aws:ServiceAccountRoles",
            name,
            {"serviceAccounts": {t: f"{sa.namespace}/{sa.name}" for t, sa in args.service_accounts.items()}},
            opts,
        )
        child = pulumi.ResourceOptions(parent=self)
        buckets = pulumi.Output.all(
            pulumi.Output.all(*args.read_bucket_arns),
            pulumi.Output.all(*args.write_bucket_arns),
            args.kms_key_arn,
        )

        self.role_arns = {}
        for team, sa in sorted(args.service_accounts.items()):
            role = aws.iam.Role(
                f"{name}-{team}",
                description=f"Training pods of team {team}: service account {sa.namespace}/{sa.name}",
                assume_role_policy=_trust(args.oidc_provider_arn, args.oidc_issuer, sa),
                tags={**args.tags, "gpuforge:team": team},
                opts=child,
            )
            if args.read_bucket_arns or args.write_bucket_arns:
                aws.iam.RolePolicy(
                    f"{name}-{team}-buckets",
                    role=role.id,
                    policy=buckets.apply(partial(_team_policy_json, team)),
                    opts=child,
                )
            self.role_arns[team] = role.arn
        self.register_outputs({"roleArns": self.role_arns})


def _team_policy_json(team: str, values: list[Any]) -> str:
    read, write, kms_key_arn = values
    return json.dumps(team_bucket_policy(team, read, write, kms_key_arn))


def _trust(
    oidc_provider_arn: pulumi.Input[str], oidc_issuer: pulumi.Input[str], sa: ServiceAccount
) -> pulumi.Output[str]:
    return pulumi.Output.all(oidc_provider_arn, oidc_issuer).apply(
        lambda values: service_account_trust_policy(values[0], values[1], sa.namespace, sa.name)
    )


def controller_role(
    name: str,
    *,
    oidc_provider_arn: pulumi.Input[str],
    oidc_issuer: pulumi.Input[str],
    service_account: str,  # namespace/name
    policy_arn: str | None = None,
    inline_policy: pulumi.Input[str] | None = None,
    tags: dict[str, str] | None = None,
    opts: pulumi.ResourceOptions | None = None,
) -> aws.iam.Role:
    """An IRSA role for one cluster controller (VPC CNI, FSx CSI controller, Cluster Autoscaler): trusted by its
    service account only, with the controller's managed policy and/or an inline one, so it never borrows the
    node role."""
    namespace, account = service_account.split("/")
    role = aws.iam.Role(
        name,
        description=f"Controller service account {service_account}",
        assume_role_policy=_trust(oidc_provider_arn, oidc_issuer, ServiceAccount(namespace, account)),
        tags=tags or {},
        opts=opts,
    )
    if policy_arn is not None:
        aws.iam.RolePolicyAttachment(f"{name}-policy", role=role.name, policy_arn=policy_arn, opts=opts)
    if inline_policy is not None:
        aws.iam.RolePolicy(f"{name}-inline", role=role.id, policy=inline_policy, opts=opts)
    return role
