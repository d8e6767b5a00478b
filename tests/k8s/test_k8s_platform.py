"""GpuPlatform: what lands in the cluster, on EKS (staging plan) and on any other provider."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from gpuforge.catalog.charts import load_charts
from gpuforge.infra.k8s import GpuPlatform, GpuPlatformArgs, GpuPool, ParallelFsVolume
from gpuforge.plan.model import Plan, PlanResource
from gpuforge.spec.models import Platform

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta1"


def by_name(plan: Plan, type_: str) -> dict[str, dict[str, Any]]:
    return {
        r.inputs["metadata"]["name"] + "@" + r.inputs["metadata"].get("namespace", ""): r.inputs
        for r in plan.by_type(type_)
    }


def releases(plan: Plan) -> dict[str, PlanResource]:
    return {r.inputs["name"]: r for r in plan.by_type("kubernetes:helm.sh/v3:Release")}


def test_kueue_queue_per_team_with_whole_node_quotas(staging: Plan) -> None:
    cqs = by_name(staging, f"{KUEUE}:ClusterQueue")
    assert set(cqs) == {"llm@", "research@"}
    llm = cqs["llm@"]["spec"]
    assert llm["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "llm-pretrain"}}
    group = llm["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa"]
    (flavor,) = group["flavors"]
    assert flavor["name"] == "gpu-h100"
    quota = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    # 48 H100 = 6 p5.48xlarge: 192 vCPUs, 2 TiB and 32 EFA each, less what the EKS AMI's kubelet keeps:
    # 550m CPU (6 % + 1 % + 2 x 0.5 % + 188 x 0.25 % of a core), 11 x 250 pods + 255 MiB, 100 MiB eviction.
    assert quota == {
        "nvidia.com/gpu": 48,
        "cpu": f"{6 * (192_000 - 550)}m",
        "memory": f"{6 * (2097152 - 3005 - 100)}Mi",
        "vpc.amazonaws.com/efa": 6 * 32,
    }
    research = {
        r["name"]: r["nominalQuota"] for r in cqs["research@"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    }
    assert research["nvidia.com/gpu"] == 16
    assert by_name(staging, f"{KUEUE}:LocalQueue") == {
        # Named as Kueue's LocalQueueDefaulting expects: a job without a queue label lands here.
        "default@llm-pretrain": {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "default", "namespace": "llm-pretrain"},
            "spec": {"clusterQueue": "llm"},
        },
        "default@research": {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "default", "namespace": "research"},
            "spec": {"clusterQueue": "research"},
        },
    }
    flavors = by_name(staging, f"{KUEUE}:ResourceFlavor")
    assert flavors == {
        "gpu-h100@": {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "gpu-h100"},
            # The GPU nodes' taint, tolerated by the flavor: Kueue adds the toleration to the pods it admits.
            "spec": {
                "nodeLabels": {"gpuforge.dev/gpu-model": "H100"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
        }
    }


def test_network_policies_segment_each_team(staging: Plan) -> None:
    policies = by_name(staging, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
    for ns in ("llm-pretrain", "research"):
        deny = policies[f"default-deny@{ns}"]["spec"]
        assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
        same = policies[f"allow-same-team@{ns}"]["spec"]
        assert same["ingress"] == [{"from": [{"podSelector": {}}]}] and same["egress"] == [
            {"to": [{"podSelector": {}}]}
        ]
        https = policies[f"allow-https-public@{ns}"]["spec"]["egress"][0]
        assert https["to"][0]["ipBlock"] == {
            "cidr": "0.0.0.0/0",
            "except": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"],
        }
        assert https["ports"] == [{"protocol": "TCP", "port": 443}]
        dns = policies[f"allow-dns@{ns}"]["spec"]["egress"][0]
        assert dns["to"][0]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}
    # Nothing opens a management namespace to the teams.
    assert {p.split("@")[1] for p in policies} == {"llm-pretrain", "research"}


def test_helm_releases_pinned_and_driver_switch(staging: Plan) -> None:
    found = releases(staging)
    assert set(found) == {
        "gpu-operator",
        "node-feature-discovery",
        "aws-efa-device-plugin",
        "kueue",
        "jobset",
        "aws-fsx-csi-driver",
        "kube-prometheus-stack",  # prometheus_operator: true (tests/k8s/test_k8s_monitoring_stack.py)
    }
    jobset = found["jobset"].inputs
    assert jobset["chart"] == "oci://registry.k8s.io/jobset/charts/jobset" and jobset["version"] == "0.10.1"
    # The platform's controllers run on the system group, never on a GPU node the quota counts as free.
    assert jobset["values"] == {"controller": {"nodeSelector": {"gpuforge.dev/node-group": "system"}}}
    assert found["kueue"].inputs["values"]["controllerManager"] == {
        "nodeSelector": {"gpuforge.dev/node-group": "system"}
    }
    system = {"nodeSelector": {"gpuforge.dev/node-group": "system"}}
    assert found["gpu-operator"].inputs["values"]["operator"] == system
    nfd = found["node-feature-discovery"].inputs["values"]
    assert nfd["master"] == nfd["gc"] == system and "nodeSelector" not in nfd["worker"]  # the worker runs everywhere
    fsx_controller = found["aws-fsx-csi-driver"].inputs["values"]["controller"]
    assert fsx_controller["nodeSelector"] == system["nodeSelector"]  # its role: test_k8s_irsa.py
    gpu = found["gpu-operator"].inputs
    assert gpu["version"] == "v25.10.1" and gpu["repositoryOpts"]["repo"] == "https://helm.ngc.nvidia.com/nvidia"
    assert gpu["values"]["driver"] == {"enabled": False}  # preinstalled in the stack
    assert gpu["values"]["nfd"] == {"enabled": False}
    efa = found["aws-efa-device-plugin"].inputs
    # No nodeSelector (the chart's affinity on EFA instance types places it); the chart that ships plugin v0.5.20.
    assert efa["namespace"] == "kube-system" and "nodeSelector" not in efa["values"]
    assert efa["version"] == "v0.5.30" and load_charts().chart("aws_efa_device_plugin").app_version == "v0.5.20"
    # The GPU groups register with the GPU taint: the device plugin tolerates it.
    assert efa["values"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    # Staging's monitoring declares the labelled dcgm ServiceMonitor (gpuforge/infra/k8s/alerting.py), so the
    # platform's own is off: one scrape of the GPU Operator's exporter.
    monitors = by_name(staging, "kubernetes:monitoring.coreos.com/v1:ServiceMonitor")
    assert list(monitors) == ["gpuforge-dcgm-exporter@monitoring"]
    monitor = monitors["gpuforge-dcgm-exporter@monitoring"]
    assert monitor["spec"]["selector"] == {"matchLabels": {"app": "nvidia-dcgm-exporter"}}
    assert monitor["spec"]["endpoints"][0]["port"] == "gpu-metrics"
    # No storage class: nothing creates new, empty file systems.
    assert not staging.by_type("kubernetes:storage.k8s.io/v1:StorageClass")
    pcs = {
        r.inputs["metadata"]["name"]: r.inputs["value"]
        for r in staging.by_type("kubernetes:scheduling.k8s.io/v1:PriorityClass")
    }
    assert pcs == {"gpuforge-training-critical": 100000, "gpuforge-training": 10000, "gpuforge-preemptible": 1000}


def test_platform_objects_use_the_eks_provider(staging: Plan) -> None:
    providers = staging.by_type("pulumi:providers:kubernetes")
    assert [p.name for p in providers] == ["forge-staging-eks-k8s"]
    kubeconfig = providers[0].inputs["kubeconfig"]
    assert '"command": "aws"' in kubeconfig and '"get-token", "--cluster-name", "forge-staging-eks"' in kubeconfig


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


@pytest.fixture
def onprem_platform() -> GpuPlatform:
    """The same component on an on-premises cluster: a kubeconfig provider, InfiniBand, a vendor CSI."""
    pulumi.runtime.set_mocks(_Mocks(), preview=False)
    provider = k8s.Provider("onprem", kubeconfig="apiVersion: v1\nkind: Config\n")
    return GpuPlatform(
        "lab",
        GpuPlatformArgs(
            platform=Platform(gpu_driver="operator", teams={"vision": {"gpu_quota": {"H100": 16}}}),
            fabric="infiniband",
            pools=[
                GpuPool(
                    "H100",
                    nodes=4,
                    gpus_per_node=8,
                    cpus_per_node=224,
                    memory_mib_per_node=2 * 1024 * 1024,
                    fabric_devices_per_node=1,
                )
            ],
            parallel_fs_volume=ParallelFsVolume(
                name="lustre",
                driver="lustre.csi.vendor.example",
                volume_handle="lab01",
                volume_attributes={"mgs": "10.64.8.10@o2ib"},
                capacity_gib=1024,
            ),
        ),
        opts=pulumi.ResourceOptions(provider=provider),
    )


@pulumi.runtime.test
def test_same_component_on_prem_uses_network_operator(onprem_platform: GpuPlatform) -> pulumi.Output[Any]:
    assert onprem_platform.namespaces == {"vision": "vision"}
    registered: list[Any] = []
    for child in _children(onprem_platform):
        registered.append(child)
    kinds = {type(c).__name__ for c in registered}
    assert "Release" in kinds and "NetworkPolicy" in kinds
    release_names = [c for c in registered if isinstance(c, k8s.helm.v3.Release)]

    def check(values: list[Any]) -> None:
        names = set(values)
        assert "network-operator" in names and "aws-efa-device-plugin" not in names
        assert "aws-fsx-csi-driver" not in names  # the on-prem CSI is already installed

    return pulumi.Output.all(*[r.name for r in release_names]).apply(check)


def _children(component: pulumi.ComponentResource) -> list[Any]:
    return list(getattr(component, "_childResources", set()))


def test_each_team_claims_the_stacks_own_file_system(staging: Plan) -> None:
    """A static PersistentVolume per team naming the FSx file system Pulumi builds (id, DNS and mount names
    from its outputs), bound to the team's claim; nothing that provisions a new one."""
    (fs,) = staging.by_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    volumes = {r.inputs["metadata"]["name"]: r for r in staging.by_type("kubernetes:core/v1:PersistentVolume")}
    claims = by_name(staging, "kubernetes:core/v1:PersistentVolumeClaim")
    assert set(volumes) == {"fsx-lustre-llm-pretrain", "fsx-lustre-research"}
    for namespace in ("llm-pretrain", "research"):
        volume = volumes[f"fsx-lustre-{namespace}"]
        spec = volume.inputs["spec"]
        assert volume.dependencies["spec"] == [fs.urn]  # the handle and attributes are the file system's outputs
        assert spec["csi"] == {
            "driver": "fsx.csi.aws.com",
            "volumeHandle": "forge-staging-lustre-fs-id",
            "volumeAttributes": {"dnsname": "forge-staging-lustre-fs.fsx.mock.amazonaws.com", "mountname": "mockmnt"},
        }
        assert spec["capacity"] == {"storage": "4800Gi"} and spec["persistentVolumeReclaimPolicy"] == "Retain"
        assert spec["claimRef"] == {"namespace": namespace, "name": "fsx-lustre"} and spec["storageClassName"] == ""
        claim = claims[f"fsx-lustre@{namespace}"]["spec"]
        assert claim["volumeName"] == f"fsx-lustre-{namespace}" and claim["storageClassName"] == ""
        assert claim["accessModes"] == spec["accessModes"] == ["ReadWriteMany"]


def test_team_editors_cannot_change_the_platforms_policies(staging: Plan) -> None:
    (policy,) = staging.by_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    (binding,) = staging.by_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
    spec = policy.inputs["spec"]
    assert binding.inputs["spec"] == {"policyName": policy.inputs["metadata"]["name"], "validationActions": ["Deny"]}
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["namespaceSelector"] == {
        "matchExpressions": [{"key": "gpuforge.dev/team", "operator": "Exists"}]
    }
    guarded = {
        (g, r)
        for rule in spec["matchConstraints"]["resourceRules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert guarded == {
        ("networking.k8s.io", "networkpolicies"),
        ("", "resourcequotas"),
        ("", "limitranges"),
        ("kueue.x-k8s.io", "localqueues"),
    }
    assert all(
        rule["operations"] == ["CREATE", "UPDATE", "DELETE"] for rule in spec["matchConstraints"]["resourceRules"]
    )
    assert "'gpuforge:platform-admins'" in spec["validations"][0]["expression"]
    # The cluster admins' access entries (the deployer's among them) carry that group; the team editors' do not.
    groups = {
        r.name.removeprefix("forge-staging-eks-access-"): r.inputs.get("kubernetesGroups")
        for r in staging.by_type("aws:eks/accessEntry:AccessEntry")
    }
    assert groups == {
        "deployer": ["gpuforge:platform-admins"],
        "platform-admins": ["gpuforge:platform-admins"],
        "llm-engineers": None,
    }


def test_gpu_nodes_are_tainted_and_the_system_group_is_not(staging: Plan) -> None:
    taints = {
        r.inputs["labels"]["gpuforge.dev/node-group"]: r.inputs.get("taints")
        for r in staging.by_type("aws:eks/nodeGroup:NodeGroup")
    }
    assert taints == {
        "train": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
        "system": None,
    }


def _cel(expression: str, request: dict[str, Any]) -> bool:
    """A CEL expression of the policy evaluated on an admission request, with cel-python (the CEL spec's
    semantics; the API server's own evaluator is cel-go)."""
    import celpy

    env = celpy.Environment()
    return bool(env.program(env.compile(expression)).evaluate({"request": celpy.json_to_cel(request)}))


@pytest.mark.parametrize(
    ("who", "groups", "applies", "allowed"),
    [
        # an llm engineer (AmazonEKSEditPolicy on llm-pretrain) adding an allow-all NetworkPolicy: refused
        ("arn:aws:sts::111122223333:assumed-role/llm-engineers/alice", ["system:authenticated"], True, False),
        # the deployer running `pulumi up` (its access entry carries the platform-admin group): allowed
        (
            "arn:aws:sts::111122223333:assumed-role/deploy/ci",
            ["system:authenticated", "gpuforge:platform-admins"],
            True,
            True,
        ),
        # a site admin's kubeconfig (kubeadm's admin group): allowed
        ("kubernetes-admin", ["kubeadm:cluster-admins", "system:authenticated"], True, True),
        # the namespace controller cleaning up a deleted team namespace: not matched at all
        ("system:serviceaccount:kube-system:namespace-controller", ["system:serviceaccounts"], False, True),
        # Kueue maintaining a LocalQueue: not matched
        ("system:serviceaccount:kueue-system:kueue-controller-manager", ["system:serviceaccounts"], False, True),
        # a team's own service account: matched and refused
        ("system:serviceaccount:llm-pretrain:training", ["system:serviceaccounts"], True, False),
    ],
)
def test_admission_policy_cel_decides_who_may_change_team_objects(
    staging: Plan, who: str, groups: list[str], applies: bool, allowed: bool
) -> None:
    (policy,) = staging.by_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    spec = policy.inputs["spec"]
    request = {"userInfo": {"username": who, "groups": groups}, "operation": "CREATE"}
    matched = all(_cel(c["expression"], request) for c in spec["matchConditions"])
    assert matched is applies
    if matched:
        assert all(_cel(v["expression"], request) for v in spec["validations"]) is allowed
