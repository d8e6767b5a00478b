"""MPI through PMIx (issue 25, item 4): every stack's slurm.conf says MpiDefault=pmix, and the Slurm roles install,
per distribution, the package of Slurm's mpi/pmix plugin and the one with the PMIx library file the plugin opens
(catalog slurm.distributions.<os>.pmix). A plugin that cannot open its library fails no daemon's start, only every
MPI step at launch, so a distribution the roles run on without the packages is refused: in the catalog, and by the
slurm_pmix role on a node (Ansible's own run against this host). The booted proof is the bench's MPI job
(test_slurm_bench.py)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from gpuforge.catalog import load_catalog
from gpuforge.catalog.models import SlurmFacts
from gpuforge.nodes.bake import run_playbook
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.spec import resolve


@pytest.mark.parametrize("stack", ["dev", "prod", "onprem-lab", "hybrid"])
def test_every_stack_starts_mpi_steps_through_pmix(stack: str) -> None:
    config = slurm_config(resolve(copy.deepcopy(load_stack(stack).cluster), stack))
    conf = render_slurm(config)["slurm.conf"]
    assert [line for line in conf.splitlines() if line.startswith("Mpi")] == ["MpiDefault=pmix"]
    assert config["mpi"]["packages"] == load_catalog().slurm.pmix_packages()


def test_the_packages_are_those_that_carry_the_plugin_and_the_library_it_opens() -> None:
    slurm = load_catalog().slurm
    assert slurm.pmix_packages() == {
        # 22.05's mpi_pmix_v4.so dlopens pmix2/lib/libpmix.so, which only libpmix-dev ships.
        "bookworm": ["slurm-wlm-basic-plugins", "libpmix-dev"],
        # 24.11's mpi_pmix_v5.so dlopens libpmix.so.2, in libpmix2t64.
        "trixie": ["slurm-wlm-basic-plugins", "libpmix2t64"],
        "noble": ["slurm-wlm-basic-plugins", "libpmix-dev"],
    }
    production = slurm.distributions[slurm.production.os or ""]
    assert production.pmix is not None and production.pmix.plugin == "mpi_pmix_v5.so"
    assert slurm.distributions["ubuntu-22.04"].pmix is None  # 21.08: refused (slurm.minimum) before MPI matters


def test_a_supported_distribution_without_pmix_packages_is_refused() -> None:
    data: dict[str, Any] = load_catalog().slurm.model_dump()
    data["distributions"]["debian-12"]["pmix"] = None
    with pytest.raises(ValidationError, match="distributions debian-12 need pmix"):
        SlurmFacts.model_validate(data)


def test_the_role_refuses_a_distribution_the_catalog_has_no_packages_for(tmp_path: Path) -> None:
    playbook = tmp_path / "pmix.yml"
    play = {"name": "pmix", "hosts": "all", "gather_facts": True, "gather_subset": ["!all"],
            "roles": [{"role": "slurm_pmix"}]}
    playbook.write_text(yaml.safe_dump([play]))
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        # This host's codename left out: as if the node booted a distribution the catalog does not know.
        "slurm_config": {"mpi": {"default": "pmix", "packages": {"elsewhere": ["slurm-wlm-basic-plugins"]}}},
    }
    result = run_playbook(playbook, {"all": {"hosts": {"node": host}}}, check=True)
    assert result.failed_hosts == ["node"]
    assert [f.task for f in result.failures] == ["Refuse a distribution the catalog has no PMIx packages for"]
    message = result.failures[0].message
    assert "has no entry in the catalog's slurm.distributions.<os>.pmix" in message, message
    assert "(known: elsewhere)" in message and "MpiDefault=pmix" in message, message
