"""Grafana dashboards from one definition (gpuforge/assets/monitoring/dashboards.yaml): cluster, node, GPU, fabric,
storage, jobs. Every dashboard uses the same layout (two panels a row), one Prometheus data source and the
same variables, so none is hand-edited JSON. Per stack (DashboardView): the data source's uid and the
exporters' job names as that stack's Prometheus has them (gpuforge's own on a monitoring host,
kube-prometheus-stack's on Kubernetes), and only the panels whose series sources the stack has.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from string import Template
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from gpuforge.assets import MONITORING_DIR

# The data source the prometheus role provisions for Grafana on a monitoring host.
PROVISIONED_DATASOURCE_UID = "gpuforge-prometheus"
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
    needs: tuple[str, ...] = ()  # series sources (gpuforge.render.exporters.SOURCES); left out without them
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


@dataclass(frozen=True)
class DashboardView:
    """What differs per stack: the data source's uid, the exporters' job names in its Prometheus, and which
    series sources it has (None: all)."""

    datasource_uid: str = PROVISIONED_DATASOURCE_UID
    node_job: str = "node"
    dcgm_job: str = "dcgm"
    sources: frozenset[str] | None = None

    @property
    def datasource(self) -> dict[str, str]:
        return {"type": "prometheus", "uid": self.datasource_uid}

    def fill(self, expr: str) -> str:
        """${node_job} and ${dcgm_job} are ours; Grafana's own $variables pass through."""
        return Template(expr).safe_substitute(node_job=self.node_job, dcgm_job=self.dcgm_job)

    def shows(self, panel: Panel) -> bool:
        return self.sources is None or set(panel.needs) <= self.sources


def _panel(index: int, panel: Panel, view: DashboardView) -> dict[str, Any]:
    datasource = view.datasource
    return {
        "id": index + 1,
        "type": panel.type,
        "title": panel.title,
        "datasource": datasource,
        "gridPos": {
            "x": (index % 2) * PANEL_WIDTH,
            "y": (index // 2) * PANEL_HEIGHT,
            "w": PANEL_WIDTH,
            "h": PANEL_HEIGHT,
        },
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": datasource, "expr": view.fill(t.expr), "legendFormat": t.legend}
            for i, t in enumerate(panel.targets)
        ],
    }


def _variable(name: str, variable: Variable, view: DashboardView) -> dict[str, Any]:
    query = view.fill(variable.query)
    return {
        "name": name,
        "label": variable.label,
        "type": "query",
        "datasource": view.datasource,
        "query": {"query": query, "refId": name},
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "refresh": 2,
    }


def dashboard(key: str, view: DashboardView | None = None) -> dict[str, Any] | None:
    """One dashboard's JSON model (what Grafana's file provisioning loads); None when the stack has the
    sources of none of its panels."""
    view = view or DashboardView()
    spec = definition()
    board = spec.dashboards[key]
    panels = [p for p in board.panels if view.shows(p)]
    if not panels:
        return None
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
        "templating": {"list": [_variable(v, spec.variables[v], view) for v in board.variables]},
        "panels": [_panel(i, p, view) for i, p in enumerate(panels)],
    }


def dashboards(view: DashboardView | None = None) -> dict[str, str]:
    """File name -> dashboard JSON, for every dashboard of the definition the stack has panels of."""
    boards = {key: dashboard(key, view) for key in definition().dashboards}
    return {f"gpuforge-{key}.json": json.dumps(board, indent=2) + "\n" for key, board in boards.items() if board}


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
                "uid": PROVISIONED_DATASOURCE_UID,
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


def panel_queries(view: DashboardView | None = None) -> list[tuple[str, str, str]]:
    """(dashboard, panel, expr with Grafana's variables substituted) for every query of every panel the
    view shows (every panel without one), the template variables' queries included."""
    view = view or DashboardView()
    out = []

    def substituted(expr: str) -> str:
        expr = view.fill(expr)
        for variable, value in GRAFANA_DEFAULTS.items():
            expr = expr.replace(variable, value)
        return expr

    spec = definition()
    for key, board in spec.dashboards.items():
        panels = [p for p in board.panels if view.shows(p)]
        if not panels:
            continue
        for name in board.variables:
            query = spec.variables[name].query
            # label_values(<selector>, <label>): the selector is the PromQL Grafana sends.
            if query.startswith("label_values("):
                query = query.removeprefix("label_values(").rsplit(",", 1)[0]
            out.append((key, f"variable {name}", substituted(query)))
        for panel in panels:
            for target in panel.targets:
                out.append((key, panel.title, substituted(target.expr)))
    return out
