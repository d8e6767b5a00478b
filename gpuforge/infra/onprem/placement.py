"""Compose the on-premises components for one site and return the stack outputs.

The outputs follow the AWS placement's shape where a consumer reads both: `nodeGroups` (one per
host pool, with its hosts and their per-host inventory) feeds gpuforge/nodes/inventory.py, `site` the
plan and the power rules."""

from __future__ import annotations

from typing import Any

import pulumi

from gpuforge.infra.k8s.alerting import declare_alert_routing, operator_monitoring
from gpuforge.infra.k8s.monitoring_stack import monitoring_stack_for
from gpuforge.render.ib_partitions import host_pkey_index
from gpuforge.spec import ResolvedSpec
from gpuforge.spec.host_network_checks import host_lnet, host_storage_addresses
from gpuforge.spec.resolved_site import ResolvedHost, ResolvedSite

from .host import host_props
from .site import OnPremSite, OnPremSiteArgs
from .slurm import SlurmControlPlane

CONFIG_NAMESPACE = "gpuforge"


def site_kubeconfig(site: ResolvedSite) -> pulumi.Output[str] | None:
    """The site cluster's kubeconfig from the stack's secret config (None without site.kubernetes).
    Offline plans have no secret set: the provider gets an empty config, as a preview would."""
    kube = site.spec.kubernetes
    if kube is None:
        return None
    value = pulumi.Config(CONFIG_NAMESPACE).get_secret(kube.kubeconfig_secret)
    return value if value is not None else pulumi.Output.secret("")


def pool_outputs(site: ResolvedSite) -> dict[str, Any]:
    """Per host pool: what gpuforge/nodes/inventory.py reads (role, fabric, GPUs, HCAs per rail, hosts)."""
    fabric = site.spec.fabric
    out: dict[str, Any] = {}
    for pool, hosts in sorted(site.pools().items()):
        first = hosts[0]
        out[pool] = {
            "nodeGroup": pool,
            "role": first.spec.role,
            "serverModel": first.spec.model,
            "gpuModel": first.server.gpu_model,
            "gpusPerNode": first.gpus,
            "count": len(hosts),
            "fabric": fabric.kind if fabric and first.spec.hcas else "none",
            "railOptimized": bool(fabric and fabric.topology == "rail_optimized" and first.spec.hcas),
            # The acceptance playbook's floors follow the link rate (render/lifecycle.py site_fabric_floors).
            "fabricRateGbps": fabric.rate_gbps if fabric and first.spec.hcas else None,
            "ibHcas": first.spec.hcas_by_rail(),
            "sharp": bool(fabric and fabric.kind == "infiniband" and fabric.sharp and first.spec.hcas),
            "orchestrator": first.spec.orchestrator,
            # LNet's o2ib networks of the site's Lustre and the interfaces they run on (a pool is one model).
            # The site's mirror of NVIDIA's CUDA repository (site.driver_source); None: NVIDIA's own.
            "driverRepository": _driver_repository(site),
            "lnetInterfaces": {net: v["interfaces"] for net, v in host_lnet(site.spec, first).items()},
            "hosts": {h.name: _host_outputs(site, h) for h in sorted(hosts, key=lambda h: h.name)},
        }
    return out


def _driver_repository(site: ResolvedSite) -> dict[str, str | None] | None:
    source = site.spec.driver_source
    return {"url": source.cuda_repository, "keyUrl": source.key_url} if source is not None else None


def _host_outputs(site: ResolvedSite, host: ResolvedHost) -> dict[str, Any]:
    """The host's inventory, with its IPoIB addresses (storage network) and LNet NIDs derived from them."""
    return {
        **host_props(site.spec.name, host),
        "storageAddresses": host_storage_addresses(site.spec, host),
        "lnetNids": {net: v["nids"] for net, v in host_lnet(site.spec, host).items() if v["nids"]},
        # NCCL_IB_PKEY: the P_Key index of the host's tenant key (site.fabric.partitioning), None outside one.
        "ncclIbPkeyIndex": host_pkey_index(site.spec, host.name),
    }


def build_onprem_cluster(name: str, resolved: ResolvedSpec, parent: pulumi.Resource) -> dict[str, Any]:
    return build_onprem_site(name, resolved, parent)[0]


def build_onprem_site(name: str, resolved: ResolvedSpec, parent: pulumi.Resource) -> tuple[dict[str, Any], OnPremSite]:
    """The stack outputs, and the site component for a composer (hybrid) that reuses its provider."""
    site = resolved.site
    assert site is not None  # resolve() admits onprem placement only with a site
    spec = resolved.spec
    component = OnPremSite(
        f"{name}-{site.spec.name}",
        OnPremSiteArgs(
            site=site,
            cluster=name,
            platform=spec.kubernetes.platform if spec.kubernetes else None,
            kubeconfig=site_kubeconfig(site),
            dcgm_service_monitor=not operator_monitoring(resolved),
            monitoring=monitoring_stack_for(resolved),
        ),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    outputs: dict[str, Any] = {
        "cluster": {"name": spec.name, "environment": spec.environment, "placement": "onprem", "region": None},
        "site": site_props_output(site),
        "nodeGroups": pool_outputs(site),
    }
    if resolved.scheduler is not None:
        slurm = SlurmControlPlane(
            f"{name}-{site.spec.name}-slurm", resolved, resolved.scheduler, pulumi.ResourceOptions(parent=parent)
        )
        outputs["slurm"] = slurm.props
    if spec.monitoring is not None and component.provider is not None:
        # The site cluster's operator Alertmanager (monitoring.server.kind kubernetes; else nothing).
        declare_alert_routing(
            f"{name}-{site.spec.name}-alert-routing",
            resolved,
            pulumi.ResourceOptions(parent=parent, providers={"kubernetes": component.provider}),
            after=component.platform.monitoring_release if component.platform else None,
        )
    if component.platform is not None and site.spec.kubernetes is not None:
        outputs["kubernetes"] = {
            "apiServer": site.spec.kubernetes.api_server,
            "teamNamespaces": component.platform.namespaces,
        }
    return outputs, component


def site_props_output(site: ResolvedSite) -> dict[str, Any]:
    spec = site.spec
    return {
        "name": spec.name,
        "budgetKw": spec.power.budget_kw,
        "pue": spec.power.pue,
        "itKw": round(site.it_kw, 3),
        "facilityKw": round(site.facility_kw, 3),
        "racks": {r: round(site.rack_load_kw(r), 3) for r in sorted(spec.racks)},
        "parallelFs": {k: m.model_dump() for k, m in spec.storage.mounts.items()},
        "objectStore": spec.storage.object_store.endpoint if spec.storage.object_store else None,
    }
