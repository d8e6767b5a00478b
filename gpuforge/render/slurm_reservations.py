"""slurm_config.reservations: the Slurm reservations the controller's role keeps (gpuforge/nodes/reservations.py
compares them with `scontrol show reservation` and creates, changes or deletes), and their listing for
`gpuforge diff`. Each is named gpuforge-<key>, so a reservation made by hand is never touched."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuforge.spec.reservations import Reservation, utc_time
from gpuforge.spec.scheduler import SchedulerSpec
from gpuforge.spec.slurm_time import sacctmgr_minutes

PREFIX = "gpuforge-"
# MAINT: the nodes count as reserved for maintenance (no accounting of idle time, jobs refused). IGNORE_JOBS: the
# reservation is made even where running jobs would still run at its start; Slurm's own time limits keep new
# jobs that would not end in time off its nodes (scontrol(1), "Flags", and the reservations guide).
MAINTENANCE_FLAGS = ("MAINT", "IGNORE_JOBS")
BOOKING_FLAGS = ("IGNORE_JOBS",)
# Maintenance admits no one's jobs; Slurm needs Users or Accounts on every reservation, and root runs none.
MAINTENANCE_USERS = ("root",)


def reservations(sched: SchedulerSpec) -> list[dict[str, Any]]:
    """The contract's entries, in the spec's order."""
    return [_entry(name, resv) for name, resv in sched.reservations.items()]


def _entry(name: str, resv: Reservation) -> dict[str, Any]:
    window = resv.window()
    if window is None:  # check_reservations refused it before rendering
        raise ValueError(f"reservation {name} has no window")
    start, end = window
    maintenance = resv.kind == "maintenance"
    recurrence = (resv.recurrence or "").upper()
    return {
        "name": PREFIX + name,
        "kind": resv.kind,
        "start": f"{start:%Y-%m-%dT%H:%M:%S}Z",
        "end": f"{end:%Y-%m-%dT%H:%M:%S}Z",
        "flags": [*(MAINTENANCE_FLAGS if maintenance else BOOKING_FLAGS), *([recurrence] if recurrence else [])],
        "users": list(MAINTENANCE_USERS if maintenance else resv.users),
        "accounts": [] if maintenance else list(resv.accounts),
        "node_features": [f"group_{group}" for group in resv.node_groups],
        "node_count": resv.node_count or 0,
        "partition": resv.partition or "",
    }


def reservations_listing(config: Mapping[str, Any]) -> str:
    """What the controller's role keeps in slurmctld, one reservation a line in scontrol's key=value words, so
    `gpuforge diff` shows a reservation change line by line."""
    lines = [f"# Reservations of cluster {config['cluster_name']} named {PREFIX}*: these and no others (times UTC)."]
    for resv in config.get("reservations", []):
        start, end = utc_time(resv["start"]), utc_time(resv["end"])
        words = [f"ReservationName={resv['name']}", f"StartTime={resv['start']}", f"EndTime={resv['end']}",
                 f"Duration={sacctmgr_minutes(int((end - start).total_seconds()) // 60)}",
                 f"Flags={','.join(resv['flags'])}"]
        if resv["node_features"]:
            words.append("NodeGroups=" + ",".join(f.removeprefix("group_") for f in resv["node_features"]))
        if resv["node_count"]:
            words.append(f"NodeCnt={resv['node_count']}")
        if resv["partition"]:
            words.append(f"PartitionName={resv['partition']}")
        words += [f"Users={','.join(resv['users']) or '(null)'}", f"Accounts={','.join(resv['accounts']) or '(null)'}"]
        lines.append(" ".join(words))
    return "\n".join(lines) + "\n"

