"""Committed artefacts stay in step with their sources."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import yaml

from components.assets import SOURCE_ROOT as PROJECT_ROOT
from components.spec.loader import parse_yaml
from components.spec.schema import render_schema
from gpuforge.plan.model import Plan

GOLDEN = Path(__file__).parent.parent / "golden"


def test_committed_schema_is_current() -> None:
    committed = (PROJECT_ROOT / "schemas" / "cluster.schema.json").read_text()
    assert committed == render_schema(), "schemas/cluster.schema.json is stale: run `make schema`"


def test_every_stack_points_at_the_schema_and_validates() -> None:
    import jsonschema

    schema = json.loads(render_schema())
    stacks = sorted((PROJECT_ROOT / "stacks").glob("Pulumi.*.yaml"))
    assert stacks
    for stack in stacks:
        text = stack.read_text()
        assert text.startswith("# yaml-language-server: $schema=../schemas/cluster.schema.json"), stack.name
        # Read as Pulumi and editors read it (YAML 1.2: a timestamp such as a Capacity Block's end is text).
        jsonschema.validate(parse_yaml(text, stack.name), schema)


def test_node_user_data_matches_golden(dev_plan: Plan) -> None:
    (lt,) = [r for r in dev_plan.resources if r.name == "forge-dev-train-lt"]
    rendered = base64.b64decode(lt.inputs["userData"]).decode()
    golden = GOLDEN / "cloud-init" / "dev-train.yaml"
    assert rendered == golden.read_text(), f"user data changed; review and update {golden}"
    document = yaml.safe_load(rendered)
    node = json.loads(document["write_files"][0]["content"])
    assert (node["instanceType"], node["efaInterfacesPerNode"]) == ("g5.12xlarge", 1)
    assert document["mounts"][0][0] == "forge-dev-lustre-fs.fsx.mock.amazonaws.com@tcp:/mockmnt"
