"""The monitoring stack's namespace and operator (issue 30, item 6): with `prometheus_operator`, the platform installs
kube-prometheus-stack, pinned, whose Prometheus selects the ServiceMonitors and PrometheusRules gpuforge declares
(the dcgm-exporter metrics of the GPU Operator's ConfigMap among them) and whose Alertmanager reads the
AlertmanagerConfig; every monitoring.coreos.com object waits for the release that installs its CRD.

The chart's values are the upstream files, verbatim (tests/fixtures/k8s/SOURCES.md): every key gpuforge writes
must be one the chart (or its subchart) reads, so a renamed key fails here rather than being ignored by Helm."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from gpuforge.catalog.charts import load_charts
from gpuforge.infra.k8s import GpuPlatform, GpuPlatformArgs, GpuPool
from gpuforge.infra.k8s.monitoring_stack import MonitoringStack, kube_prometheus_stack_values
from gpuforge.plan.model import Plan, PlanResource
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.policy.rules import REGISTRY, RuleContext
from gpuforge.render.labels import NODE_LABEL_GPU_MODEL, NODE_LABEL_GROUP
from gpuforge.render.monitoring import KUBE_PROMETHEUS_STACK_NODE_JOB, NODE_EXPORTER_PORT
from gpuforge.spec.models import Platform
from gpuforge.spec.monitoring import KubernetesServer
from tests.k8s.test_k8s_platform import _Mocks

CHARTS = Path(__file__).resolve().parents[1] / "fixtures" / "k8s" / "charts"
RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
# kube-prometheus-stack passes a subchart's values under its name (Chart.yaml dependencies at 88.3.0).
SUBCHARTS = {
    "kube-state-metrics": "kube-state-metrics-8.2.0-values.yaml",
    "prometheus-node-exporter": "prometheus-node-exporter-4.56.1-values.yaml",
}


def chart_values(name: str) -> dict[str, Any]:
    return yaml.safe_load((CHARTS / name).read_text())


def unknown_keys(written: Any, chart: Any, path: str = "") -> list[str]:
    """Keys of `written` the chart's values do not have. Below a key whose default is an empty map (a selector,
    a nodeSelector), anything goes: that is the map's content, not the chart's structure."""
    if not isinstance(written, dict) or not isinstance(chart, dict) or chart == {}:
        return []
    out = []
    for key, value in written.items():
        if key not in chart:
            out.append(f"{path}{key}")
        else:
            out += unknown_keys(value, chart[key], f"{path}{key}.")
    return out


def release(plan: Plan, chart: str) -> PlanResource:
    found = [r for r in plan.by_type(RELEASE) if r.inputs["chart"] == chart]
    assert len(found) == 1, [r.name for r in plan.by_type(RELEASE)]
    return found[0]


def test_every_value_gpuforge_writes_is_read_by_the_pinned_chart(staging: Plan) -> None:
    values = release(staging, "kube-prometheus-stack").inputs["values"]
    top = chart_values("kube-prometheus-stack-88.3.0-values.yaml")
    problems = unknown_keys({k: v for k, v in values.items() if k not in SUBCHARTS}, top)
    for sub, file in SUBCHARTS.items():
        problems += unknown_keys(values.get(sub, {}), chart_values(file), f"{sub}.")
    assert problems == []
    # And the comparison can fail: a misspelt selector key is reported.
    assert unknown_keys({"prometheus": {"prometheusSpec": {"serviceMonitorSelectors": {}}}}, top) == [
        "prometheus.prometheusSpec.serviceMonitorSelectors"
    ]


def test_the_operator_is_installed_pinned_in_the_monitoring_namespace(staging: Plan) -> None:
    pin = load_charts().chart("kube_prometheus_stack")
    kps = release(staging, "kube-prometheus-stack")
    assert (kps.inputs["name"], kps.inputs["version"]) == ("kube-prometheus-stack", pin.version)
    assert kps.inputs["repositoryOpts"] == {"repo": pin.repo}
    server = staging.resolved.spec.monitoring.server  # type: ignore[union-attr]
    assert kps.inputs["namespace"] == server.namespace == "monitoring"  # type: ignore[union-attr]
    namespace = next(r for r in staging.by_type(NAMESPACE) if r.inputs["metadata"]["name"] == "monitoring")
    # node-exporter uses the host's network, PIDs and root file system.
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert namespace.urn in kps.depends_on
    spec = kps.inputs["values"]["prometheus"]["prometheusSpec"]
    assert spec["retention"] == f"{staging.resolved.spec.monitoring.retention_days}d"  # type: ignore[union-attr]
    # Controllers on the system group, never on a GPU node.
    system = {NODE_LABEL_GROUP: "system"}
    assert spec["nodeSelector"] == system
    assert kps.inputs["values"]["alertmanager"]["alertmanagerSpec"]["nodeSelector"] == system
    assert kps.inputs["values"]["prometheusOperator"]["nodeSelector"] == system
    assert kps.inputs["values"]["kube-state-metrics"]["nodeSelector"] == system


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def test_prometheus_selects_every_monitor_and_rule_gpuforge_declares(staging: Plan) -> None:
    spec = release(staging, "kube-prometheus-stack").inputs["values"]["prometheus"]["prometheusSpec"]
    kinds = {
        "ServiceMonitor": "serviceMonitorSelector",
        "PodMonitor": "podMonitorSelector",
        "PrometheusRule": "ruleSelector",
    }
    seen = set()
    for r in staging.resources:
        kind = r.inputs.get("kind")
        if r.type.startswith("kubernetes:monitoring.coreos.com/") and kind in kinds:
            labels = r.inputs["metadata"].get("labels", {})
            assert _matches(spec[kinds[kind]], labels), (r.name, labels)
            seen.add(kind)
    # The dcgm-exporter ServiceMonitor (the GPU Operator's ConfigMap counters) and the alert rules.
    assert seen >= {"ServiceMonitor", "PrometheusRule"}
    # Empty namespace selectors: the dcgm-exporter's monitor lives in the GPU Operator's namespace.
    assert spec["serviceMonitorNamespaceSelector"] == {} and spec["ruleNamespaceSelector"] == {}


def test_every_operator_object_waits_for_the_release(staging: Plan) -> None:
    kps = release(staging, "kube-prometheus-stack")
    objects = [r for r in staging.resources if r.type.startswith("kubernetes:monitoring.coreos.com/")]
    assert {r.inputs["kind"] for r in objects} >= {"ServiceMonitor", "PrometheusRule", "AlertmanagerConfig"}
    for r in objects:
        assert kps.urn in r.depends_on, r.name
    # Kueue's chart creates its own ServiceMonitor (enablePrometheus): it installs after the operator too.
    assert kps.urn in release(staging, "oci://registry.k8s.io/kueue/charts/kueue").depends_on
    # The wiring rule that guards the order passes on the plan, and fails when an object does not wait.
    rule = REGISTRY["wiring-release-crd-order"]
    ctx = RuleContext("staging", rule.defaults())
    assert rule.run(to_rule_resources(staging.resources), ctx) == []
    monitor = next(r for r in objects if r.inputs["kind"] == "ServiceMonitor")
    cut = [
        dataclasses.replace(r, depends_on=[u for u in r.depends_on if u != kps.urn]) if r is monitor else r
        for r in staging.resources
    ]
    assert [v.urn for v in rule.run(to_rule_resources(cut), ctx)] == [monitor.urn]


def test_selectors_follow_the_monitoring_sections_labels() -> None:
    stack = MonitoringStack(
        namespace="observability",
        rule_labels={"prometheus": "platform"},
        alertmanager_config_labels={"alertmanager": "platform"},
        retention_days=7,
    )
    values = kube_prometheus_stack_values(stack, {})
    spec = values["prometheus"]["prometheusSpec"]
    assert spec["ruleSelector"] == spec["serviceMonitorSelector"] == {"matchLabels": {"prometheus": "platform"}}
    assert values["alertmanager"]["alertmanagerSpec"]["alertmanagerConfigSelector"] == {
        "matchLabels": {"alertmanager": "platform"}
    }
    assert spec["retention"] == "7d"
    # No system group: no nodeSelector anywhere (the GPU taint keeps the controllers off GPU nodes).
    assert "nodeSelector" not in spec and "prometheusOperator" not in values


def test_without_a_monitoring_section_the_chart_release_label_is_selected() -> None:
    # KubernetesServer.rule_labels' default and the release name agree.
    assert KubernetesServer(kind="kubernetes").rule_labels == MonitoringStack().rule_labels
    spec = kube_prometheus_stack_values(MonitoringStack(), {})["prometheus"]["prometheusSpec"]
    assert spec["serviceMonitorSelector"] == {"matchLabels": {"release": "kube-prometheus-stack"}}
    assert "retention" not in spec


def _relabel(labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, str] | None:
    """Prometheus' relabelling for the actions the job uses (replace, the default, and keep): the source values
    joined by ';', the regex anchored at both ends, ${n} groups in the replacement."""
    out = dict(labels)
    for rule in rules:
        value = ";".join(out.get(s, "") for s in rule["source_labels"])
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        if rule.get("action", "replace") == "keep":
            if match is None:
                return None
        elif match is not None:
            template = re.sub(r"\$\{(\d+)\}", r"\\g<\1>", rule.get("replacement", "${1}"))
            out[rule["target_label"]] = match.expand(template)
    return out


def test_gpu_hosts_node_exporter_is_scraped_and_the_charts_stays_off_gpu_nodes(staging: Plan) -> None:
    values = release(staging, "kube-prometheus-stack").inputs["values"]
    affinity = values["prometheus-node-exporter"]["affinity"]["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": NODE_LABEL_GPU_MODEL, "operator": "DoesNotExist"}]}]
    groups = staging.by_type("aws:eks/nodeGroup:NodeGroup")
    gpu = [g for g in groups if g.inputs.get("taints")]
    # Every GPU group carries the label the affinity excludes (and the job keeps); the system group does not.
    assert gpu and all(NODE_LABEL_GPU_MODEL in g.inputs["labels"] for g in gpu)
    assert all(NODE_LABEL_GPU_MODEL not in g.inputs["labels"] for g in groups if g not in gpu)
    [job] = values["prometheus"]["prometheusSpec"]["additionalScrapeConfigs"]
    # The job name the alert rules read on Kubernetes (render/monitoring.py).
    assert job["job_name"] == KUBE_PROMETHEUS_STACK_NODE_JOB
    node = {
        "__address__": "10.0.64.12:10250",
        "__meta_kubernetes_node_name": "ip-10-0-64-12.ec2.internal",
        "__meta_kubernetes_node_label_gpuforge_dev_gpu_model": "H100",
        "__meta_kubernetes_node_label_gpuforge_dev_node_group": "train",
    }
    target = _relabel(node, job["relabel_configs"])
    assert target is not None
    assert (target["__address__"], target["node_group"], target["instance"]) == (
        f"10.0.64.12:{NODE_EXPORTER_PORT}",
        "train",
        "ip-10-0-64-12.ec2.internal",
    )
    system = {k: v for k, v in node.items() if "gpu_model" not in k}
    assert _relabel(system, job["relabel_configs"]) is None


@pytest.fixture
def site_platform() -> GpuPlatform:
    """The platform on a site's own cluster with the operator installed into a namespace of the stack's choosing."""
    pulumi.runtime.set_mocks(_Mocks(), preview=False)
    provider = k8s.Provider("site", kubeconfig="apiVersion: v1\nkind: Config\n")
    return GpuPlatform(
        "site",
        GpuPlatformArgs(
            platform=Platform(prometheus_operator=True, teams={"vision": {"gpu_quota": {"H100": 8}}}),
            fabric="infiniband",
            pools=[GpuPool("H100", nodes=1, gpus_per_node=8, cpus_per_node=224, memory_mib_per_node=2 * 1024 * 1024)],
            monitoring=MonitoringStack(namespace="observability", rule_labels={"prometheus": "site"}),
        ),
        opts=pulumi.ResourceOptions(provider=provider),
    )


@pulumi.runtime.test
def test_the_operator_goes_where_the_monitoring_section_says(site_platform: GpuPlatform) -> pulumi.Output[Any]:
    kps = site_platform.monitoring_release
    assert kps is not None
    children = list(getattr(site_platform, "_childResources", set()))
    monitors = [c for c in children if isinstance(c, k8s.apiextensions.CustomResource)]
    namespaces = [c for c in children if isinstance(c, k8s.core.v1.Namespace)]

    def check(values: list[Any]) -> None:
        namespace, version, prometheus, monitor_meta, *namespace_meta = values
        assert (namespace, version) == ("observability", load_charts().chart("kube_prometheus_stack").version)
        assert prometheus["prometheusSpec"]["serviceMonitorSelector"] == {"matchLabels": {"prometheus": "site"}}
        # The platform's own dcgm-exporter ServiceMonitor carries the label Prometheus selects.
        assert monitor_meta["labels"]["prometheus"] == "site"
        assert "observability" in {m["name"] for m in namespace_meta}

    dcgm = next(m for m in monitors if m._name.endswith("dcgm-exporter-monitor"))
    return pulumi.Output.all(
        kps.namespace,
        kps.version,
        kps.values.apply(lambda v: v["prometheus"]),
        dcgm.metadata,
        *[n.metadata for n in namespaces],
    ).apply(check)
