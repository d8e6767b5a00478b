"""`scheduler.preemption`: whether a running job can be stopped for another, and how it is warned.

Safe by default: no preemption at all (PreemptType=preempt/none). A partition's priority_tier then only
orders the queue: a debug job starts first on the next free resources, and never requeues a training job
that holds them. A cluster that wants spare capacity used opts in with `kind: qos`: jobs submitted with
the scavenger QOS run on idle GPUs and are the only ones ever preempted; they get SIGTERM and
`grace_time_s` to write a checkpoint before Slurm requeues them (docs/slurm.md, "Preemption").
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .base import SpecModel
from .fields import Name


class Preemption(SpecModel):
    kind: Literal["none", "qos"] = Field(
        default="none",
        description="none: no running job is ever preempted (partition tiers only order the queue). qos: jobs "
        "of the scavenger QOS may be preempted by every other job (preempt/qos), after their grace time.",
    )
    scavenger_qos: Name = Field(
        default="scavenger",
        description="kind qos: the QOS whose jobs may be preempted (sbatch --qos=scavenger); every account may "
        "use it, at the lowest priority.",
    )
    grace_time_s: int = Field(
        default=300,
        ge=30,
        le=3600,
        description="kind qos: seconds between SIGTERM (write a checkpoint now) and SIGKILL before a preempted "
        "scavenger job is requeued (the QOS's GraceTime).",
    )

    @field_validator("scavenger_qos")
    @classmethod
    def _not_the_default_qos(cls, name: str) -> str:
        if name == "normal":
            raise ValueError(
                "normal is the QOS every job gets without --qos (slurmdbd creates it, sacctmgr(1)); it is the one "
                "that preempts the scavenger QOS, so it cannot be it: keep scavenger or name another"
            )
        return name
