"""Compose a hybrid cluster: the site (gpuforge/infra/onprem), the cloud side (gpuforge/infra/aws), the link
between them, the burst (cloud partitions of the site's Slurm controller, gpuforge/infra/hybrid/slurm_burst.py;
or, for a Kubernetes site, an EKS worker cluster the site's Kueue dispatches to through MultiKueue,
gpuforge/infra/hybrid/burst.py), and object sync."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pulumi
import pulumi_aws as aws

from gpuforge.catalog import load_charts
from gpuforge.catalog.flows import load_flows
from gpuforge.catalog.tokens import CLUSTER_TAG, ENVIRONMENT_TAG
from gpuforge.infra.aws import build_aws_network_and_cluster
from gpuforge.infra.aws.network import SegmentedNetwork
from gpuforge.infra.k8s.platform import GPU_RESOURCE, fabric_resource
from gpuforge.infra.onprem import build_onprem_site
from gpuforge.render.slurm import slurm_config
from gpuforge.spec import ClusterSpec, ResolvedSpec
from gpuforge.spec.monitoring import SiteHostServer
from gpuforge.spec.scheduler_checks import secret_names
from gpuforge.spec.site import BurstSpec, NfsMount
from gpuforge.spec.slurm_burst import SlurmBurstSpec

from .burst import MultiKueueBurst, MultiKueueBurstArgs
from .link import SiteLink, SiteLinkArgs, link_description
from .object_sync import ObjectSync, ObjectSyncArgs, egress_statement
from .slurm_burst import SlurmBurst, SlurmBurstArgs


def _ca_from_kubeconfig(text: str) -> str:
    return str(json.loads(text)["clusters"][0]["cluster"]["certificate-authority-data"])


def build_hybrid_cluster(name: str, resolved: ResolvedSpec, parent: pulumi.Resource) -> dict[str, Any]:
    spec, site, hybrid = resolved.spec, resolved.site, resolved.spec.hybrid
    assert site is not None and hybrid is not None and spec.network is not None and spec.region is not None
    # The kubernetes section describes the site's platform; the cloud worker runs the same platform
    # with the burst quotas (hybrid.burst.team_gpus) as its teams' quotas.
    kube = spec.kubernetes
    burst = hybrid.burst if isinstance(hybrid.burst, BurstSpec) else None
    slurm_burst = hybrid.burst if isinstance(hybrid.burst, SlurmBurstSpec) else None
    if kube is not None and burst is not None:
        teams = {
            t: team.model_copy(update={"gpu_quota": dict(burst.team_gpus[t])})
            for t, team in kube.platform.teams.items()
            if t in burst.team_gpus
        }
        worker_kube = kube.model_copy(update={"platform": kube.platform.model_copy(update={"teams": teams})})
        cloud = replace(resolved, spec=spec.model_copy(update={"kubernetes": worker_kube}))
    else:
        cloud = replace(resolved, spec=spec.model_copy(update={"kubernetes": None}))
    # The Slurm controller is the site's: the cloud side builds no control plane of its own.
    cloud = replace(cloud, scheduler=None)
    cloud_side = build_aws_network_and_cluster(name, cloud, parent)
    aws_outputs, network = cloud_side.outputs, cloud_side.network
    site_outputs, site_component = build_onprem_site(name, resolved, parent)

    tags = {CLUSTER_TAG: spec.name, ENVIRONMENT_TAG: spec.environment, **spec.tags}
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
            pod_cidrs=list(site.spec.kubernetes.pod_cidrs) if site.spec.kubernetes else [],
            vpc_id=network.vpc_id,
            vpc_cidr=spec.network.cidr,
            route_table_ids=dict(network.private_route_table_ids),
            attachment_subnet_ids=[
                network.subnet_ids["management"][az] for az in sorted(spec.network.availability_zones)
            ],
            burst_security_group_id=network.security_group_ids["compute"],
            kms_key_arn=aws_outputs["kmsKeyArn"],
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

    eks, worker = cloud_side.eks, cloud_side.platform
    manager = site_component.platform
    worker_provider = cloud_side.kubernetes_provider
    if burst is not None and eks is not None and worker is not None and manager is not None and worker_provider:
        assert site_component.provider is not None
        charts = load_charts()
        extra = fabric_resource(worker.fabric_kind)
        MultiKueueBurst(
            f"{name}-burst",
            MultiKueueBurstArgs(
                region=spec.region,
                # The MultiKueue manager is a site pod: with routed pod IPs it calls from a pod CIDR.
                site_cidrs=[*site.spec.cidrs, *(site.spec.kubernetes.pod_cidrs if site.spec.kubernetes else [])],
                team_gpus={t: dict(g) for t, g in burst.team_gpus.items()},
                team_namespaces=dict(manager.namespaces),
                pools=worker.gpu_pools,
                covered=["cpu", "memory", GPU_RESOURCE, *([extra] if extra else [])],
                local_queue=burst.local_queue,
                kueue_api_version=charts.chart("kueue").api_version or "kueue.x-k8s.io/v1beta1",
                kueue_namespace=charts.chart("kueue").namespace,
                worker_cluster=eks.name,
                worker_endpoint=eks.endpoint,
                worker_ca_data=eks.kubeconfig.apply(_ca_from_kubeconfig),
                worker_security_group_id=eks.cluster_security_group_id,
                worker_provider=worker_provider,
                worker_after=[worker.kueue, *worker.team_namespaces],
                manager_provider=site_component.provider,
                manager_after=[manager.kueue, *manager.team_namespaces],
            ),
            opts=pulumi.ResourceOptions(parent=parent, providers={"aws": provider}),
        )
        hybrid_outputs["burst"] = {
            "mechanism": burst.mechanism,
            "admissionCheck": f"multikueue-{spec.region}",
            "localQueue": burst.local_queue,
            "gpus": sum(g for team in burst.team_gpus.values() for g in team.values()),
        }

    if slurm_burst is not None and resolved.scheduler is not None:
        hybrid_outputs["burst"] = _slurm_burst(
            f"{name}-burst", resolved, slurm_burst, network, cloud_side.node_role_names, aws_outputs["kmsKeyArn"],
            tags, in_aws,
        )

    sync = hybrid.object_sync
    store = site.spec.storage.object_store
    if sync is not None and store is not None:
        bucket = aws_outputs["objectStores"][sync.cloud_store]
        ObjectSync(
            f"{name}-sync",
            ObjectSyncArgs(
                sync, store.endpoint, sync.cloud_store, bucket["arn"], aws_outputs["kmsKeyArn"], store.ca_certificate
            ),
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


# What a site Prometheus scrapes on a cloud Slurm node (render/monitoring.py's ec2_sd jobs "node" and "dcgm").
SCRAPED_EXPORTERS = ("node_exporter", "dcgm_exporter")


def _site_prometheus_hosts(spec: ClusterSpec) -> dict[str, str]:
    """The site hosts that run Prometheus (monitoring.server kind site_host and its replica), by name."""
    server = spec.monitoring.server if spec.monitoring is not None else None
    if not isinstance(server, SiteHostServer):
        return {}
    hosts = {server.host: server.address}
    if server.replica is not None:
        hosts[server.replica.host] = server.replica.address
    return hosts


def _slurm_burst(
    name: str,
    resolved: ResolvedSpec,
    burst: SlurmBurstSpec,
    network: SegmentedNetwork,
    node_roles: dict[str, pulumi.Output[str]],
    kms_key_arn: pulumi.Output[str],
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> dict[str, Any]:
    """The Slurm burst's cloud side, and the stack output `hybrid.burst` (names and ARNs, never the key)."""
    spec, sched = resolved.spec, resolved.scheduler
    assert sched is not None and spec.site is not None and spec.region is not None
    home = spec.site.storage.mounts[sched.home]
    assert isinstance(home, NfsMount)  # slurm_burst_checks: /home over the link is NFS
    config = slurm_config(resolved)
    cloud_groups = sorted(g for g, group in sched.groups.items() if group.cloud)
    partitions = {
        pname: {
            "location": "cloud" if all(g in spec.node_groups for g in p.node_groups) else "site",
            "nodeGroups": list(p.node_groups),
        }
        for pname, p in sched.spec.partitions.items()
    }
    # Rendered switches hold the site's static hosts; the cloud's are written at run time beside them.
    switches = [
        {"name": sw["name"], "switches": [c for c in sw["switches"].split(",") if c],
         **({"location": "site"} if sw["nodes"] else {})}
        for sw in config["topology"]["switches"]
    ]
    munge_secret = secret_names(spec.name)["munge_key"]
    component = SlurmBurst(
        name,
        SlurmBurstArgs(
            burst=burst,
            cluster=spec.name,
            region=spec.region,
            controllers={c.name: c.address for c in sched.controllers},
            login_hosts=dict(sched.login_hosts),
            home={"server": home.server, "export": home.export, "mount_point": home.mount_point},
            compute_security_group_id=network.security_group_ids["compute"],
            compute_cidrs=sorted(str(n) for (tier, _), n in resolved.subnets.items() if tier == "compute"),
            node_role_names={g: node_roles[g] for g in cloud_groups},
            munge_secret_name=munge_secret,
            kms_key_arn=kms_key_arn,
            ports=resolved.catalog.slurm.ports,
            partitions=partitions,
            switches=switches,
            protected=spec.protected,
            tags=tags,
            prometheus_hosts=_site_prometheus_hosts(spec),
            exporter_ports={name: load_flows().ports[name].ports for name in SCRAPED_EXPORTERS},
        ),
        opts=opts,
    )
    return {
        "mechanism": "slurm",
        "controllers": {c.name: c.address for c in sched.controllers},
        "cloudPartitions": sorted(p for p, v in partitions.items() if v["location"] == "cloud"),
        "mungeSecret": munge_secret,
        "mungeSecretArn": component.munge_secret_arn,
        "scaler": {
            "roleArn": component.scaler_role_arn,
            "profileArn": component.scaler_profile_arn,
            "trustAnchorArn": component.trust_anchor_arn,
        },
        "siteFirewall": component.site_firewall,
    }
