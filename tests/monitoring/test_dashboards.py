"""Dashboards as code: generated from gpuforge/assets/monitoring/dashboards.yaml, well formed, every query parses."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpuforge.plan.stacks import load_stack
from gpuforge.render.dashboards import (
    PROVISIONED_DATASOURCE_UID,
    DashboardView,
    dashboards,
    panel_queries,
    provisioning,
)
from gpuforge.render.monitoring import dashboard_view
from gpuforge.spec import resolve
from tests.support import skip_or_fail

EXPECTED = {"cluster", "node", "gpu", "fabric", "storage", "jobs", "teams"}


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


# --- Grafana's dashboard schema ------------------------------------------------------------------


def schema_problems(board: dict[str, object]) -> list[str]:
    """The dashboard read through the Grafana Foundation SDK's models, which are generated from Grafana's
    dashboard schema (its panel plugins' options and the Prometheus query included): every field the schema
    does not know is dropped on the way, every scalar must have the schema's type."""
    import enum
    import typing

    from grafana_foundation_sdk.cog import plugins
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import Dashboard

    plugins.register_default_plugins()
    model = Dashboard.from_json(board)
    problems: list[str] = []

    def types_of(obj: object, path: str) -> None:
        if isinstance(obj, list):
            for i, item in enumerate(obj):
                types_of(item, f"{path}[{i}]")
            return
        if not hasattr(obj, "__dict__") or isinstance(obj, enum.Enum):
            return
        hints = typing.get_type_hints(type(obj))
        for name, value in vars(obj).items():
            hint = hints.get(name)
            allowed = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
            allowed = tuple(a for a in allowed if a is not type(None))
            # Checked where the schema allows scalars only (a list, a mapping or a model is walked instead).
            scalars = allowed if all(a in (str, int, float, bool) for a in allowed) else ()
            if float in scalars:
                scalars = (*scalars, int)  # a JSON number
            if scalars and value is not None and not isinstance(value, (*scalars, enum.Enum)):
                problems.append(f"{path}.{name}: {value!r} is not {' or '.join(a.__name__ for a in scalars)}")
            types_of(value, f"{path}.{name}")

    types_of(model, "dashboard")
    again = json.loads(json.dumps(model, cls=JSONEncoder))

    def dropped(ours: object, theirs: object, path: str) -> None:
        if isinstance(ours, dict):
            for key, value in ours.items():
                if not isinstance(theirs, dict) or key not in theirs:
                    problems.append(f"{path}.{key}: not in Grafana's dashboard schema")
                else:
                    dropped(value, theirs[key], f"{path}.{key}")
        elif isinstance(ours, list) and isinstance(theirs, list):
            for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
                dropped(a, b, f"{path}[{i}]")

    dropped(board, again, "dashboard")
    return problems


@pytest.mark.parametrize("stack", ["prod", "onprem-lab", "staging"])
def test_each_stacks_dashboards_pass_grafanas_schema(stack: str) -> None:
    boards = [json.loads(t) for t in dashboards(dashboard_view(resolve(load_stack(stack).cluster))).values()]
    assert boards
    problems = [f"{b['uid']}: {p}" for b in boards for p in schema_problems(b)]
    assert not problems, "\n".join(problems)


def test_the_schema_check_catches_an_unknown_field_and_a_wrong_type() -> None:
    board = json.loads(dashboards()["gpuforge-gpu.json"])
    board["panels"][0]["gridPos"]["w"] = "half"
    board["panels"][0]["targets"][0]["legend"] = "{{gpu}}"
    problems = schema_problems(board)
    assert any("gridPos.w: 'half' is not int" in p or "grid_pos.w: 'half' is not int" in p for p in problems)
    assert "dashboard.panels[0].targets[0].legend: not in Grafana's dashboard schema" in problems
