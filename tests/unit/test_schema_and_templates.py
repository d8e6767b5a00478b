"""Committed artefacts stay in step with their sources (the examples' cloud-init goldens: tests/examples/)."""

from __future__ import annotations

from gpuforge.plan.schema import render_schema
from tests.support import REPO as PROJECT_ROOT


def test_committed_schema_is_current() -> None:
    committed = (PROJECT_ROOT / "schemas" / "cluster.schema.json").read_text()
    assert committed == render_schema(), "schemas/cluster.schema.json is stale: run `make schema`"
