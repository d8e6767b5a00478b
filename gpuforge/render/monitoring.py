"""What a stack's monitoring gets: Prometheus configuration, rules, Alertmanager routes, scrape targets.

The rules live once, as data, in gpuforge/assets/monitoring/ (alerts.yaml, recording.yaml); this module fills in the
per-stack values (thresholds from the spec, GPU counts and power from the catalog) and renders them
two ways from the same groups: a Prometheus rule file (the prometheus role installs it) and a
PrometheusRule object (the Prometheus operator on Kubernetes). Scrape discovery follows what gpuforge
knows: the `gpuforge:cluster` and `gpuforge:node-group` tags on AWS (ec2_sd), the site's hosts on
premises (file_sd), the exporters' pods and services on Kubernetes.

Secrets are never rendered: Alertmanager reads them from files the alertmanager role writes
(`*_file` fields), so this output, the plan and the logs only ever show paths.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpuforge.assets import MONITORING_DIR
from gpuforge.catalog.flows import load_flows
from gpuforge.catalog.models import DATA_DIR, AlertmanagerFacts
from gpuforge.catalog.mounts import LUSTRE_MOUNT_POINT
from gpuforge.render.dashboards import PROVISIONED_DATASOURCE_UID, DashboardView, dashboards, provisioning
from gpuforge.render.exporters import SOURCES, Sources, stack_sources
from gpuforge.render.labels import NODE_LABEL_GROUP
from gpuforge.spec import ResolvedSpec
from gpuforge.spec.monitoring import (
    EmailReceiver,
    KubernetesServer,
    Monitoring,
    PagerDutyReceiver,
    Receiver,
    SiteHostServer,
    SlackReceiver,
    WebhookReceiver,
    monitoring_hosts,
    power_budget_kw,
    receiver_secret_names,
    secret_file_name,
    slurm_account_teams,
)
from gpuforge.spec.power import GroupLoad, facility_power_kw
from gpuforge.spec.scheduler_checks import CONTROLLER_NODE_GROUP

XID_FILE = DATA_DIR / "gpu_xids.yaml"
RUNBOOK = "docs/monitoring.md"

# Where the roles put things on the monitoring host (Debian's prometheus packages' layout); tests
# render into a directory of their own to run promtool on the result.
PROMETHEUS_DIR = "/etc/prometheus"
GRAFANA_DASHBOARDS_DIR = "/var/lib/grafana/dashboards/gpuforge"
GRAFANA_PROVISIONING_DIR = "/etc/grafana/provisioning"
# The exporters' ports, as the flow model opens them (gpuforge/catalog/data/flows.yaml, with their sources).
NODE_EXPORTER_PORT = load_flows().ports["node_exporter"].ports[0]  # playbooks/roles/node_exporter
DCGM_EXPORTER_PORT = load_flows().ports["dcgm_exporter"].ports[0]  # playbooks/roles/dcgm_exporter
PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
# What kube-prometheus-stack creates (charts/kube-prometheus-stack/values.yaml, kube-prometheus-stack-88.5.3,
# verbatim in tests/fixtures/monitoring/): its Grafana's Prometheus data source (grafana.sidecar.datasources.uid)
# and its node-exporter's job (the Service label prometheus-node-exporter.service.labels.jobLabel, which the
# ServiceMonitor's jobLabel: jobLabel reads).
KUBE_PROMETHEUS_STACK_DATASOURCE_UID = "prometheus"
KUBE_PROMETHEUS_STACK_NODE_JOB = "node-exporter"
# The GPU Operator's dcgm-exporter Service carries app: nvidia-dcgm-exporter; gpuforge's ServiceMonitor takes
# the job from it (jobLabel: app).
GPU_OPERATOR_DCGM_JOB = "nvidia-dcgm-exporter"
# prometheus.yml's remote write URL where the stack writes to AMP: a placeholder the prometheus role fills from
# prometheus_remote_write_url (the stack output monitoring.remoteWrite.url), with its [[ ]] delimiters.
REMOTE_WRITE_URL_PLACEHOLDER = "[[ prometheus_remote_write_url ]]"
# Two replicas (monitoring.replicas 2): the external label naming each Prometheus, its value the prometheus role's
# prometheus_replica (the host's inventory name), and the Alertmanagers' gossip port (Alertmanager's default
# --cluster.listen-address 0.0.0.0:9094).
REPLICA_LABEL = "replica"
PROMETHEUS_REPLICA_PLACEHOLDER = "[[ prometheus_replica ]]"
PROMETHEUS_LISTEN_PLACEHOLDER = "[[ prometheus_listen ]]"
ALERTMANAGER_CLUSTER_PORT = 9094
# The node_group label of a site's Slurm controllers (file_sd).
SLURM_CONTROLLER_GROUP = CONTROLLER_NODE_GROUP  # the site file_sd label and the AWS controllers' tag
# The file each of node_textfile_collectors' scripts writes into the textfile directory, without .prom.
TEXTFILE_COLLECTOR_FILES = ("efa", "lustre", "slurm", "software")
# Kubernetes service discovery's name for a node's gpuforge.dev/node-group label (label names sanitised:
# every character outside [a-zA-Z0-9_] becomes "_").
# The Slurm team attribution's series (monitoring/recording.yaml): account -> team, and a running job's team.
SLURM_ACCOUNT_TEAM = "gpuforge:slurm_account_team:info"
SLURM_JOB_TEAM = "slurm_job:team:info"
NODE_GROUP_META_LABEL = "__meta_kubernetes_node_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", NODE_LABEL_GROUP)


# --- the rules as data -------------------------------------------------------------------------


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Alert(_Data):
    name: str = Field(pattern=r"^[A-Z][A-Za-z0-9]+$")
    severity: Literal["critical", "warning", "none"]  # none: the Watchdog, for the dead man's switch alone
    for_: str = Field(alias="for", pattern=r"^(\d+[smh]|\$\{\w+\})$")
    summary: str
    description: str
    expr: str
    requires: str | None = None  # a parameter without which the alert is left out
    needs: tuple[str, ...] = ()  # series sources (exporters.SOURCES) without which the alert is left out
    # The label naming the Slurm job's team's key (alerts.yaml: team_from): the alert carries that job's team.
    team_from: Literal["hpc_job", "account"] | None = None

    @field_validator("needs")
    @classmethod
    def _known_sources(cls, needs: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(needs) - set(SOURCES))
        if unknown:
            raise ValueError(f"unknown source(s) {', '.join(unknown)}; known: {', '.join(sorted(SOURCES))}")
        return needs

    @property
    def runbook(self) -> str:
        return f"{RUNBOOK}#{self.name.lower()}"


class AlertGroup(_Data):
    name: str
    alerts: list[Alert]


class RecordingRule(_Data):
    record: str
    expr: str
    needs: tuple[str, ...] = ()  # series sources (exporters.SOURCES) without which the rule is left out


class RecordingGroup(_Data):
    name: str
    rules: list[RecordingRule]


@lru_cache(maxsize=1)
def alert_groups() -> tuple[AlertGroup, ...]:
    data = yaml.safe_load((MONITORING_DIR / "alerts.yaml").read_text())
    return tuple(AlertGroup.model_validate(g) for g in data["groups"])


@lru_cache(maxsize=1)
def recording_groups() -> tuple[RecordingGroup, ...]:
    data = yaml.safe_load((MONITORING_DIR / "recording.yaml").read_text())
    return tuple(RecordingGroup.model_validate(g) for g in data["groups"])


def alert_names() -> list[str]:
    return [a.name for g in alert_groups() for a in g.alerts]


@lru_cache(maxsize=1)
def critical_xids() -> dict[int, str]:
    return {int(k): str(v) for k, v in yaml.safe_load(XID_FILE.read_text())["critical"].items()}


# --- per-stack values ----------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupFacts:
    """What the rules need to know of a node group (or on-prem host pool)."""

    gpus_per_node: int
    overhead_watts: float  # node power the catalog counts beyond the GPUs' own draw
    expected_targets: int = 0  # nodes the plan runs (count + spares, an elastic group's minimum, a pool's hosts)


@dataclass(frozen=True)
class RuleParams:
    """Everything per stack that the rules depend on; tests build one by hand."""

    groups: dict[str, GroupFacts]
    pue: float
    planned_kw: float
    budget_kw: float | None = None
    power_alert_fraction: float = 0.95
    job_pending_minutes: int = 60
    disk_full_percent: int = 90
    scratch_path: str = "/scratch"
    lustre_mountpoint: str | None = None
    node_down_for: str = "2m"
    node_job: str = "node"
    dcgm_job: str = "dcgm"
    evaluation_interval_s: int = 30
    sources: Sources = field(default_factory=Sources)  # default: every source (the promtool cases)
    # The job whose targets carry node_group, counted against the plan: node_exporter's on a monitoring host;
    # on Kubernetes dcgm-exporter's (kube-prometheus-stack's node-exporter series carry no node group).
    group_targets_job: str = "node"
    # Ten of the textfile collectors' 30 s timer runs (node_textfile_collectors_interval_s).
    textfile_stale_seconds: int = 300
    # RDMA devices of the stack's hosts that are storage or in-band management ports and a compute port of no
    # host (fabric_idle_devices): FabricLinkDown leaves them to the storage alerts, an uncabled one pages forever.
    fabric_idle_devices: tuple[str, ...] = ()
    # Slurm account -> team (monitoring.slurm_teams), a constant series the attribution rules join on.
    slurm_account_teams: Mapping[str, str] = field(default_factory=dict)
    monitoring_replicas: int = 1  # 2: two Prometheus servers and clustered Alertmanagers watching each other

    def values(self) -> dict[str, str | None]:
        xids = sorted(critical_xids())
        gpu_groups = sorted(n for n, g in self.groups.items() if g.gpus_per_node > 0)
        budget = self.budget_kw
        return {
            "xid_critical_list": ", ".join(map(str, xids)),
            "xid_critical_regex": "|".join(map(str, xids)),
            "job_pending_minutes": str(self.job_pending_minutes),
            "job_pending_seconds": str(self.job_pending_minutes * 60),
            "disk_full_percent": str(self.disk_full_percent),
            "scratch_path": self.scratch_path,
            "lustre_mountpoint": self.lustre_mountpoint,
            "lustre_node_groups": "|".join(gpu_groups) if gpu_groups else None,
            "node_down_for": self.node_down_for,
            "monitoring_replicas": str(self.monitoring_replicas) if self.monitoring_replicas > 1 else None,
            "group_targets_job": self.group_targets_job,
            "textfile_stale_seconds": str(self.textfile_stale_seconds),
            # The files the textfile collectors write (efa.prom, lustre.prom, slurm.prom, software.prom).
            "textfile_collectors": "|".join(TEXTFILE_COLLECTOR_FILES),
            "node_job": self.node_job,
            "dcgm_job": self.dcgm_job,
            "pue": f"{self.pue:g}",
            "evaluation_interval_s": str(self.evaluation_interval_s),
            # irate()'s window for the energy counter: four scrape intervals (it needs two samples).
            "energy_rate_window": f"{4 * self.evaluation_interval_s}s",
            "power_budget_kw": f"{budget:g}" if budget is not None else None,
            "power_alert_percent": f"{self.power_alert_fraction * 100:g}",
            "power_alert_kw": f"{budget * self.power_alert_fraction:g}" if budget is not None else None,
            # A regex for node_exporter's device label; empty matches no device, so every port is watched.
            "fabric_idle_devices": "|".join(re.escape(d) for d in self.fabric_idle_devices),
        }


class _Braced(Template):
    """Only ${name} is ours: $value and $labels belong to Prometheus' own annotation templates."""

    pattern = r"\$\{(?P<braced>[a-z_]+)\}|(?P<escaped>(?!))|(?P<named>(?!))|(?P<invalid>(?!))"  # type: ignore[assignment]


def _fill(text: str, values: Mapping[str, str | None]) -> str:
    return _Braced(text).substitute({k: v for k, v in values.items() if v is not None})


def rule_params(resolved: ResolvedSpec, monitoring: Monitoring | None = None) -> RuleParams:
    """The rules' values for a stack: thresholds from its monitoring section, facts from the catalog."""
    spec = resolved.spec
    mon = monitoring or spec.monitoring
    groups: dict[str, GroupFacts] = {}
    loads: list[GroupLoad] = []
    for name, group in resolved.node_groups.items():
        tdp = _gpu_tdp(resolved, group.instance.gpu_model) if group.gpus_per_node else 0.0
        groups[name] = GroupFacts(
            group.gpus_per_node, group.node_power_kw * 1000 - tdp * group.gpus_per_node, group.spec.min_nodes
        )
        loads.append(GroupLoad(name, group.spec.active_nodes, group.spec.spares, group.node_power_kw))
    planned = facility_power_kw(loads, resolved.pue, spec.power.spare_draw_fraction)
    if resolved.site is not None:
        for pool, hosts in resolved.site.pools().items():
            first = hosts[0]
            tdp = _gpu_tdp(resolved, first.server.gpu_model) if first.gpus else 0.0
            groups[pool] = GroupFacts(first.gpus, first.node_power_kw * 1000 - tdp * first.gpus, len(hosts))
        planned += resolved.site.facility_kw
        # Targets without GPUs or a power figure of their own, counted against the plan too (file_sd_targets).
        scheduler = spec.scheduler
        if scheduler is not None and scheduler.kind == "slurm" and scheduler.controller.hosts:
            groups[SLURM_CONTROLLER_GROUP] = GroupFacts(0, 0.0, len(scheduler.controller.hosts))
    lustre = None
    if spec.storage.parallel_fs is not None:
        lustre = LUSTRE_MOUNT_POINT
    elif spec.site is not None:
        lustre = next((m.mount_point for m in spec.site.storage.mounts.values() if m.kind == "lustre"), None)
    sources = stack_sources(resolved)
    on_k8s = mon is not None and isinstance(mon.server, KubernetesServer)
    params = RuleParams(
        groups=groups,
        pue=resolved.pue,
        planned_kw=round(planned, 1),
        budget_kw=power_budget_kw(spec),
        lustre_mountpoint=lustre,
        node_job=KUBE_PROMETHEUS_STACK_NODE_JOB if on_k8s else "node",
        dcgm_job=GPU_OPERATOR_DCGM_JOB if on_k8s else "dcgm",
        group_targets_job=GPU_OPERATOR_DCGM_JOB if on_k8s else "node",
        sources=sources,
        fabric_idle_devices=fabric_idle_devices(resolved),
        slurm_account_teams=slurm_account_teams(mon) if mon is not None else {},
        monitoring_replicas=len(monitoring_hosts(mon)) if replicated(mon) and mon is not None else 1,
    )
    if mon is None:
        return params
    return RuleParams(
        **{
            **params.__dict__,
            "power_alert_fraction": mon.power_alert_fraction,
            "job_pending_minutes": mon.job_pending_minutes,
            "node_down_for": f"{mon.node_down_minutes}m",
            "disk_full_percent": mon.disk_full_percent,
            "scratch_path": mon.scratch_path,
            "evaluation_interval_s": mon.scrape_interval_s,
        }
    )


def fabric_idle_devices(resolved: ResolvedSpec) -> tuple[str, ...]:
    """The site's storage and management RDMA devices (the catalog's port tables) that are a compute port of no
    host: node_exporter's infiniband collector labels a port by device alone, and one stack-wide regex serves
    Kubernetes too, where its series carry no node group. Cloud groups add nothing (EFA's devices are all
    fabric); a model without a port table adds nothing, so its ports are all watched; a device that is a compute
    port on one host stays watched everywhere (a page, never a hidden rail)."""
    site = resolved.site
    if site is None:
        return ()
    idle: set[str] = set()
    compute: set[str] = set()
    for host in site.hosts.values():
        idle |= {p.device for p in host.server.network_ports if p.role != "compute"}
        compute |= set(host.server.compute_hcas) | set(host.spec.hcas)
    return tuple(sorted(idle - compute))


def _gpu_tdp(resolved: ResolvedSpec, model: str | None) -> float:
    if not model:
        return 0.0
    try:
        return float(resolved.catalog.gpu(model).tdp_w)
    except (KeyError, ValueError):
        return 0.0


# --- rules, two renderers ------------------------------------------------------------------------


def rule_groups(params: RuleParams) -> list[dict[str, Any]]:
    """Prometheus rule groups: the stack's constants, the recording rules, the alerts."""
    values = params.values()
    constants: list[dict[str, Any]] = []
    for name, facts in sorted(params.groups.items()):
        constants += [
            {
                "record": "gpuforge:node_group_expected_gpus",
                "expr": f"vector({facts.gpus_per_node})",
                "labels": {"node_group": name},
            },
            {
                "record": "gpuforge:node_group_overhead_watts",
                "expr": f"vector({facts.overhead_watts:g})",
                "labels": {"node_group": name},
            },
        ]
        # Counted only where the group's targets are in group_targets_job: GPU groups where that is dcgm-exporter.
        if facts.expected_targets and (params.group_targets_job == params.node_job or facts.gpus_per_node):
            constants.append(
                {
                    "record": "gpuforge:node_group_expected_targets",
                    "expr": f"vector({facts.expected_targets})",
                    "labels": {"node_group": name},
                }
            )
    constants.append({"record": "cluster:power_kw:planned", "expr": f"vector({params.planned_kw:g})"})
    if params.budget_kw is not None:
        constants.append({"record": "cluster:power_kw:budget", "expr": f"vector({params.budget_kw:g})"})
    if params.sources.has("slurm_teams"):
        constants += [
            {"record": SLURM_ACCOUNT_TEAM, "expr": "vector(1)", "labels": {"account": account, "team": team}}
            for account, team in sorted(params.slurm_account_teams.items())
        ]
    interval = f"{params.evaluation_interval_s}s"
    groups: list[dict[str, Any]] = [{"name": "gpuforge-constants", "interval": interval, "rules": constants}]
    for rgroup in recording_groups():
        groups.append(
            {
                "name": rgroup.name,
                "interval": interval,
                "rules": [
                    {"record": r.record, "expr": _fill(r.expr, values)}
                    for r in rgroup.rules
                    if params.sources.missing(r.needs) is None
                ],
            }
        )
    left_out = left_out_alerts(params)
    for agroup in alert_groups():
        rules = []
        for alert in agroup.alerts:
            if alert.name in left_out:
                continue
            expr = _fill(alert.expr, values)
            if alert.team_from is not None and params.sources.has("slurm_teams"):
                expr = with_slurm_team(expr, alert.team_from)
            rules.append(
                {
                    "alert": alert.name,
                    "expr": expr,
                    "for": _fill(alert.for_, values),
                    "labels": {"severity": alert.severity},
                    "annotations": {
                        "summary": _fill(alert.summary, values),
                        "description": _fill(alert.description, values),
                        "runbook_url": alert.runbook,
                    },
                }
            )
        groups.append({"name": agroup.name, "interval": interval, "rules": rules})
    return groups


def with_slurm_team(expr: str, key: Literal["hpc_job", "account"]) -> str:
    """An alert's expression, its series given the team of their Slurm job: by hpc_job (a GPU's series, joined to
    slurm_job:team:info) or by account (joined to the account-to-team constants). Series of no team's job stay
    as they are. Each team series has the value 1, so the product keeps the alert's value."""
    teams = SLURM_JOB_TEAM if key == "hpc_job" else SLURM_ACCOUNT_TEAM
    joined = f"({expr}) * on({key}) group_left(team) {teams}"
    return f"{joined}\nor\n(({expr}) unless on({key}) {teams})"


def left_out_alerts(params: RuleParams) -> dict[str, str]:
    """Alert -> why this stack does not get it: a source its hardware, exporters or scheduler lack, or a
    per-stack value it does not set."""
    values = params.values()
    out: dict[str, str] = {}
    for agroup in alert_groups():
        for alert in agroup.alerts:
            missing = params.sources.missing(alert.needs)
            if missing is not None:
                out[alert.name] = f"needs {missing}"
            elif alert.requires is not None and values.get(alert.requires) is None:
                out[alert.name] = f"needs {alert.requires}, which the stack does not set"
    return out


def rule_file(params: RuleParams) -> dict[str, Any]:
    return {"groups": rule_groups(params)}


def prometheus_rule(params: RuleParams, name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The same groups as a PrometheusRule object for the Prometheus operator. Each alert carries
    namespace=<the rule's namespace>: the operator's default alertmanagerConfigMatcherStrategy (OnNamespace,
    pkg/alertmanager/amcfg.go getEnforcer) routes an AlertmanagerConfig only alerts of its own namespace, and a
    GPU's series carry the exporter's namespace (gpu-operator), a recorded power series none."""
    groups = [
        {**g, "rules": [{**r, "labels": {**r.get("labels", {}), "namespace": namespace}} if "alert" in r else r
                        for r in g["rules"]]}
        for g in rule_groups(params)
    ]  # fmt: skip
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpuforge", **labels},
        },
        "spec": {"groups": groups},
    }


# --- scrape discovery --------------------------------------------------------------------------


def _ec2_job(job: str, port: int, region: str, cluster: str, groups: list[str], interval: int) -> dict[str, Any]:
    return {
        "job_name": job,
        "ec2_sd_configs": [
            {
                "region": region,
                "port": port,
                "refresh_interval": "60s",
                "filters": [
                    {"name": "tag:gpuforge:cluster", "values": [cluster]},
                    {"name": "tag:gpuforge:node-group", "values": groups},
                    {"name": "instance-state-name", "values": ["running"]},
                ],
            }
        ],
        "relabel_configs": [
            {"source_labels": ["__meta_ec2_tag_gpuforge_node_group"], "target_label": "node_group"},
            # Alerts name the node: its private DNS name, not address:port.
            {"source_labels": ["__meta_ec2_private_dns_name"], "target_label": "instance"},
        ],
        "scrape_interval": f"{interval}s",
    }


@dataclass(frozen=True)
class Paths:
    """Files on the monitoring host, under Prometheus' configuration directory, and the addresses
    Prometheus and Alertmanager listen on there (loopback: Prometheus reaches both locally)."""

    root: str = PROMETHEUS_DIR
    prometheus: str = f"127.0.0.1:{PROMETHEUS_PORT}"
    alertmanager_address: str = f"127.0.0.1:{ALERTMANAGER_PORT}"

    @property
    def config(self) -> str:
        return f"{self.root}/prometheus.yml"

    @property
    def rules(self) -> str:
        return f"{self.root}/rules/gpuforge.yml"

    def file_sd(self, job: str) -> str:
        return f"{self.root}/file_sd/{job}.json"

    @property
    def alertmanager(self) -> str:
        return f"{self.root}/alertmanager.yml"

    @property
    def secrets_dir(self) -> str:
        return f"{self.root}/alertmanager-secrets"

    def secret(self, receiver: str, field: str) -> str:
        return f"{self.secrets_dir}/{secret_file_name(receiver, field)}"


def _file_sd_job(job: str, interval: int, paths: Paths) -> dict[str, Any]:
    return {
        "job_name": job,
        "file_sd_configs": [{"files": [paths.file_sd(job)], "refresh_interval": "5m"}],
        "scrape_interval": f"{interval}s",
    }


def file_sd_targets(resolved: ResolvedSpec) -> dict[str, list[dict[str, Any]]]:
    """file_sd target groups per job from the site's inventory (and the monitoring host itself)."""
    out: dict[str, list[dict[str, Any]]] = {"node": [], "dcgm": []}
    site = resolved.site
    if site is not None:
        for name, host in sorted(site.hosts.items()):
            labels = {"instance": name, "node_group": host.spec.pool, "rack": host.spec.rack}
            address = host.spec.management_ip
            out["node"].append({"targets": [f"{address}:{NODE_EXPORTER_PORT}"], "labels": dict(labels)})
            if host.gpus:
                out["dcgm"].append({"targets": [f"{address}:{DCGM_EXPORTER_PORT}"], "labels": dict(labels)})
    # The site's Slurm controllers: node_exporter with slurm-textfile-collector (playbooks/slurm.yml), the only
    # source of the gpuforge_slurm_* series.
    scheduler = resolved.spec.scheduler
    if site is not None and scheduler is not None and scheduler.kind == "slurm":
        for name, address in sorted(scheduler.controller.hosts.items()):
            out["node"].append(
                {
                    "targets": [f"{address}:{NODE_EXPORTER_PORT}"],
                    "labels": {"instance": name, "node_group": SLURM_CONTROLLER_GROUP},
                }
            )
    mon = resolved.spec.monitoring
    for server, server_address in sorted(monitoring_hosts(mon).items()) if mon is not None else ():
        out["node"].append(
            {
                "targets": [f"{server_address}:{NODE_EXPORTER_PORT}"],
                "labels": {"instance": server, "node_group": "monitoring"},
            }
        )
    return out


def replicated(mon: Monitoring | None) -> bool:
    """Two Prometheus servers and two clustered Alertmanagers (monitoring.replicas 2, on site hosts)."""
    return mon is not None and len(monitoring_hosts(mon)) == 2


def _self_targets(mon: Monitoring | None, local: str, port: int) -> list[str]:
    """Where Prometheus finds the monitoring stack's own servers: every replica's address, else *local*."""
    if mon is None or not replicated(mon):
        return [local]
    return [f"{address}:{port}" for _, address in sorted(monitoring_hosts(mon).items())]


def prometheus_config(resolved: ResolvedSpec, paths: Paths | None = None) -> dict[str, Any]:
    """prometheus.yml for a stack whose Prometheus runs on a node group or a site host."""
    paths = paths or Paths()
    spec = resolved.spec
    mon = spec.monitoring
    interval = mon.scrape_interval_s if mon is not None else 30
    alertmanagers = _self_targets(mon, paths.alertmanager_address, ALERTMANAGER_PORT)
    prometheuses = _self_targets(mon, paths.prometheus, PROMETHEUS_PORT)
    scrape: list[dict[str, Any]] = [
        {"job_name": "prometheus", "static_configs": [{"targets": prometheuses}]},
        {"job_name": "alertmanager", "static_configs": [{"targets": list(alertmanagers)}]},
    ]
    cloud = sorted(resolved.node_groups)
    if cloud and spec.region is not None and spec.placement.kind == "aws" and resolved.scheduler is not None:
        # The Slurm controllers carry their own gpuforge:node-group value (gpuforge/infra/aws/slurm.py): node_exporter
        # and the Slurm collector's textfile series on them are scraped with the nodes'.
        cloud.append(CONTROLLER_NODE_GROUP)
    if cloud and spec.region is not None:
        gpu = sorted(n for n, g in resolved.node_groups.items() if g.gpus_per_node)
        scrape.append(_ec2_job("node", NODE_EXPORTER_PORT, spec.region, spec.name, cloud, interval))
        if gpu:
            scrape.append(_ec2_job("dcgm", DCGM_EXPORTER_PORT, spec.region, spec.name, gpu, interval))
    if resolved.site is not None or (mon is not None and isinstance(mon.server, SiteHostServer)):
        # Hybrid: the site's hosts through file_sd beside the burst groups through ec2_sd, one job each.
        for job in ("node", "dcgm"):
            existing = next((s for s in scrape if s["job_name"] == job), None)
            sd = _file_sd_job(job, interval, paths)
            if existing is None:
                scrape.append(sd)
            else:
                existing["file_sd_configs"] = sd["file_sd_configs"]
    remote: dict[str, Any] = {}
    if mon is not None and mon.remote_write is not None and spec.region is not None:
        # The workspace's URL exists once `pulumi up` made it (stack output monitoring.remoteWrite.url): the prometheus
        # role fills it in (prometheus_remote_write_url); SigV4 signs as the node's instance role.
        remote = {
            "remote_write": [
                {"url": REMOTE_WRITE_URL_PLACEHOLDER, "sigv4": {"region": spec.region}, "send_exemplars": False}
            ]
        }
    external_labels = {"cluster": spec.name, "environment": spec.environment}
    # The address the alertmanager role makes it listen on (paths.alertmanager_address), not a fixed
    # loopback: where Alertmanager binds another address, alerts sent to 127.0.0.1 are never delivered.
    alerting: dict[str, Any] = {"alertmanagers": [{"static_configs": [{"targets": alertmanagers}]}]}
    if replicated(mon):
        # Each replica names itself (the role fills the placeholder with its host name) so their series stay
        # apart where they meet (remote storage, federation), and drops the label from the alerts it sends:
        # Prometheus' configuration docs, <alert_relabel_configs>: "ensuring a HA pair of Prometheus servers
        # with different external labels send identical alerts", which Alertmanager then deduplicates. Every
        # Prometheus sends to every Alertmanager, never to a load balancer (Alertmanager README, "High
        # Availability").
        external_labels[REPLICA_LABEL] = PROMETHEUS_REPLICA_PLACEHOLDER
        alerting["alert_relabel_configs"] = [{"action": "labeldrop", "regex": REPLICA_LABEL}]
    return {
        "global": {
            "scrape_interval": f"{interval}s",
            "evaluation_interval": f"{interval}s",
            "external_labels": external_labels,
        },
        "alerting": alerting,
        "rule_files": [paths.rules],
        "scrape_configs": scrape,
        **remote,
    }


def namespace_teams(resolved: ResolvedSpec) -> dict[str, str]:
    """Kubernetes namespace -> the team the spec gives it (kubernetes.platform.teams)."""
    kubernetes = resolved.spec.kubernetes
    teams = kubernetes.platform.teams if kubernetes is not None else {}
    return {team.namespace_for(name): name for name, team in teams.items()}


def kubernetes_monitors(resolved: ResolvedSpec, server: KubernetesServer) -> list[dict[str, Any]]:
    """Objects the operator needs beside the rules: the GPU Operator's dcgm-exporter, with the labels
    the operator selects (the platform's own ServiceMonitor carries no release label)."""
    interval = resolved.spec.monitoring.scrape_interval_s if resolved.spec.monitoring else 30
    return [
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": {
                "name": "gpuforge-dcgm-exporter",
                "namespace": server.namespace,
                "labels": {"app.kubernetes.io/managed-by": "gpuforge", **server.rule_labels},
            },
            "spec": {
                "jobLabel": "app",
                "namespaceSelector": {"matchNames": ["gpu-operator"]},
                "selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
                # The node's own labels (Prometheus >= 2.37 lists nodes for it): every gpuforge node carries
                # its node group, and GpuMissing compares each node with its group's catalog GPU count.
                "attachMetadata": {"node": True},
                "endpoints": [
                    {
                        "port": "gpu-metrics",
                        "interval": f"{interval}s",
                        "relabelings": [
                            {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "instance"},
                            {"sourceLabels": [NODE_GROUP_META_LABEL], "targetLabel": "node_group"},
                        ],
                        # A GPU a pod holds carries the pod's namespace (dcgm-exporter's Kubernetes mode; exported_
                        # because the target's own namespace label is gpu-operator's): its team, from the spec,
                        # on every series, so alerts carry it and route to the team's receiver.
                        "metricRelabelings": [
                            {
                                "sourceLabels": ["exported_namespace"],
                                "regex": re.escape(namespace),
                                "targetLabel": "team",
                                "replacement": team,
                            }
                            for namespace, team in sorted(namespace_teams(resolved).items())
                        ],
                    }
                ],
            },
        }
    ]


# --- Alertmanager ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RouteTiming:
    group_wait: str = "30s"
    group_interval: str = "5m"
    repeat_interval: str = "4h"


# The always-firing alert (monitoring/alerts.yaml) and, where the spec names no dead man's switch, the receiver
# that takes it and sends nothing.
WATCHDOG = "Watchdog"
WATCHDOG_NULL_RECEIVER = "gpuforge-watchdog"

# The alertmanager role writes alertmanager.yml with ansible.builtin.template and these delimiters, so that
# Alertmanager's own {{ }} templates pass through and only the inline-secret placeholders are filled.
ROLE_VARIABLE_START, ROLE_VARIABLE_END = "[[", "]]"


def _inline_token(file_name: str) -> str:
    return f"gpuforge-inline-secret-{file_name}"


def inline_secret_placeholder(file_name: str) -> str:
    """What alertmanager.yml holds for a secret the Alertmanager release reads only inline: a role-side
    expression over alertmanager_secrets (JSON-quoted, so any value stays one YAML scalar), never the value."""
    return f"{ROLE_VARIABLE_START} alertmanager_secrets['{file_name}'] | to_json {ROLE_VARIABLE_END}"


@dataclass(frozen=True)
class SecretFields:
    """Which receiver secrets a given Alertmanager release reads from files (the catalog's secret_files)."""

    version: str | None  # None: the newest (every *_file field)
    facts: AlertmanagerFacts | None = None

    def from_file(self, field: str) -> bool:
        if self.version is None or self.facts is None:
            return True
        return self.facts.reads_from_file(field, self.version)


def _secret(
    fields: SecretFields, field: str, key: str, name: str, secret_field: str, paths: Paths
) -> dict[str, str]:
    """`<key>_file: path` where the release has it, else `<key>: <placeholder>` the role fills."""
    if fields.from_file(field):
        return {f"{key}_file": paths.secret(name, secret_field)}
    return {key: _inline_token(secret_file_name(name, secret_field))}


def _receiver_config(name: str, receiver: Receiver, paths: Paths, fields: SecretFields) -> dict[str, Any]:
    secret_file = paths.secret
    if isinstance(receiver, WebhookReceiver):
        hook: dict[str, Any] = {"url": receiver.url, "send_resolved": True}
        if receiver.token_secret:
            hook["http_config"] = {"authorization": {"credentials_file": secret_file(name, "token_secret")}}
        return {"name": name, "webhook_configs": [hook]}
    if isinstance(receiver, EmailReceiver):
        mail: dict[str, Any] = {
            "to": receiver.to,
            "from": receiver.from_address,
            "smarthost": receiver.smarthost,
            "send_resolved": True,
            "require_tls": True,
        }
        if receiver.username:
            mail["auth_username"] = receiver.username
        if receiver.password_secret:
            mail |= _secret(fields, "email.auth_password_file", "auth_password", name, "password_secret", paths)
        return {"name": name, "email_configs": [mail]}
    if isinstance(receiver, SlackReceiver):
        return {
            "name": name,
            "slack_configs": [
                {
                    "api_url_file": secret_file(name, "url_secret"),
                    "channel": receiver.channel,
                    "send_resolved": True,
                    "title": "{{ .CommonAnnotations.summary }}",
                    "text": "{{ .CommonAnnotations.description }}",
                }
            ],
        }
    assert isinstance(receiver, PagerDutyReceiver)
    key = _secret(fields, "pagerduty.routing_key_file", "routing_key", name, "routing_key_secret", paths)
    return {"name": name, "pagerduty_configs": [key]}


def receiver_secret_files(monitoring: Monitoring, paths: Paths | None = None) -> dict[str, str]:
    """Secret file path -> the Pulumi config key that holds its value (what the role must write)."""
    secrets_dir = (paths or Paths()).secrets_dir
    return {f"{secrets_dir}/{file}": key for file, key in receiver_secret_names(monitoring).items()}


def alertmanager_config(
    monitoring: Monitoring,
    timing: RouteTiming | None = None,
    paths: Paths | None = None,
    fields: SecretFields | None = None,
) -> dict[str, Any]:
    """Routes by severity: each receiver gets the severities it asked for; nothing else is sent. Secrets
    are files where the release reads them from files (*fields*; default: the newest release)."""
    timing, paths, fields = timing or RouteTiming(), paths or Paths(), fields or SecretFields(None)
    watchdog = monitoring.dead_mans_switch or WATCHDOG_NULL_RECEIVER
    routes: list[dict[str, Any]] = [
        # First, and final: the dead man's switch hears only Watchdog, every minute, and nobody else hears it.
        {
            "receiver": watchdog,
            "matchers": [f'alertname="{WATCHDOG}"'],
            "group_wait": "0s",
            "group_interval": "1m",
            "repeat_interval": "1m",
        }
    ]
    routes += [
        {
            "receiver": name,
            "matchers": [f'severity=~"{"|".join(r.severities)}"']
            + ([f'team=~"{"|".join(r.teams)}"'] if r.teams else []),
            "continue": True,
        }
        for name, r in sorted(monitoring.receivers.items())
        if name != monitoring.dead_mans_switch
    ]
    return {
        "route": {
            "receiver": "gpuforge-unrouted",
            "group_by": ["alertname", "instance"],
            "group_wait": timing.group_wait,
            "group_interval": timing.group_interval,
            "repeat_interval": timing.repeat_interval,
            "routes": routes,
        },
        # A critical alert on a node silences that node's warnings: one page, not ten.
        "inhibit_rules": [
            {
                "source_matchers": ['severity="critical"'],
                "target_matchers": ['severity="warning"'],
                "equal": ["instance"],
            }
        ],
        "receivers": [{"name": "gpuforge-unrouted"}]
        + ([{"name": WATCHDOG_NULL_RECEIVER}] if monitoring.dead_mans_switch is None else [])
        + [_receiver_config(n, r, paths, fields) for n, r in sorted(monitoring.receivers.items())],
    }


def alertmanager_yaml(
    monitoring: Monitoring, timing: RouteTiming | None = None, paths: Paths | None = None,
    fields: SecretFields | None = None,
) -> str:
    """alertmanager.yml as the role receives it: inline secrets as placeholders, never values."""
    text = dump(alertmanager_config(monitoring, timing, paths, fields))
    for file_name in receiver_secret_names(monitoring):
        text = text.replace(_inline_token(file_name), inline_secret_placeholder(file_name))
    return text


# --- Alertmanager on Kubernetes: the same routes and receivers as an AlertmanagerConfig ------------

ALERTMANAGER_CONFIG_API = "monitoring.coreos.com/v1alpha1"
# alertmanager.yml's field names -> the AlertmanagerConfig CRD's (v1alpha1). A field the file renderer
# gains without a name here fails the render, so the two never drift apart silently.
_CRD_FIELDS = {
    "receiver": "receiver", "group_by": "groupBy", "group_wait": "groupWait", "group_interval": "groupInterval",
    "repeat_interval": "repeatInterval", "routes": "routes", "matchers": "matchers", "continue": "continue",
    "source_matchers": "sourceMatch", "target_matchers": "targetMatch", "equal": "equal", "name": "name",
    "webhook_configs": "webhookConfigs", "email_configs": "emailConfigs", "slack_configs": "slackConfigs",
    "pagerduty_configs": "pagerdutyConfigs", "url": "url", "send_resolved": "sendResolved",
    "http_config": "httpConfig", "authorization": "authorization", "credentials_file": "credentials",
    "to": "to", "from": "from", "smarthost": "smarthost", "require_tls": "requireTLS",
    "auth_username": "authUsername", "auth_password_file": "authPassword", "api_url_file": "apiURL",
    "channel": "channel", "title": "title", "text": "text", "routing_key_file": "routingKey",
}  # fmt: skip
_MATCHER = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)(=~|!~|!=|=)"(.*)"$')


def _crd_matcher(text: str) -> dict[str, str]:
    match = _MATCHER.match(text)
    if match is None:
        raise ValueError(f'matcher {text!r} is not name<op>"value"')
    name, op, value = match.groups()
    return {"name": name, "matchType": op, "value": value}


def _crd_value(key: str, value: Any, secret_name: str) -> Any:
    if key.endswith("_file"):
        # The file alertmanager.yml names is the Secret's key: <receiver>-<token|password|url|routing-key>.
        return {"name": secret_name, "key": value.rsplit("/", 1)[-1]}
    if key.endswith("matchers"):
        return [_crd_matcher(m) for m in value]
    if isinstance(value, dict):
        return _crd_fields(value, secret_name)
    if isinstance(value, list):
        return [_crd_fields(v, secret_name) if isinstance(v, dict) else v for v in value]
    return value


def _crd_fields(obj: Mapping[str, Any], secret_name: str) -> dict[str, Any]:
    unknown = sorted(set(obj) - set(_CRD_FIELDS))
    if unknown:
        raise ValueError(f"alertmanager.yml field(s) {', '.join(unknown)} have no AlertmanagerConfig name")
    return {_CRD_FIELDS[k]: _crd_value(k, v, secret_name) for k, v in obj.items()}


def alertmanager_secret_name(cluster: str) -> str:
    """The Secret (in the monitoring namespace) holding every receiver secret, keyed by its file name."""
    return f"gpuforge-{cluster}-alert-receivers"


def alertmanager_config_object(
    monitoring: Monitoring, server: KubernetesServer, cluster: str, timing: RouteTiming | None = None
) -> dict[str, Any]:
    """alertmanager_config's routes, inhibitions and receivers as an AlertmanagerConfig for the operator's
    Alertmanager: each secret file becomes a secretKeySelector on alertmanager_secret_name's Secret."""
    config, secret = alertmanager_config(monitoring, timing), alertmanager_secret_name(cluster)
    return {
        "apiVersion": ALERTMANAGER_CONFIG_API,
        "kind": "AlertmanagerConfig",
        "metadata": {
            "name": f"gpuforge-{cluster}",
            "namespace": server.namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpuforge", **server.alertmanager_config_labels},
        },
        "spec": {
            "route": _crd_fields(config["route"], secret),
            "inhibitRules": [_crd_fields(r, secret) for r in config["inhibit_rules"]],
            "receivers": [_crd_fields(r, secret) for r in config["receivers"]],
        },
    }


# --- a stack's whole monitoring, as files ------------------------------------------------------


@dataclass
class MonitoringBundle:
    """Rendered files, keyed by where they go (a path on the monitoring host, or a Kubernetes object)."""

    placement: str
    files: dict[str, str] = field(default_factory=dict)
    secret_keys: dict[str, str] = field(default_factory=dict)  # secret file -> Pulumi config key
    left_out: dict[str, str] = field(default_factory=dict)  # alert -> why the stack does not get it


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True)


def render_monitoring(
    resolved: ResolvedSpec, timing: RouteTiming | None = None, paths: Paths | None = None
) -> MonitoringBundle:
    mon = resolved.spec.monitoring
    if mon is None:
        raise ValueError(f"{resolved.spec.name} declares no monitoring section")
    paths = paths or Paths()
    bundle = MonitoringBundle(
        placement=mon.server.kind,
        secret_keys=receiver_secret_files(mon, paths),
        left_out=left_out_alerts(rule_params(resolved)),
    )
    if isinstance(mon.server, KubernetesServer):
        srv = mon.server
        objects = operator_objects(resolved, srv)
        for kind, file in (("PrometheusRule", "prometheusrule"), ("ServiceMonitor", "servicemonitors")):
            bundle.files[f"kubernetes/{file}.yaml"] = "---\n".join(dump(o) for o in objects if o["kind"] == kind)
        # The routes and receivers as the program declares them (gpuforge/infra/k8s/alerting.py), each secret a
        # key of one Secret beside them.
        bundle.files["kubernetes/alertmanagerconfig.yaml"] = dump(
            alertmanager_config_object(mon, srv, resolved.spec.name, timing)
        )
        secret = f"secret/{srv.namespace}/{alertmanager_secret_name(resolved.spec.name)}"
        bundle.secret_keys = {f"{secret}[{file}]": key for file, key in receiver_secret_names(mon).items()}
        bundle.files["kubernetes/dashboards.yaml"] = "---\n".join(dump(o) for o in objects if o["kind"] == "ConfigMap")
        return bundle
    bundle.files[paths.config] = dump(prometheus_config(resolved, paths))
    bundle.files[paths.rules] = dump(rule_file(rule_params(resolved)))
    for job, groups in file_sd_targets(resolved).items():
        if groups:
            bundle.files[paths.file_sd(job)] = json.dumps(groups, indent=2) + "\n"
    facts = resolved.catalog.alertmanager  # the release the monitoring host runs in production
    fields = SecretFields(facts.production.version, facts)
    bundle.files[paths.alertmanager] = alertmanager_yaml(mon, timing, paths, fields)
    for name, text in dashboards(dashboard_view(resolved)).items():
        bundle.files[f"{GRAFANA_DASHBOARDS_DIR}/{name}"] = text
    # Two replicas: each host's Grafana reads its own Prometheus, at the address the role makes it listen on.
    prometheus_url = f"http://{PROMETHEUS_LISTEN_PLACEHOLDER if replicated(mon) else paths.prometheus}"
    for name, text in provisioning(GRAFANA_DASHBOARDS_DIR, prometheus_url).items():
        bundle.files[f"{GRAFANA_PROVISIONING_DIR}/{name}"] = text
    return bundle


def operator_objects(resolved: ResolvedSpec, server: KubernetesServer) -> list[dict[str, Any]]:
    """What the Prometheus operator and Grafana read, as the program declares them
    (gpuforge/infra/k8s/alerting.py) and `gpuforge render monitoring` prints them: the rules, the
    ServiceMonitors and the dashboards' ConfigMaps."""
    name = f"gpuforge-{resolved.spec.name}"
    rule = prometheus_rule(rule_params(resolved), name, server.namespace, server.rule_labels)
    view = dashboard_view(resolved)
    return [rule, *kubernetes_monitors(resolved, server), *dashboard_configmaps(server.namespace, view)]


def dashboard_view(resolved: ResolvedSpec) -> DashboardView:
    """The dashboards as the stack's Grafana and Prometheus have them: data source, job names, panels."""
    params = rule_params(resolved)
    mon = resolved.spec.monitoring
    on_k8s = mon is not None and isinstance(mon.server, KubernetesServer)
    return DashboardView(
        datasource_uid=KUBE_PROMETHEUS_STACK_DATASOURCE_UID if on_k8s else PROVISIONED_DATASOURCE_UID,
        node_job=params.node_job,
        dcgm_job=params.dcgm_job,
        sources=frozenset(s for s in SOURCES if params.sources.has(s)),
    )


def dashboard_configmaps(namespace: str, view: DashboardView | None = None) -> list[dict[str, Any]]:
    """The dashboards as ConfigMaps that kube-prometheus-stack's Grafana sidecar loads (label
    grafana_dashboard: "1", its default)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name.removesuffix(".json"),
                "namespace": namespace,
                "labels": {"grafana_dashboard": "1", "app.kubernetes.io/managed-by": "gpuforge"},
            },
            "data": {name: text},
        }
        for name, text in dashboards(view).items()
    ]


def role_vars(resolved: ResolvedSpec, files_dir: str | Path, paths: Paths | None = None) -> dict[str, Any]:
    """Variables of gpuforge/assets/playbooks/monitoring.yml (roles prometheus and alertmanager) for a stack whose
    Prometheus
    runs on a node group or a site host; *files_dir* holds what render_monitoring wrote (the roles copy it)."""
    mon = resolved.spec.monitoring
    if mon is None or isinstance(mon.server, KubernetesServer):
        raise ValueError(f"{resolved.spec.name}: no Prometheus of its own to configure (monitoring.server)")
    paths = paths or Paths()
    return {
        **_replica_vars(mon),
        "prometheus_files_dir": str(files_dir),
        "prometheus_config_dir": paths.root,
        "prometheus_listen": paths.prometheus,
        "prometheus_retention_days": mon.retention_days,
        # Stop before the data volume fills: retention by size at 90 % of it.
        "prometheus_retention_size": f"{int(mon.storage_gib * 0.9)}GB",
        "alertmanager_files_dir": str(files_dir),
        "alertmanager_config_file": paths.alertmanager,
        "alertmanager_listen": paths.alertmanager_address,
        **_replica_listen_vars(mon),
    }


def _replica_vars(mon: Monitoring) -> dict[str, Any]:
    return {"monitoring_hosts": monitoring_hosts(mon)} if replicated(mon) else {}


def _replica_listen_vars(mon: Monitoring) -> dict[str, Any]:
    """Two replicas: each host listens on its own management address (the other Prometheus sends alerts to
    its Alertmanager, never through loopback), gossips on :9094 there and names the other host as its peer.
    Evaluated per host by Ansible from monitoring_hosts, keyed by inventory name (the spec's host names)."""
    if not replicated(mon):
        return {}
    own = "{{ monitoring_hosts[inventory_hostname] }}"
    others = (
        "{{ monitoring_hosts | dict2items | rejectattr('key', 'equalto', inventory_hostname) "
        f"| map(attribute='value') | map('regex_replace', '$', ':{ALERTMANAGER_CLUSTER_PORT}') | list }}}}"
    )
    return {
        "prometheus_listen": f"{own}:{PROMETHEUS_PORT}",
        "alertmanager_listen": f"{own}:{ALERTMANAGER_PORT}",
        "alertmanager_cluster_listen": f"{own}:{ALERTMANAGER_CLUSTER_PORT}",
        "alertmanager_cluster_peers": others,
    }
