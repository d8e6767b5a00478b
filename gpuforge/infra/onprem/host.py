"""Host: one bare-metal server. No Pulumi provider manages the metal, so the component carries
the host's inventory (rack, U, BMC, management address, per-rail HCAs, power) as inputs and
outputs, and registers what Pulumi can own: the Kubernetes node's labels.

Taints are not patched onto the Node: `spec.taints` is an atomic list, so a server-side apply of
it conflicts with the kubelet and the node lifecycle controller (which add their own taints) on
every later `up`, and a node would run pods before the patch lands. The host registers with its
taints instead: `kubelet_config` is a KubeletConfiguration drop-in (`registerWithTaints`, and the
reservations the platform's quotas assume) for the kubelet's --config-dir, delivered through the
inventory (`kubelet_config_dropin`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuforge.catalog.kubelet import load_kubelet_reservation
from gpuforge.catalog.tokens import HOST
from gpuforge.render.labels import NODE_LABEL_GPU_MODEL, NODE_LABEL_GROUP, NODE_LABEL_LOCATION
from gpuforge.spec.resolved_site import ResolvedHost

NODE_LABEL_SITE = "gpuforge.dev/site"
NODE_LABEL_RACK = "gpuforge.dev/rack"
NODE_LABEL_SCALABLE_UNIT = "gpuforge.dev/scalable-unit"
NODE_LABEL_RAILS = "gpuforge.dev/rails"
NODE_LABEL_RAIL_PREFIX = "gpuforge.dev/rail-"  # gpuforge.dev/rail-0: mlx5_0, one per rail


def host_labels(site: str, host: ResolvedHost) -> dict[str, str]:
    """Kubernetes labels of the host's node: the platform's flavors select on the shared ones,
    topology-aware placement on rack and scalable unit."""
    labels = {
        NODE_LABEL_GROUP: host.spec.pool,
        NODE_LABEL_LOCATION: "onprem",
        NODE_LABEL_SITE: site,
        NODE_LABEL_RACK: host.spec.rack,
        NODE_LABEL_SCALABLE_UNIT: host.scalable_unit,
    }
    if host.gpus:
        labels[NODE_LABEL_GPU_MODEL] = host.server.gpu_model
    if host.spec.hcas:
        labels[NODE_LABEL_RAILS] = str(len(host.spec.hcas))
        labels.update({f"{NODE_LABEL_RAIL_PREFIX}{rail}": device for device, rail in host.spec.hcas.items()})
    return labels


def kubelet_config(host: ResolvedHost) -> dict[str, Any]:
    """The host's KubeletConfiguration drop-in (kubelet.config.k8s.io/v1beta1): the taints it
    registers with, and kube-reserved, eviction and maxPods as gpuforge/catalog/data/kubelet.yaml
    models them, so the node's allocatable is what the Kueue quotas count."""
    reservation = load_kubelet_reservation()
    cpus = host.server.cpu_threads or 0
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "registerWithTaints": [
            {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect} for t in host.spec.taints
        ],
        "maxPods": reservation.max_pods["onprem"],
        "kubeReserved": {
            "cpu": f"{reservation.cpu_reserved_millicores(cpus)}m",
            "memory": f"{reservation.memory_reserved_mib('onprem')}Mi",
        },
        "evictionHard": {"memory.available": f"{reservation.eviction_memory_mib}Mi"},
    }


def host_props(site: str, host: ResolvedHost) -> dict[str, Any]:
    """What the plan summary, the power rules and the inventory read off the component."""
    spec = host.spec
    return {
        "host": host.name,
        "site": site,
        "rack": spec.rack,
        "scalableUnit": host.scalable_unit,
        "uPosition": spec.u_position,
        "uHeight": spec.u_height or host.server.rack_units,
        "model": spec.model,
        "pool": spec.pool,
        "role": spec.role,
        "orchestrator": spec.orchestrator,
        "gpuModel": host.server.gpu_model,
        "gpusPerNode": host.gpus,
        "nodePowerKw": host.node_power_kw,
        "bmcAddress": spec.bmc_address,
        "managementIp": spec.management_ip,
        # rail index (as a string: a map key) -> HCA device
        "hcas": {str(rail): device for device, rail in sorted(spec.hcas.items(), key=lambda i: i[1])},
        "ibHcas": spec.hcas_by_rail(),
        "nodeLabels": host_labels(site, host),
        "kubeletConfig": kubelet_config(host) if spec.orchestrator == "kubernetes" else None,
    }


@dataclass(frozen=True)
class HostArgs:
    site: str
    host: ResolvedHost
    kubernetes: bool  # the host joins the site's cluster: label and taint its node


class Host(pulumi.ComponentResource):
    inventory: dict[str, Any]

    def __init__(self, name: str, args: HostArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props = host_props(args.site, args.host)
        super().__init__(HOST, name, props, opts)
        self.inventory = props
        if args.kubernetes:
            # Server-side apply patch of the existing Node object: Pulumi owns only these label keys
            # (a map: each key is its own field). Taints come with registration, see the module doc.
            k8s.core.v1.NodePatch(
                f"{name}-node",
                metadata=k8s.meta.v1.ObjectMetaPatchArgs(name=args.host.name, labels=host_labels(args.site, args.host)),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.register_outputs({"inventory": self.inventory})
