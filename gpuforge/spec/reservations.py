"""`scheduler.reservations`: maintenance windows and team bookings as Slurm reservations, kept by the controller's
role (docs/slurm.md, "Reservations").

A maintenance window covers node groups: no job of anyone runs there while it lasts (Slurm's MAINT flag, users
root only), and gpuforge-lifecycle's rolling image updates drain nodes inside it (docs/lifecycle.md). A booking
gives accounts or users nodes of their own for a time: whole node groups, or a count Slurm picks in a partition.
Times are UTC; a window may recur daily or weekly (Slurm's DAILY/WEEKLY flags). The rules that cross fields
(end after start, overlapping maintenance, unknown names) are in reservation_checks.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import Field, field_validator

from .base import SpecModel
from .fields import Name
from .slurm_time import SLURM_TIME, slurm_time_minutes

# What a recurring window repeats by: Slurm moves a reservation with DAILY or WEEKLY on by this much when it ends
# (scontrol(1), "Flags").
RECURRENCE_PERIODS = {"daily": timedelta(days=1), "weekly": timedelta(days=7)}


def utc_time(value: str) -> datetime:
    """An ISO 8601 time that says it is UTC (2026-12-05T02:00:00Z or +00:00), as a timezone-aware datetime."""
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO 8601 time; write it like 2026-12-05T02:00:00Z") from None
    if parsed.utcoffset() != timedelta(0):
        raise ValueError(f"{value!r} is not in UTC; write the UTC time with a Z, like 2026-12-05T02:00:00Z "
                         "(Slurm's times are the controller's, and gpuforge converts)")
    return parsed


class Reservation(SpecModel):
    kind: Literal["maintenance", "booking"] = Field(
        description="maintenance: no job runs on its nodes while it lasts (Flags=MAINT, users root only; "
        "rolling image updates drain inside it). booking: only its accounts and users run there.",
    )
    node_groups: list[Name] = Field(
        default_factory=list,
        description="Node groups (or a site's host pools) whose nodes it covers, every node of them. Required for "
        "maintenance; a booking gives these or node_count.",
    )
    node_count: int | None = Field(
        default=None,
        ge=1,
        description="A booking: this many nodes, which Slurm picks in `partition` (NodeCnt).",
    )
    partition: Name | None = Field(
        default=None,
        description="A booking with node_count: the partition (scheduler.partitions) its nodes come from, and its "
        "jobs run in. None: the default partition.",
    )
    accounts: list[Name] = Field(
        default_factory=list,
        description="A booking: accounts (scheduler.accounts) whose jobs may use it (sbatch --reservation).",
    )
    users: list[str] = Field(
        default_factory=list,
        description="A booking: users (scheduler.users) whose jobs may use it. With accounts too, a job must "
        "match both (Slurm).",
    )
    start: str = Field(description="When it begins: ISO 8601 in UTC, e.g. 2026-12-05T02:00:00Z.")
    duration: str | None = Field(
        default=None,
        description="How long it lasts: minutes, HH:MM:SS or D-HH:MM:SS. Give this or end.",
    )
    end: str | None = Field(default=None, description="When it ends, ISO 8601 in UTC. Give this or duration.")
    recurrence: Literal["daily", "weekly"] | None = Field(
        default=None,
        description="Repeat the window every day or week from start (Slurm's DAILY/WEEKLY flags). None: once.",
    )

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, value: str | None) -> str | None:
        if value is not None:
            utc_time(value)
        return value

    @field_validator("duration")
    @classmethod
    def _limited(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not SLURM_TIME.match(value) or value in ("UNLIMITED", "INFINITE") or slurm_time_minutes(value) < 1:
            raise ValueError(f"{value!r} is not a limited Slurm time of a minute or more; write minutes (240), "
                             "HH:MM:SS (04:00:00) or D-HH:MM:SS (1-00:00:00)")
        return value

    def window(self) -> tuple[datetime, datetime] | None:
        """Its first occurrence (start, end) in UTC, or None when neither or both of duration and end are given
        (reservation_checks reports that)."""
        start = utc_time(self.start)
        if (self.duration is None) == (self.end is None):
            return None
        if self.end is not None:
            return start, utc_time(self.end)
        return start, start + timedelta(minutes=slurm_time_minutes(self.duration or "0"))
