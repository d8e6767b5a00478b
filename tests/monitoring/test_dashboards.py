"""Dashboards as code: generated from monitoring/dashboards.yaml, well formed, every query parses."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import yaml

from gpuforge.render.dashboards import (
    PROVISIONED_DATASOURCE_UID,
    DashboardView,
    dashboards,
    panel_queries,
    provisioning,
)
from tests.support import skip_or_fail

EXPECTED = {"cluster", "node", "gpu", "fabric", "storage", "jobs"}


def test_one_dashboard_per_view_each_well_formed() -> None:
    boards = {name: json.loads(text) for name, text in dashboards().items()}
    assert {b["uid"].removeprefix("gpuforge-") for b in boards.values()} == EXPECTED
    for name, board in boards.items():
        assert board["title"].startswith("gpuforge / "), name
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), f"{name}: panel ids repeat"
        cells = set()
        for panel in board["panels"]:
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24, f"{name}/{panel['title']}: wider than the grid"
            assert (grid["x"], grid["y"]) not in cells, f"{name}/{panel['title']}: overlaps"
            cells.add((grid["x"], grid["y"]))
            assert panel["datasource"] == DashboardView().datasource and panel["targets"]
            assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
        used = {v for p in board["panels"] for t in p["targets"] for v in ("$node",) if v in t["expr"]}
        declared = {f"${v['name']}" for v in board["templating"]["list"]}
        assert used <= declared, f"{name}: a query uses a variable the dashboard does not declare"


def test_every_panel_query_parses_with_promtool(tmp_path: Path) -> None:
    """promtool parses expressions through a rules file: each query becomes a recording rule."""
    promtool = shutil.which("promtool")
    if promtool is None:
        skip_or_fail("promtool is not installed (Debian: prometheus)")
    assert promtool is not None
    queries = panel_queries()
    rules = {
        "groups": [
            {
                "name": "dashboards",
                "rules": [{"record": f"dashboard:query{i}", "expr": expr} for i, (_, _, expr) in enumerate(queries)],
            }
        ]
    }
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump(rules))
    run = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"SUCCESS: {len(queries)} rules found" in run.stdout
    # and a broken query would be caught
    path.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "x:y", "expr": "rate(up[5m]"}]}]}))
    assert subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, timeout=60).returncode != 0


def test_provisioning_points_grafana_at_the_dashboards_and_prometheus() -> None:
    files = provisioning("/var/lib/grafana/dashboards/gpuforge", "http://127.0.0.1:9090")
    providers = yaml.safe_load(files["dashboards/gpuforge.yaml"])["providers"]
    assert providers[0]["options"]["path"] == "/var/lib/grafana/dashboards/gpuforge"
    source = yaml.safe_load(files["datasources/gpuforge.yaml"])["datasources"][0]
    assert (source["uid"], source["url"]) == (PROVISIONED_DATASOURCE_UID, "http://127.0.0.1:9090")
