"""The NCCL build the nodes install (libnccl2=<nccl_version>-1+cuda<nccl_cuda_version>) must be one NVIDIA
publishes: the catalog lists them (gpuforge/catalog/data/facts.yaml, nccl.builds, with its source), and a
spec naming another pair is refused with the fix before anything is declared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.catalog import load_catalog
from gpuforge.nodes.inventory import node_group_vars
from gpuforge.plan.engine import plan_stack
from gpuforge.spec import SpecError
from gpuforge.spec.checks import resolve
from gpuforge.spec.models import Software

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "stacks" / "invalid" / "nccl-build-not-published.yaml"


def _spec(**software: Any) -> dict[str, Any]:
    spec = yaml.safe_load(FIXTURE.read_text())["config"]["gpuforge:cluster"]
    return {**spec, "software": software}


def _problems(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    return [str(issue) for issue in caught.value.issues]


def test_the_default_pair_is_a_published_build() -> None:
    defaults = Software()
    assert defaults.nccl_cuda_version in load_catalog().data.nccl.cuda_versions(defaults.nccl_version)
    resolve(_spec())  # the defaults resolve


def test_a_release_without_a_build_for_that_cuda_is_refused_with_the_fix() -> None:
    (problem,) = _problems(_spec(nccl_version="2.27.7", nccl_cuda_version="12.8"))
    assert problem.startswith("cluster.software.nccl_cuda_version: NCCL 2.27.7 has no build for CUDA 12.8")
    assert "libnccl2=2.27.7-1+cuda12.8 is not published" in problem
    assert "fix: set nccl_cuda_version to 12.9 or 13.0, or nccl_version to 2.26.2 (built for CUDA 12.8)" in problem
    assert "catalog.nccl.builds" in problem


def test_an_unknown_release_is_refused_and_a_catalog_override_admits_it() -> None:
    (problem,) = _problems(_spec(nccl_version="2.28.3", nccl_cuda_version="12.9"))
    assert problem.startswith("cluster.software.nccl_version: NCCL 2.28.3 is not in the catalog; known builds:")
    assert "2.27.7 (CUDA 12.9, 13.0)" in problem
    override = {"nccl": {"builds": {"2.28.3": ["12.9"]}}}
    resolve({**_spec(nccl_version="2.28.3", nccl_cuda_version="12.9"), "catalog": override})


def test_the_inventory_carries_the_pair_to_the_nccl_role() -> None:
    outputs = plan_stack("dev").outputs
    group = node_group_vars(outputs)
    assert (group["nccl_version"], group["nccl_cuda_version"]) == ("2.27.7", "12.9")
