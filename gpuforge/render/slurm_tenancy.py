"""slurm_config's tenancy: the accounts (each after its parent, so sacctmgr can add them in order) and the
teams' QOS, with every limit as the slurm_dbd role compares it with `sacctmgr --parsable2` rows."""

from __future__ import annotations

import re
from collections.abc import Mapping
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


def tenancy_listing(config: Mapping[str, Any]) -> str:
    """What the slurm_dbd role keeps in slurmdbd (slurm_config's QOS, accounts and users), one object a line in
    the shape of `sacctmgr dump`'s flat file, so `gpuforge diff` shows a tenancy change line by line. Secrets and
    keys are no part of it."""

    def fields(pairs: list[tuple[str, Any]]) -> str:
        return "".join(f":{key}={_quoted(value)}" for key, value in pairs if value not in (None, "", []))

    lines = [f"# slurmdbd of cluster {config['cluster_name']}: these and no others (Slurm's root aside); one the spec "
             "no longer has is removed once its jobs end.",
             f"Cluster - {_quoted(config['cluster_name'])}"]
    for qos in config.get("preemption", {}).get("qos", []):
        lines.append(f"QOS - {_quoted(qos['name'])}" + fields([
            ("Priority", qos["priority"]), ("Preempt", ",".join(qos["preempt"])), ("PreemptMode", qos["preempt_mode"]),
            ("GraceTime", qos["grace_time_s"])]))
    for qos in config.get("qos", []):
        lines.append(f"QOS - {_quoted(qos['name'])}" + fields([
            ("Description", qos["description"]), ("Priority", qos["priority"]),
            ("GrpTRES", _gpus(qos["max_gpus"])), ("MaxTRESPerUser", _gpus(qos["max_gpus_per_user"])),
            ("MaxJobsPerUser", qos["max_jobs_per_user"]), ("MaxWall", qos["max_wall"])]))
    for name, account in config["accounts"].items():
        lines.append(f"Account - {_quoted(name)}" + fields([
            ("Parent", account.get("parent", ROOT_ACCOUNT)), ("Description", account["description"]),
            ("Fairshare", account["fairshare"]), ("GrpTRES", _gpus(account.get("max_gpus"))),
            ("Coordinators", ",".join(account.get("coordinators", []))), ("QOS", ",".join(account.get("qos", [])))]))
    for login, user in config["users"].items():
        for account in [user["account"], *user.get("further_accounts", [])]:
            default = user["account"] if account == user["account"] else None
            lines.append(f"User - {_quoted(login)}" + fields([("Account", account), ("DefaultAccount", default)]))
    return "\n".join(lines) + "\n"


def _gpus(count: int | None) -> str | None:
    return None if count is None else f"gres/gpu={count}"


def _quoted(value: Any) -> str:
    """Names and descriptions in quotes, as sacctmgr dump writes them; numbers, TRES and times bare."""
    bare = not isinstance(value, str) or value.startswith("gres/") or re.fullmatch(r"[\d:-]+", value)
    return str(value) if bare else f"'{value}'"
