"""Every Kubernetes object in the staging plan, as the manifest the API server would receive,
validated offline: built-in kinds against the Kubernetes OpenAPI schema of the pinned version
(kubernetes-validate ships them), CRD kinds against the CRD fields transcribed in
tests/fixtures/k8s/crd-subsets.json, Helm values against a chart's values.schema.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from gpuforge.plan.model import Plan

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "k8s"
CRD_SUBSETS = json.loads((FIXTURES / "crd-subsets.json").read_text())
CRD_GROUPS = ("kueue.x-k8s.io", "monitoring.coreos.com", "mellanox.com")


def is_crd(obj: dict[str, Any]) -> bool:
    return obj["apiVersion"].split("/")[0] in CRD_GROUPS


def manifest(type_: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """kubernetes:networking.k8s.io/v1:NetworkPolicy + inputs -> the object's manifest."""
    _, group_version, kind = type_.split(":")
    api_version = group_version.removeprefix("core/")
    body = {k: v for k, v in inputs.items() if k not in ("apiVersion", "kind")}
    return {"apiVersion": api_version, "kind": kind, **body}


def objects(plan: Plan) -> list[dict[str, Any]]:
    return [
        manifest(r.type, r.inputs)
        for r in plan.resources
        if r.type.startswith("kubernetes:") and r.custom and "helm.sh" not in r.type
    ]


def test_every_builtin_object_passes_the_kubernetes_schema(staging: Plan) -> None:
    version = staging.resolved.spec.kubernetes.version if staging.resolved.spec.kubernetes else ""
    builtin = [m for m in objects(staging) if not is_crd(m)]
    kinds = {m["kind"] for m in builtin}
    assert kinds == {"Namespace", "NetworkPolicy", "StorageClass", "PriorityClass", "ServiceAccount"}
    for obj in builtin:
        kubernetes_validate.validate(obj, f"{version}.0", strict=True)


def test_every_crd_object_passes_its_crd_fields(staging: Plan) -> None:
    checked = 0
    for obj in filter(is_crd, objects(staging)):
        schema = {**CRD_SUBSETS[f"{obj['apiVersion']}/{obj['kind']}"], "definitions": CRD_SUBSETS["definitions"]}
        jsonschema.validate(obj, schema)
        checked += 1
    assert checked == 2 + 2 + 1 + 1  # 2 ClusterQueues, 2 LocalQueues, 1 ResourceFlavor, 1 ServiceMonitor


def test_a_wrong_object_fails_validation() -> None:
    """The validators bite: a misspelt field fails both."""
    bad_policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "x", "namespace": "y"},
        "spec": {"podSelector": {}, "policyType": ["Ingress"]},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad_policy, "1.33.0", strict=True)
    bad_queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "x"},
        "spec": {"queueingStrategy": "FIFO"},
    }
    schema = {**CRD_SUBSETS["kueue.x-k8s.io/v1beta1/ClusterQueue"], "definitions": CRD_SUBSETS["definitions"]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad_queue, schema)


def test_kueue_values_match_the_charts_values_schema(staging: Plan) -> None:
    schema = json.loads((FIXTURES / "kueue-values.schema.json").read_text())
    (kueue,) = [r for r in staging.by_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kueue"]
    jsonschema.validate(kueue.inputs["values"], schema)
    assert "waitForPodsReady:" in kueue.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"managerConfig": {"controllerManagerConfigYaml": 1}}, schema)
