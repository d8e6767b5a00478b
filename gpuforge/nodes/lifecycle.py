"""Node lifecycle on the Slurm controller: elastic scaling, replacement of failed nodes, rolling image
updates and the fabric gate, one reconciliation cycle at a time (`gpuforge-lifecycle cycle`, run by the
slurm_scaler role's systemd timer).

Each cycle reads Slurm (scontrol, squeue) and the Auto Scaling groups (boto3), decides in
:func:`decide` (pure, unit-tested), then acts:

- Scale up: jobs pending in an elastic group's partitions raise the group's desired capacity (never
  above max); the new instances join by dynamic registration as ``<group>-<instance id>``.
- Scale down: a node idle longer than the group's scale-down idle time is drained, checked again for
  jobs, terminated with ``ShouldDecrementDesiredCapacity=True`` and deleted from Slurm; never below min.
- Replacement: a node drained by a gpuforge health check (reason ``gpuforge prolog:``, ``gpuforge
  epilog:``, ``gpuforge check:``) is terminated once idle WITHOUT decrementing the desired capacity, so
  the group launches a replacement; spares keep the partition's size meanwhile.
- Rolling update (ParallelCluster's DRAIN strategy): an instance launched from another launch template
  version than its group's (or, where AWS reports no version, from another AMI) is drained (at most
  ``rolling_batch`` per group at a time), and replaced once idle.
- Fabric gate: a gated group's nodes register drained (slurmd ``--conf "State=DRAIN ..."``); the
  gate runs nccl-tests through srun on the node alone and with a healthy neighbour, each against its
  floor (a fraction of the catalog's reference busbw), then resumes the node or leaves it drained with
  the measured figure as the reason. Where no node of the type serves yet (a first deploy, a group
  scaling from zero), nodes awaiting the gate are tested in pairs; a lone one waits for a partner (an
  elastic group launches one).

A node with jobs is never terminated: only a drained node (no new jobs) that Slurm reports without
jobs is. A node maps to its instance by its Slurm name, ``<group>-<instance id>``, which the node sets at
boot (instance_name.py). This file runs on the controller with the standard library, boto3, health.py and
instance_name.py beside it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

try:
    from gpuforge.nodes.health import parse_nccl_tests
    from gpuforge.nodes.instance_name import node_name
except ImportError:  # installed on the controller: health.py and instance_name.py sit beside this file
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
    from health import parse_nccl_tests  # type: ignore[import-not-found,no-redef,unused-ignore]
    from instance_name import node_name  # type: ignore[import-not-found,no-redef,unused-ignore]

LOG = logging.getLogger("gpuforge-lifecycle")
CONFIG_PATH = Path("/etc/gpuforge/lifecycle.json")
NODE_GROUP_TAG = "gpuforge:node-group"
CLUSTER_TAG = "gpuforge:cluster"
# Reasons gpuforge's health checks drain a node with (the prolog/epilog script, `gpuforge check --drain`).
HEALTH_REASON_PREFIXES = ("gpuforge prolog:", "gpuforge epilog:", "gpuforge health:", "gpuforge check:")
GATE_PENDING = "gpuforge gate: awaiting acceptance"
GATE_FAILED = "gpuforge gate failed:"
# Passed alone, waits for a second node of its type to run the two-node test with: retried every cycle.
GATE_WAITING = "gpuforge gate: waiting for a neighbour:"
# Two new nodes failed their two-node test together: either may be the bad one, so each is tested
# again once a node of its type serves (an elastic group replaces them instead).
GATE_RETEST = "gpuforge gate: retest with a serving neighbour:"
# What an older gpuforge-lifecycle wrote when no neighbour served; it is a wait, not a failure.
_LEGACY_NO_NEIGHBOUR = "gpuforge gate failed: two-node test not run"
ROLLING = "gpuforge rolling update:"
SCALEDOWN = "gpuforge scale-down:"
# Pending reasons more nodes cannot help (a dependency, a hold, a limit, a time).
NOT_CAPACITY = (
    "Dependency",
    "BeginTime",
    "JobHeld",
    "Assoc",
    "QOS",
    "PartitionDown",
    "PartitionInactive",
    "PartitionTimeLimit",
    "Invalid",
    "AccountNotAllowed",
    "Reservation",
    "DependencyNeverSatisfied",
)
BUSY_STATES = {"ALLOCATED", "MIXED", "COMPLETING"}


# --- configuration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class GatePolicy:
    """Acceptance of a new node: nccl-tests all_reduce_perf alone and with a neighbour, against floors."""

    single_node_floor_gbps: float | None
    two_node_floor_gbps: float | None
    message_bytes: int
    nccl_tests: str  # the all_reduce_perf binary on the nodes
    gpus: int
    # Slurm's own PMI-2: needs no PMIx library on the nodes, and Open MPI (nccl-tests' MPI=1) speaks it.
    mpi: str = "pmi2"
    timeout_s: int = 900


@dataclass(frozen=True)
class Window:
    """A maintenance window the spec declares over a group (scheduler.reservations): once, or every period."""

    name: str
    start: datetime
    end: datetime
    period: timedelta | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Window:
        period = data.get("period_s")
        return cls(name=data["name"], start=_utc(data["start"]), end=_utc(data["end"]),
                   period=timedelta(seconds=period) if period else None)

    def current(self, now: datetime) -> tuple[datetime, datetime] | None:
        """The occurrence that holds *now* or comes next; None once a one-off window has passed."""
        start, end = self.start, self.end
        if self.period is not None and end <= now:
            skip = -(-(now - end) // self.period)
            start, end = start + skip * self.period, end + skip * self.period
        return (start, end) if end > now else None


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.removesuffix("Z")).replace(tzinfo=UTC)


@dataclass(frozen=True)
class GroupPolicy:
    name: str
    partitions: tuple[str, ...]
    instance_type: str
    elastic: bool = False
    min_nodes: int = 0
    max_nodes: int = 0
    scaledown_idle_minutes: float = 10.0
    gate: GatePolicy | None = None
    windows: tuple[Window, ...] = ()


@dataclass(frozen=True)
class LifecycleConfig:
    cluster: str
    region: str
    groups: Mapping[str, GroupPolicy]
    endpoint_url: str | None = None
    rolling_batch: int = 1
    gate_partition: str = "gpuforge-gate"  # hidden, root-only, every node: where the gate's jobs run
    # A group no maintenance window covers: rolled at any time (True), or never (False, scheduler.reservations).
    rolling_outside_windows: bool = True

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LifecycleConfig:
        groups = {}
        for name, group in data["groups"].items():
            gate = group.get("gate")
            groups[name] = GroupPolicy(
                name=name,
                partitions=tuple(group["partitions"]),
                instance_type=group["instance_type"],
                elastic=bool(group.get("elastic", False)),
                min_nodes=int(group.get("min", 0)),
                max_nodes=int(group.get("max", 0)),
                scaledown_idle_minutes=float(group.get("scaledown_idle_minutes", 10)),
                gate=GatePolicy(**gate) if gate else None,
                windows=tuple(Window.from_dict(w) for w in group.get("maintenance_windows", [])),
            )
        return cls(
            cluster=data["cluster"],
            region=data["region"],
            groups=groups,
            endpoint_url=data.get("endpoint_url"),
            rolling_batch=int(data.get("rolling_batch", 1)),
            gate_partition=data.get("gate_partition", "gpuforge-gate"),
            rolling_outside_windows=bool(data.get("rolling_outside_windows", True)),
        )


# --- what the cycle sees ------------------------------------------------------------------------


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str  # base state: IDLE, ALLOCATED, MIXED, DOWN, ...
    flags: frozenset[str]  # DRAIN, COMPLETING, DYNAMIC_NORM, ...
    reason: str = ""
    last_busy: datetime | None = None
    features: frozenset[str] = frozenset()

    @property
    def group(self) -> str | None:
        """The node group, from the group_<name> feature every gpuforge node carries."""
        return next((f.removeprefix("group_") for f in sorted(self.features) if f.startswith("group_")), None)

    @property
    def has_jobs(self) -> bool:
        return self.state in BUSY_STATES or "COMPLETING" in self.flags

    @property
    def drained(self) -> bool:
        """Drained and without jobs (Slurm's DRAINED, as opposed to DRAINING)."""
        return "DRAIN" in self.flags and not self.has_jobs

    @property
    def serving(self) -> bool:
        """Takes jobs: up and not draining."""
        return "DRAIN" not in self.flags and self.state not in ("DOWN", "FUTURE", "UNKNOWN")


@dataclass(frozen=True)
class PendingJob:
    job_id: str
    partitions: tuple[str, ...]
    nodes: int
    reason: str


@dataclass(frozen=True)
class Instance:
    instance_id: str
    lifecycle_state: str  # Pending, InService, Terminating, ...
    image_id: str | None = None
    # The launch template (id, version) the instance was launched from (DescribeAutoScalingGroups).
    template_id: str | None = None
    template_version: str | None = None


@dataclass(frozen=True)
class AutoScalingGroup:
    name: str
    group: str  # gpuforge:node-group
    desired: int
    min_size: int
    max_size: int
    instances: tuple[Instance, ...]
    image_id: str | None = None  # the AMI of the launch template version the group launches
    template_id: str | None = None
    template_version: str | None = None  # that version's number

    def outdated(self, instance: Instance) -> str | None:
        """Why *instance* runs something else than the group launches now, or None.

        The launch template version decides where both are numbers (any template change: image, user
        data, ...); the AMI where AWS reports no number (``$Latest``/``$Default`` or nothing)."""
        if self.image_id and instance.image_id and instance.image_id != self.image_id:
            return f"image {instance.image_id} -> {self.image_id}"
        ours, theirs = self.template_version or "", instance.template_version or ""
        if ours.isdigit() and theirs.isdigit() and (theirs, instance.template_id) != (ours, self.template_id):
            return f"launch template {instance.template_id} v{theirs} -> {self.template_id} v{ours}"
        return None


# --- what the cycle does ------------------------------------------------------------------------


@dataclass(frozen=True)
class SetDesired:
    asg: str
    desired: int
    why: str


@dataclass(frozen=True)
class Drain:
    node: str
    reason: str


@dataclass(frozen=True)
class Terminate:
    """Terminate *instance* (its Slurm node *node* must be drained and idle) and delete the node."""

    asg: str
    instance_id: str
    node: str
    decrement: bool
    why: str


@dataclass(frozen=True)
class Accept:
    """Run the fabric gate on *nodes* (one, or two new nodes tested as a pair) with *neighbour*, a serving
    node of the same type, when there is one. *alone*: the group can never hold a second node of its
    type, so a node passing its single-node test is admitted without the two-node test (said so)."""

    group: str
    nodes: tuple[str, ...]
    neighbour: str | None
    alone: bool = False


@dataclass(frozen=True)
class Forget:
    """Delete a dynamic node whose instance is gone from its group."""

    node: str


Action = SetDesired | Drain | Terminate | Accept | Forget


@dataclass
class Decision:
    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _needed_nodes(policy: GroupPolicy, pending: Iterable[PendingJob]) -> int:
    return sum(
        job.nodes
        for job in pending
        if set(job.partitions) & set(policy.partitions) and not job.reason.startswith(NOT_CAPACITY)
    )


def decide(
    config: LifecycleConfig,
    nodes: Mapping[str, SlurmNode],
    pending: Sequence[PendingJob],
    groups: Mapping[str, AutoScalingGroup],
    now: datetime,
) -> Decision:
    """Everything one cycle should do, from what Slurm and the Auto Scaling groups report."""
    decision = Decision()
    for name, policy in config.groups.items():
        asg = groups.get(name)
        if asg is None:
            decision.notes.append(f"group {name}: no Auto Scaling group tagged {NODE_GROUP_TAG}={name}")
            continue
        _decide_group(config, policy, asg, nodes, pending, now, decision)
    return decision


def _decide_group(
    config: LifecycleConfig,
    policy: GroupPolicy,
    asg: AutoScalingGroup,
    nodes: Mapping[str, SlurmNode],
    pending: Sequence[PendingJob],
    now: datetime,
    decision: Decision,
) -> None:
    live = [
        i for i in asg.instances if i.lifecycle_state in ("Pending", "Pending:Wait", "Pending:Proceed", "InService")
    ]
    by_node = {node_name(policy.name, i.instance_id): i for i in live}
    # Dynamic nodes of this group whose instance left the group (terminated elsewhere): forget them.
    prefix = f"{policy.name}-i-"
    for name, node in nodes.items():
        if name.startswith(prefix) and name not in by_node and not node.has_jobs:
            decision.actions.append(Forget(name))
    registered = {n: nodes[n] for n in by_node if n in nodes}
    in_service = len(live)
    leaving = 0  # instances this cycle terminates with the desired capacity decremented
    awaiting: list[str] = []  # registered drained, awaiting the gate: capacity on its way
    neighbour = _neighbour(config, policy, nodes)

    for name, node in registered.items():
        instance = by_node[name]
        if node.reason.startswith(HEALTH_REASON_PREFIXES) and "DRAIN" in node.flags:
            if node.drained:
                decision.actions.append(
                    Terminate(asg.name, instance.instance_id, name, False, f"health: {node.reason}")
                )
            else:
                decision.notes.append(f"{name}: drained by its health check, waiting for its jobs to end")
        elif policy.gate is not None and "DRAIN" in node.flags and _awaits_gate(node.reason, neighbour):
            awaiting.append(name)
        elif policy.gate is not None and policy.elastic and node.drained and _gate_rejected(node.reason):
            # An elastic group does not keep a rejected node (it costs money and serves nothing); the
            # measured figure is in this cycle's log. Below min, the group replaces it instead.
            decrement = in_service - leaving > policy.min_nodes
            decision.actions.append(Terminate(asg.name, instance.instance_id, name, decrement, node.reason))
            leaving += decrement
    partner_wanted = _plan_gates(config, policy, nodes, awaiting, neighbour, decision)

    # Rolling update: instances launched from another launch template version (or AMI) than the group's.
    why_outdated = {n: why for n, i in by_node.items() if (why := asg.outdated(i))}
    outdated = list(why_outdated)
    rolling = [n for n in outdated if n in registered and registered[n].reason.startswith(ROLLING)]
    for name in rolling:
        if registered[name].drained:
            instance = by_node[name]
            decision.actions.append(Terminate(asg.name, instance.instance_id, name, False, registered[name].reason))
    budget = max(0, config.rolling_batch - len(rolling))
    held = _rolling_held(config, policy, now) if outdated else None
    if held:
        decision.notes.append(f"group {policy.name}: {len(outdated)} node(s) to roll; {held}")
        budget = 0
    # Idle nodes first: they are replaced at once, busy ones after their jobs.
    for name in sorted(outdated, key=lambda n: (n not in registered or registered[n].has_jobs, n)):
        if budget == 0:
            break
        candidate = registered.get(name)
        if candidate is not None and "DRAIN" not in candidate.flags:
            reason = f"{ROLLING} {why_outdated[name]}"
            decision.actions.append(Drain(name, reason))
            budget -= 1

    if not policy.elastic:
        return
    needed = _needed_nodes(policy, pending)
    idle = [n for n, node in registered.items() if node.serving and not node.has_jobs]
    launching = max(0, asg.desired - len(registered))
    booting = launching + len(awaiting)
    want = asg.desired
    whys = []
    if needed and asg.desired + max(0, needed - len(idle) - booting) > asg.desired:
        want = min(policy.max_nodes, asg.desired + max(0, needed - len(idle) - booting))
        whys.append(f"{needed} node(s) wanted by pending jobs")
    if partner_wanted and not launching and want == asg.desired and asg.desired < policy.max_nodes:
        # A lone node awaiting its gate and nothing of its type serving or booting: one more node to run
        # the two-node test with (it serves too, and scale-down takes it back once idle).
        want = asg.desired + 1
        whys.append(f"a gate partner for {partner_wanted}")
    if want > asg.desired:
        decision.actions.append(SetDesired(asg.name, want, "; ".join(whys)))
    if needed:
        return
    # Scale down: idle past the group's idle time, oldest first, never below min.
    idle_limit = timedelta(minutes=policy.scaledown_idle_minutes)
    for name in sorted(idle, key=lambda n: registered[n].last_busy or now):
        node = registered[name]
        idle_for = now - (node.last_busy or now)
        if idle_for < idle_limit or in_service - leaving <= policy.min_nodes:
            continue
        decision.actions.append(Drain(name, f"{SCALEDOWN} idle {idle_for.total_seconds() / 60:.0f} min"))
        decision.actions.append(Terminate(asg.name, by_node[name].instance_id, name, True, "idle"))
        leaving += 1
    # A node drained for scale-down by an earlier cycle that got no further (the controller restarted).
    for name, node in registered.items():
        if node.reason.startswith(SCALEDOWN) and node.drained and in_service - leaving > policy.min_nodes:
            decision.actions.append(Terminate(asg.name, by_node[name].instance_id, name, True, "idle"))
            leaving += 1


def _rolling_held(config: LifecycleConfig, policy: GroupPolicy, now: datetime) -> str | None:
    """Why a rolling update of *policy*'s group may not drain now, or None: a group a maintenance window covers
    is drained inside the window only (its MAINT reservation has kept jobs off the nodes); one no window covers
    at any time, unless the spec refuses that (scheduler.rolling_updates_outside_windows: false)."""
    if not policy.windows:
        if config.rolling_outside_windows:
            return None
        return ("refused: no maintenance window covers the group and scheduler.rolling_updates_outside_windows "
                "is false; declare one in scheduler.reservations")
    # The cycle's clock is the controller's local time (naive), the windows' UTC.
    moment = now.astimezone(UTC)
    upcoming: list[tuple[datetime, datetime, str]] = []
    for window in policy.windows:
        occurrence = window.current(moment)
        if occurrence is not None:
            upcoming.append((*occurrence, window.name))
    if any(start <= moment < end for start, end, _ in upcoming):
        return None
    if not upcoming:
        return "waiting: every maintenance window over the group has passed; declare a new one"
    start, _, name = min(upcoming)
    return f"waiting for maintenance window {name} at {start:%Y-%m-%dT%H:%MZ}"


def _neighbour(config: LifecycleConfig, policy: GroupPolicy, nodes: Mapping[str, SlurmNode]) -> str | None:
    """A healthy, idle node of the same instance type to run the pairwise test with."""
    same_type = {g.name for g in config.groups.values() if g.instance_type == policy.instance_type}
    for name in sorted(nodes):
        node = nodes[name]
        if node.serving and not node.has_jobs and node.group in same_type:
            return name
    return None


def _awaits_gate(reason: str, neighbour: str | None) -> bool:
    """A drained node the gate should test this cycle."""
    if reason in ("", GATE_PENDING) or reason.startswith((GATE_WAITING, _LEGACY_NO_NEIGHBOUR)):
        # Registered drained (slurmd -Z --conf "State=DRAIN ...": Slurm keeps no reason), sent back, or
        # still waiting for a neighbour.
        return True
    return reason.startswith(GATE_RETEST) and neighbour is not None


def _gate_rejected(reason: str) -> bool:
    return reason.startswith((GATE_FAILED, GATE_RETEST)) and not reason.startswith(_LEGACY_NO_NEIGHBOUR)


def _plan_gates(
    config: LifecycleConfig,
    policy: GroupPolicy,
    nodes: Mapping[str, SlurmNode],
    awaiting: Sequence[str],
    neighbour: str | None,
    decision: Decision,
) -> str | None:
    """Accept actions for the nodes awaiting the gate; the lone node that needs a partner, if any.

    With a serving neighbour each node is tested with it. Without one (a first deploy registers every
    node drained; a group scaling from zero has nothing serving), the awaiting nodes are tested in pairs.
    A lone node gets its single-node test and then waits for a partner."""
    if neighbour is not None:
        decision.actions.extend(Accept(policy.name, (name,), neighbour) for name in sorted(awaiting))
        return None
    ordered = sorted(awaiting)
    pairs = zip(ordered[0::2], ordered[1::2], strict=False)  # the odd one out, if any, is handled below
    decision.actions.extend(Accept(policy.name, pair, None) for pair in pairs)
    if len(ordered) % 2 == 0:
        return None
    lone = ordered[-1]
    same_type = [g for g in config.groups.values() if g.instance_type == policy.instance_type]
    if sum(g.max_nodes for g in same_type) <= 1 and all(g.name == policy.name for g in same_type):
        decision.actions.append(Accept(policy.name, (lone,), None, alone=True))
        return None
    if nodes[lone].reason.startswith(GATE_WAITING):
        decision.notes.append(f"{lone}: passed alone, waits for a node of its type for the two-node test")
    else:
        decision.actions.append(Accept(policy.name, (lone,), None))
    return lone


# --- Slurm --------------------------------------------------------------------------------------


def _run(argv: Sequence[str], timeout: float = 60) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


_FIELD = re.compile(r"(?:^|\s)([A-Z][A-Za-z/:]*)=")


def parse_scontrol_nodes(text: str) -> dict[str, SlurmNode]:
    """``scontrol --oneliner show node``: one node a line, Key=Value fields (Reason may hold spaces)."""
    nodes = {}
    for line in text.splitlines():
        matches = list(_FIELD.finditer(line))
        fields = {
            m.group(1): line[m.end() : matches[i + 1].start() if i + 1 < len(matches) else len(line)].strip()
            for i, m in enumerate(matches)
        }
        if "NodeName" not in fields:
            continue
        state, *flags = fields.get("State", "UNKNOWN").split("+")
        reason = re.sub(r"\s*\[[^\]]*@[^\]]*\]$", "", fields.get("Reason", ""))  # drop "[user@time]"
        busy = fields.get("LastBusyTime", "")
        nodes[fields["NodeName"]] = SlurmNode(
            name=fields["NodeName"],
            state=state.rstrip("*~#%!$@^-"),
            flags=frozenset(flags),
            reason="" if reason in ("(null)", "none") else reason,
            last_busy=_time(busy),
            features=frozenset(f for f in fields.get("AvailableFeatures", "").split(",") if f and f != "(null)"),
        )
    return nodes


def _time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def parse_squeue_pending(text: str) -> list[PendingJob]:
    """``squeue -h -t PD -o %i|%P|%D|%r``."""
    jobs = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4 and parts[2].isdigit():
            jobs.append(PendingJob(parts[0], tuple(parts[1].split(",")), int(parts[2]), parts[3]))
    return jobs


class Slurm:
    """The controller's Slurm, through its commands (run as root, or SlurmUser)."""

    def nodes(self) -> dict[str, SlurmNode]:
        return parse_scontrol_nodes(_run(["scontrol", "--oneliner", "show", "node"]))

    def pending(self) -> list[PendingJob]:
        return parse_squeue_pending(_run(["squeue", "-h", "-t", "PD", "-o", "%i|%P|%D|%r"]))

    def drain(self, node: str, reason: str) -> None:
        _run(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason[:250]}"])

    def resume(self, node: str) -> None:
        _run(["scontrol", "update", f"nodename={node}", "state=resume"])

    def delete(self, node: str) -> None:
        _run(["scontrol", "delete", f"nodename={node}"])

    def reserve(self, name: str, nodes: Sequence[str]) -> None:
        """A maintenance reservation for root only: the gate's jobs run there, users' jobs do not."""
        _run(["scontrol", "create", f"reservation={name}", f"nodes={','.join(nodes)}", "users=root",
              "flags=maint,ignore_jobs", "starttime=now", "duration=60"])  # fmt: skip

    def unreserve(self, name: str) -> None:
        subprocess.run(["scontrol", "delete", f"reservation={name}"], capture_output=True, check=False, timeout=60)

    def srun(self, argv: Sequence[str], timeout: float) -> tuple[int, str]:
        try:
            proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return 124, f"timed out after {timeout:.0f}s"
        return proc.returncode, proc.stdout + proc.stderr


# --- Auto Scaling -------------------------------------------------------------------------------


class AutoScalingApi(Protocol):
    def describe_auto_scaling_groups(self, **kwargs: Any) -> dict[str, Any]: ...
    def set_desired_capacity(self, **kwargs: Any) -> dict[str, Any]: ...
    def terminate_instance_in_auto_scaling_group(self, **kwargs: Any) -> dict[str, Any]: ...


class Ec2Api(Protocol):
    def describe_instances(self, **kwargs: Any) -> dict[str, Any]: ...
    def describe_launch_template_versions(self, **kwargs: Any) -> dict[str, Any]: ...


def clients(config: LifecycleConfig) -> tuple[AutoScalingApi, Ec2Api]:
    import boto3  # type: ignore[import-not-found,import-untyped,unused-ignore]

    kwargs: dict[str, Any] = {"region_name": config.region}
    if config.endpoint_url:
        kwargs["endpoint_url"] = config.endpoint_url
    return boto3.client("autoscaling", **kwargs), boto3.client("ec2", **kwargs)


def read_groups(config: LifecycleConfig, autoscaling: AutoScalingApi, ec2: Ec2Api) -> dict[str, AutoScalingGroup]:
    """The cluster's Auto Scaling groups by node group (tags gpuforge:cluster and gpuforge:node-group)."""
    found: dict[str, AutoScalingGroup] = {}
    filters = [{"Name": f"tag:{CLUSTER_TAG}", "Values": [config.cluster]}]
    for raw in autoscaling.describe_auto_scaling_groups(Filters=filters)["AutoScalingGroups"]:
        tags = {t["Key"]: t["Value"] for t in raw.get("Tags", [])}
        group = tags.get(NODE_GROUP_TAG, "")
        if group not in config.groups:
            continue
        ids = [i["InstanceId"] for i in raw.get("Instances", [])]
        images = _instance_images(ec2, ids)
        template = raw.get("LaunchTemplate") or {}
        image_id, version = _template(ec2, template)
        found[group] = AutoScalingGroup(
            name=raw["AutoScalingGroupName"],
            group=group,
            desired=raw["DesiredCapacity"],
            min_size=raw["MinSize"],
            max_size=raw["MaxSize"],
            instances=tuple(
                Instance(
                    i["InstanceId"],
                    i["LifecycleState"],
                    images.get(i["InstanceId"]),
                    (i.get("LaunchTemplate") or {}).get("LaunchTemplateId"),
                    (i.get("LaunchTemplate") or {}).get("Version"),
                )
                for i in raw.get("Instances", [])
            ),
            image_id=image_id,
            template_id=template.get("LaunchTemplateId"),
            template_version=version,
        )
    return found


def _instance_images(ec2: Ec2Api, ids: list[str]) -> dict[str, str]:
    if not ids:
        return {}
    reservations = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    return {i["InstanceId"]: i.get("ImageId", "") for r in reservations for i in r["Instances"]}


def _accepts(client: Any, operation: str, parameter: str) -> bool:
    """Whether the installed botocore knows *parameter*: Debian 12's python3-botocore (1.29) predates
    ResolveAlias and refuses the whole call (ParamValidationError), as the booted test found. Without it a
    resolve:ssm: image reads as unknown and the launch template version alone decides."""
    try:
        members = client.meta.service_model.operation_model(operation).input_shape.members
    except AttributeError:  # a stand-in client without botocore's model
        return True
    return parameter in members


def _template(ec2: Ec2Api, template: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(AMI id, version number) of the launch template version the group launches.

    ResolveAlias: a template whose image is ``resolve:ssm:<parameter>`` answers with the AMI the parameter
    names today instead of the parameter string, which no instance's ImageId would ever equal (EC2 API,
    DescribeLaunchTemplateVersions; default false)."""
    if not template:
        return None, None
    key = {"LaunchTemplateId": template["LaunchTemplateId"]} if "LaunchTemplateId" in template else {
        "LaunchTemplateName": template["LaunchTemplateName"]}  # fmt: skip
    resolve = {"ResolveAlias": True} if _accepts(ec2, "DescribeLaunchTemplateVersions", "ResolveAlias") else {}
    versions = ec2.describe_launch_template_versions(
        **key, Versions=[str(template.get("Version", "$Default"))], **resolve
    )["LaunchTemplateVersions"]
    if not versions:
        return None, None
    image = versions[0]["LaunchTemplateData"].get("ImageId")
    number = versions[0].get("VersionNumber")
    return (None if image and image.startswith("resolve:ssm:") else image), (None if number is None else str(number))


# --- the fabric gate ----------------------------------------------------------------------------


@dataclass(frozen=True)
class GateResult:
    node: str
    verdict: str  # "admitted", or the reason the node stays drained with
    figures: Mapping[str, float | None]
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.verdict == ADMITTED


ADMITTED = "admitted"


def judge_nccl(
    label: str, output: str, rc: int, floor: float | None, message_bytes: int
) -> tuple[str | None, float | None]:
    """(problem or None, busbw GB/s at the message size) for one all_reduce_perf run."""
    result = parse_nccl_tests(output)
    rows = [row for row in result.rows if row.size_bytes == message_bytes] or list(result.rows[-1:])
    busbw = rows[0].out_of_place_busbw_gbps if rows else None
    if rc != 0 or busbw is None:
        tail = (output.strip().splitlines() or ["no output"])[-1]
        return f"{label} all_reduce_perf gave no bus bandwidth (exit {rc}): {tail[:80]}", busbw
    if result.out_of_bounds_ok is False or any(row.wrong for row in result.rows):
        return f"{label} all_reduce_perf found wrong results", busbw
    if floor is not None and busbw < floor:
        return f"{label} busbw {busbw:g} GB/s at {rows[0].size_bytes} B < floor {floor:g} GB/s", busbw
    return None, busbw


def run_gate(
    slurm: Slurm,
    gate: GatePolicy,
    partition: str,
    nodes: Sequence[str],
    neighbour: str | None,
    alone: bool = False,
) -> list[GateResult]:
    """nccl-tests on each of *nodes* alone, then two nodes together (a node with the serving *neighbour*,
    or the two new *nodes* as a pair), inside a root-only maintenance reservation so no user job lands on
    a node before it is judged. Every node ends admitted or drained with the reason."""
    reservation = f"gpuforge-gate-{nodes[0]}"
    problems: dict[str, list[str]] = {n: [] for n in nodes}
    figures: dict[str, dict[str, float | None]] = {n: {} for n in nodes}
    notes: list[str] = []
    verdicts: dict[str, str] = {}
    bench = [gate.nccl_tests, "-b", str(gate.message_bytes), "-e", str(gate.message_bytes), "-g", "1"]
    base = ["srun", f"--reservation={reservation}", f"--partition={partition}", f"--mpi={gate.mpi}",
            f"--ntasks-per-node={gate.gpus}", f"--time={max(1, gate.timeout_s // 60)}"]  # fmt: skip

    def run(label: str, where: Sequence[str], floor: float | None) -> tuple[str | None, float | None]:
        rc, out = slurm.srun([*base, f"-N{len(where)}", f"--nodelist={','.join(where)}", *bench], gate.timeout_s)
        return judge_nccl(label, out, rc, floor, gate.message_bytes)

    slurm.reserve(reservation, [*nodes, *([neighbour] if neighbour else [])])
    try:
        for node in nodes:
            slurm.resume(node)
        if gate.single_node_floor_gbps is None:
            notes.append("single-node: the catalog has no floor for this type, its figure is reported only")
        for node in nodes:
            problem, figures[node]["single-node"] = run("single-node", [node], gate.single_node_floor_gbps)
            if problem:
                problems[node].append(problem)
                verdicts[node] = f"{GATE_FAILED} {problem}"
        healthy = [n for n in nodes if not problems[n]]
        if neighbour is not None:
            for node in healthy:
                label = f"two-node with {neighbour}"
                problem, figures[node][label] = run(label, [node, neighbour], gate.two_node_floor_gbps)
                verdicts[node] = f"{GATE_FAILED} {problem}" if problem else ADMITTED
        elif len(healthy) == 2:
            first, second = healthy
            label = f"two-node pair {first},{second}"
            problem, busbw = run(label, healthy, gate.two_node_floor_gbps)
            for node in healthy:
                figures[node][label] = busbw
                # Two new nodes: either may be the bad one, so neither is judged until one serves.
                verdicts[node] = f"{GATE_RETEST} {problem}" if problem else ADMITTED
        elif alone:
            for node in healthy:
                notes.append("two-node: not run, the group holds one node of its type")
                verdicts[node] = ADMITTED
        else:
            for node in healthy:
                single = figures[node].get("single-node")
                verdicts[node] = f"{GATE_WAITING} single-node passed ({single} GB/s), two-node test not run yet"
    finally:
        for node in nodes:
            verdict = verdicts.get(node, GATE_PENDING)  # cut short: tested again next cycle
            current = slurm.nodes().get(node)
            if current is not None and current.reason.startswith(HEALTH_REASON_PREFIXES):
                # The prolog (or a health check) drained it during the gate: its reason is the one that
                # gets the node replaced, so it stays.
                verdicts[node] = current.reason
            elif verdict != ADMITTED:
                slurm.drain(node, verdict)
        slurm.unreserve(reservation)
    return [GateResult(n, verdicts[n], figures[n], tuple(notes)) for n in nodes]


# --- the cycle ----------------------------------------------------------------------------------


def act(decision: Decision, config: LifecycleConfig, slurm: Slurm, autoscaling: AutoScalingApi) -> list[str]:
    """Carry out *decision*; what was done, one line each."""
    done: list[str] = []
    for action in decision.actions:
        if isinstance(action, SetDesired):
            autoscaling.set_desired_capacity(
                AutoScalingGroupName=action.asg, DesiredCapacity=action.desired, HonorCooldown=False
            )
            done.append(f"{action.asg}: desired capacity {action.desired} ({action.why})")
        elif isinstance(action, Drain):
            slurm.drain(action.node, action.reason)
            done.append(f"{action.node}: drained ({action.reason})")
        elif isinstance(action, Terminate):
            # Look again: only a drained node without jobs goes (a drain stops new jobs, so this holds).
            node = slurm.nodes().get(action.node)
            if node is None or not node.drained:
                done.append(f"{action.node}: kept, it has jobs or is not drained")
                continue
            autoscaling.terminate_instance_in_auto_scaling_group(
                InstanceId=action.instance_id, ShouldDecrementDesiredCapacity=action.decrement
            )
            slurm.delete(action.node)
            how = "desired capacity decremented" if action.decrement else "the group replaces it"
            done.append(f"{action.node}: terminated {action.instance_id}, {how} ({action.why})")
        elif isinstance(action, Accept):
            gate = config.groups[action.group].gate
            assert gate is not None
            for result in run_gate(slurm, gate, config.gate_partition, action.nodes, action.neighbour, action.alone):
                figures = ", ".join(f"{k} {v:g} GB/s" for k, v in result.figures.items() if v is not None)
                said = "; ".join([figures or "no figures", *result.notes])
                verdict = "admitted" if result.passed else f"kept drained: {result.verdict}"
                done.append(f"{result.node}: gate {verdict} ({said})")
        elif isinstance(action, Forget):
            slurm.delete(action.node)
            done.append(f"{action.node}: deleted from Slurm, its instance left the group")
    return done


def cycle(
    config: LifecycleConfig, slurm: Slurm, autoscaling: AutoScalingApi, ec2: Ec2Api, now: datetime | None = None
) -> list[str]:
    """One reconciliation: read, decide, act."""
    groups = read_groups(config, autoscaling, ec2)
    decision = decide(config, slurm.nodes(), slurm.pending(), groups, now or datetime.now())
    for note in decision.notes:
        LOG.info("%s", note)
    done = act(decision, config, slurm, autoscaling)
    for line in done:
        LOG.info("%s", line)
    return done


def roll(config: LifecycleConfig, slurm: Slurm, autoscaling: AutoScalingApi, ec2: Ec2Api, group: str,
         every_s: float = 30, timeout_s: float = 86400) -> int:  # fmt: skip
    """Run cycles until no instance of *group* runs another AMI than its launch template: drain, wait for
    the jobs, replace, a batch at a time. 0 when done, 1 when *timeout_s* passed first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        asg = read_groups(config, autoscaling, ec2).get(group)
        if asg is None:
            raise SystemExit(f"no Auto Scaling group tagged {NODE_GROUP_TAG}={group} in cluster {config.cluster}")
        left = [i.instance_id for i in asg.instances if asg.outdated(i)]
        if not left:
            return 0
        LOG.info("%s: %d instance(s) on another launch template or image: %s", group, len(left), ", ".join(left))
        cycle(config, slurm, autoscaling, ec2)
        time.sleep(every_s)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpuforge-lifecycle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=CONFIG_PATH)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("cycle", help="one reconciliation (the systemd timer runs this)")
    rolling = sub.add_parser("roll", help="replace a group's nodes on another image, draining first")
    rolling.add_argument("group")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    config = LifecycleConfig.from_dict(json.loads(args.config.read_text()))
    autoscaling, ec2 = clients(config)
    if args.command == "roll":
        return roll(config, Slurm(), autoscaling, ec2, args.group)
    cycle(config, Slurm(), autoscaling, ec2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
