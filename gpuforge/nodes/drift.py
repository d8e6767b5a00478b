"""Drift: nodes whose software differs from what the stack pins, from the software-versions collector's series.

Each node writes `gpuforge_node_software_info{component,version,source} 1` (node_textfile_collectors'
software-versions); Prometheus gives every series the node's `instance` and `node_group`. The pins are the
stack's Ansible group variables for that node group (`gpuforge inventory STACK`, ng_<group>): what the roles
install there, so a group without EFA is not asked for an EFA installer, and a stack's override of a version is
the version expected. Compared, per node:

  nvidia_driver  on GPU groups: the driver's major version is the group's nvidia_driver_branch (580.82.07 is 580)
  nccl           on GPU groups: the libnccl2 package is <nccl_version>-1+cuda<nccl_cuda_version> (the nccl role's pin)
  efa_installer  where the group has efa_installer_version: the installer's version is it
  kernel         not pinned: a node whose kernel differs from the one most of its group's nodes run

A pinned component a node does not report is drift too (not installed, or the collector cannot read it). Pure:
the caller brings the Prometheus answer (`parse_query_result`) and the inventory.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SOFTWARE_SERIES = "gpuforge_node_software_info"


class SeriesFormatError(ValueError):
    """The document is not a Prometheus instant-query answer of the software series."""


@dataclass(frozen=True)
class NodeSoftware:
    """What one node reports: component -> version."""

    instance: str
    node_group: str
    versions: Mapping[str, str]


@dataclass(frozen=True)
class Pins:
    """What a node group is to run (its inventory group variables)."""

    node_group: str
    gpus: bool
    driver_branch: str | None
    nccl_package: str | None
    efa_installer: str | None

    def expected(self) -> dict[str, str]:
        """component -> what the node must report, in words for the report."""
        wanted: dict[str, str] = {}
        if self.gpus and self.driver_branch:
            wanted["nvidia_driver"] = f"branch {self.driver_branch} ({self.driver_branch}.x)"
        if self.gpus and self.nccl_package:
            wanted["nccl"] = self.nccl_package
        if self.efa_installer:
            wanted["efa_installer"] = self.efa_installer
        return wanted

    def matches(self, component: str, version: str) -> bool:
        if component == "nvidia_driver":
            return version.split(".", 1)[0] == self.driver_branch
        if component == "nccl":
            return version == self.nccl_package
        return version == self.efa_installer


@dataclass(frozen=True)
class Difference:
    instance: str
    node_group: str
    component: str
    found: str | None  # None: the node does not report it
    expected: str

    def to_json(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "node_group": self.node_group,
            "component": self.component,
            "found": self.found,
            "expected": self.expected,
        }


@dataclass(frozen=True)
class DriftReport:
    nodes: tuple[NodeSoftware, ...]
    differences: tuple[Difference, ...]
    # instances of no node group the stack pins software for: Slurm controllers and monitoring hosts (their
    # node_group is slurm-controller or monitoring), or a group the stack no longer declares
    not_compared: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": len(self.nodes),
            "drifted": sorted({d.instance for d in self.differences}),
            "differences": [d.to_json() for d in self.differences],
            "not_compared": list(self.not_compared),
        }


def parse_query_result(document: Any) -> list[NodeSoftware]:
    """The nodes in a Prometheus HTTP API answer to `gpuforge_node_software_info` (GET /api/v1/query:
    {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {...}, "value": [t, "1"]}]}})."""
    if not isinstance(document, Mapping) or document.get("status") != "success":
        error = document.get("error") if isinstance(document, Mapping) else None
        raise SeriesFormatError(f"Prometheus did not answer with success: {error or str(document)[:200]}")
    data = document.get("data")
    if not isinstance(data, Mapping) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise SeriesFormatError("expected data.resultType vector with a result list (an instant query's answer)")
    found: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for number, sample in enumerate(data["result"]):
        metric = sample.get("metric") if isinstance(sample, Mapping) else None
        if not isinstance(metric, Mapping):
            raise SeriesFormatError(f"result[{number}] has no metric labels")
        missing = [k for k in ("instance", "node_group", "component", "version") if not metric.get(k)]
        if metric.get("__name__", SOFTWARE_SERIES) != SOFTWARE_SERIES or missing:
            raise SeriesFormatError(
                f"result[{number}] is not a {SOFTWARE_SERIES} series with instance, node_group, component and "
                f"version (missing: {', '.join(missing) or 'none'}; name {metric.get('__name__')!r})"
            )
        found[(metric["instance"], metric["node_group"])][metric["component"]] = metric["version"]
    return [NodeSoftware(instance, group, versions) for (instance, group), versions in sorted(found.items())]


def pins_from_inventory(inventory: Mapping[str, Any]) -> dict[str, Pins]:
    """node group -> its pins, from the inventory's ng_<group> group variables."""
    children = inventory.get("all", {}).get("children", {})
    pins = {}
    for name, group in children.items():
        facts = (group or {}).get("vars") or {}
        if not name.startswith("ng_") or "gpuforge_node_group" not in facts:
            continue
        nccl, cuda = facts.get("nccl_version"), facts.get("nccl_cuda_version")
        pins[facts["gpuforge_node_group"]] = Pins(
            node_group=facts["gpuforge_node_group"],
            gpus=int(facts.get("gpuforge_gpus_per_node") or 0) > 0,
            driver_branch=str(facts["nvidia_driver_branch"]) if facts.get("nvidia_driver_branch") else None,
            nccl_package=f"{nccl}-1+cuda{cuda}" if nccl and cuda else None,
            efa_installer=str(facts["efa_installer_version"]) if facts.get("efa_installer_version") else None,
        )
    return pins


def _kernel_outliers(nodes: Iterable[NodeSoftware]) -> list[Difference]:
    """Nodes whose kernel is not the one most of their group runs (a tie names no majority, and no outlier)."""
    by_group: dict[str, list[NodeSoftware]] = defaultdict(list)
    for node in nodes:
        if "kernel" in node.versions:
            by_group[node.node_group].append(node)
    outliers = []
    for group, members in sorted(by_group.items()):
        counts = Counter(n.versions["kernel"] for n in members).most_common()
        if len(counts) < 2 or counts[0][1] == counts[1][1]:
            continue
        majority = counts[0][0]
        outliers += [
            Difference(n.instance, group, "kernel", n.versions["kernel"], f"{majority} (most of {group}'s nodes)")
            for n in members
            if n.versions["kernel"] != majority
        ]
    return outliers


def find_drift(nodes: Iterable[NodeSoftware], pins: Mapping[str, Pins]) -> DriftReport:
    """Every node's differences from its group's pins, and kernel outliers within a group."""
    nodes = tuple(nodes)
    differences: list[Difference] = []
    not_compared = []
    for node in nodes:
        group = pins.get(node.node_group)
        if group is None:
            not_compared.append(node.instance)
            continue
        for component, expected in group.expected().items():
            found = node.versions.get(component)
            if found is None or not group.matches(component, found):
                differences.append(Difference(node.instance, node.node_group, component, found, expected))
    differences += _kernel_outliers(n for n in nodes if n.node_group in pins)
    differences.sort(key=lambda d: (d.node_group, d.instance, d.component))
    return DriftReport(nodes=nodes, differences=tuple(differences), not_compared=tuple(sorted(not_compared)))
