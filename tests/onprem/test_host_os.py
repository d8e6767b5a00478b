"""site.host_os: DGX OS only on DGX systems (the catalog's servers), on the site's own pools, and never beside a
driver_source no pool would use; every problem at once. The roles' behaviour on DGX OS is
tests/playbooks/test_dgx_os_roles.py's."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpuforge.catalog import load_catalog
from gpuforge.spec import SpecError, resolve
from tests.support import REPO


def lab_with_host_os(host_os: dict[str, Any]) -> dict[str, Any]:
    """The onprem-lab stack file (its pool train: DGX H100 hosts) with *host_os* as site.host_os."""
    data: dict[str, Any] = yaml.safe_load((REPO / "stacks" / "Pulumi.onprem-lab.yaml").read_text())
    data["config"]["gpuforge:cluster"]["site"]["host_os"] = host_os
    return data


def test_dgx_os_is_a_catalog_fact_of_dgx_systems_only() -> None:
    catalog = load_catalog()
    assert all(catalog.server(m).dgx_os for m in ("dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200"))
    assert "docs.nvidia.com/dgx/dgx-os-6-user-guide" in (catalog.server("dgx-h100").dgx_os_source or "")
    assert not catalog.server("hgx-h100-8gpu").dgx_os


def test_a_dgx_pool_on_dgx_os_resolves() -> None:
    resolved = resolve(lab_with_host_os({"default": "dgx_os"})["config"]["gpuforge:cluster"])
    assert resolved.site is not None and resolved.site.spec.host_os.of_pool("train") == "dgx_os"


def test_dgx_os_spec_problems_are_reported_together() -> None:
    cluster = lab_with_host_os({"default": "dgx_os", "pools": {"inference": "generic"}})["config"]["gpuforge:cluster"]
    cluster["site"]["driver_source"] = {"cuda_repository": "https://mirror.lab-east.example.internal/cuda/repos"}
    first = next(iter(cluster["site"]["hosts"].values()))
    first["model"] = "hgx-h100-8gpu"
    with pytest.raises(SpecError) as caught:
        resolve(cluster)
    found = {issue.path: str(issue) for issue in caught.value.issues}
    assert "inference is not a pool of the site's hosts" in found["cluster.site.host_os.pools[inference]"]
    assert "hgx-h100-8gpu hosts" in found["cluster.site.host_os.default"]
    assert "DGX OS runs on NVIDIA's DGX systems only" in found["cluster.site.host_os.default"]
    assert "no host would install from this mirror" in found["cluster.site.driver_source"]
