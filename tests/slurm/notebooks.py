"""scheduler.notebooks on the booted Slurm cluster: JupyterHub on the login machine, each notebook server a Slurm
job on a compute (test_slurm_cluster.py, "notebooks"). The hub's configuration is the dev stack's rendering with
notebooks turned on, unmodified; the role installs from the stand-in package index (tests/standins/wheelhouse.py)."""

from __future__ import annotations

import copy
from typing import Any

from gpuforge.plan.stacks import load_stack
from gpuforge.render.notebooks import jupyterhub_config
from gpuforge.spec import resolve

# One GPU and one CPU per server, for half an hour, in the gpu partition (the bench's stand-in GPUs).
NOTEBOOKS = {"enabled": True, "partition": "gpu", "time_limit": "30:00", "gpus": 1, "cpus": 1}


def notebooks_rendering() -> dict[str, Any]:
    """jupyterhub_config as the dev stack renders it with scheduler.notebooks turned on (access: ssh_tunnel, the
    default: the hub's proxy on the login machine's loopback)."""
    cluster = copy.deepcopy(load_stack("dev").cluster)
    cluster["scheduler"]["notebooks"] = dict(NOTEBOOKS)
    rendered = jupyterhub_config(resolve(cluster, "dev"))
    assert rendered is not None
    return rendered


def notebooks_vars(package_index: str) -> dict[str, Any]:
    """The inventory variables of the jupyterhub role on the bench: the rendering, and the stand-in index."""
    return {"jupyterhub_config": notebooks_rendering(), "jupyterhub_pip_index_url": package_index}
