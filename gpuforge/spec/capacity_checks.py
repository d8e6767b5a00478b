"""Capacity and update rules that need the group's neighbours (placement, capacity source,
orchestrator), each reported with its field path and the fix (issue 12)."""

from __future__ import annotations

from collections import Counter

from .capacity import ELASTIC_ORCHESTRATORS
from .errors import SpecIssue
from .limits import capacity_block_problem
from .models import ClusterSpec, NodeGroup
from .paths import NODE_GROUPS


def check_group_capacity(path: str, group: NodeGroup) -> list[SpecIssue]:
    """Elastic groups, Capacity Blocks and the update strategy of one AWS node group."""
    return [*_elastic(path, group), *_capacity_block(path, group), *_update_strategy(path, group)]


def _elastic(path: str, group: NodeGroup) -> list[SpecIssue]:
    if group.scaling is None:
        return []
    issues: list[SpecIssue] = []
    if group.orchestrator not in ELASTIC_ORCHESTRATORS:
        issues.append(
            SpecIssue(
                f"{path}.scaling",
                f"an elastic group needs a scheduler that asks for nodes; orchestrator is {group.orchestrator}",
                "set orchestrator: slurm (gpuforge-lifecycle scales it with the queue) or eks (the Cluster "
                "Autoscaler scales it with Kueue's admitted workloads), or replace scaling with count: N",
            )
        )
    if group.is_reserved:
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


# Spares belong to one Auto Scaling group (its launch template, its Slurm partition): a spare of one group
# cannot stand in for a node of another. Teams that want to share spares share a group.
SHARED_SPARES_HINT = (
    "; to share spares, make the teams one group on the reservation with a partition (or account) per team: "
    "a group's spares cannot stand in for another group's nodes"
)


def check_shared_reservations(spec: ClusterSpec) -> list[SpecIssue]:
    """Groups launching into one reservation or Capacity Block (teams sharing it): a reservation holds one
    instance type in one AZ (EC2 CreateCapacityReservation: InstanceType, AvailabilityZone), and every
    group's count + spares come out of its one size."""
    sharing: dict[str, list[str]] = {}
    for name, group in spec.node_groups.items():  # the stack file's order: a tie goes to the first group
        if group.reservation is not None:
            sharing.setdefault(group.reservation.reservation_id, []).append(name)
    issues: list[SpecIssue] = []
    for rid, names in sharing.items():
        groups = [(name, spec.node_groups[name]) for name in names]
        if len(groups) > 1:
            issues += _one_kind_per_reservation(rid, groups)
        issues += _reservation_size(rid, groups)
    return issues


def _one_kind_per_reservation(rid: str, groups: list[tuple[str, NodeGroup]]) -> list[SpecIssue]:
    """Each group that differs from what most groups on *rid* say (the first group's on a tie)."""
    issues: list[SpecIssue] = []
    # A block's groups each state its type (capacity.instance_type, checked against the group's own type
    # per group); a reservation's type is the groups' instance_type.
    blocks = all(group.capacity.type == "capacity_block" for _, group in groups)
    for field in ("capacity.type", "capacity.instance_type" if blocks else "instance_type", "availability_zone"):
        values = [(name, _field(group, field)) for name, group in groups]
        usual = Counter(value for _, value in values).most_common(1)[0][0]
        if all(value == usual for _, value in values):
            continue
        said = ", ".join(f"{name}: {value}" for name, value in values)
        for name, value in values:
            if value != usual:
                issues.append(
                    SpecIssue(
                        NODE_GROUPS.key(name).field(*field.split(".")),
                        f"{value}, while the groups launching into {rid} say {said}: a reservation holds one "
                        "instance type in one AZ",
                        f"set {field}: {usual} as the others do, or give {name} a reservation of its own",
                    )
                )
    return issues


def _field(group: NodeGroup, field: str) -> str | None:
    if field.startswith("capacity."):
        return str(getattr(group.capacity, field.removeprefix("capacity.")))
    return getattr(group, field)


def _reservation_size(rid: str, groups: list[tuple[str, NodeGroup]]) -> list[SpecIssue]:
    """count + spares of every fixed group on *rid* against the size the spec states (a block's
    instance_count, a reservation's optional one). One group over a block is _capacity_block's finding."""
    sizes: set[int] = {count for _, g in groups if (count := getattr(g.capacity, "instance_count", None)) is not None}
    if len(sizes) > 1:
        stated = ", ".join(f"{n}: {getattr(g.capacity, 'instance_count', None)}" for n, g in groups)
        return [
            SpecIssue(
                NODE_GROUPS.key(groups[-1][0]).field("capacity", "instance_count"),
                f"the groups on {rid} state different sizes ({stated})",
                "write the reservation's one size in each group's capacity.instance_count",
            )
        ]
    if not sizes:
        return []
    size = sizes.pop()
    fixed = [(n, g) for n, g in groups if g.scaling is None]
    total = sum(g.total_nodes for _, g in fixed)
    if total <= size or (len(fixed) == 1 and fixed[0][1].capacity.type == "capacity_block"):
        return []
    parts = " + ".join(f"{n} {g.count}+{g.spares}" for n, g in fixed)
    return [
        SpecIssue(
            NODE_GROUPS.key(fixed[-1][0]).field("count"),
            f"count + spares on {rid} add up to {total} ({parts}), past its {size} instances",
            f"lower the groups' count or spares to fit {size}, or grow the reservation and its instance_count"
            + (SHARED_SPARES_HINT if len(fixed) > 1 and all(g.spares for _, g in fixed) else ""),
        )
    ]
