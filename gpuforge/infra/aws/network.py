"""SegmentedNetwork: a VPC split into ingress, management, compute and storage tiers.

Only the ingress tier routes to the internet gateway; the other tiers leave through NAT.
Security groups open nothing from outside unless the spec lists it, and the EFA group
allows all traffic to and from itself only, as EFA's OS-bypass transport requires.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from ipaddress import IPv4Network

import pulumi
import pulumi_aws as aws

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.spec.models import TIERS, Network, Tier

from .iam import assume_role_policy

# LNet and the Lustre client's privileged ports (data/aws_wiring.yaml lustre).
LUSTRE_PORTS = load_aws_wiring().lustre.ports


@dataclass(frozen=True)
class SegmentedNetworkArgs:
    network: Network
    region: str
    subnets: dict[tuple[Tier, str], IPv4Network]
    kms_key_arn: pulumi.Input[str] | None = None  # encrypts the flow-log group
    lustre: bool = True  # a Lustre file system in the storage tier: open LNet's ports to it (flows.yaml lustre)
    # A node group runs Prometheus (monitoring.server kind node_group): its nodes get a group of their own,
    # apart from the login nodes' management group (flows.yaml role monitoring).
    monitoring: bool = False


class SegmentedNetwork(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    subnet_ids: dict[Tier, dict[str, pulumi.Output[str]]]
    security_group_ids: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: SegmentedNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec = args.network
        super().__init__(
            "gpuforge:aws:SegmentedNetwork",
            name,
            {"cidr": spec.cidr, "availabilityZones": spec.availability_zones, "nat": spec.nat},
            opts,
        )
        child = pulumi.ResourceOptions(parent=self)
        azs = sorted(spec.availability_zones)

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=spec.cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={"Name": f"{name}-vpc"},
            opts=child,
        )
        self.vpc_id = vpc.id
        subnets: dict[Tier, dict[str, aws.ec2.Subnet]] = {tier: {} for tier in TIERS}
        for (tier, az), block in sorted(args.subnets.items()):
            subnets[tier][az] = aws.ec2.Subnet(
                f"{name}-{tier}-{az}",
                vpc_id=vpc.id,
                cidr_block=str(block),
                availability_zone=az,
                map_public_ip_on_launch=False,
                tags={"Name": f"{name}-{tier}-{az}", "gpuforge:tier": tier},
                opts=child,
            )
        self.subnet_ids = {tier: {az: s.id for az, s in by_az.items()} for tier, by_az in subnets.items()}

        # Ingress tier: the only one with a route to the internet gateway.
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={"Name": f"{name}-igw"}, opts=child)
        public_rt = aws.ec2.RouteTable(
            f"{name}-ingress-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags={"Name": f"{name}-ingress-rt"},
            opts=child,
        )
        for az, subnet in subnets["ingress"].items():
            aws.ec2.RouteTableAssociation(
                f"{name}-ingress-{az}-rta", subnet_id=subnet.id, route_table_id=public_rt.id, opts=child
            )

        nat_ids = self._nat_gateways(name, spec, azs, subnets["ingress"], child)
        private_rts: list[aws.ec2.RouteTable] = []
        for az in azs:
            nat_id = nat_ids.get(az) or next(iter(nat_ids.values()), None)
            routes = [aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat_id)] if nat_id else []
            rt = aws.ec2.RouteTable(
                f"{name}-private-{az}-rt",
                vpc_id=vpc.id,
                routes=routes,
                tags={"Name": f"{name}-private-{az}"},
                opts=child,
            )
            private_rts.append(rt)
            for tier in ("management", "compute", "storage"):
                aws.ec2.RouteTableAssociation(
                    f"{name}-{tier}-{az}-rta", subnet_id=subnets[tier][az].id, route_table_id=rt.id, opts=child
                )

        if spec.s3_gateway_endpoint:
            aws.ec2.VpcEndpoint(
                f"{name}-s3-endpoint",
                vpc_id=vpc.id,
                service_name=f"com.amazonaws.{args.region}.s3",
                vpc_endpoint_type="Gateway",
                route_table_ids=[rt.id for rt in private_rts],
                tags={"Name": f"{name}-s3-endpoint"},
                opts=child,
            )
        if spec.flow_logs:
            self._flow_logs(name, spec, vpc, args, child)
        self.security_group_ids = self._security_groups(
            name, spec, vpc, child, lustre=args.lustre, monitoring=args.monitoring
        )
        if spec.nat == "none":
            self._interface_endpoints(name, spec, args.region, vpc, subnets["management"], child)
        # Private route tables by AZ: a hybrid link propagates the site's routes into them.
        self.private_route_table_ids = {az: rt.id for az, rt in zip(azs, private_rts, strict=True)}

        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "subnetIds": self.subnet_ids,
                "securityGroupIds": self.security_group_ids,
            }
        )

    @staticmethod
    def _nat_gateways(
        name: str,
        spec: Network,
        azs: list[str],
        ingress: dict[str, aws.ec2.Subnet],
        child: pulumi.ResourceOptions,
    ) -> dict[str, pulumi.Output[str]]:
        nat_azs = {"per_az": azs, "single": azs[:1], "none": []}[spec.nat]
        nats = {}
        for az in nat_azs:
            eip = aws.ec2.Eip(f"{name}-nat-{az}-eip", domain="vpc", tags={"Name": f"{name}-nat-{az}"}, opts=child)
            nats[az] = aws.ec2.NatGateway(
                f"{name}-nat-{az}",
                allocation_id=eip.id,
                subnet_id=ingress[az].id,
                tags={"Name": f"{name}-nat-{az}"},
                opts=child,
            ).id
        return nats

    @staticmethod
    def _interface_endpoints(
        name: str,
        spec: Network,
        region: str,
        vpc: aws.ec2.Vpc,
        subnets: dict[str, aws.ec2.Subnet],
        child: pulumi.ResourceOptions,
    ) -> None:
        """Without NAT, private subnets reach AWS only through endpoints: interface endpoints (private
        DNS, so the SDKs' default endpoints resolve to them) for SSM, STS, ECR, logs, EC2, EKS and the
        rest in data/aws_wiring.yaml private_endpoints, in the management tier of every AZ, open on
        443 to the VPC. ECR serves image layers from S3, through the gateway endpoint."""
        group = aws.ec2.SecurityGroup(
            f"{name}-endpoints-sg",
            vpc_id=vpc.id,
            description="Interface endpoints: HTTPS from the VPC",
            tags={"Name": f"{name}-endpoints"},
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-endpoints-in-https",
            security_group_id=group.id,
            cidr_ipv4=spec.cidr,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            description="HTTPS to AWS service endpoints from the VPC",
            opts=child,
        )
        for service in load_aws_wiring().private_endpoints.services:
            aws.ec2.VpcEndpoint(
                f"{name}-{service.replace('.', '-')}-endpoint",
                vpc_id=vpc.id,
                service_name=f"com.amazonaws.{region}.{service}",
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,
                subnet_ids=[subnets[az].id for az in sorted(subnets)],
                security_group_ids=[group.id],
                tags={"Name": f"{name}-{service}"},
                opts=child,
            )

    @staticmethod
    def _flow_logs(
        name: str, spec: Network, vpc: aws.ec2.Vpc, args: SegmentedNetworkArgs, child: pulumi.ResourceOptions
    ) -> None:
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-flow-logs",
            retention_in_days=spec.flow_log_retention_days,
            kms_key_id=args.kms_key_arn,
            opts=child,
        )
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=child.parent)).account_id
        role = aws.iam.Role(
            f"{name}-flow-logs-role",
            # Only for this account's flow logs (VPC User Guide, "IAM role for publishing flow logs").
            assume_role_policy=account.apply(
                lambda acct: assume_role_policy(
                    "vpc-flow-logs.amazonaws.com",
                    source_account=acct,
                    source_arn=f"arn:aws:ec2:{args.region}:{acct}:vpc-flow-log/*",
                )
            ),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-flow-logs-policy",
            role=role.id,
            policy=log_group.arn.apply(
                lambda arn: json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                                "Resource": [arn, f"{arn}:*"],
                            }
                        ],
                    }
                )
            ),
            opts=child,
        )
        aws.ec2.FlowLog(
            f"{name}-flow-log",
            vpc_id=vpc.id,
            traffic_type="ALL",
            log_destination_type="cloud-watch-logs",
            log_destination=log_group.arn,
            iam_role_arn=role.arn,
            opts=child,
        )

    @staticmethod
    def _security_groups(
        name: str,
        spec: Network,
        vpc: aws.ec2.Vpc,
        child: pulumi.ResourceOptions,
        *,
        lustre: bool,
        monitoring: bool = False,
    ) -> dict[str, pulumi.Output[str]]:
        purposes = {
            "ingress": "Ingress tier: load balancers and bastions; only the spec's allowed_ingress opens it",
            "management": "Management tier: login and services nodes",
            "compute": "Compute tier: GPU nodes",
            "storage": "Storage tier: parallel file system",
            "efa": "EFA: all traffic to and from itself, as EFA's OS-bypass transport requires",
        }
        if monitoring:
            # In the management tier's subnets, but not its group: what is opened to login nodes (srun's
            # ports, SSH from bastions' login group) does not reach Prometheus, Alertmanager and Grafana,
            # and only the flows of role monitoring (flows.yaml) open anything to them.
            purposes["monitoring"] = "Monitoring nodes: Prometheus, Alertmanager, Grafana"
        groups = {
            key: aws.ec2.SecurityGroup(
                f"{name}-{key}-sg", vpc_id=vpc.id, description=text, tags={"Name": f"{name}-{key}"}, opts=child
            )
            for key, text in purposes.items()
        }

        def ingress(
            rule: str,
            group: str,
            *,
            source: str | None = None,
            cidr: str | None = None,
            protocol: str = "tcp",
            ports: tuple[int, int] | None = None,
            why: str,
        ) -> None:
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-{group}-in-{rule}",
                security_group_id=groups[group].id,
                referenced_security_group_id=groups[source].id if source else None,
                cidr_ipv4=cidr,
                ip_protocol=protocol,
                from_port=ports[0] if ports else None,
                to_port=ports[1] if ports else None,
                description=why,
                opts=child,
            )

        def egress_all(group: str, *, to_self: bool = False) -> None:
            aws.vpc.SecurityGroupEgressRule(
                f"{name}-{group}-out-{'self' if to_self else 'all'}",
                security_group_id=groups[group].id,
                referenced_security_group_id=groups[group].id if to_self else None,
                cidr_ipv4=None if to_self else "0.0.0.0/0",
                ip_protocol="-1",
                description="EFA to itself" if to_self else "Egress through NAT and VPC endpoints",
                opts=child,
            )

        for i, rule in enumerate(spec.allowed_ingress):
            for port in rule.ports:
                ingress(f"allowed{i}-{port}", "ingress", cidr=rule.cidr, ports=(port, port), why=rule.description)
        ingress("ssh-from-ingress", "management", source="ingress", ports=(22, 22), why="SSH from bastions")
        if monitoring:  # administrators reach the monitoring nodes as they did in the management group
            ingress("ssh-from-ingress", "monitoring", source="ingress", ports=(22, 22), why="SSH from bastions")
        ingress("ssh-from-management", "compute", source="management", ports=(22, 22), why="SSH from login nodes")
        ingress("compute-self", "compute", source="compute", protocol="-1", why="Node to node (control traffic)")
        # LNet's ports only where a Lustre file system listens on them (no flow needs them otherwise:
        # wiring-flows-security-groups).
        for client in ("compute", "management", *(("monitoring",) if monitoring else ())) if lustre else ():
            for low, high in LUSTRE_PORTS:
                ingress(
                    f"lustre-{low}-{client}",
                    "storage",
                    source=client,
                    ports=(low, high),
                    why=f"Lustre from the {client} tier",
                )
        # The file system's servers talk to each other on both ranges too (FSx for Lustre User Guide,
        # "File system access control with Amazon VPC"); the 988 rule keeps its name (no replacement).
        for low, high in LUSTRE_PORTS if lustre else ():
            suffix = "" if low == 988 else f"-{low}"
            ingress(
                f"lustre-self{suffix}",
                "storage",
                source="storage",
                ports=(low, high),
                why="Lustre servers to each other",
            )
        ingress("self", "efa", source="efa", protocol="-1", why="EFA from itself")
        egress_all("efa", to_self=True)
        for group in ("ingress", "management", "compute", "storage", *(("monitoring",) if monitoring else ())):
            egress_all(group)
        return {key: group.id for key, group in groups.items()}
