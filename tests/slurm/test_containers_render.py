"""Containers for jobs, rendered from the spec and the catalog: enroot.conf per node group (per-user paths,
local NVMe where the instance type has it), pyxis's plugstack line, plugstack.conf, and nothing of it when
the spec says `containers: none`. The booted proof is test_slurm_containers.py."""

from __future__ import annotations

import copy
import os
import subprocess
from typing import Any

import pytest

from gpuforge.catalog import load_catalog
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.spec import SpecError, resolve

FACTS = load_catalog().slurm.containers
# The plugstack arguments pyxis 0.23.0 parses (NVIDIA/pyxis config.c, pyxis_config_parse); any other
# makes the plugin, and with `required` every job step, fail.
PYXIS_ARGUMENTS = {"runtime_path", "execute_entrypoint", "container_scope", "sbatch_support", "use_enroot_load",
                   "importer", "use_squashfuse"}  # fmt: skip


def _config(stack: str, containers: str | None = None) -> dict[str, Any]:
    data = copy.deepcopy(load_stack(stack).cluster)
    if containers is not None:
        data["scheduler"]["containers"] = containers
    return slurm_config(resolve(data, stack))


def test_enroot_data_goes_to_local_nvme_where_the_type_has_it() -> None:
    files = render_slurm(_config("prod"))
    catalog = load_catalog()
    spec = load_stack("prod").cluster["node_groups"]
    # p5.48xlarge carries instance-store NVMe, the login type none.
    assert catalog.instance_type(spec["train"]["instance_type"]).nvme_gb > 0
    assert catalog.instance_type(spec["login"]["instance_type"]).nvme_gb == 0
    assert "ENROOT_DATA_PATH /scratch/enroot/data/user-$(id -u)\n" in files["enroot.conf.train"]
    assert "ENROOT_CACHE_PATH /scratch/enroot/cache/user-$(id -u)\n" in files["enroot.conf.train"]
    assert "ENROOT_DATA_PATH /var/lib/enroot/data/user-$(id -u)\n" in files["enroot.conf.login"]
    for name in ("enroot.conf.train", "enroot.conf.login"):
        assert "ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)\n" in files[name]


def test_enroot_conf_is_what_enroot_reads(tmp_path: Any) -> None:
    """enroot refuses a configuration that is not valid bash (`bash -n`), then evaluates each value with
    `eval echo` as the user who runs it: the per-user paths end in that user's id."""
    conf = tmp_path / "enroot.conf"
    conf.write_text(render_slurm(_config("prod"))["enroot.conf.train"])
    assert subprocess.run(["bash", "-n", str(conf)], capture_output=True).returncode == 0
    settings = _config("prod")["containers"]["enroot"]["settings"]["train"]
    expanded = subprocess.run(
        ["bash", "-c", 'eval echo "$1"', "_", settings["ENROOT_DATA_PATH"]], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert expanded == f"/scratch/enroot/data/user-{os.getuid()}"


def test_pyxis_line_names_the_packaged_plugin_and_only_pyxis_arguments() -> None:
    files = render_slurm(_config("prod"))
    line = files["pyxis.conf"].splitlines()[-1].split()
    assert line[:2] == ["required", FACTS.pyxis.plugin]
    arguments = dict(arg.split("=", 1) for arg in line[2:])
    assert set(arguments) <= PYXIS_ARGUMENTS
    assert arguments["container_scope"] in ("job", "global")
    assert files["plugstack.conf"].splitlines()[-1] == "include /etc/slurm/plugstack.conf.d/*"


def test_releases_come_from_the_catalog() -> None:
    containers = _config("prod")["containers"]
    assert containers["runtime"] == "enroot_pyxis"
    assert containers["enroot"]["version"] == f"{FACTS.enroot.version}-{FACTS.enroot.package_release}"
    assert containers["enroot"]["packages"] == ["enroot", "enroot+caps"]
    assert f"/v{FACTS.enroot.version}" in containers["enroot"]["url"]
    assert containers["pyxis"]["version"] == f"{FACTS.pyxis.version}-{FACTS.pyxis.package_release}"
    assert containers["nvidia_container_toolkit"]["packages"] == ["libnvidia-container1", "libnvidia-container-tools"]
    # GPU groups get the toolkit enroot's GPU hook runs; login nodes do not.
    assert containers["gpu_groups"] == ["train"]
    for facts in (FACTS.enroot, FACTS.pyxis, FACTS.nvidia_container_toolkit):
        assert facts.source.strip() and facts.reason.strip()


def test_no_container_runtime_renders_no_container_files() -> None:
    config = _config("dev", containers="none")
    files = render_slurm(config)
    assert config["containers"]["runtime"] == "none"
    assert not [name for name in files if name.startswith(("enroot.conf", "pyxis.conf", "plugstack.conf"))]


def test_an_unknown_container_runtime_is_rejected_with_its_path() -> None:
    data = copy.deepcopy(load_stack("dev").cluster)
    data["scheduler"]["containers"] = "singularity"
    with pytest.raises(SpecError) as err:
        resolve(data, "dev")
    paths = {issue.path for issue in err.value.issues}
    assert "cluster.scheduler.containers" in paths
