"""slurmrestd and its JSON Web Tokens (`scheduler.rest_api`, docs/slurm.md "The REST API"): what slurm.conf,
slurmdbd.conf and the slurm_controller role read from slurm_config.rest_api, and where the signing key is kept.

The key signs and checks every token (AuthAltParameters=jwt_key=...): whoever holds it can be any user, so it is
a secret like the MUNGE key, read only by the controllers (AWS: Secrets Manager, the controller's role alone; on
premises: the Ansible vault variable `vault_slurm_jwt_key`), and written 0600 to the slurm user.
"""

from __future__ import annotations

from typing import Any

from gpuforge.catalog.flows import load_flows
from gpuforge.spec import ResolvedSpec
from gpuforge.spec.resolved_scheduler import ResolvedScheduler

# jwt.html keeps the key beside slurmctld's state; here a local file of each controller's, so a backup controller
# needs no shared state mount for it and slurmdbd (which reads it too) finds it where slurmctld does.
JWT_KEY_PATH = "/etc/slurm/jwt_hs256.key"
JWT_VAULT_VARIABLE = "vault_slurm_jwt_key"
# slurmrestd refuses to run as root or as SlurmUser (its unit files say so): a system user of its own.
REST_USER = "slurmrestd"


def jwt_secret_name(cluster: str) -> str:
    """The key's name in Secrets Manager (AWS): the program creates it, the controllers read it."""
    return f"gpuforge/{cluster}/slurm/jwt-key"


def jwt_key_ref(resolved: ResolvedSpec, sched: ResolvedScheduler) -> dict[str, Any] | None:
    """Where the controllers read the key (slurm_config.secrets.jwt_key); None with the API off."""
    if not sched.spec.rest_api.enabled:
        return None
    if resolved.spec.placement.kind == "aws":
        return {"store": "aws_secretsmanager", "id": jwt_secret_name(resolved.spec.name)}
    return {"store": "ansible_vault", "id": JWT_VAULT_VARIABLE}


def rest_api(sched: ResolvedScheduler) -> dict[str, Any] | None:
    """slurm_config.rest_api; None with the API off (nothing about it is rendered then)."""
    spec = sched.spec.rest_api
    if not spec.enabled:
        return None
    low, _ = load_flows().ports[load_flows().external("rest_api").ports].ports
    return {
        "port": low,
        "jwt_key": JWT_KEY_PATH,
        "user": REST_USER,
        # The unit's IP filter: the clients' ranges, and the controllers slurmrestd itself calls (slurmctld and
        # slurmdbd), which the filter would otherwise cut off too.
        "allowed_cidrs": list(spec.allowed_cidrs),
        "controller_addresses": [c.address for c in sched.controllers],
    }
