"""An SSH bastion for a Slurm cluster's login nodes (`scheduler.login.bastion: true`).

SSM Session Manager stays the default way in (no open port). Where a site needs plain SSH, users jump
through this instance: `ssh -J <user>@<bastion> <user>@<login node>`.

- It sits in the first AZ's ingress subnet (the only tier routed to the internet gateway), with a
  public address, IMDSv2 only, an encrypted root volume (the cluster key) and no instance role: it
  holds no credentials and calls no AWS API.
- Its own security group opens tcp/22 only to the CIDRs of the `network.allowed_ingress` rules that
  list port 22, and lets it out only to tcp/22 of the login security group; login nodes (and only
  they) carry that group, which admits SSH from the bastion alone.
- Each cluster user gets an account with their public keys and no shell (`/usr/sbin/nologin`):
  `ssh -J` forwards a TCP connection (a direct-tcpip channel), it runs no command on the bastion.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import yaml

from gpuforge.catalog.tokens import SLURM_ROLE_TAG
from gpuforge.spec.models import IngressRule
from gpuforge.spec.scheduler import SchedulerSpec

from .instance import hardened_instance

SSH_PORT = 22


def ssh_sources(rules: list[IngressRule]) -> list[str]:
    """The CIDRs allowed to reach the bastion: those of the allowed_ingress rules that open port 22."""
    return sorted({rule.cidr for rule in rules if SSH_PORT in rule.ports})


def bastion_user_data(scheduler: SchedulerSpec) -> str:
    """cloud-init: one shell-less account per cluster user with their public keys (no secret: public
    keys only), forwarding allowed, nothing else."""
    users = [
        {"name": name, "uid": user.uid, "shell": "/usr/sbin/nologin", "lock_passwd": True,
         "ssh_authorized_keys": list(user.ssh_public_keys)}
        for name, user in sorted(scheduler.users.items())
        if user.ssh_public_keys
    ]
    sshd = "\n".join([
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin no",
        "AllowTcpForwarding yes",  # ssh -J: a forwarded connection to a login node
        "X11Forwarding no",
        "PermitTunnel no",
        "",
    ])
    config = {
        "users": ["default", *users],
        "write_files": [{"path": "/etc/ssh/sshd_config.d/50-gpuforge-bastion.conf", "content": sshd}],
        "runcmd": [["systemctl", "reload", "ssh"]],
    }
    return "#cloud-config\n" + yaml.safe_dump(config, sort_keys=False)


@dataclass
class BastionArgs:
    cluster: str
    scheduler: SchedulerSpec
    allowed_ingress: list[IngressRule]
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]  # the first AZ's ingress subnet
    kms_key_arn: pulumi.Input[str]
    tags: dict[str, str] = field(default_factory=dict)


class Bastion(pulumi.ComponentResource):
    """`gpuforge:aws:Bastion`: the instance, its security group and the login nodes' group."""

    login_security_group_id: pulumi.Output[str]
    public_ip: pulumi.Output[str]

    def __init__(self, name: str, args: BastionArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        sources = ssh_sources(args.allowed_ingress)
        super().__init__("gpuforge:aws:Bastion", name, {"sshSources": sources}, opts)
        child = pulumi.ResourceOptions(parent=self)
        bastion_sg = aws.ec2.SecurityGroup(
            f"{name}-sg", vpc_id=args.vpc_id, description="SSH bastion: port 22 from allowed_ingress only",
            tags={"Name": f"{args.cluster}-bastion"}, opts=child,
        )
        login_sg = aws.ec2.SecurityGroup(
            f"{name}-login-sg", vpc_id=args.vpc_id, description="Slurm login nodes: SSH from the bastion",
            tags={"Name": f"{args.cluster}-login"}, opts=child,
        )
        for i, cidr in enumerate(sources):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-in-ssh-{i}", security_group_id=bastion_sg.id, cidr_ipv4=cidr, ip_protocol="tcp",
                from_port=SSH_PORT, to_port=SSH_PORT, description=f"SSH from {cidr} (network.allowed_ingress)",
                opts=child,
            )
        # Out to the login nodes' SSH only: no other egress rule, so the bastion reaches nothing else.
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-out-ssh-login", security_group_id=bastion_sg.id, referenced_security_group_id=login_sg.id,
            ip_protocol="tcp", from_port=SSH_PORT, to_port=SSH_PORT, description="SSH on to the login nodes",
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-login-in-ssh", security_group_id=login_sg.id, referenced_security_group_id=bastion_sg.id,
            ip_protocol="tcp", from_port=SSH_PORT, to_port=SSH_PORT, description="SSH from the bastion",
            opts=child,
        )
        instance = hardened_instance(
            f"{name}-instance",
            template_name=f"{name}-lt",
            volume_size=8,
            kms_key_arn=args.kms_key_arn,
            template_opts=child,
            instance_type=args.scheduler.login.bastion_instance_type,
            subnet_id=args.subnet_id,
            vpc_security_group_ids=[bastion_sg.id],
            associate_public_ip_address=True,  # the ingress tier: reached from allowed_ingress over the internet
            user_data_base64=base64.b64encode(bastion_user_data(args.scheduler).encode()).decode(),
            tags={**args.tags, "Name": f"{args.cluster}-bastion", SLURM_ROLE_TAG: "bastion"},
            opts=child,
        )
        self.login_security_group_id = login_sg.id
        self.public_ip = instance.public_ip
        self.register_outputs({"publicIp": self.public_ip, "loginSecurityGroup": self.login_security_group_id})
