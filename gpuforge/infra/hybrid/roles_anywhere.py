"""IAM Roles Anywhere on the site CA: the trust policy a site host's role gets, and the site Prometheus's own
role and profile for EC2 service discovery.

A hybrid Slurm cluster's site Prometheus (monitoring.server kind site_host) finds the cloud burst nodes with
`ec2_sd_configs` (gpuforge/render/monitoring.py), which calls EC2's API and so needs AWS credentials. A site
host has no instance profile; as the scaler does, the Prometheus host trades its certificate from the site CA
(the burst's trust anchor) for a short session, here of a role that may only read what ec2_sd reads.
Prometheus' configuration docs, `<ec2_sd_config>`: "The IAM credentials used must have the
ec2:DescribeInstances permission to discover scrape targets, and may optionally have the
ec2:DescribeAvailabilityZones permission if you want the availability zone ID available as a label". Neither
action supports resource-level permissions (Service Authorization Reference, Amazon EC2), so Resource is "*".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

ROLES_ANYWHERE = "rolesanywhere.amazonaws.com"
# What Prometheus' EC2 discovery calls (see the module's docstring).
EC2_SD_READ = ["ec2:DescribeAvailabilityZones", "ec2:DescribeInstances"]


def roles_anywhere_trust_policy(trust_anchor_arn: str, hosts: list[str]) -> str:
    """IAM Roles Anywhere User Guide, "Trust model" and "Attribute mapping and trust policy": the service
    principal with AssumeRole, TagSession and SetSourceIdentity, bound to the one trust anchor, and to
    certificates whose subject CN names one of *hosts*."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": ROLES_ANYWHERE},
                    "Action": ["sts:AssumeRole", "sts:TagSession", "sts:SetSourceIdentity"],
                    "Condition": {
                        "ArnEquals": {"aws:SourceArn": trust_anchor_arn},
                        "StringEquals": {"aws:PrincipalTag/x509Subject/CN": sorted(hosts)},
                    },
                }
            ],
        }
    )


def ec2_sd_policy() -> str:
    statement = {"Effect": "Allow", "Action": EC2_SD_READ, "Resource": "*"}
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


@dataclass(frozen=True)
class PrometheusDiscoveryArgs:
    cluster: str
    trust_anchor_arn: pulumi.Input[str]
    hosts: list[str]  # the site hosts that run Prometheus: their certificates' subject CN
    session_minutes: int
    tags: dict[str, str] = field(default_factory=dict)


class PrometheusDiscovery(pulumi.ComponentResource):
    """The site Prometheus's discovery credentials: a role trusted for the Prometheus hosts' certificates only,
    allowed EC2_SD_READ only, and the Roles Anywhere profile that hands out sessions of it."""

    role_arn: pulumi.Output[str]
    profile_arn: pulumi.Output[str]

    def __init__(self, name: str, args: PrometheusDiscoveryArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            "gpuforge:hybrid:PrometheusDiscovery", name, {"hosts": sorted(args.hosts), "actions": EC2_SD_READ}, opts
        )
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=pulumi.Output.from_input(args.trust_anchor_arn).apply(
                lambda arn: roles_anywhere_trust_policy(arn, args.hosts)
            ),
            max_session_duration=max(3600, args.session_minutes * 60),
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicy(f"{name}-ec2-sd", role=role.id, policy=ec2_sd_policy(), opts=child)
        profile = aws.rolesanywhere.Profile(
            f"{name}-profile",
            name=f"{args.cluster}-prometheus-discovery",
            enabled=True,
            role_arns=[role.arn],
            duration_seconds=args.session_minutes * 60,
            tags=args.tags,
            opts=child,
        )
        self.role_arn = role.arn
        self.profile_arn = profile.arn
        self.register_outputs({"roleArn": role.arn, "profileArn": profile.arn})
