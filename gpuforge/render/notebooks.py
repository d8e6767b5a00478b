"""JupyterHub with batchspawner (`scheduler.notebooks`, docs/notebooks.md): the `jupyterhub_config` variable the
jupyterhub role reads, and the jupyterhub_config.py it writes (the same template here and in the role).

Everything the hub needs is a fact of the spec or the catalog: the pinned packages and pip's constraints
(catalog notebooks.yaml), the ports (flows.yaml ports.jupyterhub and jupyterhub_api; notebooks.yaml
proxy_api_port), the partition, limits and each user's account. No secret is rendered: the hub makes its cookie
secret and the proxy's token itself, on the login node, at its first start.
"""

from __future__ import annotations

from typing import Any

from gpuforge.catalog.flows import load_flows
from gpuforge.catalog.notebooks import load_notebooks
from gpuforge.spec import ResolvedSpec

from .templates import render

TEMPLATE = "notebooks/jupyterhub_config.py.j2"
VENV = "/opt/jupyterhub"
STATE_DIR = "/var/lib/jupyterhub"
# The hub runs as a system user of its own, never root: in group shadow for PAM (pam_unix reads /etc/shadow),
# and allowed by sudo to run only sbatch, squeue and scancel as the notebook users (batchspawner's exec_prefix).
HUB_USER = "jupyterhub"


def jupyterhub_config(resolved: ResolvedSpec) -> dict[str, Any] | None:
    """The jupyterhub role's `jupyterhub_config`; None without a scheduler or with notebooks off."""
    sched = resolved.scheduler
    if sched is None or not sched.spec.notebooks.enabled:
        return None
    spec = sched.spec.notebooks
    catalog = load_notebooks()
    flows = load_flows()
    public_port, _ = flows.ports[flows.external("notebooks").ports].ports
    hub_api_port, _ = flows.ports["jupyterhub_api"].ports
    return {
        "packages": catalog.requirements(),
        "constraints": catalog.constraint_lines(),
        "venv_packages": list(catalog.venv_packages),
        "proxy_packages": [catalog.proxy.package],
        "proxy_command": catalog.proxy.command,
        "venv": VENV,
        "state_dir": STATE_DIR,
        "user": HUB_USER,
        "access": spec.access,
        # ssh_tunnel: the login node's loopback only; network: every address, TLS, the allowed ranges only.
        "public_ip": "" if spec.access == "network" else "127.0.0.1",
        "public_port": public_port,
        "proxy_api_port": catalog.proxy_api_port,
        "hub_api_port": hub_api_port,
        "allowed_cidrs": list(spec.allowed_cidrs),
        "tls_certificate": spec.tls_certificate or "",
        "tls_key": spec.tls_key or "",
        "partition": spec.partition,
        "time_limit": spec.time_limit,
        "gpus": spec.gpus,
        "cpus": spec.cpus,
        "memory": f"{spec.memory_gib}G" if spec.memory_gib else "",
        # Who may log in, and the account (team) each one's servers are charged to.
        "users": {name: user.account for name, user in sorted(sched.spec.users.items())},
    }


def render_jupyterhub_config(config: dict[str, Any], hub_address: str) -> str:
    """jupyterhub_config.py for a login node whose address the compute nodes reach it at."""
    return render(TEMPLATE, jupyterhub_config=config, jupyterhub_hub_address=hub_address)
