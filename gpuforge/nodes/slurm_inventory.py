"""The Slurm part of the Ansible inventory: the `slurm_config` variable and the hosts of each Slurm role.

`slurm_config` is rendered from the stack file's spec and the catalog (gpuforge/render/slurm.py, the
same dict `gpuforge render slurm` renders), completed with what only the deployed stack knows (the
accounting database's endpoint, the /home file system), read from the stack's `slurm` output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuforge.plan.stacks import find_stack, load_stack
from gpuforge.plan.validation import check_stack
from gpuforge.render.slurm import slurm_config
from gpuforge.spec import SpecError

# Stack output hybrid.burst.scaler (gpuforge/infra/hybrid/placement.py) -> the lifecycle configuration's keys.
SCALER_ARNS = {"trustAnchorArn": "trust_anchor_arn", "profileArn": "profile_arn", "roleArn": "role_arn"}


def scaler_arns(outputs: Mapping[str, Any]) -> dict[str, str]:
    """The Slurm burst scaler's trust anchor, profile and role ARNs from the stack outputs; a key the outputs
    lack is absent (the slurm_scaler role then refuses, naming the output to deploy)."""
    scaler = ((outputs.get("hybrid") or {}).get("burst") or {}).get("scaler") or {}
    return {key: str(scaler[name]) for name, key in SCALER_ARNS.items() if scaler.get(name)}


def slurm_inventory(stack: str, outputs: Mapping[str, Any], group_name: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(all-vars, children) for a stack with a scheduler; ({}, {}) without one. Children:
    slurm_controller (and slurmdbd: the same hosts), slurm_compute, slurm_login (login groups and site
    login hosts)."""
    try:
        find_stack(stack)
    except SpecError:
        return {}, {}  # an inventory from outputs alone (no stack file): no spec to render Slurm from
    stack_file = load_stack(stack)
    resolved = check_stack(stack_file).resolved  # the spec, and no clear-text secret, before anything is printed
    if resolved.scheduler is None:
        return {}, {}
    config = slurm_config(resolved)
    deployed = outputs.get("slurm") or {}
    if deployed.get("databaseEndpoint"):
        config["accounting"]["database"]["host"] = deployed["databaseEndpoint"]
    if deployed.get("homeFileSystem"):
        config["home"]["source"] = deployed["homeFileSystem"]
    # The EFS file systems' DNS names: what login, controller and compute hosts mount (slurm.yml's site_mounts).
    if config["home"]["kind"] == "efs":
        config["home"]["server"] = deployed.get("homeDnsName") or ""
    if config["state_shared"].get("kind") == "efs":
        config["state_shared"]["server"] = deployed.get("stateDnsName") or ""
        config["state_shared"]["source"] = deployed.get("stateFileSystem") or ""
    # A hybrid cluster's site scaler: the Roles Anywhere ARNs its credential_process names (public
    # identifiers, no secret: the controller's private key stays on the controller, only its path is a variable).
    credentials = (config.get("lifecycle") or {}).get("aws_credentials")
    if credentials and credentials.get("kind") == "roles_anywhere":
        credentials.update(scaler_arns(outputs))
    # A hybrid cluster's cloud nodes read the munge key from Secrets Manager with their role; the site's
    # hosts from the site's vault (slurm_config.secrets.munge_key, the munge role's default).
    cloud_key = config["secrets"].get("cloud_munge_key")

    def compute_vars(group: str) -> dict[str, Any]:
        return {"vars": {"munge_key_ref": cloud_key}} if cloud_key and config["groups"][group]["dynamic"] else {}

    controllers = {c["name"]: {"ansible_host": c["address"]} for c in config["controllers"]}
    children = {
        "slurm_controller": {"hosts": controllers},
        "slurmdbd": {"hosts": {name: {} for name in controllers}},
        "slurm_compute": {"children": {group_name("ng", g): compute_vars(g) for g in config["groups"]}},
        "slurm_login": {
            "children": {group_name("ng", g): {} for g in config["login_groups"]},
            # Site login hosts (scheduler.login.hosts): service hosts outside every node group.
            "hosts": {h["name"]: {"ansible_host": h["address"]} for h in config["login_hosts"]},
        },
    }
    return {"slurm_config": config}, children
