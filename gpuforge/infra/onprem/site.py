"""OnPremSite: the site model as components, and the GPU platform on the site's cluster.

- a `gpuforge:onprem:Rack` per rack (feeds, cooling, load) with a `gpuforge:onprem:Host` per host
  (inventory as outputs; node labels and taints through the site cluster's provider);
- the Kubernetes provider built from the site's kubeconfig (a Pulumi config secret);
- gpuforge/infra/k8s GpuPlatform on that provider: the same code EKS stacks run, with the NVIDIA
  Network Operator and the RDMA shared device plugin for the InfiniBand or RoCE fabric.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuforge.catalog.tokens import SITE
from gpuforge.infra.k8s import GpuPlatform, GpuPlatformArgs, GpuPool
from gpuforge.infra.k8s.monitoring_stack import MonitoringStack
from gpuforge.infra.k8s.scheduling import Taint
from gpuforge.spec.models import Fabric, Platform
from gpuforge.spec.resolved_site import ResolvedHost, ResolvedSite
from gpuforge.spec.site_halls import hall_power

from .rack import Rack, RackArgs

# One RDMA shared device per pod: the plugin hands every HCA of the node to it.
RDMA_DEVICES_PER_NODE = 1


def hall_props(site: ResolvedSite) -> dict[str, Any]:
    """Per hall: IT kW against its budget, racks, and per hall feed the normal load against its continuous rating."""
    return {
        hall.name: {
            "itKw": round(hall.load_kw, 3),
            "budgetKw": hall.budget.limit_kw if hall.budget else None,
            "racks": len(hall.racks),
            "feeds": {
                feed: {"loadKw": round(room.load_kw, 3), "continuousKw": round(room.limit_kw, 3)}
                for feed, room in hall.feeds.items()
            },
        }
        for hall in hall_power(site)
    }


def site_props(site: ResolvedSite) -> dict[str, Any]:
    spec = site.spec
    fabric = spec.fabric
    return {
        "site": spec.name,
        "budgetKw": spec.power.budget_kw,
        "pue": spec.power.pue,
        "itKw": round(site.it_kw, 3),
        # The IT load beside the GPU hosts: fabric switches and the declared equipment.
        "switchKw": round(site.switch_kw, 3),
        "equipmentKw": round(site.equipment_kw, 3),
        "facilityKw": round(site.facility_kw, 3),
        "racks": sorted(spec.racks),
        # Power rolled up by hall and hall feed (site.halls), only where the site declares halls.
        **({"halls": hall_props(site)} if spec.halls else {}),
        "hosts": len(site.hosts),
        "gpus": sum(h.gpus for h in site.hosts.values()),
        "fabric": (
            {
                "kind": fabric.kind,
                "topology": fabric.topology,
                "rails": fabric.rails,
                "rateGbps": fabric.rate_gbps,
                "scalableUnits": sorted({r.scalable_unit for r in spec.racks.values()}),
                "leavesPerScalableUnit": fabric.rails,
                "spines": fabric.spines,
                "railIslands": fabric.rail_islands,
                # Per leaf: host ports against uplink ports (1.0 non-blocking), and the ports hosts use.
                "leafDownlinks": fabric.downlinks,
                "leafUplinks": fabric.uplinks,
                "leafOversubscription": round(fabric.oversubscription, 3),
                # Three tiers: the cores, the spines' down and up ports, and the spine groups (pods) of whole SUs.
                "cores": fabric.cores,
                "spineDownlinks": fabric.spine_down,
                "spineUplinks": fabric.spine_up,
                "spineOversubscription": round(fabric.spine_oversubscription, 3),
                "spineGroups": len(fabric.pods(site.su_names())) if fabric.cores else None,
                "reservedLeafPorts": dict(fabric.reserved_leaf_ports),
                "partitions": dict(fabric.partitions),
                "subnetManagers": dict(fabric.subnet_managers),
                "sharp": fabric.sharp,
            }
            if fabric
            else None
        ),
        "storage": {
            "mounts": {k: m.model_dump() for k, m in spec.storage.mounts.items()},
            "objectStore": spec.storage.object_store.model_dump() if spec.storage.object_store else None,
        },
    }


def host_taints(host: ResolvedHost) -> tuple[Taint, ...]:
    return tuple(Taint(t.key, t.value, t.effect) for t in host.spec.taints)


def site_https_endpoints(site: ResolvedSite) -> dict[str, int]:
    """The site's object store as the platform's NetworkPolicies allow it: CIDR -> port."""
    store = site.spec.storage.object_store
    return {cidr: store.port for cidr in store.cidrs} if store else {}


def site_gpu_pools(site: ResolvedSite) -> list[GpuPool]:
    """Active Kubernetes GPU hosts per GPU model: the platform's Kueue quotas."""
    pools: dict[str, GpuPool] = {}
    for host in site.hosts.values():
        if host.spec.orchestrator != "kubernetes" or host.gpus == 0:
            continue
        model = host.server.gpu_model
        known = pools.get(model)
        pools[model] = GpuPool(
            gpu_model=model,
            nodes=(known.nodes if known else 0) + 1,
            gpus_per_node=host.gpus,
            cpus_per_node=host.server.cpu_threads or 0,
            memory_mib_per_node=(host.server.memory_gib or 0) * 1024,
            fabric_devices_per_node=RDMA_DEVICES_PER_NODE if host.spec.hcas else 0,
            node_kind="onprem",
            taints=tuple(sorted({*(known.taints if known else ()), *host_taints(host)}, key=str)),
        )
    return [pools[m] for m in sorted(pools)]


@dataclass(frozen=True)
class OnPremSiteArgs:
    site: ResolvedSite
    cluster: str
    platform: Platform | None  # the cluster's kubernetes.platform; None: no platform on the site
    kubeconfig: pulumi.Input[str] | None  # None: hosts are not on Kubernetes
    dcgm_service_monitor: bool = True  # GpuPlatformArgs.dcgm_service_monitor
    monitoring: MonitoringStack = field(default_factory=MonitoringStack)  # GpuPlatformArgs.monitoring


class OnPremSite(pulumi.ComponentResource):
    rack_components: dict[str, Rack]
    provider: k8s.Provider | None
    platform: GpuPlatform | None

    def __init__(self, name: str, args: OnPremSiteArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        site = args.site
        props = site_props(site)
        super().__init__(SITE, name, props, opts)
        self.provider = None
        self.platform = None
        child = pulumi.ResourceOptions(parent=self)
        if site.spec.kubernetes is not None and args.kubeconfig is not None:
            self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=args.kubeconfig, opts=child)
            child = pulumi.ResourceOptions(parent=self, providers={"kubernetes": self.provider})
        self.rack_components = {
            rack: Rack(f"{name}-{rack}", RackArgs(site, rack, args.cluster), opts=child)
            for rack in sorted(site.spec.racks)
        }
        pools = site_gpu_pools(site)
        if self.provider is not None and args.platform is not None and pools:
            fabric: Fabric = site.spec.fabric.kind if site.spec.fabric else "none"
            self.platform = GpuPlatform(
                f"{name}-platform",
                GpuPlatformArgs(
                    platform=args.platform,
                    fabric=fabric,
                    pools=pools,
                    private_https_endpoints=site_https_endpoints(site),
                    dcgm_service_monitor=args.dcgm_service_monitor,
                    monitoring=args.monitoring,
                ),
                opts=child,
            )
        self.register_outputs({"site": props})
