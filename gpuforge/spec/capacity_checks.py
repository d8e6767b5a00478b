"""Capacity and update rules that need the group's neighbours (placement, capacity source,
orchestrator), each reported with its field path and the fix (issue 12)."""

from __future__ import annotations

from .capacity import ELASTIC_ORCHESTRATORS
from .errors import SpecIssue
from .limits import capacity_block_problem
from .models import KUBERNETES_ORCHESTRATORS, NodeGroup


def check_group_capacity(path: str, group: NodeGroup) -> list[SpecIssue]:
    """Elastic groups, Capacity Blocks and the update strategy of one AWS node group."""
    return [*_elastic(path, group), *_capacity_block(path, group), *_update_strategy(path, group)]


def _elastic(path: str, group: NodeGroup) -> list[SpecIssue]:
    if group.scaling is None:
        return []
    issues: list[SpecIssue] = []
    if group.orchestrator in KUBERNETES_ORCHESTRATORS:
        issues.append(
            SpecIssue(
                f"{path}.scaling",
                f"nothing scales a group of orchestrator {group.orchestrator}: gpuforge installs no cluster "
                "autoscaler or Karpenter, so the group would stay at min while pods pend",
                "replace scaling with count: N, or run the group under orchestrator: slurm (gpuforge-lifecycle "
                "scales it with the queue)",
            )
        )
    elif group.orchestrator not in ELASTIC_ORCHESTRATORS:
        issues.append(
            SpecIssue(
                f"{path}.scaling",
                f"an elastic group needs a scheduler that asks for nodes; orchestrator is {group.orchestrator}",
                "set orchestrator: slurm, or replace scaling with count: N",
            )
        )
    if group.capacity.type in ("capacity_reservation", "capacity_block"):
        issues.append(
            SpecIssue(
                f"{path}.scaling",
                f"a {group.capacity.type.replace('_', ' ')} is paid for whether nodes run or not; scaling it in "
                "only leaves reserved capacity idle",
                "replace scaling with count: N (+ spares) sized to the reservation, or use capacity: on_demand",
            )
        )
    if group.spares:
        issues.append(
            SpecIssue(
                f"{path}.spares",
                f"{group.spares} spares on an elastic group: it launches a replacement when it needs one",
                "remove spares, or raise scaling.min to keep nodes warm",
            )
        )
    return issues


def _capacity_block(path: str, group: NodeGroup) -> list[SpecIssue]:
    block = group.capacity
    if block.type != "capacity_block":
        return []
    issues: list[SpecIssue] = []
    if block.end <= block.start:
        issues.append(
            SpecIssue(
                f"{path}.capacity.end",
                f"{block.end.isoformat()} is not after start ({block.start.isoformat()})",
                "write the block's window as AWS shows it (describe-capacity-reservations StartDate, EndDate)",
            )
        )
    else:
        for field, problem in capacity_block_problem(block.start, block.end):
            message, _, fix = problem.rpartition("; ")
            issues.append(SpecIssue(f"{path}.capacity.{field}", message, fix))
    if block.instance_type != group.instance_type:
        issues.append(
            SpecIssue(
                f"{path}.capacity.instance_type",
                f"the block holds {block.instance_type} and the group launches {group.instance_type}: "
                "launches outside the block's type are refused",
                f"set instance_type: {block.instance_type} on the group, or name the block of "
                f"{group.instance_type} you bought",
            )
        )
    if group.scaling is None and group.total_nodes > block.instance_count:
        issues.append(
            SpecIssue(
                f"{path}.count",
                f"count + spares ({group.count} + {group.spares} = {group.total_nodes}) exceed the block's "
                f"{block.instance_count} instances",
                f"lower count + spares to at most {block.instance_count}, or set capacity.instance_count to the "
                "block you bought",
            )
        )
    return issues


def _update_strategy(path: str, group: NodeGroup) -> list[SpecIssue]:
    strategy = group.update_strategy
    if strategy is None:
        return []
    if group.orchestrator == "eks":
        return [
            SpecIssue(
                f"{path}.update_strategy",
                f"{strategy}: an EKS managed node group rolls its nodes through EKS's own update (cordon, drain, "
                "replace)",
                "remove update_strategy",
            )
        ]
    if strategy == "drain" and group.orchestrator != "slurm":
        return [
            SpecIssue(
                f"{path}.update_strategy",
                f"drain waits for each node's Slurm jobs, and orchestrator is {group.orchestrator}",
                "use update_strategy: instance_refresh, or set orchestrator: slurm",
            )
        ]
    return []
