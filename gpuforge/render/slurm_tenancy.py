"""slurm_config's tenancy: the accounts (each after its parent, so sacctmgr can add them in order) and the
teams' QOS, with every limit as the slurm_dbd role compares it with `sacctmgr --parsable2` rows."""

from __future__ import annotations

from typing import Any

from gpuforge.spec.scheduler import SchedulerSpec
from gpuforge.spec.slurm_time import sacctmgr_minutes, slurm_time_minutes
from gpuforge.spec.tenancy_checks import ROOT_ACCOUNT, accounts_parents_first


def accounts(sched: SchedulerSpec) -> dict[str, dict[str, Any]]:
    """slurm_config.accounts: parents before children (dicts keep order through YAML and Ansible)."""
    return {
        name: {
            "description": account.description,
            "fairshare": account.fairshare,
            "max_gpus": account.max_gpus,
            "parent": account.parent or ROOT_ACCOUNT,
            "coordinators": list(account.coordinators),
            "inherited_coordinators": _ancestors_coordinators(sched, name),
            "qos": list(account.qos),
        }
        for name in accounts_parents_first(sched)
        for account in [sched.accounts[name]]
    }


def _ancestors_coordinators(sched: SchedulerSpec, name: str) -> list[str]:
    """Coordinators of the accounts above `name`: slurmdbd lists them among its coordinators too."""
    found: list[str] = []
    seen = {name}
    parent = sched.accounts[name].parent
    while parent is not None and parent in sched.accounts and parent not in seen:
        seen.add(parent)
        found += [c for c in sched.accounts[parent].coordinators if c not in found]
        parent = sched.accounts[parent].parent
    return found


def team_qos(sched: SchedulerSpec) -> list[dict[str, Any]]:
    """slurm_config.qos: MaxWall in sacctmgr's own form, so the role's comparison is a string's."""
    return [
        {
            "name": name,
            "description": qos.description,
            "priority": qos.priority,
            "max_gpus": qos.max_gpus,
            "max_gpus_per_user": qos.max_gpus_per_user,
            "max_jobs_per_user": qos.max_jobs_per_user,
            "max_wall": sacctmgr_minutes(int(slurm_time_minutes(qos.max_wall))) if qos.max_wall else "",
        }
        for name, qos in sched.qos.items()
    ]
