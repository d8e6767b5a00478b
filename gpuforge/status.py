"""`gpuforge status STACK` and `gpuforge ssh STACK [NODE]`: the cluster as AWS has it on day two.

status: the stack's instances (EC2 DescribeInstances, by the gpuforge:cluster and gpuforge:node-group tags
the launch templates and controllers carry) against the plan: per group, nodes by EC2 state against
count + spares (or an elastic group's min-max), the spares in hand, the image each node booted against
the one the spec pins, and each reservation's use (DescribeCapacityReservations). A call AWS refuses
or a stand-in lacks is reported as unchecked, never as fine. The Slurm state of each node is the
controller's to tell (`sinfo`), reached with `gpuforge ssh STACK controller`.

ssh: on AWS, a Session Manager session (`aws ssm start-session`, the account's Session Manager
preferences: Run As, encrypted and logged; no open port); on premises, SSH to the management address
the spec gives the login host (or a site host).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from gpuforge.catalog.tokens import SLURM_ROLE_TAG
from gpuforge.nodes.inventory import CLUSTER_TAG, NODE_GROUP_TAG
from gpuforge.preflight import call_aws
from gpuforge.spec import ResolvedSpec

LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]


@dataclass(frozen=True)
class Node:
    name: str  # the Slurm node name (<group>-<instance id>), or a controller's Name tag
    instance_id: str
    group: str  # node group, "controller", or "" for an instance of the cluster in no group
    state: str
    private_ip: str
    image_id: str
    availability_zone: str


@dataclass
class GroupStatus:
    name: str
    planned: str  # 64+2, or 0-2 for an elastic group
    least: int  # nodes that should run at least (count + spares; an elastic group's min)
    most: int
    spares: int
    by_state: dict[str, int] = field(default_factory=dict)
    slurm_states: dict[str, int] = field(default_factory=dict)  # sinfo's node states on the controller
    images: dict[str, int] = field(default_factory=dict)
    pinned_image: str | None = None  # the spec's image.ami_id, when pinned
    findings: list[str] = field(default_factory=list)

    @property
    def running(self) -> int:
        return self.by_state.get("running", 0)


@dataclass
class ReservationUse:
    reservation_id: str
    groups: list[str]
    total: int | None = None
    available: int | None = None
    state: str = ""
    unchecked: str = ""  # why AWS did not say


@dataclass
class StatusReport:
    stack: str
    region: str
    groups: list[GroupStatus] = field(default_factory=list)
    controllers: list[Node] = field(default_factory=list)
    reservations: list[ReservationUse] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    pending_jobs: int | None = None  # squeue on the controller; None: not asked or not answered

    @property
    def healthy(self) -> bool:
        return not self.unchecked and not any(g.findings for g in self.groups)

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "region": self.region,
            "healthy": self.healthy,
            "groups": [{**asdict(g), "running": g.running} for g in self.groups],
            "controllers": [asdict(n) for n in self.controllers],
            "reservations": [asdict(r) for r in self.reservations],
            "nodes": [asdict(n) for n in self.nodes],
            "pending_jobs": self.pending_jobs,
            "unchecked": self.unchecked,
        }


def cluster_instances(ec2: Any, cluster: str) -> tuple[list[Node], str | None]:
    """Every live instance tagged with *cluster*, or why AWS did not list them."""
    nodes: list[Node] = []

    def describe() -> None:
        filters = [
            {"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]},
            {"Name": "instance-state-name", "Values": LIVE_STATES},
        ]
        for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page.get("Reservations", []):
                nodes.extend(_node(instance) for instance in reservation.get("Instances", []))

    _, failure = call_aws(describe)
    return sorted(nodes, key=lambda n: (n.group, n.name)), failure


def _node(instance: dict[str, Any]) -> Node:
    tags = {t.get("Key"): t.get("Value", "") for t in instance.get("Tags", [])}
    iid = str(instance.get("InstanceId", ""))
    group = tags.get(NODE_GROUP_TAG) or ("controller" if tags.get(SLURM_ROLE_TAG) == "controller" else "")
    name = f"{group}-{iid}" if tags.get(NODE_GROUP_TAG) else tags.get("Name", iid)
    return Node(
        name=name,
        instance_id=iid,
        group=group,
        state=str((instance.get("State") or {}).get("Name", "")),
        private_ip=str(instance.get("PrivateIpAddress", "")),
        image_id=str(instance.get("ImageId", "")),
        availability_zone=str((instance.get("Placement") or {}).get("AvailabilityZone", "")),
    )


def cluster_status(resolved: ResolvedSpec, ec2: Any, stack: str = "", ssm: Any = None) -> StatusReport:
    spec = resolved.spec
    report = StatusReport(stack, spec.region or "")
    nodes, failure = cluster_instances(ec2, spec.name)
    if failure is not None:
        report.unchecked.append(f"instances: could not list them ({failure}); grant ec2:DescribeInstances")
        return report
    report.nodes = nodes
    report.controllers = [n for n in nodes if n.group == "controller"]
    for name, group in resolved.node_groups.items():
        report.groups.append(_group_status(name, group.spec, [n for n in nodes if n.group == name]))
    report.reservations = _reservations(resolved, ec2, report.unchecked)
    if ssm is not None and resolved.scheduler is not None and spec.placement.kind == "aws":
        _ask_slurm(report, ssm)  # a hybrid cluster's controller is on the site, out of Run Command's reach
    strays = [n for n in nodes if n.group not in resolved.node_groups and n.group != "controller"]
    for stray in strays:
        report.unchecked.append(f"{stray.instance_id} ({stray.name}) carries the cluster's tag but no known group")
    return report


def _group_status(name: str, spec: Any, nodes: list[Node]) -> GroupStatus:
    least, most = spec.min_nodes, spec.max_nodes
    status = GroupStatus(name, spec.nodes_text, least, most, spec.spares, pinned_image=spec.image.ami_id)
    status.by_state = dict(Counter(n.state for n in nodes))
    status.images = dict(Counter(n.image_id for n in nodes if n.state in ("pending", "running")))
    running = status.running
    if running < least:
        short = least - running
        status.findings.append(
            f"{running} running of {least}: {short} short"
            + (f" (spares in hand: {max(0, running - (spec.count or 0))} of {spec.spares})" if spec.spares else "")
        )
    elif spec.spares and running - (spec.count or 0) < spec.spares:
        status.findings.append(f"spares in hand: {running - (spec.count or 0)} of {spec.spares}")
    if running > most:
        status.findings.append(f"{running} running, more than the group's {most}")
    if status.pinned_image is not None:
        drifted = sum(count for image, count in status.images.items() if image != status.pinned_image)
        if drifted:
            status.findings.append(f"{drifted} node(s) boot another image than the pinned {status.pinned_image}")
    elif len(status.images) > 1:
        status.findings.append(f"nodes boot {len(status.images)} different images (the image is not pinned)")
    return status


def _reservations(resolved: ResolvedSpec, ec2: Any, unchecked: list[str]) -> list[ReservationUse]:
    sharing: dict[str, list[str]] = {}
    for name, group in resolved.node_groups.items():
        if group.spec.reservation is not None:
            sharing.setdefault(group.spec.reservation.reservation_id, []).append(name)
    uses = []
    for rid, groups in sharing.items():
        use = ReservationUse(rid, groups)
        answer, failure = call_aws(partial(ec2.describe_capacity_reservations, CapacityReservationIds=[rid]))
        found = (answer or {}).get("CapacityReservations") or []
        if failure is not None or not found:
            use.unchecked = failure or "not returned by AWS"
            unchecked.append(f"reservation {rid}: {use.unchecked}")
        else:
            use.total = int(found[0].get("TotalInstanceCount") or 0)
            use.available = int(found[0].get("AvailableInstanceCount") or 0)
            use.state = str(found[0].get("State") or "")
        uses.append(use)
    return uses


# --- Slurm, asked on the controller --------------------------------------------------------------------

# One line per node and partition ("train-i-0abc idle"); then the number of pending jobs.
SLURM_QUERY = (
    "sinfo --noheader --Node --format='%N %T'; echo '--- pending'; "
    "squeue --noheader --states=PENDING --format=%i | wc -l"
)
RUN_SHELL = "AWS-RunShellScript"  # Systems Manager's own document: the controller's SSM agent runs it as root
WAITING = {"Pending", "InProgress", "Delayed"}


def _ask_slurm(report: StatusReport, ssm: Any, polls: int = 30, wait: Any = time.sleep) -> None:
    """Node states and the pending queue from the running controller, through Systems Manager Run
    Command (the controller's role has AmazonSSMManagedInstanceCore; the caller needs ssm:SendCommand)."""
    controller = next((n for n in report.controllers if n.state == "running"), None)
    if controller is None:
        report.unchecked.append("Slurm states: no controller is running")
        return
    sent, failure = call_aws(
        partial(ssm.send_command, InstanceIds=[controller.instance_id], DocumentName=RUN_SHELL,
                Parameters={"commands": [SLURM_QUERY]})
    )
    if failure is not None:
        report.unchecked.append(f"Slurm states: could not run sinfo on {controller.name} ({failure})")
        return
    command_id = sent["Command"]["CommandId"]
    for _ in range(polls):
        answer, failure = call_aws(
            partial(ssm.get_command_invocation, CommandId=command_id, InstanceId=controller.instance_id)
        )
        if failure is None and answer.get("Status") not in WAITING:
            break
        wait(1)
    if failure is not None or answer.get("Status") != "Success":
        why = failure or f"{answer.get('Status')}: {str(answer.get('StandardErrorContent', '')).strip()[:200]}"
        report.unchecked.append(f"Slurm states: sinfo on {controller.name} did not answer ({why})")
        return
    parsed = parse_slurm_answer(str(answer.get("StandardOutputContent", "")))
    if parsed is None:  # an agent that ran nothing (a stand-in) is no answer, never an empty cluster
        report.unchecked.append(f"Slurm states: the answer from {controller.name} carries no sinfo output")
        return
    states, pending = parsed
    report.pending_jobs = pending
    for group in report.groups:
        mine = [state for node, state in states.items() if node.startswith(f"{group.name}-")]
        group.slurm_states = dict(Counter(mine))


def parse_slurm_answer(text: str) -> tuple[dict[str, str], int | None] | None:
    """sinfo's node -> state (a node in several partitions listed once), and the pending job count; None
    when the text is not SLURM_QUERY's output."""
    nodes_part, marker, pending_part = text.partition("--- pending")
    if not marker:
        return None
    states: dict[str, str] = {}
    for line in nodes_part.splitlines():
        fields = line.split()
        if len(fields) == 2:
            states[fields[0]] = fields[1]
    count = pending_part.strip()
    return states, int(count) if count.isdigit() else None


# --- ssh -----------------------------------------------------------------------------------------------


class NoSuchNode(Exception):
    """The node the user named is not one of the stack's (the message lists what is)."""


def pick_node(nodes: list[Node], wanted: str | None, login_groups: list[str]) -> Node:
    """The running node *wanted* names (instance id, Slurm node name, Name tag, private address, a group
    or "controller": its first running node); none named: a login node, else the first controller."""
    running = [n for n in nodes if n.state == "running"]
    if wanted is None:
        preferred = [n for n in running if n.group in login_groups] + [n for n in running if n.group == "controller"]
        if preferred:
            return preferred[0]
        raise NoSuchNode("no login node or controller is running; name a node: " + _known(running))
    for node in running:
        if wanted in (node.instance_id, node.name, node.private_ip):
            return node
    in_group = [n for n in running if n.group == wanted]
    if in_group:
        return in_group[0]
    raise NoSuchNode(f"no running node {wanted!r}; running: " + _known(running))


def _known(nodes: list[Node]) -> str:
    return ", ".join(f"{n.name} ({n.private_ip})" for n in nodes) or "none"


def session_command(node: Node, region: str) -> list[str]:
    """Session Manager to *node*: the account's preferences document applies (Run As, logged, encrypted)."""
    return ["aws", "ssm", "start-session", "--target", node.instance_id, "--region", region]


def site_address(resolved: ResolvedSpec, wanted: str | None) -> tuple[str, str]:
    """(host, management address) on premises: a login host by default, else the host named."""
    scheduler = resolved.spec.scheduler
    login = dict(scheduler.login.hosts) if scheduler is not None else {}
    controllers = dict(scheduler.controller.hosts) if scheduler is not None else {}
    site = resolved.site
    hosts = {name: h.spec.management_ip for name, h in site.hosts.items()} if site is not None else {}
    known = {**hosts, **controllers, **login}
    if wanted is None:
        if login:
            return next(iter(login.items()))
        if controllers:
            return next(iter(controllers.items()))
        raise NoSuchNode("the spec names no login or controller host; name one of: " + ", ".join(known))
    if wanted in known:
        return wanted, known[wanted]
    for name, address in known.items():
        if address == wanted:
            return name, address
    raise NoSuchNode(f"no site host {wanted!r}; the spec's: " + ", ".join(f"{n} ({a})" for n, a in known.items()))
