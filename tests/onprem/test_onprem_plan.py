"""The onprem-lab plan (a Slurm cluster): components per rack and host carrying the inventory, the site's
Slurm control plane, power per rack and site, the summary. The same site as a Kubernetes cluster
(tests/fixtures/stacks/Pulumi.onprem-k8s.yaml, fixture lab_k8s): node labels and taints per host, the
GPU platform on the site's cluster, every Kubernetes object validated like tests/k8s does."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from onprem_k8s import validate_all

from gpuforge.plan.engine import plan_stack
from gpuforge.plan.model import Plan
from gpuforge.review.report import markdown_plan

ROOT = Path(__file__).resolve().parents[2]


def test_placement_and_summary(lab: Plan) -> None:
    assert lab.placement == "onprem" and lab.outputs["cluster"]["placement"] == "onprem"
    s = lab.summary
    assert (s.nodes, s.gpus, s.efa_interfaces) == (8, 64, 0)
    # Hosts, 8 leaves and 4 spines at 1.7 kW, and the declared equipment (UFM, management, storage).
    assert s.power_kw == pytest.approx(1.35 * (8 * 10.2 + 12 * 1.7 + 10.5), abs=0.01)
    assert s.power_budget_kw == 160
    assert not [r for r in lab.resources if r.type.startswith("aws:") or r.type.startswith("gpuforge:aws:")]


def test_rack_and_host_components_carry_the_inventory(lab: Plan) -> None:
    racks = {r.inputs["rack"]: r for r in lab.by_type("gpuforge:onprem:Rack")}
    hosts = {r.inputs["host"]: r for r in lab.by_type("gpuforge:onprem:Host")}
    site = lab.by_type("gpuforge:onprem:Site")[0]
    assert set(racks) == {"r01", "r02"} and len(hosts) == 8
    assert racks["r01"].inputs["loadKw"] == pytest.approx(40.8)
    assert racks["r01"].inputs["feeds"] == [{"name": f, "side": f, "capacityKw": 57.5} for f in ("a", "b", "c")]
    # Six PSUs per DGX H100 (4+2), two on each feed.
    assert racks["r01"].inputs["devices"][0] == {
        "name": "dgx-a01",
        "loadKw": 10.2,
        "psusByFeed": {"a": 2, "b": 2, "c": 2},
        "psusRequired": 4,
    }
    a01 = hosts["dgx-a01"]
    assert a01.parent == racks["r01"].urn and racks["r01"].parent == site.urn
    assert a01.inputs["managementIp"] == "10.64.1.11" and a01.inputs["bmcAddress"] == "10.64.0.11"
    assert a01.inputs["uPosition"] == 3 and a01.inputs["uHeight"] == 8
    # The catalog's DGX H100 compute ports in GPU order (the stack lists none).
    dgx_h100 = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    assert a01.inputs["hcas"] == {str(i): hca for i, hca in enumerate(dgx_h100)}
    assert a01.outputs["inventory"]["scalableUnit"] == "su1"
    assert site.inputs["fabric"]["leavesPerScalableUnit"] == 8 and site.inputs["fabric"]["sharp"] is False


def test_the_lab_is_a_slurm_cluster_on_its_service_hosts(lab: Plan) -> None:
    """The controller, login host, accounting and /home in the plan, where the rendered files say; no
    Kubernetes object on a site whose hosts run Slurm."""
    (slurm,) = lab.by_type("gpuforge:onprem:SlurmControlPlane")
    assert slurm.inputs["controllers"] == 1 and slurm.inputs["controllerHosts"] == {"slurm-01": "10.64.1.6"}
    assert slurm.inputs["loginHosts"] == {"login-01": "10.64.1.7"}
    assert slurm.inputs["database"] == {"kind": "controller", "host": "slurm-01"}
    assert slurm.inputs["home"] == "nfs 10.64.8.20:/export/home"
    assert slurm.inputs["partitions"] == {"batch": ["train"], "debug": ["train"]}
    assert slurm.inputs["directory"] == "ldaps://ldap.lab-east.example.internal"
    assert lab.outputs["slurm"] == slurm.inputs and lab.outputs["nodeGroups"]["train"]["orchestrator"] == "slurm"
    assert not [r for r in lab.resources if r.type.startswith("kubernetes:") or r.type == "pulumi:providers:kubernetes"]


def test_node_labels_and_taints_per_host(lab_k8s: Plan) -> None:
    patches = {r.inputs["metadata"]["name"]: r.inputs for r in lab_k8s.by_type("kubernetes:core/v1:NodePatch")}
    assert len(patches) == 8
    labels = patches["dgx-b03"]["metadata"]["labels"]
    assert labels["gpuforge.dev/rack"] == "r02" and labels["gpuforge.dev/scalable-unit"] == "su1"
    assert labels["gpuforge.dev/gpu-model"] == "H100" and labels["gpuforge.dev/node-group"] == "train"
    assert labels["gpuforge.dev/rails"] == "8" and labels["gpuforge.dev/rail-3"] == "mlx5_5"
    assert labels["gpuforge.dev/location"] == "onprem"
    # Taints come with registration (the kubelet drop-in), never through the patch (an atomic list).
    assert "spec" not in patches["dgx-b03"]
    (host,) = [h for h in lab_k8s.by_type("gpuforge:onprem:Host") if h.inputs["host"] == "dgx-b03"]
    kubelet = host.inputs["kubeletConfig"]
    assert kubelet["kind"] == "KubeletConfiguration"
    assert kubelet["registerWithTaints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert kubelet["kubeReserved"] == {"cpu": "630m", "memory": "1465Mi"} and kubelet["maxPods"] == 110


def test_same_k8s_platform_runs_on_the_site_provider(lab_k8s: Plan) -> None:
    platform = lab_k8s.by_type("gpuforge:k8s:GpuPlatform")
    assert len(platform) == 1 and platform[0].inputs["fabric"] == "infiniband"
    provider = [r for r in lab_k8s.resources if r.type == "pulumi:providers:kubernetes"]
    assert len(provider) == 1
    cqs = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]
        for r in lab_k8s.by_type("kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue")
    }
    gpus = {f["name"]: f["resources"] for f in cqs["vision"]["resourceGroups"][0]["flavors"]}["gpu-h100"]
    assert {"name": "nvidia.com/gpu", "nominalQuota": 32} in gpus
    # Whole DGX H100 nodes from the catalog, as allocatable: 224 threads less 630m kube-reserved.
    assert {"name": "cpu", "nominalQuota": f"{4 * (224_000 - 630)}m"} in gpus


def test_team_service_accounts_without_aws_annotation(lab_k8s: Plan) -> None:
    accounts = {
        r.inputs["metadata"]["namespace"]: r.inputs for r in lab_k8s.by_type("kubernetes:core/v1:ServiceAccount")
    }
    assert set(accounts) == set(lab_k8s.outputs["kubernetes"]["teamNamespaces"].values()) == {"llm", "vision"}
    for sa in accounts.values():
        assert sa["metadata"]["name"] == "training"
        assert "annotations" not in sa["metadata"]  # no IRSA on a site: the placement passes none
    assert not lab_k8s.by_type("gpuforge:aws:ServiceAccountRoles")


def test_every_kubernetes_object_is_valid(lab_k8s: Plan) -> None:
    kinds = validate_all(lab_k8s)
    assert kinds["Node"] == 8 and kinds["ClusterQueue"] == 2 and kinds["NicClusterPolicy"] == 1
    assert kinds["ServiceAccount"] == 2


def test_power_per_rack_and_site_in_the_report(lab: Plan) -> None:
    assert lab.policy is not None
    power = lab.policy.power
    assert power.racks["r01"]["without a"].limit_kw == pytest.approx(57.5 * 0.8)
    assert power.racks["r01"]["without a"].load_kw == pytest.approx(40.8 / 2)
    assert power.racks["r01"]["budget"].limit_kw == 50
    assert power.sites["lab-east"].budget.load_kw == pytest.approx(1.35 * 112.5)
    assert not lab.policy.findings
    text = markdown_plan(lab)
    assert "(onprem)" in text and "site lab-east budget: 151.9 kW of 160.0 kW" in text and "rack r02 without b" in text
    assert "leaf oversubscription | 32:32 host:uplink ports (1.00:1, non-blocking)" in text


def _imports(package: Path) -> set[str]:
    names: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
    return names


def test_placements_never_import_each_other() -> None:
    infra = ROOT / "gpuforge" / "infra"
    assert not {m for m in _imports(infra / "aws") if m.startswith(("gpuforge.infra.onprem", "gpuforge.infra.hybrid"))}
    assert not {m for m in _imports(infra / "onprem") if m.startswith(("gpuforge.infra.aws", "gpuforge.infra.hybrid"))}
    hybrid = _imports(infra / "hybrid")
    assert "gpuforge.infra.aws" in hybrid and "gpuforge.infra.onprem" in hybrid  # hybrid composes both


def _lab_variant(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.onprem-lab.yaml").read_text())
    edit(document["config"]["gpuforge:cluster"])
    path = tmp_path / "Pulumi.onprem-lab-variant.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_prod_site_needs_a_backup_controller_on_shared_state(tmp_path: Path) -> None:
    """redundancy-slurm-backup-controller reads the site's control plane as it reads AWS's: one controller
    host in prod is refused; a second host with the state directory on a site mount passes."""

    def prod(cluster: dict[str, Any]) -> None:
        cluster["environment"] = "prod"

    def prod_with_backup(cluster: dict[str, Any]) -> None:
        prod(cluster)
        controller = cluster["scheduler"]["controller"]
        controller["hosts"]["slurm-02"] = "10.64.1.8"
        # Its own export: the users' /home is refused as the state directory (scheduler_checks.py).
        cluster["site"]["storage"]["mounts"]["slurm-state"] = {
            "kind": "nfs", "server": "10.64.8.20", "export": "/export/slurm-state", "mount_point": "/srv/slurm-state"}
        controller["state_mount"] = "slurm-state"

    single = plan_stack(_lab_variant(tmp_path, prod))
    assert single.policy is not None
    (finding,) = [f for f in single.policy.findings if f.rule == "redundancy-slurm-backup-controller"]
    assert finding.level == "mandatory" and finding.urn.endswith("::forge-lab-lab-east-slurm")
    paired = plan_stack(_lab_variant(tmp_path, prod_with_backup))
    assert paired.policy is not None
    assert not [f for f in paired.policy.findings if f.rule.startswith("redundancy-slurm")]
    (slurm,) = paired.by_type("gpuforge:onprem:SlurmControlPlane")
    assert slurm.inputs["controllers"] == 2 and slurm.inputs["stateSaveLocation"] == "site mount slurm-state"
