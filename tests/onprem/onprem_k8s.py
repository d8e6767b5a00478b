"""Kubernetes objects of a plan, validated offline as tests/k8s does: built-in kinds against the
Kubernetes OpenAPI schema (kubernetes-validate), CRD kinds against tests/fixtures/k8s/crd-subsets.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

from gpuforge.plan.model import Plan

ROOT = Path(__file__).resolve().parents[2]
CRD_SUBSETS = json.loads((ROOT / "tests" / "fixtures" / "k8s" / "crd-subsets.json").read_text())
CRD_GROUPS = ("kueue.x-k8s.io", "monitoring.coreos.com", "mellanox.com")


def k8s_manifests(plan: Plan) -> list[dict[str, Any]]:
    """Each Kubernetes object as the API server receives it; a NodePatch is a partial Node."""
    out = []
    for r in plan.resources:
        if not (r.type.startswith("kubernetes:") and r.custom) or "helm.sh" in r.type:
            continue
        _, group_version, kind = r.type.split(":")
        body = {k: v for k, v in r.inputs.items() if k not in ("apiVersion", "kind")}
        out.append({"apiVersion": group_version.removeprefix("core/"), "kind": kind.removesuffix("Patch"), **body})
    return out


def validate_all(plan: Plan, version: str = "1.33.0") -> dict[str, int]:
    kinds: dict[str, int] = {}
    for obj in k8s_manifests(plan):
        if obj["apiVersion"].split("/")[0] in CRD_GROUPS:
            schema = {**CRD_SUBSETS[f"{obj['apiVersion']}/{obj['kind']}"], "definitions": CRD_SUBSETS["definitions"]}
            jsonschema.validate(obj, schema)
        else:
            kubernetes_validate.validate(obj, version, strict=True)
        kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
    return kinds
