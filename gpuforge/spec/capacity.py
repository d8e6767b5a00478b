"""How many nodes a group runs over time, and how its nodes are replaced (issue 12).

A node group is fixed (`count` + `spares`, always running) or elastic (`scaling: {min, max}`):
an elastic group scales from `min` to `max` with the queue and back after an idle time. The
spec stays placement-neutral; which placements and orchestrators can run an elastic group is
judged in `checks.py`, where the placement is known, so every problem is reported at once with
its field path.

`update_strategy` says how a changed image or launch template reaches running nodes: `drain`
(ParallelCluster's DRAIN: Slurm drains each node, waits for its jobs, then it is replaced) or
`instance_refresh` (the Auto Scaling group replaces instances itself). EKS managed groups roll
through EKS's own update and take neither.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import SpecModel
from .fields import MAX_NODES_PER_GROUP

# ParallelCluster's default ScaledownIdletime (Scheduling/SlurmSettings/ScaledownIdletime: "The default
# value is 10 minutes"), https://docs.aws.amazon.com/parallelcluster/latest/ug/Scheduling-v3.html
DEFAULT_SCALEDOWN_IDLE_MINUTES = 10

# Instance maintenance policy (EC2 Auto Scaling User Guide, "Instance maintenance policies"): with
# min healthy 100 % and max healthy 110 % a replacement launches before its old instance terminates
# (launch before terminate); with max healthy 100 % the old instance terminates first. A reservation
# or Capacity Block sized to count + spares has no room for an extra instance, so reserved groups
# terminate first and keep at least 90 % serving (the spares cover the gap).
MAINTENANCE_ON_DEMAND = (100, 110)  # (min healthy %, max healthy %)
MAINTENANCE_RESERVED = (90, 100)
# The same for an EKS managed node group (EKS API NodegroupUpdateConfig.updateStrategy): DEFAULT launches
# new instances before it terminates old ones, so inside a full reservation or Capacity Block its roll
# stalls on a node that cannot launch; MINIMAL terminates first ("useful where you are constrained to
# resources ... for example, with hardware accelerators such as GPUs"). One node unavailable at a time.
EKS_UPDATE_ON_DEMAND = "DEFAULT"
EKS_UPDATE_RESERVED = "MINIMAL"

UpdateStrategy = Literal["drain", "instance_refresh"]
# What rolls a group's nodes once the default is applied: an EKS managed group rolls by itself.
EffectiveUpdateStrategy = Literal["drain", "instance_refresh", "eks_managed"]
# Orchestrators that can grow and shrink a group: Slurm's, through gpuforge-lifecycle on the controller
# (gpuforge/nodes/lifecycle.py), and EKS's, through the Cluster Autoscaler gpuforge installs beside an elastic
# managed node group (gpuforge/infra/aws/cluster_autoscaler.py; why not Karpenter: docs/kubernetes.md). Not a
# site's Kubernetes: its nodes are bare-metal hosts nothing can launch.
ELASTIC_ORCHESTRATORS = ("slurm", "eks")


class Scaling(SpecModel):
    """An elastic group: from `min` to `max` nodes, following the work queued for it."""

    min: int = Field(ge=0, le=MAX_NODES_PER_GROUP, description="Nodes kept running when idle; 0 scales to zero.")
    max: int = Field(ge=1, le=MAX_NODES_PER_GROUP, description="Most nodes the group may run.")
    scaledown_idle_minutes: int = Field(
        default=DEFAULT_SCALEDOWN_IDLE_MINUTES,
        ge=1,
        le=7 * 24 * 60,
        description="Minutes a node stays idle before it is terminated (ParallelCluster's ScaledownIdletime, "
        "default 10).",
    )

    @model_validator(mode="after")
    def _min_below_max(self) -> Scaling:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max}); lower min or raise max")
        return self
