"""`scheduler.qos`: a team's own quality of service, the limits Slurm holds a team's jobs to.

An account's fair share and `max_gpus` bound the team as a whole; a QOS adds what an account cannot say on
its own: a priority, per-user limits inside the team (GPUs, jobs), a longest run time, and a GPU limit shared
by every account that uses it. An account lists the QOS its users may submit with (`accounts.<a>.qos`, sbatch
--qos), a partition may admit only some (`partitions.<p>.allow_qos`, AllowQos). The slurm_dbd role keeps them
in slurmdbd as written: added, changed, and a limit taken out of the spec cleared (docs/slurm.md, "A cluster
many teams share").
"""

from __future__ import annotations

from pydantic import Field, field_validator

from .base import SpecModel
from .slurm_time import SLURM_TIME, slurm_time_minutes


class Qos(SpecModel):
    description: str = Field(description="Who the QOS is for and why (sacctmgr's Description).")
    priority: int = Field(
        default=0,
        ge=0,
        le=10000,
        description="Priority of its jobs (PriorityWeightQOS scales it against the highest QOS priority).",
    )
    max_gpus: int | None = Field(
        default=None,
        ge=1,
        description="GPUs the running jobs of this QOS hold together (GrpTRES=gres/gpu=N); a job past it waits "
        "(reason QOSGrpGRES). None: no limit.",
    )
    max_gpus_per_user: int | None = Field(
        default=None,
        ge=1,
        description="GPUs one user's running jobs of this QOS hold together (MaxTRESPerUser=gres/gpu=N); a job "
        "past it waits (reason QOSMaxGRESPerUser). None: no limit.",
    )
    max_jobs_per_user: int | None = Field(
        default=None,
        ge=1,
        description="Running jobs one user may have in this QOS (MaxJobsPerUser); the next waits (reason "
        "QOSMaxJobsPerUserLimit). None: no limit.",
    )
    max_wall: str | None = Field(
        default=None,
        description="Longest run time of a job of this QOS (MaxWall): D-HH:MM:SS, HH:MM:SS or minutes, whole "
        "minutes. None: no limit of the QOS's own (the partition's MaxTime still holds).",
    )

    @field_validator("max_wall")
    @classmethod
    def _whole_minutes(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not SLURM_TIME.match(value) or value in ("UNLIMITED", "INFINITE"):
            raise ValueError(f"{value!r} is not a limited Slurm time; write minutes (480), HH:MM:SS (08:00:00) or "
                             "D-HH:MM:SS (2-00:00:00), or leave max_wall out for no limit")
        minutes = slurm_time_minutes(value)
        if minutes != int(minutes) or minutes < 1:
            raise ValueError(f"{value!r}: MaxWall counts whole minutes (sacctmgr(1)); write at least one minute "
                             "with :00 seconds")
        return value
