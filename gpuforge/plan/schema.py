"""JSON Schema of a stack file, generated from the spec models (committed under schemas/)."""

from __future__ import annotations

import json
from typing import Any

from gpuforge.policy.settings import policy_json_schema
from gpuforge.spec.models import ClusterSpec

SCHEMA_ID = "https://gpuforge.dev/schemas/cluster.schema.json"


def stack_file_schema() -> dict[str, Any]:
    """The schema editors apply to stacks/Pulumi.<env>.yaml: the cluster spec sits under
    config: gpuforge:cluster:, beside other providers' config keys."""
    cluster = ClusterSpec.model_json_schema(ref_template="#/$defs/{model}")
    defs = cluster.pop("$defs", {})
    defs["ClusterSpec"] = cluster
    policy, policy_defs = policy_json_schema()
    defs.update(policy_defs)
    defs["PolicySettings"] = policy
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "gpuforge stack file",
        "description": "A Pulumi stack file whose gpuforge:cluster key holds the cluster spec.",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": {
                    "gpuforge:cluster": {"$ref": "#/$defs/ClusterSpec"},
                    "gpuforge:policy": {"$ref": "#/$defs/PolicySettings"},
                },
                "required": ["gpuforge:cluster"],
            },
            "encryptionsalt": {"type": "string"},
            "secretsprovider": {"type": "string"},
        },
        "required": ["config"],
        "$defs": defs,
    }


def render_schema() -> str:
    return json.dumps(stack_file_schema(), indent=2, sort_keys=True) + "\n"
