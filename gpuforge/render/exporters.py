"""What a stack's exporters produce, as gpuforge configures them, and why a stack lacks a series source.

Alerts, recording rules and dashboard panels name the sources they read (`needs:` in monitoring/*.yaml).
A stack gets only those whose every source it has: an EFA alert needs EFA devices and the efa-counters
collector, a Slurm alert a Slurm controller that Prometheus scrapes. What is left out is listed with the
reason, so the rendering never carries a rule that cannot fire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import yaml

from gpuforge.assets import PLAYBOOKS_DIR
from gpuforge.spec import ResolvedSpec
from gpuforge.spec.monitoring import KubernetesServer

DCGM_EXPORTER_ROLE = PLAYBOOKS_DIR / "roles" / "dcgm_exporter"

# source -> what produces it (the reason names it when a stack lacks the source)
SOURCES: dict[str, str] = {
    "dcgm": "dcgm-exporter on the GPU nodes",
    "fabric_ports": "InfiniBand or EFA ports, read by node_exporter's infiniband collector",
    "infiniband_counters": "InfiniBand (or RoCE) HCA port counters, read by node_exporter's infiniband collector",
    "efa_counters": "EFA hw_counters, written by the efa-counters textfile collector",
    "lustre": "a Lustre file system on the training nodes, seen by node_exporter and the lustre-client collector",
    "slurm_collector": "slurm-textfile-collector on a Slurm controller that Prometheus scrapes",
    "textfile": "gpuforge's textfile collectors in the node_exporter role's textfile directory",
    "pod_attribution": "dcgm-exporter's pod labels (Kubernetes mode) and the spec's team namespaces",
    "slurm_teams": "Slurm jobs' accounts (the Slurm collector) mapped to teams by monitoring.slurm_teams",
    "team_attribution": "GPUs attributed to teams, by Kubernetes team namespaces or by monitoring.slurm_teams",
}


@dataclass(frozen=True)
class Sources:
    """The sources a stack has, and for each it lacks, why."""

    absent: dict[str, str] = field(default_factory=dict)

    def has(self, source: str) -> bool:
        return source not in self.absent

    def missing(self, needs: tuple[str, ...]) -> str | None:
        """Why a rule needing *needs* is left out on this stack; None when it has them all."""
        reasons = [f"{SOURCES[n]}: {self.absent[n]}" for n in needs if n in self.absent]
        return "; ".join(reasons) or None


def stack_sources(resolved: ResolvedSpec) -> Sources:
    spec = resolved.spec
    on_kubernetes = spec.monitoring is not None and isinstance(spec.monitoring.server, KubernetesServer)
    efa = any(g.efa_interfaces > 0 for g in resolved.node_groups.values())
    site_fabric = spec.site.fabric.kind if spec.site is not None and spec.site.fabric is not None else None
    gpus = any(g.gpus_per_node for g in resolved.node_groups.values()) or (
        resolved.site is not None and any(h.gpus for h in resolved.site.hosts.values())
    )
    absent: dict[str, str] = {}
    if not gpus:
        absent["dcgm"] = "the stack has no GPU nodes"
    if not efa and site_fabric is None:
        absent["fabric_ports"] = "no node group or site host has EFA or InfiniBand ports"
    if site_fabric is None:
        absent["infiniband_counters"] = (
            "no InfiniBand or RoCE fabric (EFA devices keep their counters in hw_counters, which node_exporter "
            "does not read)"
        )
    textfile = (
        "kube-prometheus-stack's node-exporter reads no textfile directory (the chart sets no "
        "--collector.textfile.directory), and the textfile collectors run from the node roles, not on EKS nodes"
    )
    if on_kubernetes:
        absent["textfile"] = textfile
        absent["efa_counters"] = textfile
    elif not efa:
        absent["efa_counters"] = "no node group has EFA interfaces"
    lustre = spec.storage.parallel_fs is not None or (
        spec.site is not None and any(m.kind == "lustre" for m in spec.site.storage.mounts.values())
    )
    if on_kubernetes:
        absent["lustre"] = (
            "pods mount the file system through the FSx CSI driver under /var/lib/kubelet, which "
            "kube-prometheus-stack's node-exporter excludes (--collector.filesystem.mount-points-exclude), "
            "and no lustre-client collector runs there"
        )
    elif not lustre:
        absent["lustre"] = "the stack declares no Lustre file system"
    if not on_kubernetes:
        absent["pod_attribution"] = "no Kubernetes GPU Operator: dcgm-exporter runs on the hosts, outside pods"
    elif spec.kubernetes is None or not spec.kubernetes.platform.teams:
        absent["pod_attribution"] = "the stack declares no kubernetes.teams"
    if spec.scheduler is None or spec.scheduler.kind != "slurm":
        absent["slurm_collector"] = "the stack has no Slurm scheduler"
    elif on_kubernetes or (spec.placement.kind != "aws" and not spec.scheduler.controller.hosts):
        # A site's controllers are file_sd targets (render.monitoring.file_sd_targets), AWS controllers ec2_sd
        # targets by their gpuforge:node-group tag (infra/aws/slurm.py, admitted on 9100 by the flow model).
        absent["slurm_collector"] = (
            "the Slurm controllers are not scrape targets of this stack's Prometheus (it runs on Kubernetes, or "
            "the site declares no controller hosts; docs/monitoring.md, Known limits)"
        )
    if "slurm_collector" in absent:
        absent["slurm_teams"] = absent["slurm_collector"]
    elif spec.monitoring is None or not spec.monitoring.slurm_teams:
        absent["slurm_teams"] = "the stack declares no monitoring.slurm_teams"
    if "pod_attribution" in absent and "slurm_teams" in absent:
        absent["team_attribution"] = f"{absent['pod_attribution']}; {absent['slurm_teams']}"
    return Sources(absent)


# --- dcgm-exporter's counters, one list for hosts and Kubernetes -----------------------------------


@lru_cache(maxsize=1)
def dcgm_counters() -> tuple[dict[str, str], ...]:
    """The DCGM fields and dcgm-exporter metrics gpuforge exports: the dcgm_exporter role's default
    `dcgm_exporter_counters` (the role writes them to its counters file; the GPU platform hands the same list
    to the GPU Operator's dcgm-exporter as its ConfigMap)."""
    defaults = yaml.safe_load((DCGM_EXPORTER_ROLE / "defaults" / "main.yml").read_text())
    return tuple(defaults["dcgm_exporter_counters"])


def dcgm_counters_csv() -> str:
    """The counters in dcgm-exporter's CSV format (field, Prometheus type, help), as the role's template
    writes them."""
    lines = ["# Managed by gpuforge (gpuforge/render/exporters.py, the dcgm_exporter role's counters)"]
    lines += [f"{c['field']}, {c['type']}, {c['help']}" for c in dcgm_counters()]
    return "\n".join(lines) + "\n"
