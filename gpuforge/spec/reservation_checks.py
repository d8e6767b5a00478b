"""Checks of `scheduler.reservations` that one field cannot make alone, every problem at once: a window that ends
before it starts, maintenance windows overlapping on the same node group, names the scheduler does not declare,
and fields that do not belong to the reservation's kind. scontrol would refuse some of these half-way through the
role's run; overlapping maintenance it would accept, and then nobody knows which window a rolling update keeps."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from itertools import combinations

from .errors import SpecIssue
from .reservations import RECURRENCE_PERIODS, Reservation
from .scheduler import SchedulerSpec

PATH = "cluster.scheduler.reservations"


def check_reservations(sched: SchedulerSpec, slurm_groups: set[str]) -> list[SpecIssue]:
    """Every problem of the reservations; *slurm_groups* are the node groups in the scheduler's partitions."""
    issues: list[SpecIssue] = []
    for name, resv in sched.reservations.items():
        issues += _one(f"{PATH}[{name}]", resv, sched, slurm_groups)
    maintenance = [(n, r) for n, r in sched.reservations.items() if r.kind == "maintenance" and r.window()]
    for (name_a, a), (name_b, b) in combinations(maintenance, 2):
        shared = [g for g in a.node_groups if g in b.node_groups]
        clash = _first_overlap(a, b) if shared else None
        if clash is not None:
            issues.append(SpecIssue(
                f"{PATH}[{name_b}]",
                f"overlaps maintenance window {name_a} on node group(s) {', '.join(shared)} "
                f"(both cover {clash:%Y-%m-%dT%H:%MZ})",
                "move one window, or merge them into one that lists both groups' work"))
    return issues


def _one(path: str, resv: Reservation, sched: SchedulerSpec, slurm_groups: set[str]) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    if resv.duration is None and resv.end is None:
        issues.append(SpecIssue(path, "neither duration nor end is given", "give duration (04:00:00) or end"))
    elif resv.duration is not None and resv.end is not None:
        issues.append(SpecIssue(f"{path}.end", f"both duration {resv.duration} and end {resv.end} are given",
                                "keep one of them"))
    window = resv.window()
    if window is not None:
        start, end = window
        if end <= start:
            issues.append(SpecIssue(f"{path}.end", f"{resv.end} is not after the window's beginning, {resv.start}",
                                    "give an end after start, or a duration"))
        period = RECURRENCE_PERIODS.get(resv.recurrence or "")
        if period is not None and end - start >= period:
            issues.append(SpecIssue(f"{path}.duration", f"lasts {end - start}, as long as its {resv.recurrence} "
                                    "recurrence or longer: it would overlap itself",
                                    f"make it shorter than {period}, or drop recurrence"))
    for i, group in enumerate(resv.node_groups):
        if group not in slurm_groups:
            issues.append(SpecIssue(f"{path}.node_groups[{i}]", f"no Slurm node group named {group!r}",
                                    f"use one of {', '.join(sorted(slurm_groups)) or '(none)'} (the groups in "
                                    "scheduler.partitions)"))
    for i, account in enumerate(resv.accounts):
        if account not in sched.accounts:
            issues.append(SpecIssue(f"{path}.accounts[{i}]", f"no account named {account!r}",
                                    f"use one of {', '.join(sched.accounts) or '(none)'}, or declare it in accounts"))
    for i, user in enumerate(resv.users):
        if user not in sched.users:
            issues.append(SpecIssue(f"{path}.users[{i}]", f"no user named {user!r}",
                                    f"use one of {', '.join(sched.users) or '(none)'}, or declare it in users"))
    if resv.partition is not None and resv.partition not in sched.partitions:
        issues.append(SpecIssue(f"{path}.partition", f"no partition named {resv.partition!r}",
                                f"use one of {', '.join(sched.partitions)}"))
    if resv.kind == "maintenance":
        issues += _maintenance_fields(path, resv)
    else:
        issues += _booking_fields(path, resv)
    return issues


def _maintenance_fields(path: str, resv: Reservation) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    if not resv.node_groups:
        issues.append(SpecIssue(f"{path}.node_groups", "a maintenance window covering no node group",
                                "list the node groups it takes out of service"))
    for field in ("accounts", "users"):
        if getattr(resv, field):
            issues.append(SpecIssue(f"{path}.{field}", "a maintenance window admits no one's jobs (Flags=MAINT, "
                                    "root only)", f"remove {field}, or make it kind: booking"))
    for field in ("node_count", "partition"):
        if getattr(resv, field) is not None:
            issues.append(SpecIssue(f"{path}.{field}", "a maintenance window covers whole node groups",
                                    f"remove {field} and list the node groups"))
    return issues


def _booking_fields(path: str, resv: Reservation) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    if not resv.accounts and not resv.users:
        issues.append(SpecIssue(path, "a booking for no one: no accounts and no users",
                                "list the accounts (or users) whose jobs may use it"))
    if bool(resv.node_groups) == (resv.node_count is not None):
        issues.append(SpecIssue(path, "a booking needs its nodes: node_groups or node_count, one of them",
                                "give node_groups (every node of them) or node_count (Slurm picks them)"))
    if resv.node_groups and resv.partition is not None:
        issues.append(SpecIssue(f"{path}.partition", "partition goes with node_count",
                                "remove partition, or book node_count nodes of it instead of node_groups"))
    return issues


def occurrences(resv: Reservation, lo: datetime, hi: datetime) -> Iterator[tuple[datetime, datetime]]:
    """The reservation's windows that meet [lo, hi)."""
    window = resv.window()
    if window is None:
        return
    start, end = window
    period = RECURRENCE_PERIODS.get(resv.recurrence or "")
    if period is None:
        if start < hi and end > lo:
            yield start, end
        return
    length = end - start
    skip = max(0, (lo - end) // period) if lo > end else 0
    begin = start + skip * period
    while begin < hi:
        if begin + length > lo:
            yield begin, begin + length
        begin += period


def _first_overlap(a: Reservation, b: Reservation) -> datetime | None:
    """When two windows first both hold, looking a fortnight from the later first start (every daily and weekly
    pattern repeats within a week)."""
    first_a, first_b = a.window(), b.window()
    if first_a is None or first_b is None:
        return None
    lo = min(first_a[0], first_b[0])
    hi = max(first_a[1], first_b[1]) + timedelta(days=14)
    b_windows = list(occurrences(b, lo, hi))
    for a_start, a_end in occurrences(a, lo, hi):
        for b_start, b_end in b_windows:
            if a_start < b_end and b_start < a_end:
                return max(a_start, b_start)
    return None
