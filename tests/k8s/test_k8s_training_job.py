"""A team's training job (issue 30): rendered from the plan's objects, valid against the vendored JobSet CRD,
admitted by Kueue's rules and placed on the GPU nodes, on staging (EKS, EFA) and on the on-prem Kubernetes
fixture (InfiniBand). Each check is also shown to fail where today's main branch would: hugepages-2Mi
uncovered, GPU taints the flavor does not tolerate, an unlabelled job outside quota."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.infra.k8s.platform import kueue_manager_config
from gpuforge.plan.model import Plan
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.policy.rules import Resource, Stack
from gpuforge.policy.training_job import (
    admission_problems,
    job_problems,
    kueue_config,
    pod_security_problems,
    team_job_inputs,
)
from gpuforge.render.training_job import training_jobset
from gpuforge.spec.models import PodsReady
from tests.k8s_objects import validate
from tests.support import planned

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "k8s"
ONPREM_K8S = str(ROOT / "tests" / "fixtures" / "stacks" / "Pulumi.onprem-k8s.yaml")
KUEUE_RELEASE = "oci://registry.k8s.io/kueue/charts/kueue"


def stack_of(plan: Plan) -> Stack:
    return Stack(to_rule_resources(plan.resources))


@pytest.fixture(scope="module")
def onprem() -> Plan:
    return planned(ONPREM_K8S)


def edited(stack: Stack, match: Callable[[Resource], bool], edit: Callable[[dict[str, Any]], None]) -> Stack:
    """The stack with the inputs of every matching resource edited (a deep copy through YAML)."""
    out = []
    for r in stack.resources:
        if match(r):
            inputs = yaml.safe_load(yaml.safe_dump(dict(r.inputs)))
            edit(inputs)
            r = dataclasses.replace(r, inputs=inputs)
        out.append(r)
    return Stack(out)


def with_kueue_config(stack: Stack, edit: Callable[[dict[str, Any]], None]) -> Stack:
    def change(inputs: dict[str, Any]) -> None:
        manager = inputs["values"]["managerConfig"]
        config = yaml.safe_load(manager["controllerManagerConfigYaml"])
        edit(config)
        manager["controllerManagerConfigYaml"] = yaml.safe_dump(config)

    return edited(stack, lambda r: r.type.endswith(":Release") and r.get("chart") == KUEUE_RELEASE, change)


@pytest.mark.parametrize(
    ("stack", "team", "nodes", "fabric"),
    [
        ("staging", "llm", 6, {"vpc.amazonaws.com/efa": "32", "hugepages-2Mi": "5120Mi"}),
        ("staging", "research", 2, {"vpc.amazonaws.com/efa": "32", "hugepages-2Mi": "5120Mi"}),
        ("onprem", "vision", 4, {"rdma/rdma_shared_device_a": "1"}),
        ("onprem", "llm", 4, {"rdma/rdma_shared_device_a": "1"}),
    ],
)
def test_each_team_job_is_valid_admissible_and_schedulable(
    request: pytest.FixtureRequest, stack: str, team: str, nodes: int, fabric: dict[str, str]
) -> None:
    plan: Plan = request.getfixturevalue(stack)
    planned_stack = stack_of(plan)
    job = training_jobset(team_job_inputs(planned_stack, team))
    validate(job)  # the JobSet CRD of the pinned chart, strictly
    assert job_problems(planned_stack, job) == []
    (workers,) = job["spec"]["replicatedJobs"]
    assert workers["template"]["spec"]["parallelism"] == nodes  # the team's whole quota, one pod per node
    pod = workers["template"]["spec"]["template"]["spec"]
    namespace = next(
        r.inputs["metadata"]["name"]
        for r in plan.by_type("kubernetes:core/v1:Namespace")
        if r.inputs["metadata"].get("labels", {}).get("gpuforge.dev/team") == team
    )
    assert job["metadata"]["namespace"] == namespace
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert pod["serviceAccountName"] == "training"
    requests = pod["containers"][0]["resources"]["requests"]
    assert requests["nvidia.com/gpu"] == "8"
    assert {k: v for k, v in requests.items() if k not in ("cpu", "memory", "nvidia.com/gpu")} == fabric
    assert {"name": "dshm", "mountPath": "/dev/shm"} in pod["containers"][0]["volumeMounts"]
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
    assert claims == (["fsx-lustre"] if stack == "staging" else [])  # the site's Lustre is mounted by the hosts


def test_hugepages_uncovered_is_never_admitted(staging: Plan) -> None:
    """Today's main: the ClusterQueues cover cpu, memory, GPUs and EFA and nothing excludes huge pages, so an
    EFA pod's hugepages-2Mi finds no resource group (flavorassigner.go: "resource ... unavailable")."""
    today = with_kueue_config(stack_of(staging), lambda config: config.pop("resources"))
    job = training_jobset(team_job_inputs(today, "llm"))
    problems = job_problems(today, job)
    assert problems and all("hugepages-2Mi unavailable in ClusterQueue llm" in p for p in problems), problems


def test_a_job_api_nothing_installs_is_refused(staging: Plan) -> None:
    """Today's main: Kueue lists the JobSet framework but no JobSet controller or CRD is installed."""
    without = Stack([r for r in stack_of(staging).resources if r.get("name") != "jobset"])
    job = training_jobset(team_job_inputs(without, "llm"))
    assert job_problems(without, job) == [
        "no release installs the jobset.x-k8s.io API (its CRDs and controller): the job is refused",
    ]


def test_untolerated_gpu_taint_leaves_pods_pending(staging: Plan) -> None:
    """Tainted GPU nodes behind a flavor without the toleration (a job without its own): admitted, never placed."""
    untolerant = edited(
        stack_of(staging), lambda r: r.type.endswith(":ResourceFlavor"), lambda i: i["spec"].pop("tolerations")
    )
    job = training_jobset(team_job_inputs(untolerant, "llm"))
    assert "tolerations" not in job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    problems = job_problems(untolerant, job)
    assert problems == [
        "pod set workers: the nodes with gpuforge.dev/gpu-model=H100 are tainted nvidia.com/gpu=present:NoSchedule, "
        "not tolerated"
    ]


def test_quota_and_node_room_are_checked(staging: Plan) -> None:
    planned_stack = stack_of(staging)
    job = training_jobset(team_job_inputs(planned_stack, "research"))
    workers = job["spec"]["replicatedJobs"][0]["template"]["spec"]
    workers["parallelism"] = workers["completions"] = 3  # research's quota is 2 nodes
    assert any("nominal quota" in p for p in job_problems(planned_stack, job))
    workers["parallelism"] = workers["completions"] = 2
    # Huge pages are outside quota (excluded), so only the node's 5128 pages hold them.
    workers["template"]["spec"]["containers"][0]["resources"]["requests"]["hugepages-2Mi"] = "10300Mi"
    assert job_problems(planned_stack, job) == [
        f"pod set workers: one pod requests hugepages-2Mi {10300 * 2**20:g}, a node has {5128 * 2 * 2**20:g}"
    ]


def test_a_job_without_queue_label_lands_in_the_default_queue(staging: Plan) -> None:
    planned_stack = stack_of(staging)
    job = training_jobset(team_job_inputs(planned_stack, "llm"))
    del job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert job_problems(planned_stack, job) == []
    # Today's main: LocalQueue `training` and manageJobsWithoutQueueName off: the job bypasses the quota.
    today = with_kueue_config(
        edited(
            planned_stack, lambda r: r.type.endswith(":LocalQueue"), lambda i: i["metadata"].update(name="training")
        ),
        lambda config: config.update(manageJobsWithoutQueueName=False),
    )
    assert job_problems(today, job) == [
        "no kueue.x-k8s.io/queue-name label and no LocalQueue default in llm-pretrain: it runs outside Kueue, "
        "bypassing the team's quota"
    ]


def test_pod_security_baseline_is_enforced_and_the_template_meets_it(staging: Plan) -> None:
    namespaces = [
        r.inputs["metadata"]["labels"]
        for r in staging.by_type("kubernetes:core/v1:Namespace")
        if "gpuforge.dev/team" in r.inputs["metadata"].get("labels", {})
    ]
    assert namespaces and all(labels["pod-security.kubernetes.io/enforce"] == "baseline" for labels in namespaces)
    job = training_jobset(team_job_inputs(stack_of(staging), "llm"))
    assert pod_security_problems(job) == []
    pod = job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["hostNetwork"] = True
    pod["containers"][0]["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    assert pod_security_problems(job) == [
        "pod set workers: hostNetwork is forbidden at baseline",
        "pod set workers: container trainer adds capabilities IPC_LOCK, forbidden at baseline",
    ]


def _go_structs(source: str) -> dict[str, dict[str, str]]:
    """struct name -> json field name -> Go type, from a Go file's `type X struct { ... }` blocks; an embedded
    struct tagged `json:",inline"` (ControllerManager in Configuration) contributes its fields."""
    structs: dict[str, dict[str, str]] = {}
    inlined: dict[str, list[str]] = {}
    for name, body in re.findall(r"^type (\w+) struct \{\n(.*?)^\}", source, re.S | re.M):
        fields: dict[str, str] = {}
        for gotype, tag in re.findall(r"^\s*\w+\s+([\w.*\[\]]+)\s+`json:\"([^\"]*)\"`", body, re.M):
            key = tag.split(",")[0]
            if key:
                fields[key] = gotype.lstrip("*").removeprefix("[]")
        inlined[name] = re.findall(r"^\s*([\w.]+)\s+`json:\",inline\"`", body, re.M)
        structs[name] = fields
    for name, embedded in inlined.items():
        for inner in embedded:
            structs[name].update(structs.get(inner, {}))
    return structs


def _unknown_keys(value: Any, struct: str, structs: dict[str, dict[str, str]], path: str) -> list[str]:
    if struct not in structs or not isinstance(value, dict):
        return []  # a type from another package (metav1.LabelSelector, Duration) or a scalar
    out = []
    for key, item in value.items():
        if key in ("apiVersion", "kind") and path == "":
            continue
        if key not in structs[struct]:
            out.append(f"{path}{key}")
            continue
        child = structs[struct][key]
        items = item if isinstance(item, list) else [item]
        for element in items:
            out += _unknown_keys(element, child, structs, f"{path}{key}.")
    return out


def test_kueue_configuration_matches_kueues_own_types(staging: Plan) -> None:
    """Every key of the manager configuration is a json field of the Go struct it lands in
    (apis/config/v1beta1/configuration_types.go at v0.14.4, verbatim): Kueue ignores a misspelt key silently."""
    structs = _go_structs((FIXTURES / "kueue" / "configuration_types-v0.14.4.go").read_text())
    assert structs["Resources"]["excludeResourcePrefixes"] == "string"
    assert "manageJobsWithoutQueueName" in structs["Configuration"]
    config = yaml.safe_load(
        next(
            r.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]
            for r in staging.by_type("kubernetes:helm.sh/v3:Release")
            if r.inputs["chart"] == KUEUE_RELEASE
        )
    )
    assert _unknown_keys(config, "Configuration", structs, "") == []
    config["resources"]["excludedResourcePrefixes"] = ["hugepages-"]  # a plausible misspelling
    assert _unknown_keys(config, "Configuration", structs, "") == ["resources.excludedResourcePrefixes"]
    # The running configuration is what the check reads.
    assert kueue_config(stack_of(staging)).excluded_prefixes == ("hugepages-",)
    assert kueue_manager_config(PodsReady(), "kueue-system")["resources"] == {"excludeResourcePrefixes": ["hugepages-"]}


def test_admission_names_the_uncovered_resource_for_an_unknown_device(staging: Plan) -> None:
    planned_stack = stack_of(staging)
    job = training_jobset(team_job_inputs(planned_stack, "llm"))
    job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "example.com/fpga"
    ] = "1"
    assert admission_problems(planned_stack, job).problems == [
        "pod set workers: resource example.com/fpga unavailable in ClusterQueue llm (no resource group covers it "
        "and Kueue's resources.excludeResourcePrefixes does not exclude it): never admitted"
    ]


def test_render_job_command(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["render", "job", "staging", "--team", "research"])
    assert result.exit_code == 0, result.output
    job = yaml.safe_load(result.stdout)
    assert job["kind"] == "JobSet" and job["metadata"]["namespace"] == "research"
    unknown = CliRunner().invoke(app, ["render", "job", "staging", "--team", "nobody"])
    assert unknown.exit_code == 2
    assert "no team nobody on this stack's Kubernetes platform (teams: llm, research)" in unknown.output
    assert "Traceback" not in unknown.output


def test_queues_on_a_capacity_block_open_and_drain_with_its_window(staging: Plan) -> None:
    """Staging's GPUs are a Capacity Block (2026-12-01 11:30 to 2026-12-15 11:30 UTC): the ClusterQueues are
    created held; a CronJob opens each at the block's start; another drains it (HoldAndDrain: Kueue evicts the
    workloads, pods get SIGTERM and the template's 600 s to checkpoint) at 10:35, 5 minutes before that grace
    period must start for it to end when the block-end action scales the group in (10:50)."""
    queues = {
        r.inputs["metadata"]["name"]: r for r in staging.by_type("kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue")
    }
    for queue in queues.values():
        assert queue.inputs["spec"]["stopPolicy"] == "Hold" and queue.ignore_changes == ["spec.stopPolicy"]
    jobs = {r.inputs["metadata"]["name"]: r.inputs for r in staging.by_type("kubernetes:batch/v1:CronJob")}
    assert set(jobs) == {f"block-{action}-{team}" for action in ("open", "drain") for team in queues}
    for team in queues:
        opening, draining = jobs[f"block-open-{team}"]["spec"], jobs[f"block-drain-{team}"]["spec"]
        assert (opening["schedule"], draining["schedule"]) == ("30 11 1 12 *", "35 10 15 12 *")
        assert opening["timeZone"] == draining["timeZone"] == "Etc/UTC"
        for spec, policy in ((opening, "None"), (draining, "HoldAndDrain")):
            pod = spec["jobTemplate"]["spec"]["template"]["spec"]
            (container,) = pod["containers"]
            assert container["image"] == "registry.k8s.io/kubectl:v1.33.0"
            assert container["args"][:3] == ["patch", "clusterqueue", team]
            assert json.loads(container["args"][-1]) == {"spec": {"stopPolicy": policy}}
            assert pod["nodeSelector"] == {"gpuforge.dev/node-group": "system"}
    (schedule,) = [
        r for r in staging.by_type("aws:autoscaling/schedule:Schedule") if r.name.endswith("-train-block-end")
    ]
    assert schedule.inputs["startTime"] == "2026-12-15T10:50:00Z"
    # The job template's grace period is what the drain leaves room for.
    job = training_jobset(team_job_inputs(stack_of(staging), "llm"))
    assert (
        job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 600
    )
    # Only the team's own queue: the window's service account may patch nothing else.
    roles = {
        r.inputs["metadata"]["name"]: r.inputs
        for r in staging.by_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    }
    assert roles["gpuforge-block-window-llm"]["rules"] == [
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["clusterqueues"],
            "resourceNames": ["llm"],
            "verbs": ["get", "patch"],
        }
    ]


def test_queues_without_a_block_are_never_held(onprem: Plan) -> None:
    queues = onprem.by_type("kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue")
    assert queues and all("stopPolicy" not in q.inputs["spec"] for q in queues)
    assert not onprem.by_type("kubernetes:batch/v1:CronJob")
