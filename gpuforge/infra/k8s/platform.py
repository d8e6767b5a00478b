"""GpuPlatform: the GPU platform on any Kubernetes cluster, given its provider (EKS, or an
on-premises cluster's kubeconfig): the same code for every placement.

- NVIDIA GPU Operator (driver operator-managed or preinstalled by the image: one spec switch),
  with its dcgm-exporter; Node Feature Discovery installed once, on its own;
- the fabric's device plugin: the AWS EFA device plugin, or the NVIDIA Network Operator with
  the RDMA shared device plugin (InfiniBand, RoCE);
- with `prometheus_operator`, the Prometheus operator itself (kube-prometheus-stack, gpuforge/infra/k8s/
  monitoring_stack.py) and dcgm-exporter scraped through a ServiceMonitor it selects (else the exporter
  service's prometheus.io annotations, set by the GPU Operator);
- the stack's parallel file system as a static PersistentVolume and claim per team (the placement names
  the file system and its CSI driver), never a storage class that would create new, empty ones;
- Kueue: a ResourceFlavor per GPU model, a ClusterQueue and LocalQueue per team with whole-node
  quotas (GPUs with the CPU, memory and fabric devices of their nodes), so multi-node jobs are
  admitted whole or not at all; waitForPodsReady in its manager configuration, so a job whose
  pods do not all start in time is evicted, frees its quota and is requeued with backoff; jobs
  without a queue label in team namespaces are managed too (the LocalQueue is named `default`);
- JobSet, the job API of the training template (gpuforge/render/training_job.py), with Kueue's
  JobSet integration;
- a namespace per team (Pod Security baseline enforced) with a service account for training pods
  (annotated by the placement: on EKS with the team's IAM role), NetworkPolicies that keep training
  pods away from management services, a ValidatingAdmissionPolicy that keeps team editors off those
  policies and the team's queue, and PriorityClasses.

Chart versions come from the catalog (gpuforge/catalog/data/charts.yaml). Helm charts are
`helm.v3.Release` resources (one resource each, values as inputs); everything else is a typed
pulumi_kubernetes object, so the plan shows it and tests validate it against the schemas.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from gpuforge.catalog.charts import Charts, load_charts
from gpuforge.catalog.kubelet import NodeKind, load_kubelet_reservation
from gpuforge.render.exporters import dcgm_counters_csv
from gpuforge.render.labels import NODE_LABEL_GPU_MODEL, TEAM_LABEL
from gpuforge.spec.models import Fabric, Platform, PodsReady

from .elastic import admission_checks_strategy, elastic_admission_check, provisioning_request_crd
from .monitoring_stack import MonitoringStack, kube_prometheus_stack_values
from .scheduling import Taint, tolerations_for

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
RDMA_RESOURCE_NAME = "rdma_shared_device_a"
RDMA_RESOURCE = f"rdma/{RDMA_RESOURCE_NAME}"
MELLANOX_VENDOR_ID = "15b3"
COHORT = "gpuforge"
# Kueue's DefaultLocalQueueName (pkg/controller/constants/constants.go, v0.14.4): with the LocalQueueDefaulting
# feature (beta, on since 0.12) a job without the queue-name label is sent to the LocalQueue of this name.
LOCAL_QUEUE = "default"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Resources Kueue leaves out of quota (configuration resources.excludeResourcePrefixes): huge pages are a
# per-node reservation the kubelet accounts for (the placement check holds them against the node), not a
# pooled quota; a workload requesting a resource no resource group covers is never admitted.
KUEUE_EXCLUDED_RESOURCE_PREFIXES = ("hugepages-",)
# Pod Security Standards level enforced on team namespaces (kubernetes.io, "Pod Security Standards").
TEAM_POD_SECURITY = "baseline"
# Kubernetes groups whose members may change the platform's objects in team namespaces: system:masters and
# kubeadm's admin group on site clusters, PLATFORM_ADMIN_GROUP on EKS (the deployer's and admins' access entries).
PLATFORM_ADMIN_GROUP = "gpuforge:platform-admins"
PLATFORM_ADMIN_GROUPS = ("system:masters", "kubeadm:cluster-admins", PLATFORM_ADMIN_GROUP)
# Kubernetes' private ranges: training pods reach the internet (object store, registries) but
# no in-cluster or in-VPC management service unless a policy says so.
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
# What team editors may not touch in their namespace (GpuPlatform._protect_platform_objects): API group -> resources.
PROTECTED_TEAM_RESOURCES: dict[str, tuple[str, ...]] = {
    "networking.k8s.io": ("networkpolicies",),
    "": ("resourcequotas", "limitranges"),
    "kueue.x-k8s.io": ("localqueues",),
}
PRIORITY_CLASSES: dict[str, tuple[int, str]] = {
    "gpuforge-training-critical": (100_000, "Production training runs; may preempt lower classes within quota."),
    "gpuforge-training": (10_000, "Default for training jobs."),
    "gpuforge-preemptible": (1_000, "Experiments that yield to anything else."),
}


@dataclass(frozen=True)
class BlockWindow:
    """When a pool's nodes exist (a Capacity Block): Kueue admits to its flavor from `open_at` and drains the
    flavor's queues at `drain_at`, early enough for every pod to checkpoint before the nodes go."""

    open_at: datetime
    drain_at: datetime


@dataclass(frozen=True)
class GpuPool:
    """The Kubernetes nodes of one GPU model, as a placement resolved them."""

    gpu_model: str
    nodes: int  # active nodes: the quota ceiling (spares back them up)
    gpus_per_node: int
    cpus_per_node: int
    memory_mib_per_node: int
    fabric_devices_per_node: int = 0  # EFA interfaces, or RDMA shared devices exposed per node
    node_kind: NodeKind = "eks"  # whose kubelet reservation applies (gpuforge/catalog/data/kubelet.yaml)
    taints: tuple[Taint, ...] = ()  # what the nodes register with: every node agent and flavor tolerates them
    hugepages_2mi_per_node: int = 0  # 2 MiB huge pages each node pre-allocates (EFA nodes: the catalog's)
    window: BlockWindow | None = None  # the nodes exist only inside this window (a Capacity Block)
    elastic: bool = False  # the nodes scale with the queue (Cluster Autoscaler): Kueue asks for them (elastic.py)

    @property
    def allocatable_cpu_millicores(self) -> int:
        return (
            load_kubelet_reservation()
            .allocatable(self.cpus_per_node, self.memory_mib_per_node, self.node_kind)
            .cpu_millicores
        )

    @property
    def allocatable_memory_mib(self) -> int:
        return (
            load_kubelet_reservation()
            .allocatable(self.cpus_per_node, self.memory_mib_per_node, self.node_kind)
            .memory_mib
        )


@dataclass(frozen=True)
class ParallelFsVolume:
    """An existing parallel file system as a static PersistentVolume per team, each bound to that team's claim:
    the stack's own file system (with its data), never a new empty one (FSx CSI static provisioning: the file
    system id as volumeHandle, its DNS and mount names as volumeAttributes)."""

    name: str  # the claim's name in every team namespace
    driver: str
    volume_handle: pulumi.Input[str]
    volume_attributes: dict[str, pulumi.Input[str]]
    capacity_gib: int
    mount_options: list[str] = field(default_factory=list)
    csi_chart: str | None = None  # key in charts.yaml of the driver to install (its node plugin mounts)
    csi_values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GpuPlatformArgs:
    platform: Platform
    fabric: Fabric
    pools: list[GpuPool]
    parallel_fs_volume: ParallelFsVolume | None = None  # the stack's own file system, claimed per team
    # team -> annotations of its training service account, from the placement (on EKS the IAM
    # role for service accounts); a team not listed gets a plain service account.
    service_account_annotations: dict[str, dict[str, pulumi.Input[str]]] = field(default_factory=dict)
    # Site services training pods reach over HTTPS inside private ranges (an on-premises object store):
    # CIDR -> port. The public-egress policy excludes private ranges, so each needs its own rule.
    private_https_endpoints: dict[str, int] = field(default_factory=dict)
    charts: Charts = field(default_factory=load_charts)
    # The platform's own dcgm-exporter ServiceMonitor under the Prometheus operator; off when the stack's
    # monitoring section declares its labelled one (gpuforge/infra/k8s/alerting.py), so GPUs are scraped once.
    dcgm_service_monitor: bool = True
    # Node labels of the system group the platform's controllers run on (Kueue, JobSet); empty: anywhere
    # untainted. GPU nodes are tainted, so controllers never take what a quota counts as free.
    controller_node_selector: dict[str, str] = field(default_factory=dict)
    # Where the Prometheus operator goes and what it selects (platform.prometheus_operator): the monitoring
    # section's namespace and labels when its server is the cluster's operator.
    monitoring: MonitoringStack = field(default_factory=MonitoringStack)


def flavor_name(gpu_model: str) -> str:
    return f"gpu-{gpu_model.lower()}"


def fabric_resource(fabric: Fabric) -> str | None:
    return {"efa": EFA_RESOURCE, "infiniband": RDMA_RESOURCE, "roce": RDMA_RESOURCE}.get(fabric)


def node_taints(pools: list[GpuPool]) -> list[Taint]:
    return sorted({t for pool in pools for t in pool.taints}, key=str)


def agent_tolerations(charts: Charts, key: str, pools: list[GpuPool]) -> list[dict[str, Any]]:
    """A node agent's tolerations: the chart's defaults (a Helm list value replaces them whole)
    plus one for each taint the GPU nodes register with."""
    agent = charts.chart(key).node_agent
    defaults = [t.model_dump(exclude_none=True) for t in agent.default_tolerations] if agent else []
    return tolerations_for(node_taints(pools), defaults)


# The ConfigMap the GPU Operator chart creates from dcgmExporter.config (templates/dcgm_exporter_config.yaml,
# NVIDIA/gpu-operator v25.10.1) in its own namespace.
DCGM_METRICS_CONFIGMAP = "gpuforge-dcgm-metrics"


def gpu_operator_values(
    platform: Platform, tolerations: list[dict[str, Any]], controller_selector: dict[str, str] | None = None
) -> dict[str, Any]:
    operator_driver = platform.gpu_driver == "operator"
    # The operator's own Deployment on the system group (deployments/gpu-operator/templates/operator.yaml at
    # v25.10.1: .Values.operator.nodeSelector); its operands are DaemonSets on the GPU nodes.
    controller = {"operator": {"nodeSelector": dict(controller_selector)}} if controller_selector else {}
    return {
        **controller,
        # preinstalled: the image (playbooks, or the EKS accelerated AMI) carries the driver and
        # the container toolkit; two installers of one kernel module fight.
        "driver": {"enabled": operator_driver},
        "toolkit": {"enabled": operator_driver},
        # Node Feature Discovery is its own release (one per cluster; the network operator needs it too).
        "nfd": {"enabled": False},
        # The exporter's service carries prometheus.io/scrape annotations; with the Prometheus
        # operator, GpuPlatform declares the ServiceMonitor itself. The counters are gpuforge's (the dcgm_exporter
        # role's list), not the image's dcp-metrics-included.csv, which lacks fields the alerts read: the chart
        # creates the ConfigMap (key dcgm-metrics.csv) and the operator points DCGM_EXPORTER_COLLECTORS at it.
        "dcgmExporter": {
            "enabled": True,
            "serviceMonitor": {"enabled": False},
            "config": {"name": DCGM_METRICS_CONFIGMAP, "create": True, "data": dcgm_counters_csv()},
        },
        # Operands (driver, toolkit, device plugin, dcgm-exporter) must reach every tainted GPU node.
        "daemonsets": {"tolerations": tolerations},
    }


def efa_device_plugin_values(tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    # No nodeSelector: the chart's own node affinity (node.kubernetes.io/instance-type in its list of
    # EFA types) already limits it to EFA nodes; a selector on a label no node carries ran it nowhere.
    return {"tolerations": tolerations}


def node_feature_discovery_values(
    tolerations: list[dict[str, Any]], controller_selector: dict[str, str] | None = None
) -> dict[str, Any]:
    # The worker labels each node (pci-10de for the GPU Operator, pci-15b3 for the network operator):
    # a worker kept off the tainted GPU hosts leaves them unlabelled, and both operators select nothing.
    values: dict[str, Any] = {"worker": {"tolerations": tolerations}}
    if controller_selector:
        # master and gc are Deployments: on the system group (values.yaml at v0.18.3: master.nodeSelector,
        # gc.nodeSelector).
        values |= {
            "master": {"nodeSelector": dict(controller_selector)},
            "gc": {"nodeSelector": dict(controller_selector)},
        }
    return values


def network_operator_values() -> dict[str, Any]:
    return {"nfd": {"enabled": False}}


def kueue_manager_config(pods_ready: PodsReady, namespace: str, frameworks: tuple[str, ...] = ()) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta1, Kueue 0.14): the chart's defaults
    (kubernetes-sigs/kueue config/components/manager/controller_manager_config.yaml) plus
    waitForPodsReady, Kueue's all-or-nothing admission for multi-node jobs, and quota that cannot be
    bypassed: jobs without a queue label in team namespaces are managed too (sent to the namespace's
    `default` LocalQueue), huge pages are left to the kubelet."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "manageJobsWithoutQueueName": True,
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 5,
                "LocalQueue.kueue.x-k8s.io": 1,
                "Cohort.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 50, "burst": 100},
        "waitForPodsReady": {
            "enable": True,
            "timeout": f"{pods_ready.timeout_minutes}m",
            "blockAdmission": pods_ready.block_admission,
            "requeuingStrategy": {
                # Backoff counts from the eviction, not from the job's creation.
                "timestamp": "Eviction",
                "backoffLimitCount": pods_ready.requeue_limit,  # null: requeue forever
                "backoffBaseSeconds": pods_ready.requeue_backoff_base_seconds,
                "backoffMaxSeconds": pods_ready.requeue_backoff_max_seconds,
            },
        },
        # Team namespaces only: with manageJobsWithoutQueueName, a selector that let in kube-system or Kueue's own
        # namespace would suspend the system's jobs (Kueue docs, "Setup All-or-nothing..."/manageJobsWithoutQueueName).
        "managedJobsNamespaceSelector": {
            "matchExpressions": [
                {"key": TEAM_LABEL, "operator": "Exists"},
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", namespace]},
            ]
        },
        "resources": {"excludeResourcePrefixes": list(KUEUE_EXCLUDED_RESOURCE_PREFIXES)},
        # The chart's default job kinds (catalog: charts.yaml kueue.default_frameworks).
        "integrations": {"frameworks": list(frameworks)},
    }


def kueue_values(
    pods_ready: PodsReady,
    namespace: str,
    frameworks: tuple[str, ...],
    prometheus: bool,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    # Chart 0.14 takes the manager configuration as one YAML string that replaces the chart's
    # default whole (the structured managerConfig.config merge came in later charts), so the
    # string carries the defaults too.
    config = yaml.safe_dump(kueue_manager_config(pods_ready, namespace, frameworks), sort_keys=False)
    # enablePrometheus: the chart's own ServiceMonitor for Kueue's metrics (needs the operator's CRDs).
    values: dict[str, Any] = {"enablePrometheus": prometheus, "managerConfig": {"controllerManagerConfigYaml": config}}
    if node_selector:
        # charts/kueue/values.yaml (v0.14.4): controllerManager.nodeSelector
        values["controllerManager"] = {"nodeSelector": dict(node_selector)}
    return values


def jobset_values(node_selector: dict[str, str]) -> dict[str, Any]:
    # charts/jobset/values.yaml (v0.10.1): controller.nodeSelector
    return {"controller": {"nodeSelector": dict(node_selector)}} if node_selector else {}


def rdma_shared_device_plugin_config() -> str:
    return json.dumps(
        {
            "configList": [
                {
                    "resourceName": RDMA_RESOURCE_NAME,
                    "rdmaHcaMax": 63,
                    "selectors": {"vendors": [MELLANOX_VENDOR_ID]},
                }
            ]
        }
    )


def team_labels(team: str) -> dict[str, str]:
    """The labels of the objects the platform declares for a team."""
    return {TEAM_LABEL: team, "app.kubernetes.io/managed-by": "gpuforge"}


def cron_at(when: datetime) -> str:
    """A cron schedule firing at `when` (UTC, to the minute); cron has no year field."""
    return f"{when.minute} {when.hour} {when.day} {when.month} *"


def team_windows(gpu_quota: Mapping[str, int], pools: list[GpuPool]) -> list[BlockWindow]:
    """The Capacity Block windows of the pools behind a team's quota."""
    by_model = {pool.gpu_model: pool for pool in pools}
    return sorted({w for model in gpu_quota if (w := by_model[model].window) is not None}, key=lambda w: w.open_at)


def team_quotas(platform: Platform, pools: list[GpuPool], fabric: Fabric) -> dict[str, list[dict[str, Any]]]:
    """Per team, the ClusterQueue flavors: whole nodes' worth of every covered resource, CPU and
    memory as the kubelet leaves them allocatable (a quota of nameplate CPU admits jobs no node fits)."""
    by_model = {pool.gpu_model: pool for pool in pools}
    extra = fabric_resource(fabric)
    out: dict[str, list[dict[str, Any]]] = {}
    for team, spec in platform.teams.items():
        flavors = []
        for model, gpus in sorted(spec.gpu_quota.items()):
            pool = by_model[model]  # resolve() refuses models without a pool
            nodes = gpus // pool.gpus_per_node
            resources = [
                {"name": "cpu", "nominalQuota": f"{nodes * pool.allocatable_cpu_millicores}m"},
                {"name": "memory", "nominalQuota": f"{nodes * pool.allocatable_memory_mib}Mi"},
                {"name": GPU_RESOURCE, "nominalQuota": gpus},
            ]
            if extra:
                resources.append({"name": extra, "nominalQuota": nodes * pool.fabric_devices_per_node})
            flavors.append({"name": flavor_name(model), "resources": resources})
        out[team] = flavors
    return out


class GpuPlatform(pulumi.ComponentResource):
    namespaces: dict[str, str]  # team -> namespace
    kueue: k8s.helm.v3.Release  # Kueue objects a composer adds (hybrid) wait for it
    team_namespaces: list[k8s.core.v1.Namespace]
    gpu_pools: list[GpuPool]  # not `pools`/`fabric`: those are input properties of the component
    # The ProvisioningRequest CRD, where a pool is elastic: the Cluster Autoscaler's release waits for it.
    provisioning_crd: k8s.apiextensions.v1.CustomResourceDefinition | None
    fabric_kind: Fabric

    def __init__(self, name: str, args: GpuPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        platform = args.platform
        super().__init__(
            "gpuforge:k8s:GpuPlatform",
            name,
            {
                "gpuDriver": platform.gpu_driver,
                "fabric": args.fabric,
                "prometheusOperator": platform.prometheus_operator,
                "teams": {t: dict(s.gpu_quota) for t, s in platform.teams.items()},
                "charts": {k: c.version for k, c in args.charts.charts.items()},
                # Per flavor: the nodes behind it and what each leaves allocatable (wiring-kueue-quota-allocatable).
                "pools": {
                    flavor_name(p.gpu_model): {
                        "nodes": p.nodes,
                        "gpusPerNode": p.gpus_per_node,
                        "allocatableCpuMillicores": p.allocatable_cpu_millicores,
                        "allocatableMemoryMib": p.allocatable_memory_mib,
                        "fabricResource": fabric_resource(args.fabric),
                        "fabricDevicesPerNode": p.fabric_devices_per_node,
                        "hugepages2MiPerNode": p.hugepages_2mi_per_node,
                    }
                    for p in args.pools
                },
            },
            opts,
        )
        child = pulumi.ResourceOptions(parent=self)
        charts = args.charts

        system_ns: dict[str, k8s.core.v1.Namespace] = {}

        def namespace_for(namespace: str, privileged: bool) -> k8s.core.v1.Namespace | None:
            if namespace == "kube-system":
                return None
            if namespace not in system_ns:
                labels = {"app.kubernetes.io/managed-by": "gpuforge"}
                if privileged:
                    # Device plugins and the driver stack mount host paths (GPU Operator docs: label
                    # the operator's namespace privileged under Pod Security Admission).
                    labels["pod-security.kubernetes.io/enforce"] = "privileged"
                system_ns[namespace] = k8s.core.v1.Namespace(
                    f"{name}-ns-{namespace}",
                    metadata=k8s.meta.v1.ObjectMetaArgs(name=namespace, labels=labels),
                    opts=child,
                )
            return system_ns[namespace]

        releases: dict[str, k8s.helm.v3.Release] = {}

        def release(
            key: str,
            values: dict[str, Any],
            privileged: bool = True,
            namespace: str | None = None,
            after_releases: tuple[pulumi.Resource | None, ...] = (),
        ) -> k8s.helm.v3.Release:
            chart = charts.chart(key)
            namespace = namespace or chart.namespace
            ns = namespace_for(namespace, privileged)
            # A release whose templates create objects of another chart's CRDs installs after it.
            after: list[pulumi.Resource] = [releases[k] for k in chart.requires_charts]
            after += [r for r in after_releases if r is not None]
            created = k8s.helm.v3.Release(
                f"{name}-{key.replace('_', '-')}",
                name=key.replace("_", "-"),
                chart=chart.chart,
                version=chart.version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo) if chart.repo else None,
                namespace=namespace,
                create_namespace=False,
                values=values,
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=[*([ns] if ns else []), *after])
                ),
            )
            releases[key] = created
            return created

        pools = args.pools
        release(
            "node_feature_discovery",
            node_feature_discovery_values(
                agent_tolerations(charts, "node_feature_discovery", pools), args.controller_node_selector
            ),
        )
        gpu_operator = release(
            "gpu_operator",
            gpu_operator_values(
                platform, agent_tolerations(charts, "gpu_operator", pools), args.controller_node_selector
            ),
        )
        if args.fabric == "efa":
            release(
                "aws_efa_device_plugin",
                efa_device_plugin_values(agent_tolerations(charts, "aws_efa_device_plugin", pools)),
            )
        elif args.fabric in ("infiniband", "roce"):
            network_operator = release("network_operator", network_operator_values())
            image = charts.image("rdma_shared_device_plugin")
            k8s.apiextensions.CustomResource(
                f"{name}-nic-cluster-policy",
                api_version="mellanox.com/v1alpha1",
                kind="NicClusterPolicy",
                # The operator reconciles exactly this name.
                metadata=k8s.meta.v1.ObjectMetaArgs(name="nic-cluster-policy"),
                spec={
                    "rdmaSharedDevicePlugin": {
                        "image": image.image,
                        "repository": image.repository,
                        "version": image.version,
                        "config": rdma_shared_device_plugin_config(),
                    },
                    # Applied to every DaemonSet the policy deploys: the RDMA plugin runs on the GPU hosts.
                    "tolerations": agent_tolerations(charts, "network_operator", pools),
                },
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[network_operator])),
            )

        self.monitoring_release: k8s.helm.v3.Release | None = None
        if platform.prometheus_operator:
            # node-exporter mounts the host's root and uses its network and PIDs: privileged, like the operators.
            self.monitoring_release = release(
                "kube_prometheus_stack",
                kube_prometheus_stack_values(args.monitoring, args.controller_node_selector),
                privileged=True,
                namespace=args.monitoring.namespace,
            )
        if self.monitoring_release is not None and args.dcgm_service_monitor:
            gpu_ns = charts.chart("gpu_operator").namespace
            k8s.apiextensions.CustomResource(
                f"{name}-dcgm-exporter-monitor",
                api_version="monitoring.coreos.com/v1",
                kind="ServiceMonitor",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name="nvidia-dcgm-exporter",
                    namespace=gpu_ns,
                    # The labels Prometheus selects ServiceMonitors by (monitoring_stack.py writes the selector).
                    labels={"app": "nvidia-dcgm-exporter", **args.monitoring.rule_labels},
                ),
                # The GPU Operator's dcgm-exporter service: label app=nvidia-dcgm-exporter, port gpu-metrics.
                spec={
                    "endpoints": [{"port": "gpu-metrics", "path": "/metrics", "interval": "30s"}],
                    "jobLabel": "app",
                    "namespaceSelector": {"matchNames": [gpu_ns]},
                    "selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
                },
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=[gpu_operator, self.monitoring_release])
                ),
            )

        self._fs_driver: k8s.helm.v3.Release | None = None
        volume = args.parallel_fs_volume
        if volume is not None and platform.parallel_fs_storage_class and volume.csi_chart:
            self._fs_driver = release(volume.csi_chart, volume.csi_values, privileged=True)

        for class_name, (value, description) in PRIORITY_CLASSES.items():
            k8s.scheduling.v1.PriorityClass(
                f"{name}-pc-{class_name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=class_name),
                value=value,
                global_default=False,
                preemption_policy="Never" if class_name == "gpuforge-preemptible" else "PreemptLowerPriority",
                description=description,
                opts=child,
            )

        # The job API of the training template (docs/kubernetes.md): before Kueue, whose JobSet integration
        # watches its CRD.
        release("jobset", jobset_values(args.controller_node_selector), privileged=False)
        kueue_chart = charts.chart("kueue")
        elastic = any(p.elastic for p in args.pools)
        provisioning_crd = provisioning_request_crd(name, child) if elastic else None
        self.provisioning_crd = provisioning_crd
        kueue = release(
            "kueue",
            kueue_values(
                platform.pods_ready,
                kueue_chart.namespace,
                kueue_chart.default_frameworks,
                platform.prometheus_operator,
                args.controller_node_selector,
            ),
            privileged=False,
            # enablePrometheus: the chart's ServiceMonitor needs the operator's CRDs.
            after_releases=(self.monitoring_release, provisioning_crd),
        )
        if elastic:
            elastic_admission_check(
                name,
                charts.chart("kueue").api_version or "kueue.x-k8s.io/v1beta1",
                [GPU_RESOURCE],
                pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[kueue])),
            )
        self.kueue = kueue
        self.gpu_pools, self.fabric_kind = list(args.pools), args.fabric
        self.team_namespaces = []
        self.namespaces = self._teams(name, args, kueue, child)
        self.register_outputs({"namespaces": self.namespaces})

    def _teams(
        self, name: str, args: GpuPlatformArgs, kueue: k8s.helm.v3.Release, child: pulumi.ResourceOptions
    ) -> dict[str, str]:
        platform, pools = args.platform, args.pools
        kueue_api = args.charts.chart("kueue").api_version or "kueue.x-k8s.io/v1beta1"
        after_kueue = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[kueue]))
        for pool in sorted(pools, key=lambda p: p.gpu_model):
            k8s.apiextensions.CustomResource(
                f"{name}-flavor-{flavor_name(pool.gpu_model)}",
                api_version=kueue_api,
                kind="ResourceFlavor",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=flavor_name(pool.gpu_model)),
                # The flavor's tolerations are added to the pods it admits: without them a job admitted
                # to tainted nodes stays Pending until waitForPodsReady evicts it.
                spec={
                    "nodeLabels": {NODE_LABEL_GPU_MODEL: pool.gpu_model},
                    **({"tolerations": tolerations_for(pool.taints)} if tolerations_for(pool.taints) else {}),
                },
                opts=after_kueue,
            )
        covered = ["cpu", "memory", GPU_RESOURCE]
        extra = fabric_resource(args.fabric)
        if extra:
            covered.append(extra)
        quotas = team_quotas(platform, pools, args.fabric)
        elastic_models = {pool.gpu_model: pool.elastic for pool in pools}
        namespaces: dict[str, str] = {}
        for team, spec in platform.teams.items():
            ns_name = spec.namespace_for(team)
            namespaces[team] = ns_name
            ns = k8s.core.v1.Namespace(
                f"{name}-team-{team}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=ns_name,
                    labels={
                        TEAM_LABEL: team,
                        "app.kubernetes.io/managed-by": "gpuforge",
                        # Enforced: no privileged, hostPath, hostNetwork or added capabilities beyond baseline's
                        # list. The training template needs none (devices come through the device plugins).
                        "pod-security.kubernetes.io/enforce": TEAM_POD_SECURITY,
                        "pod-security.kubernetes.io/warn": TEAM_POD_SECURITY,
                        "pod-security.kubernetes.io/audit": TEAM_POD_SECURITY,
                    },
                ),
                opts=child,
            )
            self.team_namespaces.append(ns)
            in_ns = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[ns]))
            self._network_policies(name, team, ns_name, args.private_https_endpoints, in_ns)
            k8s.core.v1.ServiceAccount(
                f"{name}-sa-{team}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=platform.service_account,
                    namespace=ns_name,
                    labels=team_labels(team),
                    annotations=args.service_account_annotations.get(team) or None,
                ),
                opts=in_ns,
            )
            windows = team_windows(spec.gpu_quota, pools)
            k8s.apiextensions.CustomResource(
                f"{name}-cq-{team}",
                api_version=kueue_api,
                kind="ClusterQueue",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=team),
                spec={
                    # Nodes on a Capacity Block exist only inside its window: the queue is created held and the
                    # window's CronJobs open and drain it (they own the field from then on).
                    **({"stopPolicy": "Hold"} if windows else {}),
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns_name}},
                    # Teams lend idle quota to each other and reclaim it on demand.
                    "cohort": COHORT,
                    "queueingStrategy": "BestEffortFIFO",
                    "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                    "resourceGroups": [{"coveredResources": covered, "flavors": quotas[team]}],
                    **admission_checks_strategy(
                        [flavor_name(m) for m in sorted(spec.gpu_quota) if elastic_models.get(m, False)]
                    ),
                },
                opts=pulumi.ResourceOptions.merge(
                    after_kueue, pulumi.ResourceOptions(ignore_changes=["spec.stopPolicy"] if windows else None)
                ),
            )
            for window in windows:
                self._block_window(name, team, window, args, after_kueue)
            self._team_volume(name, team, ns_name, args, in_ns)
            k8s.apiextensions.CustomResource(
                f"{name}-lq-{team}",
                api_version=kueue_api,
                kind="LocalQueue",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=LOCAL_QUEUE, namespace=ns_name),
                spec={"clusterQueue": team},
                opts=pulumi.ResourceOptions.merge(after_kueue, pulumi.ResourceOptions(depends_on=[ns, kueue])),
            )
        self._protect_platform_objects(name, args.charts.chart("kueue").namespace, child)
        return namespaces

    def _block_window(
        self, name: str, team: str, window: BlockWindow, args: GpuPlatformArgs, opts: pulumi.ResourceOptions
    ) -> None:
        """Two CronJobs in Kueue's namespace: at the block's start the team's ClusterQueue admits again
        (stopPolicy None); at `drain_at` it is drained (HoldAndDrain: Kueue evicts the admitted workloads, their
        pods get SIGTERM and the template's grace period to checkpoint) before the nodes are scaled in. Cron has
        no year: the schedules recur on the same dates a year on unless the block is replaced in the stack."""
        namespace = args.charts.chart("kueue").namespace
        account = f"{name}-window-sa-{team}"
        sa_name = f"gpuforge-block-window-{team}"
        sa = k8s.core.v1.ServiceAccount(
            account, metadata=k8s.meta.v1.ObjectMetaArgs(name=sa_name, namespace=namespace), opts=opts
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-window-role-{team}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=sa_name),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(
                    api_groups=["kueue.x-k8s.io"],
                    resources=["clusterqueues"],
                    resource_names=[team],
                    verbs=["get", "patch"],
                )
            ],
            opts=opts,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-window-binding-{team}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=sa_name),
            role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=sa_name),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=sa_name, namespace=namespace)],
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[role, sa])),
        )
        image = args.charts.image("kubectl")
        for action, when, policy in (("open", window.open_at, "None"), ("drain", window.drain_at, "HoldAndDrain")):
            k8s.batch.v1.CronJob(
                f"{name}-window-{action}-{team}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=f"block-{action}-{team}", namespace=namespace),
                spec=k8s.batch.v1.CronJobSpecArgs(
                    schedule=cron_at(when),
                    time_zone="Etc/UTC",
                    concurrency_policy="Forbid",
                    job_template=k8s.batch.v1.JobTemplateSpecArgs(
                        spec=k8s.batch.v1.JobSpecArgs(
                            backoff_limit=6,
                            template=k8s.core.v1.PodTemplateSpecArgs(
                                spec=k8s.core.v1.PodSpecArgs(
                                    service_account_name=sa_name,
                                    restart_policy="OnFailure",
                                    node_selector=args.controller_node_selector or None,
                                    security_context=k8s.core.v1.PodSecurityContextArgs(
                                        run_as_non_root=True,
                                        run_as_user=65532,
                                        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
                                    ),
                                    containers=[
                                        k8s.core.v1.ContainerArgs(
                                            name="kubectl",
                                            image=f"{image.repository}/{image.image}:{image.version}",
                                            args=[
                                                "patch",
                                                "clusterqueue",
                                                team,
                                                "--type=merge",
                                                "-p",
                                                json.dumps({"spec": {"stopPolicy": policy}}),
                                            ],
                                            security_context=k8s.core.v1.SecurityContextArgs(
                                                allow_privilege_escalation=False,
                                                read_only_root_filesystem=True,
                                                capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
                                            ),
                                        )
                                    ],
                                )
                            ),
                        )
                    ),
                ),
                opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[sa])),
            )

    def _team_volume(
        self, name: str, team: str, namespace: str, args: GpuPlatformArgs, opts: pulumi.ResourceOptions
    ) -> None:
        """The stack's parallel file system in the team's namespace: a PersistentVolume naming it and a claim
        bound to exactly that volume (claimRef and volumeName; no storage class, so nothing is provisioned)."""
        volume = args.parallel_fs_volume
        if volume is None or not args.platform.parallel_fs_storage_class:
            return
        pv_name = f"{volume.name}-{namespace}"
        size = f"{volume.capacity_gib}Gi"
        after = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(depends_on=[self._fs_driver] if self._fs_driver else [])
        )
        k8s.core.v1.PersistentVolume(
            f"{name}-pv-{team}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=pv_name, labels=team_labels(team)),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                capacity={"storage": size},
                access_modes=["ReadWriteMany"],
                volume_mode="Filesystem",
                # The file system outlives any claim on it: deleting a claim never touches the data.
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                mount_options=volume.mount_options or None,
                claim_ref=k8s.core.v1.ObjectReferenceArgs(namespace=namespace, name=volume.name),
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=volume.driver,
                    volume_handle=volume.volume_handle,
                    volume_attributes=volume.volume_attributes,
                ),
            ),
            opts=after,
        )
        k8s.core.v1.PersistentVolumeClaim(
            f"{name}-pvc-{team}",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=volume.name,
                namespace=namespace,
                labels=team_labels(team),
            ),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteMany"],
                storage_class_name="",
                volume_name=pv_name,
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": size}),
            ),
            opts=after,
        )

    @staticmethod
    def _protect_platform_objects(name: str, kueue_namespace: str, opts: pulumi.ResourceOptions) -> None:
        """A ValidatingAdmissionPolicy: in team namespaces only platform admins create, change or delete
        NetworkPolicies, ResourceQuotas, LimitRanges and Kueue LocalQueues. A team's editors (EKS
        AmazonEKSEditPolicy, the `edit` role) could otherwise add an allow-all NetworkPolicy next to the
        default deny, or point their queue elsewhere. The namespace controller and garbage collector
        (kube-system service accounts) still clean up a deleted namespace, and Kueue still maintains its queues.
        The identity `pulumi up` runs as must be in one of PLATFORM_ADMIN_GROUPS (on EKS its access entry is)."""
        controllers = " || ".join(
            f"request.userInfo.username.startsWith('system:serviceaccount:{ns}:')"
            for ns in ("kube-system", kueue_namespace)
        )
        policy_name = "gpuforge-protect-team-platform-objects"
        groups = ", ".join(f"'{g}'" for g in PLATFORM_ADMIN_GROUPS)
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-vap-team-objects",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=policy_name),
            spec=k8s.admissionregistration.v1.ValidatingAdmissionPolicySpecArgs(
                failure_policy="Fail",
                match_constraints=k8s.admissionregistration.v1.MatchResourcesArgs(
                    namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                        match_expressions=[k8s.meta.v1.LabelSelectorRequirementArgs(key=TEAM_LABEL, operator="Exists")]
                    ),
                    resource_rules=[
                        k8s.admissionregistration.v1.NamedRuleWithOperationsArgs(
                            api_groups=[group],
                            api_versions=["*"],
                            operations=["CREATE", "UPDATE", "DELETE"],
                            resources=list(resources),
                        )
                        for group, resources in PROTECTED_TEAM_RESOURCES.items()
                    ],
                ),
                match_conditions=[
                    k8s.admissionregistration.v1.MatchConditionArgs(
                        name="not-system-controllers",
                        expression=f"!({controllers})",
                    )
                ],
                validations=[
                    k8s.admissionregistration.v1.ValidationArgs(
                        expression=f"request.userInfo.groups.exists(g, g in [{groups}])",
                        message="NetworkPolicies, quotas and Kueue queues in team namespaces belong to the platform "
                        "(gpuforge); change them in the stack file",
                        reason="Forbidden",
                    )
                ],
            ),
            opts=opts,
        )
        k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-vapb-team-objects",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=policy_name),
            spec=k8s.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpecArgs(
                policy_name=policy_name, validation_actions=["Deny"]
            ),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[policy])),
        )

    @staticmethod
    def _network_policies(
        name: str, team: str, namespace: str, private_https: dict[str, int], opts: pulumi.ResourceOptions
    ) -> None:
        """Default deny; pods of the team talk to each other (NCCL bootstrap, rendezvous), resolve
        names, and leave for public endpoints (object store, registries) over HTTPS. Management
        services (operators, Kueue, monitoring, other teams) are unreachable. EFA and RDMA traffic
        bypasses the kernel's network stack, so these policies neither carry nor block it."""
        meta = lambda suffix: k8s.meta.v1.ObjectMetaArgs(name=suffix, namespace=namespace)  # noqa: E731
        all_pods = k8s.meta.v1.LabelSelectorArgs()
        k8s.networking.v1.NetworkPolicy(
            f"{name}-np-{team}-default-deny",
            metadata=meta("default-deny"),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(pod_selector=all_pods, policy_types=["Ingress", "Egress"]),
            opts=opts,
        )
        same_namespace = [k8s.networking.v1.NetworkPolicyPeerArgs(pod_selector=all_pods)]
        k8s.networking.v1.NetworkPolicy(
            f"{name}-np-{team}-same-team",
            metadata=meta("allow-same-team"),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=all_pods,
                policy_types=["Ingress", "Egress"],
                ingress=[k8s.networking.v1.NetworkPolicyIngressRuleArgs(from_=same_namespace)],
                egress=[k8s.networking.v1.NetworkPolicyEgressRuleArgs(to=same_namespace)],
            ),
            opts=opts,
        )
        k8s.networking.v1.NetworkPolicy(
            f"{name}-np-{team}-dns",
            metadata=meta("allow-dns"),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=all_pods,
                policy_types=["Egress"],
                egress=[
                    k8s.networking.v1.NetworkPolicyEgressRuleArgs(
                        to=[
                            k8s.networking.v1.NetworkPolicyPeerArgs(
                                namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                                    match_labels={"kubernetes.io/metadata.name": "kube-system"}
                                ),
                                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"k8s-app": "kube-dns"}),
                            )
                        ],
                        ports=[
                            k8s.networking.v1.NetworkPolicyPortArgs(protocol=proto, port=53) for proto in ("UDP", "TCP")
                        ],
                    )
                ],
            ),
            opts=opts,
        )
        k8s.networking.v1.NetworkPolicy(
            f"{name}-np-{team}-https-out",
            metadata=meta("allow-https-public"),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=all_pods,
                policy_types=["Egress"],
                egress=[
                    k8s.networking.v1.NetworkPolicyEgressRuleArgs(
                        to=[
                            k8s.networking.v1.NetworkPolicyPeerArgs(
                                ip_block=k8s.networking.v1.IPBlockArgs(cidr="0.0.0.0/0", except_=list(PRIVATE_RANGES))
                            )
                        ],
                        ports=[k8s.networking.v1.NetworkPolicyPortArgs(protocol="TCP", port=443)],
                    )
                ],
            ),
            opts=opts,
        )
        if private_https:
            k8s.networking.v1.NetworkPolicy(
                f"{name}-np-{team}-site-https",
                metadata=meta("allow-site-https"),
                spec=k8s.networking.v1.NetworkPolicySpecArgs(
                    pod_selector=all_pods,
                    policy_types=["Egress"],
                    egress=[
                        k8s.networking.v1.NetworkPolicyEgressRuleArgs(
                            to=[
                                k8s.networking.v1.NetworkPolicyPeerArgs(
                                    ip_block=k8s.networking.v1.IPBlockArgs(cidr=cidr)
                                )
                            ],
                            ports=[k8s.networking.v1.NetworkPolicyPortArgs(protocol="TCP", port=port)],
                        )
                        for cidr, port in sorted(private_https.items())
                    ],
                ),
                opts=opts,
            )
