"""Slurm's time strings (slurm.conf(5) MaxTime, sacctmgr(1) MaxWall): the forms it reads and their minutes."""

from __future__ import annotations

import re

SLURM_TIME = re.compile(r"^(UNLIMITED|INFINITE|\d+|\d+:\d{2}(:\d{2})?|\d+-\d{1,2}(:\d{2}(:\d{2})?)?)$")


def slurm_time_minutes(value: str) -> float:
    """Minutes of a time SLURM_TIME matched: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]; UNLIMITED is infinite."""
    if value in ("UNLIMITED", "INFINITE"):
        return float("inf")
    if value.isdigit():
        return float(value)
    days, _, clock = value.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if not days:  # MM:SS or HH:MM:SS
        parts = [0, *parts] if len(parts) == 2 else parts
        return parts[0] * 60 + parts[1] + parts[2] / 60
    parts += [0] * (3 - len(parts))
    return int(days) * 1440 + parts[0] * 60 + parts[1] + parts[2] / 60


def sacctmgr_minutes(minutes: int) -> str:
    """A limit in minutes as `sacctmgr --parsable2 list qos` prints it (mins2time_str): HH:MM:SS under a day,
    D-HH:MM:SS from one day on; the role compares it with the listed row."""
    days, rest = divmod(minutes, 1440)
    clock = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{clock}" if days else clock
