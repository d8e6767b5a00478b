"""Wiring pack, Kubernetes: what no schema sees between the platform's objects and the nodes.

Every object the platform writes passes its CRD or OpenAPI schema, yet a selector on a label no
node carries, a DaemonSet that does not tolerate the GPU taint, or a release installed before the
CRDs its templates use leaves a cluster that accepts everything and runs nothing. These rules read
the nodes as the plan declares them:

- EKS managed node groups (`aws:eks/nodeGroup:NodeGroup`): `labels` and `taints`, which EKS puts on
  each node at registration;
- on-premises hosts (`gpuforge:onprem:Host`): `nodeLabels` and the `registerWithTaints` of their
  kubelet drop-in (`kubeletConfig`).

Nodes and objects are matched per cluster, by Kubernetes provider: a host belongs to the provider
of its NodePatch, an EKS node group to the provider whose kubeconfig comes from its cluster. Where
the plan records no provider (fixtures, the engine's default provider) every node counts.

Labels the system puts on every node (kubernetes.io, EKS, NFD's feature labels, GPU Feature
Discovery's nvidia.com labels) are taken as present: no plan can list them.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from gpuforge.catalog.charts import ChartPin, load_charts
from gpuforge.catalog.tokens import EKS_NODE_GROUP, HOST, SITE
from gpuforge.catalog.tokens import HELM_RELEASE as RELEASE
from gpuforge.infra.k8s.scheduling import Taint, taint_from, untolerated
from gpuforge.render.labels import TEAM_LABEL

from .base import Param, Resource, RuleContext, Stack, Violation, as_list, is_unknown, resource_rule, stack_rule

NODE_PATCH = "kubernetes:core/v1:NodePatch"
NAMESPACE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
PLATFORM = "gpuforge:k8s:GpuPlatform"
GPU_MODEL_LABEL = "gpuforge.dev/gpu-model"
# Label prefixes the kubelet, EKS, Node Feature Discovery and GPU Feature Discovery set on their own.
SYSTEM_LABEL_PREFIXES = (
    "kubernetes.io/",
    "node.kubernetes.io/",
    "topology.kubernetes.io/",
    "beta.kubernetes.io/",
    "node-role.kubernetes.io/",
    "eks.amazonaws.com/",
    "k8s.io/cloud-provider-aws",
    "feature.node.kubernetes.io/",
    "nvidia.com/",
)


@dataclass(frozen=True)
class Node:
    """The nodes of one node group or host, as they register."""

    resource: Resource
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    cluster: str | None = None  # URN of the Kubernetes provider of its cluster; None: unknown

    @property
    def gpu(self) -> bool:
        return GPU_MODEL_LABEL in self.labels

    def carries(self, selector: Mapping[str, Any]) -> bool:
        return all(
            key.startswith(SYSTEM_LABEL_PREFIXES) or self.labels.get(key) == str(value)
            for key, value in selector.items()
        )


def nodes(stack: Stack) -> list[Node]:
    providers = stack.of_type("pulumi:providers:kubernetes")
    out: list[Node] = []
    for group in stack.of_type(EKS_NODE_GROUP):
        labels = group.get("labels") or {}
        taints = as_list(group.get("taints"))
        if is_unknown(labels):
            continue
        clusters = set(group.dependencies.get("clusterName", ()))
        provider = next((p.urn for p in providers if clusters & set(p.dependencies.get("kubeconfig", ()))), None)
        out.append(Node(group, dict(labels), tuple(taint_from(t) for t in taints if isinstance(t, Mapping)), provider))
    for host in stack.of_type(HOST):
        kubelet = host.get("kubeletConfig")
        labels = host.get("nodeLabels")
        if not isinstance(kubelet, Mapping) or not isinstance(labels, Mapping):
            continue  # not a Kubernetes node
        registered = as_list(kubelet.get("registerWithTaints"))
        patch = next((c.provider for c in stack.children(host, NODE_PATCH)), None)
        out.append(Node(host, dict(labels), tuple(taint_from(t) for t in registered if isinstance(t, Mapping)), patch))
    return out


def same_cluster(known: list[Node], r: Resource) -> list[Node]:
    """The nodes of r's cluster (every node where either side's cluster is unknown)."""
    return [n for n in known if n.cluster is None or r.provider is None or n.cluster == r.provider]


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for step in path:
        if not isinstance(value, Mapping) or step not in value:
            return None
        value = value[step]
    return value


def _chart_of(release: Resource) -> ChartPin | None:
    chart = release.get("chart")
    return next((c for c in load_charts().charts.values() if c.chart == chart), None)


def _custom_kind(resource: Resource) -> tuple[str, str] | None:
    """(API group, kind) of a custom resource's type token (kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue)."""
    parts = resource.type.split(":")
    if len(parts) != 3 or parts[0] != "kubernetes" or "/" not in parts[1]:
        return None
    group = parts[1].split("/")[0]
    builtin = group == "helm.sh" or (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io"))
    return (group, parts[2]) if "." in group and not builtin else None


def _describe(taints: list[Taint]) -> str:
    return ", ".join(sorted({str(t) for t in taints}))


@stack_rule(
    "wiring-daemonset-gpu-nodes",
    why="A node agent (NFD worker, GPU Operator operands, EFA or RDMA device plugin) that selects a label no node "
    "carries, or does not tolerate a taint the GPU nodes register with, runs on no GPU node: jobs never get GPUs "
    "or fabric devices and loop through admission and eviction.",
    fix="tolerate every NoSchedule/NoExecute taint of the GPU nodes (keeping the chart's default tolerations: Helm "
    "replaces a list whole) and select only labels the nodes carry",
)
def daemonset_gpu_nodes(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    all_gpu_nodes = [n for n in nodes(stack) if n.gpu]
    if not all_gpu_nodes:
        return
    agents = {c.node_agent.kind: (k, c) for k, c in load_charts().charts.items() if c.node_agent and c.node_agent.kind}
    for r in stack.resources:
        chart: ChartPin | None = None
        if r.type == RELEASE:
            chart = _chart_of(r)
            if chart is None or chart.node_agent is None or chart.node_agent.kind is not None:
                continue
            config = r.get("values") or {}
        else:
            kind = _custom_kind(r)
            if kind is None or kind[1] not in agents:
                continue
            chart = agents[kind[1]][1]
            config = r.inputs
        agent = chart.node_agent
        assert agent is not None
        gpu_nodes = same_cluster(all_gpu_nodes, r)
        if not gpu_nodes:
            continue
        selector = _at(config, agent.node_selector) if agent.node_selector else None
        if isinstance(selector, Mapping) and selector:
            reached = [n for n in gpu_nodes if n.carries(selector)]
            if not reached:
                pairs = ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))
                yield Violation(
                    "wiring-daemonset-gpu-nodes",
                    r.urn,
                    f"{r.name}: nodeSelector {pairs} matches no GPU node (they carry "
                    f"{', '.join(sorted({k for n in gpu_nodes for k in n.labels}))}); drop the selector or label the "
                    "nodes",
                )
                continue
        else:
            reached = gpu_nodes
        tolerations = _at(config, agent.tolerations)
        if tolerations is None:
            tolerations = [t.model_dump(exclude_none=True) for t in agent.default_tolerations]
        if is_unknown(tolerations):
            continue
        missing = untolerated(as_list(tolerations), [t for n in reached for t in n.taints])
        if missing:
            where = ", ".join(sorted({n.resource.name for n in reached if set(n.taints) & set(missing)}))
            yield Violation(
                "wiring-daemonset-gpu-nodes",
                r.urn,
                f"{r.name}: does not tolerate {_describe(missing)} on {where}, so it runs on none of them; add "
                f"{'.'.join(agent.tolerations)} entries for these taints ({agent.agent_source.split(':')[0]})",
            )


@stack_rule(
    "wiring-kueue-flavor-nodes",
    why="Kueue admits a workload to a ResourceFlavor and adds the flavor's nodeLabels and tolerations to its pods: "
    "a flavor that selects no node, or lacks a toleration for its nodes' taints, admits jobs whose pods never "
    "schedule (Kueue docs, Concepts: Resource Flavor).",
    fix="select labels the nodes register with, and give the flavor spec.tolerations for their NoSchedule/NoExecute "
    "taints",
)
def kueue_flavor_nodes(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    known = nodes(stack)
    dispatching = multikueue_flavors(stack)
    for flavor in stack.resources:
        kind = _custom_kind(flavor)
        if kind != ("kueue.x-k8s.io", "ResourceFlavor"):
            continue
        selector = flavor.get("spec", "nodeLabels") or {}
        if is_unknown(selector) or not known:
            continue
        if flavor.urn in dispatching:
            continue  # a MultiKueue flavor: its pods run on the worker cluster, checked there
        matched = [n for n in same_cluster(known, flavor) if n.carries(selector)]
        if not matched:
            pairs = ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))
            yield Violation(
                "wiring-kueue-flavor-nodes",
                flavor.urn,
                f"{flavor.name}: nodeLabels {pairs} select no node; use the labels the nodes register with",
            )
            continue
        tolerations = flavor.get("spec", "tolerations") or []
        missing = untolerated(as_list(tolerations), [t for n in matched for t in n.taints])
        if missing:
            yield Violation(
                "wiring-kueue-flavor-nodes",
                flavor.urn,
                f"{flavor.name}: its nodes register with {_describe(missing)} but the flavor does not tolerate "
                "them, so admitted pods stay Pending; add spec.tolerations for them",
            )


@stack_rule(
    "wiring-release-crd-order",
    why="A release whose templates create objects of another chart's CRDs (the network operator's NodeFeatureRule "
    "from NFD), or a custom resource of a chart's CRD, applied before that chart, or where no release installs "
    "it (a ServiceMonitor with no Prometheus operator), fails with 'no matches for kind' and leaves a "
    "half-installed platform.",
    fix="declare the release that installs the CRDs (the chart in charts.yaml) and make the object depend on it "
    "(ResourceOptions(depends_on=[release]))",
)
def release_crd_order(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    charts = load_charts().charts
    releases: dict[str, list[Resource]] = {}
    for r in stack.of_type(RELEASE):
        chart = _chart_of(r)
        if chart is not None:
            key = next(k for k, c in charts.items() if c is chart)
            releases.setdefault(key, []).append(r)
    by_group = {g: k for k, c in charts.items() for g in c.crd_groups}
    for r in stack.resources:
        needed: list[str] = []
        if r.type == RELEASE:
            chart = _chart_of(r)
            needed = list(chart.requires_charts) if chart else []
        else:
            kind = _custom_kind(r)
            if kind is not None and kind[0] in by_group:
                needed = [by_group[kind[0]]]
        for key in needed:
            providers = releases.get(key, [])
            if not any(p.urn in r.depends_on for p in providers):
                what = f"the {charts[key].chart.rsplit('/', 1)[-1]} release"
                yield Violation(
                    "wiring-release-crd-order",
                    r.urn,
                    f"{r.name}: uses CRDs that {what} installs but does not wait for it"
                    + ("" if providers else " (and no such release is declared)")
                    + "; depend on that release",
                )


def _crs(stack: Stack, kind: str) -> list[Resource]:
    return [r for r in stack.resources if _custom_kind(r) == ("kueue.x-k8s.io", kind)]


PULUMI_SECRET_SIG = "4dabf18193072939515e22adb298388d"  # the wire format's marker of a secret value
PLAN_SECRET = "[secret]"  # how the offline plan writes a secret value (gpuforge/plan/engine.py)


def _sealed(secret: Resource) -> bool:
    return any(
        is_unknown(v) or v == PLAN_SECRET or (isinstance(v, Mapping) and PULUMI_SECRET_SIG in v)
        for v in (secret.get("stringData"), secret.get("data"))
    )


def multikueue_checks(stack: Stack) -> set[str]:
    return {
        str(a.get("metadata", "name"))
        for a in _crs(stack, "AdmissionCheck")
        if a.get("spec", "controllerName") == "kueue.x-k8s.io/multikueue"
    }


def _flavor_names(queue: Resource) -> set[str]:
    return {
        str(f.get("name"))
        for g in as_list(queue.get("spec", "resourceGroups"))
        for f in as_list(g.get("flavors"))
        if isinstance(f, Mapping)
    }


def multikueue_flavors(stack: Stack) -> set[str]:
    """URNs of the ResourceFlavors only MultiKueue-dispatching ClusterQueues use."""
    checks = multikueue_checks(stack)
    dispatch: set[str] = set()
    local: set[str] = set()
    for q in _crs(stack, "ClusterQueue"):
        (dispatch if set(as_list(q.get("spec", "admissionChecks"))) & checks else local).update(_flavor_names(q))
    return {f.urn for f in _crs(stack, "ResourceFlavor") if f.get("metadata", "name") in dispatch - local}


_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")
_FACTORS = {None: 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1024.0, "Mi": 1024.0**2}
_FACTORS |= {"Gi": 1024.0**3, "Ti": 1024.0**4}


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity as a number of base units (cores, bytes); None if unparsable."""
    m = _QUANTITY.match(str(value).strip())
    return float(m.group(1)) * _FACTORS[m.group(2)] if m else None


@stack_rule(
    "wiring-kueue-quota-allocatable",
    why="A ClusterQueue quota of nameplate CPU or memory counts what the kubelet reserves for itself: Kueue admits "
    "a whole-node job that then fits on no node (pods request more than allocatable) and waits until evicted.",
    fix="size cpu and memory nominalQuota from the nodes' allocatable (gpuforge/catalog/data/kubelet.yaml), "
    "summed over the ClusterQueues that share the nodes",
)
def kueue_quota_allocatable(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for platform in stack.of_type(PLATFORM):
        pools = platform.get("pools")
        if not isinstance(pools, Mapping):
            continue
        limits = {
            flavor: {
                "cpu": p["nodes"] * p["allocatableCpuMillicores"] / 1000,
                "memory": p["nodes"] * p["allocatableMemoryMib"] * 1024.0**2,
                "nvidia.com/gpu": p["nodes"] * p["gpusPerNode"],
            }
            for flavor, p in pools.items()
        }
        queues = [
            q
            for q in stack.children(platform)
            if _custom_kind(q) == ("kueue.x-k8s.io", "ClusterQueue") and not q.get("spec", "admissionChecks")
        ]
        used: dict[tuple[str, str], list[tuple[Resource, float]]] = {}
        for q in queues:
            for group in as_list(q.get("spec", "resourceGroups")):
                for flavor in as_list(group.get("flavors")):
                    for res in as_list(flavor.get("resources")):
                        amount = quantity(res.get("nominalQuota"))
                        if (
                            amount is not None
                            and flavor.get("name") in limits
                            and res.get("name") in limits[flavor["name"]]
                        ):
                            used.setdefault((flavor["name"], res["name"]), []).append((q, amount))
        for (flavor, resource), entries in sorted(used.items()):
            total, limit = sum(a for _, a in entries), limits[flavor][resource]
            if total > limit * 1.000001:
                unit = {"cpu": (1, "cores"), "memory": (1024.0**3, "GiB"), "nvidia.com/gpu": (1, "GPUs")}[resource]
                for q, _ in entries:
                    yield Violation(
                        "wiring-kueue-quota-allocatable",
                        q.urn,
                        f"{q.name}: {resource} quotas on {flavor} total {total / unit[0]:,.1f} {unit[1]}; its nodes "
                        f"leave {limit / unit[0]:,.1f} allocatable; lower the quotas to the nodes' allocatable",
                    )


def _kueue_release(stack: Stack) -> Iterator[tuple[Resource, ChartPin]]:
    kueue = load_charts().charts.get("kueue")
    for r in stack.of_type(RELEASE):
        if kueue is not None and r.get("chart") == kueue.chart:
            yield r, kueue


@stack_rule(
    "wiring-kueue-frameworks",
    why="Kueue chart 0.14 takes its configuration as one YAML string that replaces the chart's default whole: a "
    "string without the default integrations leaves those job kinds (e.g. Kubeflow TrainJob) unmanaged, so they "
    "bypass quotas and admission.",
    fix="carry every framework of the chart's default configuration (charts.yaml kueue.default_frameworks)",
)
def kueue_frameworks(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for r, chart in _kueue_release(stack):
        text = r.get("values", "managerConfig", "controllerManagerConfigYaml")
        if not isinstance(text, str) or not text:
            continue  # the chart's own default applies
        try:
            config = yaml.safe_load(text) or {}
        except yaml.YAMLError:
            config = {}
        frameworks = _at(config, ("integrations", "frameworks")) or []
        missing = [f for f in chart.default_frameworks if f not in frameworks]
        if missing:
            yield Violation(
                "wiring-kueue-frameworks",
                r.urn,
                f"{r.name}: its configuration drops the chart's default integrations {', '.join(missing)}; add them "
                "to integrations.frameworks",
            )


@stack_rule(
    "wiring-kueue-metrics",
    why="With the Prometheus operator, metrics are scraped only through ServiceMonitors: a Kueue installed with "
    "enablePrometheus false exports pending workloads and quota usage that nobody collects.",
    fix="set the Kueue release's enablePrometheus: true where the platform runs the Prometheus operator",
)
def kueue_metrics(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for platform in stack.of_type(PLATFORM):
        if platform.get("prometheusOperator") is not True:
            continue
        for r, _ in _kueue_release(stack):
            if r.parent == platform.urn and r.get("values", "enablePrometheus") is not True:
                yield Violation(
                    "wiring-kueue-metrics",
                    r.urn,
                    f"{r.name}: the Prometheus operator runs but Kueue's ServiceMonitor is off; set enablePrometheus: "
                    "true",
                )


def _allows(policy: Resource, cidr: str, port: int) -> bool:
    net = ipaddress.ip_network(cidr)
    for rule in as_list(policy.get("spec", "egress")):
        ports = as_list(rule.get("ports"))
        if ports and not any(p.get("port") in (port, str(port)) for p in ports):
            continue
        for peer in as_list(rule.get("to")):
            block = peer.get("ipBlock") if isinstance(peer, Mapping) else None
            if not isinstance(block, Mapping) or is_unknown(block.get("cidr")):
                continue
            allowed = ipaddress.ip_network(str(block["cidr"]))
            excluded = [ipaddress.ip_network(str(e)) for e in as_list(block.get("except"))]
            if net.subnet_of(allowed) and not any(net.overlaps(e) for e in excluded):  # type: ignore[arg-type]
                return True
    return False


@stack_rule(
    "wiring-networkpolicy-site-store",
    why="Team namespaces deny egress except public HTTPS (private ranges excluded): a site object store on a private "
    "address is unreachable, so on-premises jobs cannot read data or write checkpoints.",
    fix="declare site.storage.object_store.cidrs; the platform then allows HTTPS to them from every team namespace",
)
def networkpolicy_site_store(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    stores: list[tuple[Resource, str, int]] = []
    for site in stack.of_type(SITE):
        store = site.get("storage", "objectStore")
        if not isinstance(store, Mapping):
            continue
        endpoint = str(store.get("endpoint") or "")
        host = endpoint.removeprefix("https://").rstrip("/")
        port = int(host.rsplit(":", 1)[1]) if ":" in host else 443
        cidrs = as_list(store.get("cidrs"))
        if not cidrs:
            yield Violation(
                "wiring-networkpolicy-site-store",
                site.urn,
                f"{site.name}: object store {endpoint} has no declared addresses, so no policy can allow it; set "
                "site.storage.object_store.cidrs",
            )
        stores += [(site, str(c), port) for c in cidrs]
    if not stores:
        return
    teams = [ns for ns in stack.of_type(NAMESPACE) if TEAM_LABEL in (ns.get("metadata", "labels") or {})]
    for ns in teams:
        name = ns.get("metadata", "name")
        policies = [p for p in stack.of_type(NETWORK_POLICY) if p.get("metadata", "namespace") == name]
        blocked = [f"{c}:{port}" for _, c, port in stores if not any(_allows(p, c, port) for p in policies)]
        if blocked:
            yield Violation(
                "wiring-networkpolicy-site-store",
                ns.urn,
                f"{ns.name}: no egress policy in {name} allows the site object store at {', '.join(blocked)}; add an "
                "egress rule to those addresses",
            )


@resource_rule(
    "wiring-node-taints-registration",
    types=[NODE_PATCH],
    why="Node spec.taints is an atomic list: a server-side apply patch of it conflicts with the kubelet and the node "
    "controllers on every later update, and the node runs pods before the patch lands.",
    fix="register the node with its taints (kubelet registerWithTaints, EKS node group taints) and patch only labels",
    params={
        "allowed_keys": Param([], {"type": "array", "items": {"type": "string"}}, "taint keys a patch may still own")
    },
)
def node_taints_registration(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    allowed = set(ctx.param("allowed_keys"))
    taints = [t for t in as_list(r.get("spec", "taints")) if isinstance(t, Mapping) and t.get("key") not in allowed]
    if taints:
        yield Violation(
            "wiring-node-taints-registration",
            r.urn,
            f"{r.name}: patches taints {', '.join(sorted(str(t.get('key')) for t in taints))} onto the Node; set them "
            "at registration (kubelet registerWithTaints) instead",
        )


@stack_rule(
    "wiring-multikueue-dispatch",
    why="MultiKueue dispatches only through a complete chain (AdmissionCheck -> MultiKueueConfig -> MultiKueueCluster "
    "-> kubeconfig Secret in Kueue's namespace), and a dispatching queue must not share flavors or a cohort with "
    "the site's queues (Kueue lends within a cohort of one cluster: a borrowed job would straddle the VPN) or leave "
    "out a resource the worker's queues cover (EFA jobs would be inadmissible).",
    fix="declare the whole chain, give dispatching ClusterQueues their own flavors and no shared cohort, and cover "
    "every resource the worker's queues cover",
)
def multikueue_dispatch(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    rule = "wiring-multikueue-dispatch"
    configs = {str(c.get("metadata", "name")): c for c in _crs(stack, "MultiKueueConfig")}
    clusters = {str(c.get("metadata", "name")): c for c in _crs(stack, "MultiKueueCluster")}
    secrets = {
        (str(s.get("metadata", "namespace")), str(s.get("metadata", "name"))): s
        for s in stack.of_type("kubernetes:core/v1:Secret")
    }
    kueue_ns = load_charts().chart("kueue").namespace
    for check in _crs(stack, "AdmissionCheck"):
        if check.get("spec", "controllerName") != "kueue.x-k8s.io/multikueue":
            continue
        params = check.get("spec", "parameters") or {}
        config = configs.get(str(params.get("name"))) if params.get("kind") == "MultiKueueConfig" else None
        if config is None:
            yield Violation(rule, check.urn, f"{check.name}: names no declared MultiKueueConfig; declare it")
            continue
        for cluster_name in as_list(config.get("spec", "clusters")):
            cluster = clusters.get(str(cluster_name))
            if cluster is None:
                yield Violation(
                    rule,
                    config.urn,
                    f"{config.name}: cluster {cluster_name} is not declared; add its MultiKueueCluster",
                )
                continue
            location = cluster.get("spec", "kubeConfig", "location")
            secret = secrets.get((kueue_ns, str(location)))
            if secret is not None and _sealed(secret):
                continue  # a Pulumi secret: its keys are not shown, the engine checks the value
            keys = {k for prop in ("stringData", "data") for k in ((secret.get(prop) or {}) if secret else {})}
            if secret is None or "kubeconfig" not in keys:
                yield Violation(
                    rule,
                    cluster.urn,
                    f"{cluster.name}: no Secret {kueue_ns}/{location} with a kubeconfig key; create it from the "
                    "worker's service-account kubeconfig",
                )
    checks = multikueue_checks(stack)
    queues = _crs(stack, "ClusterQueue")
    dispatching = [q for q in queues if set(as_list(q.get("spec", "admissionChecks"))) & checks]
    local = [
        q for q in queues if q not in dispatching and q.provider == (dispatching[0].provider if dispatching else None)
    ]
    local_flavors = {f for q in local for f in _flavor_names(q)}
    local_cohorts = {q.get("spec", "cohort") for q in local} - {None}
    worker_covered = {
        str(res)
        for q in queues
        if q not in dispatching and q not in local
        for g in as_list(q.get("spec", "resourceGroups"))
        for res in as_list(g.get("coveredResources"))
    }
    for q in dispatching:
        problems = []
        shared = sorted(_flavor_names(q) & local_flavors)
        if shared:
            problems.append(f"shares flavor(s) {', '.join(shared)} with the site's queues")
        if q.get("spec", "cohort") in local_cohorts:
            problems.append(f"is in the site's cohort {q.get('spec', 'cohort')}")
        covered = {str(r) for g in as_list(q.get("spec", "resourceGroups")) for r in as_list(g.get("coveredResources"))}
        missing = sorted(worker_covered - covered)
        if missing:
            problems.append(f"does not cover {', '.join(missing)}, which the worker's queues do")
        if problems:
            yield Violation(rule, q.urn, f"{q.name}: {'; '.join(problems)}; give it its own flavors and resources")
