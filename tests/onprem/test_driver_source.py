"""site.driver_source: the site's mirror of NVIDIA's CUDA repository reaches the nvidia_driver role of the site's
pools through the plan and the inventory (cloud groups keep NVIDIA's repository); bad URLs are refused.

The role's use of nvidia_driver_cuda_repo_base_url against a mirror is what the booted site tests run (the
stand-in repository of tests/standins/repo.py is such a mirror)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.nodes.inventory import build_inventory
from gpuforge.plan.engine import plan_stack
from gpuforge.spec import SpecError, resolve
from tests.onprem.test_site_model import ROOT

MIRROR = "https://mirror.lab-east.example.internal/nvidia/cuda/repos"
KEY = "file:///etc/gpuforge/keys/cuda-3bf863cc.pub"


def inventory_with_mirror(stack: str, tmp_path: Path, source: dict[str, Any]) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    data["config"]["gpuforge:cluster"]["site"]["driver_source"] = source
    path = tmp_path / f"Pulumi.{stack}-mirror.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return build_inventory(f"{stack}-mirror", outputs=plan_stack(path).outputs)["all"]["children"]


def test_site_pools_install_from_the_site_mirror(tmp_path: Path) -> None:
    children = inventory_with_mirror("onprem-lab", tmp_path, {"cuda_repository": MIRROR, "key_url": KEY})
    train = children["ng_train"]["vars"]
    assert train["nvidia_driver_cuda_repo_base_url"] == MIRROR
    assert train["nvidia_driver_cuda_repo_key_url"] == KEY


def test_hybrid_cloud_groups_keep_nvidias_repository(tmp_path: Path) -> None:
    children = inventory_with_mirror("hybrid", tmp_path, {"cuda_repository": "file:///srv/mirror/cuda/repos"})
    site, cloud = children["ng_train"]["vars"], children["ng_cloud"]["vars"]
    assert site["nvidia_driver_cuda_repo_base_url"] == "file:///srv/mirror/cuda/repos"
    assert "nvidia_driver_cuda_repo_key_url" not in site  # the role's default: the key beside the repository
    assert "nvidia_driver_cuda_repo_base_url" not in cloud


def test_without_a_driver_source_nothing_changes(tmp_path: Path) -> None:
    lab = build_inventory("onprem-lab", source="plan")["all"]["children"]["ng_train"]["vars"]
    assert "nvidia_driver_cuda_repo_base_url" not in lab


def test_bad_repository_urls_are_refused_together() -> None:
    spec = copy.deepcopy(yaml.safe_load((ROOT / "stacks" / "Pulumi.onprem-lab.yaml").read_text())["config"])
    cluster = spec["gpuforge:cluster"]
    cluster["site"]["driver_source"] = {"cuda_repository": "ftp://mirror/cuda/", "key_url": "https://m/k.txt"}
    with pytest.raises(SpecError) as caught:
        resolve(cluster)
    found = {issue.path: issue.message for issue in caught.value.issues}
    assert "no trailing slash" in found["cluster.site.driver_source.cuda_repository"]
    assert ".pub, .asc or .gpg" in found["cluster.site.driver_source.key_url"]
