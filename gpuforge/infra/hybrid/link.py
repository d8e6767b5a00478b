"""SiteLink: the site's network reaching the VPC.

- `vpn`: a customer gateway (the site's VPN device) and a Site-to-Site VPN on a virtual private
  gateway attached to the VPC; BGP (or static routes) carry the site's CIDRs, propagated into the
  VPC's private route tables.
- `transit_gateway`: the VPN and the VPC both attach to a transit gateway (the hub other VPCs and
  Direct Connect can join later); an attachment adds no VPC routes, so every private route table
  gets a route to each site CIDR through the transit gateway.
- both tunnels: IKEv2 only, DH groups 19-21, AES-256-GCM, SHA-2, and tunnel logs to an encrypted
  log group (data/aws_wiring.yaml vpn_tunnel).
- an existing Direct Connect gateway can be associated with the VGW or the transit gateway,
  advertising the VPC CIDR to the site over the private line.
Burst nodes open only the listed ports (kubelet) to the site's CIDRs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.spec.site import HybridSpec


def _key(cidr: str) -> str:
    return re.sub(r"[^0-9a-z]+", "-", cidr.lower()).strip("-")


def link_description(hybrid: HybridSpec, site: str, region: str) -> str:
    link = hybrid.link
    routing = "static routes" if link.static_routes_only else f"BGP (site ASN {link.customer_gateway.bgp_asn})"
    via = "virtual private gateway" if link.kind == "vpn" else "transit gateway"
    dx = ", Direct Connect gateway associated" if link.direct_connect_gateway_id else ""
    return f"{site} -> {region}: Site-to-Site VPN from {link.customer_gateway.ip_address} on a {via}, {routing}{dx}"


@dataclass(frozen=True)
class SiteLinkArgs:
    hybrid: HybridSpec
    site: str
    region: str
    site_cidrs: list[str]
    vpc_id: pulumi.Input[str]
    vpc_cidr: str
    route_table_ids: dict[str, pulumi.Input[str]]  # private route tables by AZ
    attachment_subnet_ids: list[pulumi.Input[str]]  # one per AZ, for a transit gateway attachment
    burst_security_group_id: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str]  # encrypts the tunnel log group
    # The site's pod CIDRs where its pods reach the cloud with their own addresses: routed like site_cidrs.
    pod_cidrs: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def routed_cidrs(self) -> list[str]:
        """Every range the VPC routes to the site: its networks and its routed pod networks."""
        return [*self.site_cidrs, *(c for c in self.pod_cidrs if c not in self.site_cidrs)]


class SiteLink(pulumi.ComponentResource):
    vpn_connection_id: pulumi.Output[str]
    gateway_id: pulumi.Output[str]

    def __init__(self, name: str, args: SiteLinkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        link = args.hybrid.link
        props: dict[str, Any] = {
            "site": args.site,
            "kind": link.kind,
            "siteCidrs": args.site_cidrs,
            "podCidrs": args.pod_cidrs,
            "vpcCidr": args.vpc_cidr,
            "customerGatewayIp": link.customer_gateway.ip_address,
            "bgpAsn": link.customer_gateway.bgp_asn,
            "staticRoutesOnly": link.static_routes_only,
            "directConnectGatewayId": link.direct_connect_gateway_id,
            "description": link_description(args.hybrid, args.site, args.region),
            "routeTableIds": [args.route_table_ids[az] for az in sorted(args.route_table_ids)],
        }
        super().__init__("gpuforge:hybrid:SiteLink", name, props, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = {**args.tags, "gpuforge:site": args.site}

        tunnel = _tunnel_options(name, args, child)
        cgw = aws.ec2.CustomerGateway(
            f"{name}-cgw",
            bgp_asn=str(link.customer_gateway.bgp_asn),
            ip_address=link.customer_gateway.ip_address,
            type="ipsec.1",
            tags={**tags, "Name": f"{name}-cgw"},
            opts=child,
        )
        if link.kind == "vpn":
            vgw = aws.ec2.VpnGateway(
                f"{name}-vgw",
                vpc_id=args.vpc_id,
                amazon_side_asn=str(link.amazon_side_asn),
                tags={**tags, "Name": f"{name}-vgw"},
                opts=child,
            )
            vpn = aws.ec2.VpnConnection(
                f"{name}-vpn",
                customer_gateway_id=cgw.id,
                vpn_gateway_id=vgw.id,
                type="ipsec.1",
                static_routes_only=link.static_routes_only,
                **tunnel,
                tags={**tags, "Name": f"{name}-vpn"},
                opts=child,
            )
            for az, rt in sorted(args.route_table_ids.items()):
                aws.ec2.VpnGatewayRoutePropagation(
                    f"{name}-propagate-{az}", vpn_gateway_id=vgw.id, route_table_id=rt, opts=child
                )
            if link.static_routes_only:
                for cidr in args.routed_cidrs:
                    aws.ec2.VpnConnectionRoute(
                        f"{name}-route-{_key(cidr)}", destination_cidr_block=cidr, vpn_connection_id=vpn.id, opts=child
                    )
            gateway_id = vgw.id
        else:
            tgw = aws.ec2transitgateway.TransitGateway(
                f"{name}-tgw",
                amazon_side_asn=link.amazon_side_asn,
                vpn_ecmp_support="enable",
                default_route_table_association="enable",
                default_route_table_propagation="enable",
                description=f"{args.site} <-> {args.region}",
                tags={**tags, "Name": f"{name}-tgw"},
                opts=child,
            )
            attachment = aws.ec2transitgateway.VpcAttachment(
                f"{name}-tgw-vpc",
                transit_gateway_id=tgw.id,
                vpc_id=args.vpc_id,
                subnet_ids=args.attachment_subnet_ids,
                tags={**tags, "Name": f"{name}-tgw-vpc"},
                opts=child,
            )
            vpn = aws.ec2.VpnConnection(
                f"{name}-vpn",
                customer_gateway_id=cgw.id,
                transit_gateway_id=tgw.id,
                type="ipsec.1",
                static_routes_only=link.static_routes_only,
                **tunnel,
                tags={**tags, "Name": f"{name}-vpn"},
                opts=child,
            )
            if link.static_routes_only:
                for cidr in args.routed_cidrs:
                    aws.ec2transitgateway.Route(
                        f"{name}-route-{_key(cidr)}",
                        destination_cidr_block=cidr,
                        transit_gateway_attachment_id=vpn.transit_gateway_attachment_id,
                        transit_gateway_route_table_id=tgw.association_default_route_table_id,
                        opts=child,
                    )
            # The attachment adds no VPC routes: send the site's CIDRs, and its routed pod CIDRs, to the
            # transit gateway from every private route table (Transit Gateways guide, "Transit gateway
            # attachments to a VPC").
            for az, rt in sorted(args.route_table_ids.items()):
                for cidr in args.routed_cidrs:
                    aws.ec2.Route(
                        f"{name}-{az}-to-{_key(cidr)}",
                        route_table_id=rt,
                        destination_cidr_block=cidr,
                        transit_gateway_id=tgw.id,
                        opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[attachment])),
                    )
            gateway_id = tgw.id
        if link.direct_connect_gateway_id:
            aws.directconnect.GatewayAssociation(
                f"{name}-dx",
                dx_gateway_id=link.direct_connect_gateway_id,
                associated_gateway_id=gateway_id,
                allowed_prefixes=[args.vpc_cidr],
                opts=child,
            )
        for cidr in args.site_cidrs:
            for port in args.hybrid.allowed_from_site:
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-from-site-{_key(cidr)}-{port}",
                    security_group_id=args.burst_security_group_id,
                    cidr_ipv4=cidr,
                    ip_protocol="tcp",
                    from_port=port,
                    to_port=port,
                    description=f"{args.site} to burst nodes, tcp/{port}",
                    opts=child,
                )
        _tunnel_state_alarms(name, args, vpn, child)
        self.vpn_connection_id = vpn.id
        self.gateway_id = gateway_id
        self.register_outputs({"vpnConnectionId": vpn.id, "gatewayId": gateway_id, "customerGatewayId": cgw.id})


def _tunnel_state_alarms(
    name: str, args: SiteLinkArgs, vpn: aws.ec2.VpnConnection, child: pulumi.ResourceOptions
) -> None:
    """A CloudWatch alarm per tunnel on its TunnelState (catalog vpn_tunnel.state_source): one tunnel down is the
    link without its spare; both down is the cloud side cut off (Slurm's cloud nodes, their /home and the site
    Prometheus's view of them). No data counts as down: a tunnel that reports nothing is not known to be up."""
    wiring = load_aws_wiring().vpn_tunnel
    for tunnel, address in (("1", vpn.tunnel1_address), ("2", vpn.tunnel2_address)):
        aws.cloudwatch.MetricAlarm(
            f"{name}-tunnel{tunnel}-down",
            alarm_description=f"{args.site} <-> {args.region} VPN tunnel {tunnel} is not up (TunnelState < 1)",
            namespace="AWS/VPN",
            metric_name="TunnelState",
            dimensions={"TunnelIpAddress": address},
            statistic="Maximum",
            period=wiring.state_period_seconds,
            evaluation_periods=wiring.state_alarm_periods,
            datapoints_to_alarm=wiring.state_alarm_periods,
            comparison_operator="LessThanThreshold",
            threshold=1,
            treat_missing_data="breaching",
            tags=args.tags,
            opts=child,
        )


def _tunnel_options(name: str, args: SiteLinkArgs, child: pulumi.ResourceOptions) -> dict[str, Any]:
    """Both tunnels' crypto and logging, from the catalog: IKEv2 only, modern DH groups, AES-256-GCM,
    SHA-2, and tunnel activity logged to a log group encrypted with the cluster key (AWS Site-to-Site
    VPN User Guide, "Tunnel options for your Site-to-Site VPN connection", "AWS Site-to-Site VPN logs")."""
    crypto = load_aws_wiring().vpn_tunnel
    logs = aws.cloudwatch.LogGroup(
        f"{name}-tunnel-logs",
        retention_in_days=crypto.log_retention_days,
        kms_key_id=args.kms_key_arn,
        tags=args.tags,
        opts=child,
    )
    log_options = {
        "cloudwatch_log_options": {"log_enabled": True, "log_group_arn": logs.arn, "log_output_format": "json"}
    }
    options: dict[str, Any] = {}
    for tunnel in ("tunnel1", "tunnel2"):
        options.update(
            {
                f"{tunnel}_ike_versions": list(crypto.ike_versions),
                f"{tunnel}_phase1_dh_group_numbers": list(crypto.phase1_dh_group_numbers),
                f"{tunnel}_phase2_dh_group_numbers": list(crypto.phase2_dh_group_numbers),
                f"{tunnel}_phase1_encryption_algorithms": list(crypto.phase1_encryption_algorithms),
                f"{tunnel}_phase2_encryption_algorithms": list(crypto.phase2_encryption_algorithms),
                f"{tunnel}_phase1_integrity_algorithms": list(crypto.phase1_integrity_algorithms),
                f"{tunnel}_phase2_integrity_algorithms": list(crypto.phase2_integrity_algorithms),
                f"{tunnel}_log_options": log_options,
            }
        )
    return options
