"""Kubernetes objects of a plan, validated offline as the API server would with strict field
validation: built-in kinds against the Kubernetes OpenAPI schema of the pinned version
(kubernetes-validate ships it), custom resources against the upstream CRDs' openAPIV3Schema,
verbatim in tests/fixtures/k8s/crds and, for those gpuforge installs itself, gpuforge/assets/crds (each
folder's SOURCES.md names repository, path and tag of each)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from gpuforge.assets import CRDS_DIR
from gpuforge.plan.engine import SECRET
from gpuforge.plan.model import Plan

CRDS = Path(__file__).resolve().parent / "fixtures" / "k8s" / "crds"


class CrdLoader(yaml.SafeLoader):
    """YAML 1.1 reads a bare `=` (the AlertmanagerConfig CRD's matchType enum) as the `value` tag, which
    PyYAML has no constructor for; Kubernetes' YAML 1.2 parser reads a string."""


CrdLoader.add_constructor("tag:yaml.org,2002:value", CrdLoader.construct_yaml_str)


@cache
def crd_schemas() -> dict[str, dict[str, Any]]:
    """'group/version/Kind' -> the served version's openAPIV3Schema, strict: unknown fields rejected
    (as `kubectl apply --validate=strict` / fieldValidation=Strict does), except where the CRD
    preserves unknown fields."""
    out: dict[str, dict[str, Any]] = {}
    for path in [*sorted(CRDS.glob("*.yaml")), *sorted(CRDS_DIR.glob("*.yaml"))]:
        crd = yaml.load(path.read_text(), CrdLoader)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                out[f"{group}/{version['name']}/{kind}"] = _strict(version["schema"]["openAPIV3Schema"])
    return out


def _strict(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    pattern = out.get("pattern")
    if isinstance(pattern, str) and "(?i)" in pattern:
        # RE2 (the API server's) takes inline flags anywhere; Python's re only at the start. Every such
        # pattern upstream is case-insensitive as a whole (`^(?i)(abort|warn)?$`, month and weekday names).
        out["pattern"] = "(?i)" + pattern.replace("(?i)", "")
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def is_crd(obj: dict[str, Any]) -> bool:
    return f"{obj['apiVersion']}/{obj['kind']}" in crd_schemas()


def manifests(plan: Plan) -> list[dict[str, Any]]:
    """Each Kubernetes object as the API server receives it; a NodePatch is a partial Node."""
    out = []
    for r in plan.resources:
        if not (r.type.startswith("kubernetes:") and r.custom) or "helm.sh" in r.type:
            continue
        _, group_version, kind = r.type.split(":")
        # A secret property is redacted in the plan ("[secret]"): its value is not the plan's to check.
        body = {k: v for k, v in r.inputs.items() if k not in ("apiVersion", "kind") and v != SECRET}
        out.append({"apiVersion": group_version.removeprefix("core/"), "kind": kind.removesuffix("Patch"), **body})
    return out


def validate(obj: dict[str, Any], version: str = "1.33.0") -> None:
    if is_crd(obj):
        jsonschema.validate(obj, crd_schemas()[f"{obj['apiVersion']}/{obj['kind']}"])
    else:
        kubernetes_validate.validate(obj, version, strict=True)


def validate_all(plan: Plan, version: str = "1.33.0") -> dict[str, int]:
    """Validate every object of the plan; kind -> count."""
    kinds: dict[str, int] = {}
    for obj in manifests(plan):
        validate(obj, version)
        kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
    return kinds
