"""The Slurm production path is the distribution's slurm-wlm, so the image decides the release: Slurm
groups boot Ubuntu 24.04 (23.11) by default, controllers too, and a Slurm group on Ubuntu 22.04 (21.08, no
dynamic nodes) is refused at validation with its field path and the fix (catalog slurm.minimum,
slurm.distributions)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuforge.catalog import load_catalog
from gpuforge.plan.stacks import load_stack
from gpuforge.spec import SpecError, resolve
from gpuforge.spec.models import DLAMI_SSM, UBUNTU_2204_SSM, image_os
from tests.support import planned

DLAMI_2404 = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"
CANONICAL_2404 = "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"


def _prod() -> dict[str, Any]:
    return copy.deepcopy(load_stack("prod").cluster)


def _problems(data: dict[str, Any]) -> dict[str, tuple[str, str]]:
    with pytest.raises(SpecError) as err:
        resolve(data, "test")
    return {issue.path: (issue.message, issue.fix) for issue in err.value.issues}


def test_catalog_production_slurm_is_packaged_and_new_enough() -> None:
    slurm = load_catalog().slurm
    assert slurm.minimum.version == "22.05"
    assert slurm.production.os == "ubuntu-24.04"
    assert slurm.distributions["ubuntu-24.04"].version.startswith(slurm.production.version)
    assert slurm.too_old("ubuntu-24.04") is None and slurm.too_old("debian-12") is None
    assert slurm.too_old("ubuntu-22.04") is not None and slurm.too_old("ubuntu-22.04").version == "21.08.5"
    assert slurm.supports_release(slurm.test.version)


def test_a_catalog_whose_production_os_ships_an_old_slurm_is_refused() -> None:
    with pytest.raises(Exception, match=r"older than minimum 22\.05"):
        load_catalog({"slurm": {"production": {"os": "ubuntu-22.04"}}})


def test_image_parameters_name_their_distribution() -> None:
    assert image_os(DLAMI_SSM) == image_os(UBUNTU_2204_SSM) == "ubuntu-22.04"
    assert image_os(DLAMI_2404) == image_os(CANONICAL_2404) == "ubuntu-24.04"
    assert image_os("/gpuforge/prod/gpu-node-ami") is None


def test_slurm_groups_and_controllers_boot_ubuntu_2404_by_default() -> None:
    resolved = resolve(_prod(), "prod")
    groups = resolved.node_groups
    assert groups["train"].image_id == groups["login"].image_id == f"resolve:ssm:{DLAMI_2404}"
    assert groups["services"].image_id == f"resolve:ssm:{DLAMI_SSM}"  # not Slurm: unchanged
    plan = planned("prod")
    templates = [
        r for r in plan.resources
        if r.type == "aws:ec2/launchTemplate:LaunchTemplate" and "SlurmControlPlane" in r.urn
    ]
    assert templates and {t.inputs["imageId"] for t in templates} == {f"resolve:ssm:{CANONICAL_2404}"}


def test_a_slurm_group_on_ubuntu_2204_is_refused_with_the_path_and_fix() -> None:
    data = _prod()
    data["node_groups"]["train"]["image"] = {"ssm_parameter": DLAMI_SSM}
    data["node_groups"]["services"]["image"] = {"ssm_parameter": DLAMI_SSM}  # not Slurm: allowed
    problems = _problems(data)
    assert list(problems) == ["cluster.node_groups[train].image.ssm_parameter"]
    message, fix = problems["cluster.node_groups[train].image.ssm_parameter"]
    assert "ubuntu-22.04, whose packaged Slurm is 21.08.5" in message and "22.05 or newer" in message
    assert "remove ssm_parameter" in fix and DLAMI_2404 in fix


def test_slurm_groups_baked_on_ubuntu_2204_are_refused_at_the_pipelines_parent() -> None:
    data = _prod()
    pipeline = {"extra_vars": {"dcgm_exporter_enabled": False}}
    data["image_pipeline"] = pipeline  # the default parent: Canonical's Ubuntu 22.04
    data["node_groups"]["train"]["image"] = {"pipeline": True}
    data["node_groups"]["login"]["image"] = {"pipeline": True}
    message, fix = _problems(data)["cluster.image_pipeline.parent_image_ssm_parameter"]
    assert "Slurm groups login, train" in message and "21.08.5" in message
    assert CANONICAL_2404 in fix
    data["image_pipeline"] = {**pipeline, "parent_image_ssm_parameter": CANONICAL_2404}
    resolve(data, "prod")
