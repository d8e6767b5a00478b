"""Every Kubernetes object in the staging plan, as the manifest the API server would receive,
validated offline with strict field validation: built-in kinds against the Kubernetes OpenAPI
schema of the pinned version (kubernetes-validate ships them), custom resources against the
upstream CRDs, verbatim in tests/fixtures/k8s/crds (tests/k8s_objects.py)."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from gpuforge.catalog.charts import load_charts
from gpuforge.plan.model import Plan
from tests.k8s_objects import crd_schemas, is_crd, manifests, validate

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "k8s"


def test_every_builtin_object_passes_the_kubernetes_schema(staging: Plan) -> None:
    version = staging.resolved.spec.kubernetes.version if staging.resolved.spec.kubernetes else ""
    builtin = [m for m in manifests(staging) if not is_crd(m)]
    kinds = {m["kind"] for m in builtin}
    # Secret: the alert receivers' secrets beside the AlertmanagerConfig (its stringData is [secret] in a plan);
    # ConfigMap: the Grafana dashboards
    # PersistentVolume(Claim): the stack's FSx per team; ValidatingAdmissionPolicy(Binding): team objects guarded
    kinds_expected = {"Namespace", "NetworkPolicy", "PriorityClass", "ServiceAccount", "Secret"}
    kinds_expected |= {"PersistentVolume", "PersistentVolumeClaim"}
    kinds_expected |= {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    # CronJob, its ServiceAccount, ClusterRole(Binding): the Capacity Block window opening and draining the queues
    kinds_expected |= {"CronJob", "ClusterRole", "ClusterRoleBinding"}
    assert kinds == kinds_expected | {"ConfigMap"}
    for obj in builtin:
        kubernetes_validate.validate(obj, f"{version}.0", strict=True)


def test_every_crd_object_passes_its_upstream_crd(staging: Plan) -> None:
    crds = [m for m in manifests(staging) if m["apiVersion"].split("/")[0] not in ("v1",) and "." in m["apiVersion"]]
    custom = [m for m in crds if not m["apiVersion"].endswith(".k8s.io/v1") or "x-k8s.io" in m["apiVersion"]]
    checked = 0
    for obj in custom:
        assert is_crd(obj), f"no upstream CRD in tests/fixtures/k8s/crds for {obj['apiVersion']}/{obj['kind']}"
        validate(obj)
        checked += 1
    # 2 ClusterQueues, 2 LocalQueues, 1 ResourceFlavor, 1 ServiceMonitor (monitoring's; the platform's is off),
    # 1 AlertmanagerConfig, 1 PrometheusRule
    assert checked == 2 + 2 + 1 + 1 + 1 + 1


def test_the_crds_are_the_pinned_charts_versions() -> None:
    """The CRD files match what the catalog pins: Kueue's API version, every served kind present."""
    schemas = crd_schemas()
    api = load_charts().chart("kueue").api_version
    for kind in (
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "AdmissionCheck",
        "MultiKueueCluster",
        "MultiKueueConfig",
    ):
        assert f"{api}/{kind}" in schemas
    assert "monitoring.coreos.com/v1/ServiceMonitor" in schemas
    assert "monitoring.coreos.com/v1/PrometheusRule" in schemas
    assert "monitoring.coreos.com/v1alpha1/AlertmanagerConfig" in schemas
    assert "mellanox.com/v1alpha1/NicClusterPolicy" in schemas


def test_a_wrong_object_fails_validation() -> None:
    """The validators bite: a misspelt field fails both, a wrong enum fails the CRD."""
    bad_policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "x", "namespace": "y"},
        "spec": {"podSelector": {}, "policyType": ["Ingress"]},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad_policy, "1.33.0", strict=True)
    for spec in ({"queueingStrategy": "FIFO"}, {"cohorts": "x"}):
        bad_queue = {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "x"},
            "spec": spec,
        }
        with pytest.raises(jsonschema.ValidationError):
            validate(bad_queue)


def test_kueue_default_frameworks_match_the_chart() -> None:
    """charts.yaml's copy of the chart's default frameworks is the chart's (values.yaml at v0.14.4, verbatim)."""
    chart = yaml.safe_load((FIXTURES / "charts" / "kueue-v0.14.4-values.yaml").read_text())
    default = yaml.safe_load(chart["managerConfig"]["controllerManagerConfigYaml"])
    assert tuple(default["integrations"]["frameworks"]) == load_charts().chart("kueue").default_frameworks
    assert load_charts().chart("kueue").version == "0.14.4"
