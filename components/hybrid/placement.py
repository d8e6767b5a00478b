"""Compose a hybrid cluster: the site (components/onprem), the cloud side (components/aws) without
an EKS control plane (burst nodes join the site's scheduler), the link between them, the burst
lender queue on the site's cluster, and object sync."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pulumi
import pulumi_aws as aws

from components.aws import build_aws_network_and_cluster
from components.catalog import load_charts
from components.onprem import build_onprem_site
from components.spec import ResolvedSpec

from .burst import BurstCapacity, BurstCapacityArgs, BurstPool
from .link import SiteLink, SiteLinkArgs, link_description
from .object_sync import ObjectSync, ObjectSyncArgs, egress_statement


def burst_pools(resolved: ResolvedSpec) -> list[BurstPool]:
    return [
        BurstPool(n, g.instance.gpu_model, g.spec.count, g.gpus_per_node, g.instance.vcpus, g.instance.memory_mib)
        for n, g in sorted(resolved.node_groups.items())
        if g.spec.orchestrator == "kubernetes" and g.instance.gpu_model and g.gpus_per_node
    ]


def build_hybrid_cluster(name: str, resolved: ResolvedSpec, parent: pulumi.Resource) -> dict[str, Any]:
    spec, site, hybrid = resolved.spec, resolved.site, resolved.spec.hybrid
    assert site is not None and hybrid is not None and spec.network is not None and spec.region is not None
    # The kubernetes section describes the site's platform: the cloud side declares no EKS.
    cloud = replace(resolved, spec=spec.model_copy(update={"kubernetes": None}))
    aws_outputs, network = build_aws_network_and_cluster(name, cloud, parent)
    site_outputs, site_component = build_onprem_site(name, resolved, parent)

    tags = {"gpuforge:cluster": spec.name, "gpuforge:environment": spec.environment, **spec.tags}
    provider = aws.Provider(
        f"{name}-aws-link",
        region=spec.region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=tags),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    in_aws = pulumi.ResourceOptions(parent=parent, providers={"aws": provider})
    link = SiteLink(
        f"{name}-link",
        SiteLinkArgs(
            hybrid=hybrid,
            site=site.spec.name,
            region=spec.region,
            site_cidrs=list(site.spec.cidrs),
            vpc_id=network.vpc_id,
            vpc_cidr=spec.network.cidr,
            route_table_ids=dict(network.private_route_table_ids),
            attachment_subnet_ids=[
                network.subnet_ids["management"][az] for az in sorted(spec.network.availability_zones)
            ],
            burst_security_group_id=network.security_group_ids["compute"],
        ),
        opts=in_aws,
    )
    hybrid_outputs: dict[str, Any] = {
        "link": {
            "kind": hybrid.link.kind,
            "description": link_description(hybrid, site.spec.name, spec.region),
            "vpnConnectionId": link.vpn_connection_id,
            "gatewayId": link.gateway_id,
        }
    }

    pools = burst_pools(resolved)
    if pools and site_component.provider is not None and site_component.platform is not None:
        kueue_api = load_charts().chart("kueue").api_version or "kueue.x-k8s.io/v1beta1"
        BurstCapacity(
            f"{name}-burst",
            BurstCapacityArgs(
                region=spec.region, pools=pools, kueue_api_version=kueue_api, kueue=site_component.platform.kueue
            ),
            opts=pulumi.ResourceOptions(
                parent=parent,
                providers={"kubernetes": site_component.provider},
                depends_on=[site_component.platform.kueue],
            ),
        )
        hybrid_outputs["burst"] = {
            "clusterQueue": f"burst-{spec.region}",
            "gpus": sum(p.nodes * p.gpus_per_node for p in pools),
        }

    sync = hybrid.object_sync
    store = site.spec.storage.object_store
    if sync is not None and store is not None:
        bucket = aws_outputs["objectStores"][sync.cloud_store]
        ObjectSync(
            f"{name}-sync",
            ObjectSyncArgs(sync, store.endpoint, sync.cloud_store, bucket["arn"], aws_outputs["kmsKeyArn"]),
            opts=in_aws,
        )
        hybrid_outputs["objectSync"] = {
            "direction": sync.direction,
            "description": egress_statement(sync, sync.cloud_store),
        }

    return {
        **aws_outputs,
        **site_outputs,
        "cluster": {"name": spec.name, "environment": spec.environment, "placement": "hybrid", "region": spec.region},
        "nodeGroups": {**site_outputs["nodeGroups"], **aws_outputs["nodeGroups"]},
        "hybrid": hybrid_outputs,
    }
