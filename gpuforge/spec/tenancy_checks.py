"""Checks of the scheduler's tenancy (accounts, their tree and coordinators, QOS) that one field cannot make
alone: every name one of them gives must be declared, so sacctmgr never refuses the role half-way."""

from __future__ import annotations

from .errors import SpecIssue
from .scheduler import SchedulerSpec

PATH = "cluster.scheduler"
# Slurm's own names (sacctmgr(1)): the root account every tree hangs from, and the QOS every job gets without
# --qos. The spec cannot declare them; it may name normal where a QOS is admitted.
ROOT_ACCOUNT = "root"
DEFAULT_QOS = "normal"


def check_tenancy(sched: SchedulerSpec) -> list[SpecIssue]:
    """Every problem of the accounts' tree, their coordinators and QOS, and the partitions' AllowQos."""
    issues: list[SpecIssue] = []
    if ROOT_ACCOUNT in sched.accounts:
        issues.append(SpecIssue(f"{PATH}.accounts[{ROOT_ACCOUNT}]", "root is Slurm's own account, above every other",
                                "name the organisation's account otherwise; an account without parent sits under root"))
    reserved = {DEFAULT_QOS} | ({sched.preemption.scavenger_qos} if sched.preemption.kind == "qos" else set())
    for name in sorted(reserved & set(sched.qos)):
        issues.append(SpecIssue(f"{PATH}.qos[{name}]", f"{name} is a QOS Slurm or scheduler.preemption keeps",
                                "give the team's QOS a name of its own"))
    for aname, account in sched.accounts.items():
        apath = f"{PATH}.accounts[{aname}]"
        if account.parent is not None and account.parent not in sched.accounts:
            issues.append(SpecIssue(f"{apath}.parent", f"no account named {account.parent!r}",
                                    f"use one of {', '.join(sched.accounts)}, or leave parent out (under root)"))
        for i, user in enumerate(account.coordinators):
            if user not in sched.users:
                issues.append(SpecIssue(f"{apath}.coordinators[{i}]", f"no user named {user!r}",
                                        f"use one of {', '.join(sched.users) or '(none)'}, or declare it in users"))
        issues += _unknown_qos(f"{apath}.qos", account.qos, sched, allowed=set())
    issues += _cycles(sched)
    for pname, partition in sched.partitions.items():
        issues += _unknown_qos(f"{PATH}.partitions[{pname}].allow_qos", partition.allow_qos, sched, allowed=reserved)
    return issues


def accounts_parents_first(sched: SchedulerSpec) -> list[str]:
    """The accounts in an order sacctmgr can add them in: each after its parent (the spec's order otherwise)."""
    placed: list[str] = []
    pending = list(sched.accounts)
    while pending:
        ready = [a for a in pending if sched.accounts[a].parent in (None, *placed)]
        if not ready:  # a cycle, which check_tenancy reports
            return placed + pending
        placed += ready
        pending = [a for a in pending if a not in ready]
    return placed


def _unknown_qos(path: str, names: list[str], sched: SchedulerSpec, allowed: set[str]) -> list[SpecIssue]:
    known = [*sched.qos, *sorted(allowed)]
    return [
        SpecIssue(f"{path}[{i}]", f"no QOS named {name!r}",
                  f"use one of {', '.join(known) or '(none)'}, or declare it in scheduler.qos")
        for i, name in enumerate(names) if name not in sched.qos and name not in allowed
    ]


def _cycles(sched: SchedulerSpec) -> list[SpecIssue]:
    """An account that is its own ancestor: sacctmgr could add none of the loop's accounts."""
    issues: list[SpecIssue] = []
    reported: set[str] = set()
    for start in sched.accounts:
        chain = [start]
        parent = sched.accounts[start].parent
        while parent is not None and parent in sched.accounts and parent not in chain:
            chain.append(parent)
            parent = sched.accounts[parent].parent
        if parent == start and start not in reported:
            reported.update(chain)
            issues.append(SpecIssue(f"{PATH}.accounts[{start}].parent", " -> ".join([*chain, start]),
                                    "an account tree has no loops: give the top account no parent"))
    return issues
