"""The Prometheus operator gpuforge installs where a cluster has `kubernetes.platform.prometheus_operator`:
kube-prometheus-stack (pinned in charts.yaml), so the ServiceMonitors, PrometheusRules and AlertmanagerConfig
gpuforge declares have their CRDs, an operator and a Prometheus and Alertmanager that select them.

GPU nodes already run gpuforge's own node_exporter on the host (the node_exporter role with its textfile
collectors: EFA counters, Lustre; baked into the EKS image, applied by site.yml on premises), listening on the
port kube-prometheus-stack's node-exporter DaemonSet would bind on the host network. So that DaemonSet stays
off GPU nodes, and Prometheus scrapes the hosts' node_exporter under the same job name the alert rules read
(`node-exporter`), with the node_group and instance labels the rules group by.

The selectors are written from the same labels the objects carry (monitoring.server.rule_labels and
alertmanager_config_labels), so the two cannot drift; the chart's own default (select `release: <release
name>`) is not relied on. Every key written here is read in the chart's values.yaml at the pinned version
(tests/k8s/test_k8s_monitoring_stack.py checks them against the vendored file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuforge.render.labels import NODE_LABEL_GPU_MODEL, NODE_LABEL_GROUP
from gpuforge.render.monitoring import KUBE_PROMETHEUS_STACK_NODE_JOB, NODE_EXPORTER_PORT
from gpuforge.spec import ResolvedSpec
from gpuforge.spec.monitoring import KubernetesServer

RELEASE_NAME = "kube-prometheus-stack"  # KubernetesServer.rule_labels' default selects this release's name
DEFAULT_NAMESPACE = "monitoring"


@dataclass(frozen=True)
class MonitoringStack:
    namespace: str = DEFAULT_NAMESPACE
    # Labels on every ServiceMonitor, PodMonitor and PrometheusRule the platform and the monitoring section
    # declare; Prometheus selects exactly these.
    rule_labels: dict[str, str] = field(default_factory=lambda: {"release": RELEASE_NAME})
    alertmanager_config_labels: dict[str, str] = field(default_factory=dict)
    retention_days: int | None = None  # None: the chart's default


def monitoring_stack_for(resolved: ResolvedSpec) -> MonitoringStack:
    """The monitoring section's namespace, labels and retention where its server is the cluster's operator;
    the defaults (the chart's namespace and release label) where the stack has no such section."""
    monitoring = resolved.spec.monitoring
    if monitoring is None or not isinstance(monitoring.server, KubernetesServer):
        return MonitoringStack()
    server = monitoring.server
    return MonitoringStack(
        namespace=server.namespace,
        rule_labels=dict(server.rule_labels),
        alertmanager_config_labels=dict(server.alertmanager_config_labels),
        retention_days=monitoring.retention_days,
    )


def _sd_label(node_label: str) -> str:
    """Prometheus' kubernetes_sd name of a node label (every character outside [a-zA-Z0-9_] becomes _)."""
    return "__meta_kubernetes_node_label_" + "".join(c if c.isalnum() or c == "_" else "_" for c in node_label)


def gpu_host_node_exporter_job() -> dict[str, Any]:
    """Scrape config for the node_exporter on every GPU node's host (kubernetes_sd role node: one target per
    node at its InternalIP; kept where the node carries the GPU-model label the placements put on GPU nodes)."""
    return {
        "job_name": KUBE_PROMETHEUS_STACK_NODE_JOB,
        "kubernetes_sd_configs": [{"role": "node"}],
        "relabel_configs": [
            {"source_labels": [_sd_label(NODE_LABEL_GPU_MODEL)], "regex": ".+", "action": "keep"},
            # The node role's address is the kubelet's (InternalIP:10250): node_exporter listens on its own port.
            {
                "source_labels": ["__address__"],
                "regex": "([^:]+)(?::\\d+)?",
                "replacement": f"${{1}}:{NODE_EXPORTER_PORT}",
                "target_label": "__address__",
            },
            {"source_labels": [_sd_label(NODE_LABEL_GROUP)], "target_label": "node_group"},
            {"source_labels": ["__meta_kubernetes_node_name"], "target_label": "instance"},
        ],
    }


def kube_prometheus_stack_values(stack: MonitoringStack, controller_selector: dict[str, str]) -> dict[str, Any]:
    """Values of the kube-prometheus-stack release (charts/kube-prometheus-stack/values.yaml at the pinned tag)."""
    selector = {"matchLabels": dict(stack.rule_labels)}
    prometheus_spec: dict[str, Any] = {
        # {} or nil with *NilUsesHelmValues would select `release: kube-prometheus-stack` only; explicit
        # selectors follow the labels gpuforge puts on its objects.
        "ruleSelector": selector,
        "serviceMonitorSelector": selector,
        "podMonitorSelector": selector,
        # Every namespace: the dcgm-exporter ServiceMonitor lives in the GPU Operator's.
        "ruleNamespaceSelector": {},
        "serviceMonitorNamespaceSelector": {},
        "podMonitorNamespaceSelector": {},
        "additionalScrapeConfigs": [gpu_host_node_exporter_job()],
    }
    if stack.retention_days is not None:
        prometheus_spec["retention"] = f"{stack.retention_days}d"
    alertmanager_spec: dict[str, Any] = {}
    if stack.alertmanager_config_labels:
        alertmanager_spec["alertmanagerConfigSelector"] = {"matchLabels": dict(stack.alertmanager_config_labels)}
    if controller_selector:
        # The operator, Prometheus, Alertmanager and kube-state-metrics on the system group (GPU nodes are
        # tainted; what the quota counts as free stays free).
        nodes = dict(controller_selector)
        prometheus_spec["nodeSelector"] = nodes
        alertmanager_spec["nodeSelector"] = nodes
    values: dict[str, Any] = {
        "prometheus": {"prometheusSpec": prometheus_spec},
        "alertmanager": {"alertmanagerSpec": alertmanager_spec} if alertmanager_spec else {},
        # The chart's node-exporter only where gpuforge's is not (the system group's nodes).
        "prometheus-node-exporter": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": NODE_LABEL_GPU_MODEL, "operator": "DoesNotExist"}]}
                        ]
                    }
                }
            }
        },
    }
    if controller_selector:
        values["prometheusOperator"] = {
            "nodeSelector": dict(controller_selector),
            "admissionWebhooks": {"patch": {"nodeSelector": dict(controller_selector)}},
        }
        values["kube-state-metrics"] = {"nodeSelector": dict(controller_selector)}
    return {k: v for k, v in values.items() if v}
