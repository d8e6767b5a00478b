"""Grafana dashboards from one definition (gpuforge/assets/monitoring/dashboards.yaml): cluster, node, GPU, fabric,
storage, jobs. Every dashboard uses the same layout (two panels a row), the same Prometheus data source
(provisioned with uid `gpuforge-prometheus`) and the same variables, so none is hand-edited JSON.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from gpuforge.assets import MONITORING_DIR

DATASOURCE = {"type": "prometheus", "uid": "gpuforge-prometheus"}
PANEL_WIDTH, PANEL_HEIGHT = 12, 8  # Grafana's grid is 24 columns wide
# Grafana's own variables, replaced by what Grafana substitutes before a query reaches Prometheus.
GRAFANA_DEFAULTS = {"$__rate_interval": "5m", "$node": ".*"}


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Target(_Data):
    expr: str
    legend: str = ""


class Panel(_Data):
    title: str
    type: Literal["timeseries", "stat", "table"] = "timeseries"
    unit: str = "short"
    targets: list[Target] = Field(min_length=1)


class Variable(_Data):
    query: str
    label: str


class Dashboard(_Data):
    title: str
    variables: list[str] = Field(default_factory=list)
    panels: list[Panel] = Field(min_length=1)


class Definition(_Data):
    variables: dict[str, Variable]
    dashboards: dict[str, Dashboard]


@lru_cache(maxsize=1)
def definition() -> Definition:
    return Definition.model_validate(yaml.safe_load((MONITORING_DIR / "dashboards.yaml").read_text()))


def _panel(index: int, panel: Panel) -> dict[str, Any]:
    return {
        "id": index + 1,
        "type": panel.type,
        "title": panel.title,
        "datasource": DATASOURCE,
        "gridPos": {
            "x": (index % 2) * PANEL_WIDTH,
            "y": (index // 2) * PANEL_HEIGHT,
            "w": PANEL_WIDTH,
            "h": PANEL_HEIGHT,
        },
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": t.expr, "legendFormat": t.legend}
            for i, t in enumerate(panel.targets)
        ],
    }


def _variable(name: str, variable: Variable) -> dict[str, Any]:
    return {
        "name": name,
        "label": variable.label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": variable.query, "refId": name},
        "definition": variable.query,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "refresh": 2,
    }


def dashboard(key: str) -> dict[str, Any]:
    """One dashboard's JSON model (what Grafana's file provisioning loads)."""
    spec = definition()
    board = spec.dashboards[key]
    return {
        "uid": f"gpuforge-{key}",
        "title": board.title,
        "tags": ["gpuforge"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [_variable(v, spec.variables[v]) for v in board.variables]},
        "panels": [_panel(i, p) for i, p in enumerate(board.panels)],
    }


def dashboards() -> dict[str, str]:
    """File name -> dashboard JSON, for every dashboard in the definition."""
    return {f"gpuforge-{key}.json": json.dumps(dashboard(key), indent=2) + "\n" for key in definition().dashboards}


def provisioning(dashboards_dir: str, prometheus_url: str) -> dict[str, str]:
    """Grafana's provisioning files: the dashboards folder and the Prometheus data source."""
    providers = {
        "apiVersion": 1,
        "providers": [
            {
                "name": "gpuforge",
                "folder": "gpuforge",
                "type": "file",
                "disableDeletion": True,
                "allowUiUpdates": False,
                "options": {"path": dashboards_dir},
            }
        ],
    }
    datasources = {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "gpuforge Prometheus",
                "uid": DATASOURCE["uid"],
                "type": "prometheus",
                "access": "proxy",
                "url": prometheus_url,
                "isDefault": True,
            }
        ],
    }
    return {
        "dashboards/gpuforge.yaml": yaml.safe_dump(providers, sort_keys=False),
        "datasources/gpuforge.yaml": yaml.safe_dump(datasources, sort_keys=False),
    }


def panel_queries() -> list[tuple[str, str, str]]:
    """(dashboard, panel, expr with Grafana's variables substituted) for every query of every panel."""
    out = []
    for key, board in definition().dashboards.items():
        for panel in board.panels:
            for target in panel.targets:
                expr = target.expr
                for variable, value in GRAFANA_DEFAULTS.items():
                    expr = expr.replace(variable, value)
                out.append((key, panel.title, expr))
    return out
