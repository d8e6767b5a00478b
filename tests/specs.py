"""Small, typed inputs for unit tests, so a test states the spec it depends on instead of borrowing a shipped
example stack (tests/shipped_stacks.py keeps those for the examples' own tests).

    cluster = minimal_aws_cluster(node_groups={"train": {"count": 4}})  # or minimal_aws_cluster_with_login
    plan = planned_cluster(tmp_path, cluster)

Overrides merge into the base: a mapping merges key by key, any other value replaces, None removes the key.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from gpuforge.plan.engine import plan_stack
from gpuforge.plan.model import Plan
from gpuforge.spec.config_keys import CLUSTER_KEY

Spec = dict[str, Any]


def merged(base: Spec, overrides: Spec) -> Spec:
    """A deep copy of base with overrides merged in (mappings key by key, None removes a key)."""
    result = copy.deepcopy(base)
    for key, value in overrides.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def minimal_aws_cluster(**overrides: Any) -> Spec:
    """The smallest AWS cluster that validates and plans: one on-demand GPU group (g5.12xlarge, EFA) in one
    availability zone, registered with a Slurm controller, one partition."""
    base: Spec = {
        "name": "unit",
        "environment": "dev",
        "placement": {"kind": "aws", "region": "us-east-1"},
        "network": {"cidr": "10.30.0.0/16", "availability_zones": ["us-east-1a", "us-east-1b"], "nat": "single"},
        "node_groups": {
            "train": {
                "instance_type": "g5.12xlarge",
                "count": 1,
                "fabric": "efa",
                "availability_zone": "us-east-1a",
                "capacity": {"type": "on_demand"},
                "orchestrator": "slurm",
            },
        },
        "scheduler": {
            "kind": "slurm",
            "controller": {"instance_type": "m7i.xlarge"},
            "partitions": {"gpu": {"node_groups": ["train"], "default": True}},
        },
    }
    return merged(base, overrides)


def minimal_aws_cluster_with_login(**overrides: Any) -> Spec:
    """minimal_aws_cluster plus a login node (one m7i.xlarge), Slurm's login group."""
    login = {"instance_type": "m7i.xlarge", "count": 1, "role": "login", "orchestrator": "slurm"}
    with_login = minimal_aws_cluster(node_groups={"login": login}, scheduler={"login": {"node_groups": ["login"]}})
    return merged(with_login, overrides)


def stack_document(cluster: Spec, **config: Any) -> Spec:
    """A stack file's document holding the cluster (and any other config keys, e.g. policy settings)."""
    return {"config": {CLUSTER_KEY: cluster, **config}}


def write_stack(directory: Path, cluster: Spec, name: str = "unit", **config: Any) -> Path:
    """The cluster written as directory/Pulumi.<name>.yaml: planned with this checkout's program."""
    path = directory / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(stack_document(cluster, **config), sort_keys=False), encoding="utf-8")
    return path


def planned_cluster(directory: Path, cluster: Spec, name: str = "unit", **config: Any) -> Plan:
    """The cluster's offline plan (its stack file written under directory)."""
    return plan_stack(write_stack(directory, cluster, name, **config))
