"""Burst as Slurm cloud partitions of the site's controller (`hybrid.burst.mechanism: slurm`).

The controller (slurmctld, slurmdbd, MariaDB) and the login hosts stay on the site; the cloud node groups
(`orchestrator: slurm`) are partitions of their own whose nodes register with the site's controller over
the link (configless `slurmd -Z`, named from the instance). The cloud side declares:

- the munge key: generated here (1024 random bytes, a secret output) into AWS Secrets Manager under the
  name the rendered configuration gives (`slurm_config.secrets.cloud_munge_key`), encrypted with the cluster
  key, readable by the cloud groups' node roles only. The site holds the same key as its vault variable
  (`vault_slurm_munge_key`, copied from the secret by an operator with AWS access; docs/onprem-hybrid.md).
  The value never reaches user data, outputs or the plan;
- the ports, opened on the cloud compute security group from the site's Slurm hosts only (the controllers
  and login hosts, /32 each, inside site.cidrs): slurmd from slurmctld and srun, and srun's port range
  (SrunPortRange, the catalog's, the same in slurm.conf) for job steps talking back to srun. The other
  direction is the site firewall's: the component records those rules (`siteFirewall`) for the site's
  network team, from the VPC compute subnets to slurmctld, to srun on the login hosts and to NFS /home;
- the scaler's credentials: the site's lifecycle program drives the cloud Auto Scaling groups through IAM
  Roles Anywhere. The trust anchor is the site CA (`hybrid.burst.scaler_ca_certificate`); the role trusts
  rolesanywhere.amazonaws.com only for that anchor (aws:SourceArn) and only for certificates whose subject
  CN is a controller host, and may do exactly what an AWS controller's scaler may (lifecycle_policy: scale
  and replace this cluster's groups) plus read EC2 instance topology for topology.conf. Sessions last
  `session_minutes`; no access key exists (an IAM user's would be long-lived, copied to the site, rotated
  by hand).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_random as random

from gpuforge.catalog.models import SlurmPorts
from gpuforge.infra.aws.iam import lifecycle_policy, secret_read_policy
from gpuforge.spec.slurm_burst import SlurmBurstSpec

ROLES_ANYWHERE = "rolesanywhere.amazonaws.com"
# What gpuforge-slurm-topology reads (neither call supports resource-level permissions).
TOPOLOGY_READ = ["ec2:DescribeInstances", "ec2:DescribeInstanceTopology"]
NFS_PORT = 2049


def scaler_trust_policy(trust_anchor_arn: str, controller_hosts: list[str]) -> str:
    """IAM Roles Anywhere User Guide, "Trust model" and "Attribute mapping and trust policy": the service
    principal with AssumeRole, TagSession and SetSourceIdentity, bound to the one trust anchor, and to
    certificates whose subject CN names a controller host."""
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
                        "StringEquals": {"aws:PrincipalTag/x509Subject/CN": sorted(controller_hosts)},
                    },
                }
            ],
        }
    )


def site_firewall_rules(
    compute_cidrs: list[str], controllers: dict[str, str], login_hosts: dict[str, str], home_server: str,
    ports: SlurmPorts,
) -> list[dict[str, Any]]:
    """What the site's firewall must let in from the VPC's compute tier (and nothing wider)."""
    srun = f"{ports.srun[0]}-{ports.srun[1]}"
    rules = [
        {"from": compute_cidrs, "to": f"{address}/32", "port": str(ports.slurmctld),
         "why": f"slurmd to slurmctld on {name}"}
        for name, address in sorted(controllers.items())
    ]
    rules += [
        {"from": compute_cidrs, "to": f"{address}/32", "port": srun, "why": f"job steps to srun on {name}"}
        for name, address in sorted(login_hosts.items())
    ]
    rules.append({"from": compute_cidrs, "to": f"{home_server}/32", "port": str(NFS_PORT), "why": "NFS /home"})
    return rules


@dataclass(frozen=True)
class SlurmBurstArgs:
    burst: SlurmBurstSpec
    cluster: str
    region: str
    controllers: dict[str, str]  # site controller host -> address
    login_hosts: dict[str, str]  # site login host -> address
    home: dict[str, str]  # the site's NFS /home: server, export, mount_point
    compute_security_group_id: pulumi.Input[str]
    compute_cidrs: list[str]  # the VPC's compute subnets, where cloud nodes' addresses come from
    node_role_names: dict[str, pulumi.Input[str]]  # cloud Slurm group -> its node role
    munge_secret_name: str
    kms_key_arn: pulumi.Input[str]
    ports: SlurmPorts
    partitions: dict[str, dict[str, Any]]  # name -> {location: site|cloud, nodeGroups: [...]}
    switches: list[dict[str, Any]]  # topology.conf's rendered switches with their location
    protected: bool = False
    tags: dict[str, str] = field(default_factory=dict)
    # The site's Prometheus hosts (monitoring.server kind site_host, and its replica) -> address: they scrape the
    # cloud nodes' exporters over the link, on these ports (catalog flows.yaml: node_exporter, dcgm_exporter).
    prometheus_hosts: dict[str, str] = field(default_factory=dict)
    exporter_ports: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def slurm_hosts(self) -> list[str]:
        """The site hosts that talk to cloud slurmd and job steps: controllers and login hosts, one /32 each."""
        hosts = [*self.controllers.values(), *self.login_hosts.values()]
        return sorted({f"{ipaddress.ip_address(a)}/32" for a in hosts})


class SlurmBurst(pulumi.ComponentResource):
    munge_secret_arn: pulumi.Output[str]
    scaler_role_arn: pulumi.Output[str]
    scaler_profile_arn: pulumi.Output[str]
    trust_anchor_arn: pulumi.Output[str]

    def __init__(self, name: str, args: SlurmBurstArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        ports = args.ports
        srun = f"{ports.srun[0]}-{ports.srun[1]}"
        self.site_firewall = site_firewall_rules(
            args.compute_cidrs, args.controllers, args.login_hosts, args.home["server"], ports
        )
        super().__init__(
            "gpuforge:hybrid:SlurmBurst",
            name,
            {
                "mechanism": "slurm",
                "region": args.region,
                "controllers": dict(args.controllers),
                "loginHosts": dict(args.login_hosts),
                "siteSlurmHosts": args.slurm_hosts,
                "ports": {"slurmctld": ports.slurmctld, "slurmd": ports.slurmd, "srun": srun},
                "cloudNodeGroups": sorted(args.node_role_names),
                "partitions": args.partitions,
                "switches": args.switches,
                "home": dict(args.home),
                "mungeSecretName": args.munge_secret_name,
                "siteFirewall": self.site_firewall,
            },
            opts,
        )
        child = pulumi.ResourceOptions(parent=self)
        keep = pulumi.ResourceOptions(parent=self, protect=args.protected)

        # --- the munge key: generated here, kept in Secrets Manager, read by the cloud node roles only ------
        key = random.RandomBytes(f"{name}-munge-key", length=1024, opts=child)
        secret = aws.secretsmanager.Secret(
            f"{name}-munge-secret",
            name=args.munge_secret_name,
            kms_key_id=args.kms_key_arn,
            recovery_window_in_days=30 if args.protected else 0,
            tags=args.tags,
            opts=keep,
        )
        aws.secretsmanager.SecretVersion(
            f"{name}-munge-value", secret_id=secret.id, secret_string=key.base64, opts=child
        )
        read = pulumi.Output.all(secret.arn, args.kms_key_arn).apply(
            lambda v: json.dumps(secret_read_policy([v[0]], v[1]))
        )
        for group, reader in sorted(args.node_role_names.items()):
            aws.iam.RolePolicy(f"{name}-{group}-munge", role=reader, policy=read, opts=child)
        self.munge_secret_arn = secret.arn

        # --- the ports: slurmd and srun's range from the site's Slurm hosts only -----------------------
        for source in args.slurm_hosts:
            key_name = source.replace(".", "-").replace("/", "-")
            for rule, (low, high), why in (
                ("slurmd", (ports.slurmd, ports.slurmd), "slurmctld and srun on the site to slurmd"),
                ("srun", ports.srun, "srun on the site to job steps (SrunPortRange)"),
            ):
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-{rule}-from-{key_name}",
                    security_group_id=args.compute_security_group_id,
                    cidr_ipv4=source,
                    ip_protocol="tcp",
                    from_port=low,
                    to_port=high,
                    description=why,
                    opts=child,
                )

        # --- the site's Prometheus scrapes the cloud nodes' exporters, from its own address only -------------
        for host, address in sorted(args.prometheus_hosts.items()):
            source = f"{ipaddress.ip_address(address)}/32"
            for exporter, (low, high) in sorted(args.exporter_ports.items()):
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-{exporter}-from-{host}",
                    security_group_id=args.compute_security_group_id,
                    cidr_ipv4=source,
                    ip_protocol="tcp",
                    from_port=low,
                    to_port=high,
                    description=f"Prometheus on the site's {host} scrapes {exporter}",
                    opts=child,
                )

        # --- the scaler's credentials: IAM Roles Anywhere on the site CA ------------------------------
        anchor = aws.rolesanywhere.TrustAnchor(
            f"{name}-scaler-anchor",
            name=f"{args.cluster}-slurm-scaler",
            enabled=True,
            source=aws.rolesanywhere.TrustAnchorSourceArgs(
                source_type="CERTIFICATE_BUNDLE",
                source_data=aws.rolesanywhere.TrustAnchorSourceSourceDataArgs(
                    x509_certificate_data=args.burst.scaler_ca_certificate
                ),
            ),
            tags=args.tags,
            opts=child,
        )
        role = aws.iam.Role(
            f"{name}-scaler-role",
            assume_role_policy=anchor.arn.apply(lambda arn: scaler_trust_policy(arn, list(args.controllers))),
            max_session_duration=max(3600, args.burst.session_minutes * 60),
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-scaler-lifecycle", role=role.id, policy=json.dumps(lifecycle_policy(args.cluster)), opts=child
        )
        aws.iam.RolePolicy(
            f"{name}-scaler-topology",
            role=role.id,
            policy=json.dumps(
                {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": TOPOLOGY_READ, "Resource": "*"}]}
            ),
            opts=child,
        )
        profile = aws.rolesanywhere.Profile(
            f"{name}-scaler-profile",
            name=f"{args.cluster}-slurm-scaler",
            enabled=True,
            role_arns=[role.arn],
            duration_seconds=args.burst.session_minutes * 60,
            tags=args.tags,
            opts=child,
        )
        self.scaler_role_arn = role.arn
        self.scaler_profile_arn = profile.arn
        self.trust_anchor_arn = anchor.arn
        self.register_outputs(
            {
                "mungeSecretArn": secret.arn,
                "scalerRoleArn": role.arn,
                "scalerProfileArn": profile.arn,
                "trustAnchorArn": anchor.arn,
                "siteFirewall": self.site_firewall,
            }
        )
