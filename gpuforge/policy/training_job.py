"""A team's training job, derived from a plan's objects and proven admissible and schedulable there.

`team_job_inputs` reads what the platform declares for a team (namespace, service account, LocalQueue, the
ClusterQueue's GPU flavor and the nodes behind it, the data claim) and gpuforge/render/training_job.py
renders the JobSet. `job_problems` then replays, on the planned objects, what the cluster would do with it:

- Kueue (kubernetes-sigs/kueue v0.14.4): the queue the job lands in (its label, else the namespace's
  `default` LocalQueue under LocalQueueDefaulting, pkg/controller/jobframework/defaults.go), whether Kueue
  manages it at all (integrations.frameworks; manageJobsWithoutQueueName and managedJobsNamespaceSelector),
  the ClusterQueue's namespaceSelector, the requests Kueue counts (resources.excludeResourcePrefixes,
  pkg/workload/workload.go dropExcludedResources), a resource group covering each of them
  (pkg/scheduler/flavorassigner/flavorassigner.go: "resource ... unavailable in ClusterQueue"), and a flavor
  whose nodeTaints the pod tolerates, whose nodeLabels its node selector allows and whose nominal quota
  holds the whole job;
- the scheduler: with the flavor's nodeLabels and tolerations added (as Kueue adds them on admission), a
  node group or host whose labels match and whose NoSchedule/NoExecute taints are tolerated, with room per
  node for every request (GPUs, fabric devices, huge pages, allocatable CPU and memory) and enough nodes;
- Pod Security: nothing the team namespace's enforced level (baseline) rejects.

Plain functions over plan resources: the CLI and the tests call them; nothing here needs a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.catalog.charts import load_charts
from gpuforge.infra.k8s.platform import GPU_RESOURCE, LOCAL_QUEUE, QUEUE_LABEL
from gpuforge.infra.k8s.scheduling import Taint, taint_from, untolerated
from gpuforge.render.labels import TEAM_LABEL
from gpuforge.render.training_job import TrainingJobInputs

from .rules.base import Resource, Stack, as_list
from .rules.wiring_k8s import PLATFORM, RELEASE, nodes, quantity

KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"
# Pod Security Standards, baseline: the capabilities a container may add (kubernetes.io, "Pod Security
# Standards", Baseline, Capabilities).
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)


class TrainingJobError(Exception):
    """The plan declares no training path for the team (no such team, no queue, no GPU flavor)."""


@dataclass(frozen=True)
class KueueConfig:
    frameworks: tuple[str, ...]
    manage_without_queue_name: bool
    managed_namespaces: Mapping[str, Any] | None  # a label selector; None: every namespace
    excluded_prefixes: tuple[str, ...]
    local_queue_defaulting: bool


@dataclass
class Assignment:
    """What Kueue admitted: per pod set, the flavor of each resource group; problems otherwise."""

    flavors: dict[str, list[Resource]] = field(default_factory=dict)  # pod set -> flavors assigned
    problems: list[str] = field(default_factory=list)


def _kueue(stack: Stack, kind: str) -> list[Resource]:
    return [
        r for r in stack.resources if r.type.startswith("kubernetes:kueue.x-k8s.io/") and r.type.endswith(f":{kind}")
    ]


def _of_kind(stack: Stack, kind: str) -> list[Resource]:
    return [r for r in stack.resources if r.type.startswith("kubernetes:") and r.type.endswith(f":{kind}")]


def _meta(r: Resource, key: str) -> Any:
    return r.get("metadata", key)


def kueue_config(stack: Stack) -> KueueConfig:
    """Kueue's manager configuration as the platform's release writes it (the chart's string value)."""
    release = next((r for r in stack.of_type(RELEASE) if r.get("chart") == KUEUE_CHART), None)
    text = release.get("values", "managerConfig", "controllerManagerConfigYaml") if release else None
    if not isinstance(text, str):
        raise TrainingJobError("no Kueue release with a manager configuration in the plan")
    config = yaml.safe_load(text) or {}
    gates = config.get("featureGates") or {}
    return KueueConfig(
        frameworks=tuple((config.get("integrations") or {}).get("frameworks") or ()),
        manage_without_queue_name=bool(config.get("manageJobsWithoutQueueName")),
        managed_namespaces=config.get("managedJobsNamespaceSelector"),
        excluded_prefixes=tuple((config.get("resources") or {}).get("excludeResourcePrefixes") or ()),
        # Beta and on by default since Kueue 0.12 (pkg/features/kube_features.go, v0.14.4).
        local_queue_defaulting=bool(gates.get("LocalQueueDefaulting", True)),
    )


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against labels (an empty selector matches everything)."""
    if selector is None:
        return True
    if any(labels.get(k) != str(v) for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), [str(v) for v in expr.get("values") or []]
        present = key in labels
        if (
            (op == "In" and (not present or labels[key] not in values))
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def namespace_labels(stack: Stack, namespace: str) -> dict[str, str] | None:
    for ns in _of_kind(stack, "Namespace"):
        if _meta(ns, "name") == namespace:
            return {**(_meta(ns, "labels") or {}), "kubernetes.io/metadata.name": namespace}
    return None


def _in_namespace(stack: Stack, kind: str, namespace: str) -> list[Resource]:
    return [r for r in _of_kind(stack, kind) if _meta(r, "namespace") == namespace]


def _pools(stack: Stack) -> dict[str, Mapping[str, Any]]:
    """Flavor name -> the nodes behind it, as the platform component records them."""
    out: dict[str, Mapping[str, Any]] = {}
    for platform in stack.of_type(PLATFORM):
        pools = platform.get("pools") or {}
        if isinstance(pools, Mapping):
            out.update({k: v for k, v in pools.items() if isinstance(v, Mapping)})
    return out


def team_job_inputs(stack: Stack, team: str) -> TrainingJobInputs:
    """The job template's inputs for `team`, from the plan's objects (TrainingJobError when it has none)."""
    spaces = {
        str(_meta(ns, "name")): ns for ns in _of_kind(stack, "Namespace") if (_meta(ns, "labels") or {}).get(TEAM_LABEL)
    }
    teams = {str(_meta(ns, "labels")[TEAM_LABEL]): name for name, ns in spaces.items()}
    if team not in teams:
        known = ", ".join(sorted(teams)) or "none"
        raise TrainingJobError(f"no team {team} on this stack's Kubernetes platform (teams: {known})")
    namespace = teams[team]
    accounts = [str(_meta(sa, "name")) for sa in _in_namespace(stack, "ServiceAccount", namespace)]
    queues = {str(_meta(q, "name")): q for q in _kueue(stack, "LocalQueue") if _meta(q, "namespace") == namespace}
    if not accounts or not queues:
        raise TrainingJobError(f"team {team}: namespace {namespace} has no service account or no LocalQueue")
    queue = queues.get(LOCAL_QUEUE) or next(iter(queues.values()))
    cq_name = queue.get("spec", "clusterQueue")
    cq = next((q for q in _kueue(stack, "ClusterQueue") if _meta(q, "name") == cq_name), None)
    pools = _pools(stack)
    gpu_flavors = [
        (str(f.get("name")), f)
        for g in as_list(cq.get("spec", "resourceGroups") if cq else [])
        if GPU_RESOURCE in as_list(g.get("coveredResources"))
        for f in as_list(g.get("flavors"))
        if str(f.get("name")) in pools
    ]
    if not gpu_flavors:
        raise TrainingJobError(f"team {team}: ClusterQueue {cq_name} has no GPU flavor with nodes behind it")
    flavor_name, flavor_quota = gpu_flavors[0]
    pool = pools[flavor_name]
    gpu_quota = next(
        int(r["nominalQuota"]) for r in as_list(flavor_quota.get("resources")) if r.get("name") == GPU_RESOURCE
    )
    flavor = next((f for f in _kueue(stack, "ResourceFlavor") if _meta(f, "name") == flavor_name), None)
    claims = [str(_meta(c, "name")) for c in _in_namespace(stack, "PersistentVolumeClaim", namespace)]
    gpus_per_node = int(pool["gpusPerNode"])
    hugepages = load_aws_wiring().eks.efa_pod.pod_hugepages_2mi_mib if int(pool.get("hugepages2MiPerNode") or 0) else 0
    return TrainingJobInputs(
        team=team,
        namespace=namespace,
        service_account=accounts[0],
        queue=str(_meta(queue, "name")),
        nodes=max(1, gpu_quota // gpus_per_node),
        gpu_resource=GPU_RESOURCE,
        gpus_per_node=gpus_per_node,
        allocatable_cpu_millicores=int(pool["allocatableCpuMillicores"]),
        allocatable_memory_mib=int(pool["allocatableMemoryMib"]),
        fabric_resource=pool.get("fabricResource") or None,
        fabric_devices_per_node=int(pool.get("fabricDevicesPerNode") or 0),
        hugepages_2mi_mib=hugepages,
        tolerations=tuple(dict(t) for t in as_list(flavor.get("spec", "tolerations") if flavor else [])),
        data_claim=claims[0] if claims else None,
    )


@dataclass(frozen=True)
class PodSet:
    name: str
    count: int
    spec: Mapping[str, Any]

    @property
    def requests(self) -> dict[str, float]:
        """What one pod requests, summed over its containers (a limit stands for a missing request)."""
        total: dict[str, float] = {}
        for c in self.spec.get("containers") or []:
            res = c.get("resources") or {}
            asked = {**(res.get("limits") or {}), **(res.get("requests") or {})}
            for name, value in asked.items():
                total[name] = total.get(name, 0.0) + (quantity(value) or 0.0)
        return total


def pod_sets(job: Mapping[str, Any]) -> list[PodSet]:
    """Kueue's pod sets of a JobSet: one per replicated job, replicas x parallelism pods."""
    out = []
    for rj in job.get("spec", {}).get("replicatedJobs") or []:
        spec = rj["template"]["spec"]
        out.append(
            PodSet(rj["name"], int(rj.get("replicas", 1)) * int(spec.get("parallelism", 1)), spec["template"]["spec"])
        )
    return out


def _flavor_taints(flavor: Resource) -> list[Taint]:
    return [taint_from(t) for t in as_list(flavor.get("spec", "nodeTaints")) if isinstance(t, Mapping)]


def admission_problems(stack: Stack, job: Mapping[str, Any]) -> Assignment:
    """Kueue's admission of `job` on the plan's objects: the flavors it gets, or why it is never admitted."""
    result = Assignment()
    problems = result.problems
    config = kueue_config(stack)
    meta = job.get("metadata") or {}
    namespace, labels = meta.get("namespace", ""), meta.get("labels") or {}
    ns_labels = namespace_labels(stack, namespace)
    if ns_labels is None:
        return Assignment(problems=[f"namespace {namespace} is not declared"])
    group = job["apiVersion"].split("/")[0]
    installed = {
        g
        for r in stack.of_type(RELEASE)
        for c in load_charts().charts.values()
        if c.chart == r.get("chart")
        for g in c.crd_groups
    }
    if group not in installed:
        # Reported with the rest: what Kueue would do once the API is there.
        problems.append(f"no release installs the {group} API (its CRDs and controller): the job is refused")
    framework = f"{group}/{job['kind'].lower()}"
    if framework not in config.frameworks:
        problems.append(f"Kueue's integrations.frameworks lacks {framework}: the job runs outside quota")
        return result
    queue_name = labels.get(QUEUE_LABEL)
    local_queues = {str(_meta(q, "name")): q for q in _kueue(stack, "LocalQueue") if _meta(q, "namespace") == namespace}
    if not queue_name and config.local_queue_defaulting and LOCAL_QUEUE in local_queues:
        queue_name = LOCAL_QUEUE  # Kueue's webhook labels it (ApplyDefaultLocalQueue)
    if not queue_name:
        managed = config.manage_without_queue_name and selector_matches(config.managed_namespaces, ns_labels)
        problems.append(
            f"no {QUEUE_LABEL} label and no LocalQueue {LOCAL_QUEUE} in {namespace}: "
            + ("Kueue suspends it forever" if managed else "it runs outside Kueue, bypassing the team's quota")
        )
        return result
    local = local_queues.get(queue_name)
    if local is None:
        problems.append(f"no LocalQueue {queue_name} in namespace {namespace}")
        return result
    cq_name = local.get("spec", "clusterQueue")
    cq = next((q for q in _kueue(stack, "ClusterQueue") if _meta(q, "name") == cq_name), None)
    if cq is None:
        problems.append(f"LocalQueue {namespace}/{queue_name} points at ClusterQueue {cq_name}, which is not declared")
        return result
    ns_selector = cq.get("spec", "namespaceSelector")
    # A ClusterQueue without a namespaceSelector admits from no namespace (Kueue API: nil matches none).
    if ns_selector is None or not selector_matches(ns_selector, ns_labels):
        problems.append(f"ClusterQueue {cq_name}'s namespaceSelector does not select namespace {namespace}")
        return result
    groups = [g for g in as_list(cq.get("spec", "resourceGroups")) if isinstance(g, Mapping)]
    flavors = {str(_meta(f, "name")): f for f in _kueue(stack, "ResourceFlavor")}
    for ps in pod_sets(job):
        requests = {k: v for k, v in ps.requests.items() if not k.startswith(config.excluded_prefixes)}
        assigned: list[Resource] = []
        for name in sorted(requests):
            if not any(name in as_list(g.get("coveredResources")) for g in groups):
                problems.append(
                    f"pod set {ps.name}: resource {name} unavailable in ClusterQueue {cq_name} (no resource group "
                    "covers it and Kueue's resources.excludeResourcePrefixes does not exclude it): never admitted"
                )
        for group in groups:
            covered = [r for r in as_list(group.get("coveredResources")) if r in requests]
            if not covered:
                continue
            # Kueue matches a pod's node selector against a flavor on the group's flavors' label keys only.
            label_keys: set[str] = set()
            for quota in as_list(group.get("flavors")):
                known_flavor = flavors.get(str(quota.get("name")))
                label_keys |= set(known_flavor.get("spec", "nodeLabels") or {}) if known_flavor else set()
            selector = {k: v for k, v in (ps.spec.get("nodeSelector") or {}).items() if k in label_keys}
            reasons = []
            for quota in as_list(group.get("flavors")):
                fname = str(quota.get("name"))
                flavor = flavors.get(fname)
                if flavor is None:
                    reasons.append(f"flavor {fname} not declared")
                    continue
                tolerations = [*as_list(ps.spec.get("tolerations")), *as_list(flavor.get("spec", "tolerations"))]
                if untolerated(tolerations, _flavor_taints(flavor)):
                    reasons.append(f"untolerated taint in flavor {fname}")
                    continue
                node_labels = flavor.get("spec", "nodeLabels") or {}
                if any(node_labels.get(k) != str(v) for k, v in selector.items()):
                    reasons.append(f"flavor {fname} doesn't match node affinity")
                    continue
                nominal = {
                    str(r.get("name")): quantity(r.get("nominalQuota")) or 0.0 for r in as_list(quota.get("resources"))
                }
                short = [r for r in covered if requests[r] * ps.count > nominal.get(r, 0.0)]
                if short:
                    reasons.append(
                        f"flavor {fname}: {ps.count} pods need more {', '.join(short)} than its nominal quota"
                    )
                    continue
                assigned.append(flavor)
                break
            else:
                problems.append(f"pod set {ps.name}: no flavor of ClusterQueue {cq_name} fits ({'; '.join(reasons)})")
        result.flavors[ps.name] = assigned
    return result


def placement_problems(stack: Stack, job: Mapping[str, Any], assignment: Assignment) -> list[str]:
    """Whether the admitted pods find nodes: labels, taints and room per node (the scheduler's filters)."""
    problems: list[str] = []
    known = nodes(stack)
    pools = _pools(stack)
    for ps in pod_sets(job):
        assigned = assignment.flavors.get(ps.name, [])
        selector = dict(ps.spec.get("nodeSelector") or {})
        tolerations = list(as_list(ps.spec.get("tolerations")))
        for flavor in assigned:
            selector.update(flavor.get("spec", "nodeLabels") or {})
            tolerations += as_list(flavor.get("spec", "tolerations"))
        labelled = [n for n in known if n.carries(selector)]
        fitting = [n for n in labelled if not untolerated(tolerations, n.taints)]
        where = ", ".join(f"{k}={v}" for k, v in sorted(selector.items())) or "any node"
        if not labelled:
            problems.append(f"pod set {ps.name}: no node carries {where}")
            continue
        if not fitting:
            taints = sorted({str(t) for n in labelled for t in untolerated(tolerations, n.taints)})
            problems.append(f"pod set {ps.name}: the nodes with {where} are tainted {', '.join(taints)}, not tolerated")
            continue
        pool = next((pools[str(_meta(f, "name"))] for f in assigned if str(_meta(f, "name")) in pools), None)
        if pool is None:
            problems.append(
                f"pod set {ps.name}: no GPU pool behind flavors {', '.join(str(_meta(f, 'name')) for f in assigned)}"
            )
            continue
        problems += _room(ps, pool)
    return problems


def _room(ps: PodSet, pool: Mapping[str, Any]) -> list[str]:
    capacity = {
        "cpu": int(pool["allocatableCpuMillicores"]) / 1000,
        "memory": int(pool["allocatableMemoryMib"]) * 1024.0**2,
        GPU_RESOURCE: int(pool["gpusPerNode"]),
        "hugepages-2Mi": int(pool.get("hugepages2MiPerNode") or 0) * 2 * 1024.0**2,
    }
    if pool.get("fabricResource"):
        capacity[str(pool["fabricResource"])] = int(pool.get("fabricDevicesPerNode") or 0)
    out = []
    for name, asked in sorted(ps.requests.items()):
        if asked > capacity.get(name, 0.0):
            out.append(f"pod set {ps.name}: one pod requests {name} {asked:g}, a node has {capacity.get(name, 0.0):g}")
    if ps.count > int(pool["nodes"]):
        out.append(f"pod set {ps.name}: {ps.count} pods of a node each, {pool['nodes']} nodes")
    return out


def pod_security_problems(job: Mapping[str, Any], level: str = "baseline") -> list[str]:
    """What Pod Security `baseline` rejects in the job's pods (host namespaces, host paths, privileged, ports,
    capabilities beyond baseline's list)."""
    out = []
    for ps in pod_sets(job):
        spec = ps.spec
        out += [
            f"pod set {ps.name}: {k} is forbidden at {level}"
            for k in ("hostNetwork", "hostPID", "hostIPC")
            if spec.get(k)
        ]
        out += [
            f"pod set {ps.name}: hostPath volume {v.get('name')} is forbidden at {level}"
            for v in spec.get("volumes") or []
            if "hostPath" in v
        ]
        for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            ctx = c.get("securityContext") or {}
            if ctx.get("privileged"):
                out.append(f"pod set {ps.name}: container {c.get('name')} is privileged, forbidden at {level}")
            extra = set((ctx.get("capabilities") or {}).get("add") or ()) - BASELINE_CAPABILITIES
            if extra:
                out.append(
                    f"pod set {ps.name}: container {c.get('name')} adds capabilities {', '.join(sorted(extra))}, "
                    f"forbidden at {level}"
                )
            if any(p.get("hostPort") for p in c.get("ports") or []):
                out.append(f"pod set {ps.name}: container {c.get('name')} uses a hostPort, forbidden at {level}")
    return out


def job_problems(stack: Stack, job: Mapping[str, Any]) -> list[str]:
    """Every reason the job would not be admitted, placed or accepted; empty: it runs."""
    assignment = admission_problems(stack, job)
    problems = list(assignment.problems)
    if not problems:
        problems += placement_problems(stack, job, assignment)
    ns_labels = namespace_labels(stack, (job.get("metadata") or {}).get("namespace", "")) or {}
    enforced = ns_labels.get("pod-security.kubernetes.io/enforce")
    if enforced in ("baseline", "restricted"):  # restricted includes baseline; its further rules are not checked
        problems += pod_security_problems(job)
    return problems
