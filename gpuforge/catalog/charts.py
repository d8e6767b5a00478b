"""Pinned Helm charts and images of the GPU platform (data/charts.yaml), typed.

Separate from the hardware catalog (``load_catalog``), whose API is unchanged:
``load_charts().chart("gpu_operator").version``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, model_validator

from gpuforge.catalog.models import CatalogError, load_data_file

CHARTS_FILE = Path(__file__).resolve().parent / "data" / "charts.yaml"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Toleration(_Frozen):
    key: str | None = None
    operator: str = "Equal"
    value: str | None = None
    effect: str | None = None


class NodeAgent(_Frozen):
    """Where a chart (or the custom resource that configures it) sets its DaemonSets' scheduling,
    and the chart's defaults: the wiring pack checks them against the taints GPU nodes carry."""

    kind: str | None = None  # a custom resource kind that configures the DaemonSets; None: the release values
    node_selector: tuple[str, ...] | None = None  # path in the values (or the resource's inputs)
    tolerations: tuple[str, ...]
    default_tolerations: tuple[Toleration, ...] = ()
    agent_source: str


class ChartPin(_Frozen):
    chart: str  # a name in `repo`, or an oci:// reference (then no repo)
    version: str
    namespace: str
    source: str
    repo: str | None = None
    api_version: str | None = None  # the API version of the CRDs the chart serves, where the platform writes them
    app_version: str | None = None  # the application (image) version the chart version ships
    node_agent: NodeAgent | None = None  # DaemonSets that must reach every GPU node
    requires_charts: tuple[str, ...] = ()  # charts whose CRDs this release's templates create objects of
    crd_groups: tuple[str, ...] = ()  # API groups of the CRDs the chart installs
    default_frameworks: tuple[str, ...] = ()  # Kueue: the chart's default integrations.frameworks
    operands: dict[str, str] = {}  # image versions the chart version deploys itself (GPU Operator: dcgm_exporter)
    images_by_kubernetes: dict[str, str] = {}  # image tag per Kubernetes minor, where the two must match

    @model_validator(mode="after")
    def _repo_or_oci(self) -> ChartPin:
        if self.chart.startswith("oci://") == (self.repo is not None):
            raise ValueError("give either an oci:// chart or a chart name with repo, not both or neither")
        return self


class ImagePin(_Frozen):
    repository: str
    image: str
    version: str
    source: str


class Charts(_Frozen):
    charts: dict[str, ChartPin]
    images: dict[str, ImagePin]

    def chart(self, key: str) -> ChartPin:
        try:
            return self.charts[key]
        except KeyError:
            raise CatalogError(f"no pinned chart {key!r}; known: {', '.join(sorted(self.charts))}") from None

    def image(self, key: str) -> ImagePin:
        try:
            return self.images[key]
        except KeyError:
            raise CatalogError(f"no pinned image {key!r}; known: {', '.join(sorted(self.images))}") from None


@lru_cache(maxsize=1)
def load_charts() -> Charts:
    return load_data_file(CHARTS_FILE, Charts)
