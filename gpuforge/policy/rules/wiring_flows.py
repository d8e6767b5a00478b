"""Wiring pack, the flow model (gpuforge/catalog/data/flows.yaml) against a Slurm cluster's plan on AWS.

Each role of the cluster (controllers, login nodes, compute nodes, the monitoring node group, the accounting
database, /home's mount targets, the Lustre file system) declares the flows its daemons need and the AWS calls
they make. These rules find each role's members in the plan, by what carries them:

- controller: EC2 instances tagged gpuforge:slurm-role=controller (gpuforge/infra/aws/slurm.py);
- login, compute: node groups (gpuforge:aws:GpuNodeGroup) of role login, and of role training run by Slurm;
- monitoring: the node group Prometheus runs on (gpuforge:aws:AlertSecrets readerNodeGroup);
- database: RDS instances; home: EFS mount targets; lustre: FSx for Lustre file systems;

and the security groups each member carries (a launch template's interfaces, an instance's or a database's
vpcSecurityGroupIds, a mount target's securityGroups). A flow from A to B needs, for every member of B and
every other member of A, an ingress rule on a group B carries admitting a group A carries (or a CIDR holding
the whole VPC) on the flow's ports, and an egress rule of A's groups reaching B. An ingress rule on a role's
group from another role's group that no flow between them needs is reported as well: a rule from a CIDR, or
wider than the flows' ports. Rules from groups no role carries (a bastion's, the ingress tier's) are outside
the model and left alone.

Slurm's ports are the stack's (recorded on the SlurmControlPlane component, as slurm.conf renders them).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from gpuforge.catalog.flows import Flow, FlowModel, load_flows
from gpuforge.catalog.tokens import ALERT_SECRETS, NODE_GROUP, RDS_INSTANCE, SLURM_CONTROL_PLANE, SLURM_ROLE_TAG, VPC

from .base import Resource, RuleContext, Stack, Violation, as_list, is_unknown, stack_rule
from .security import INSTANCE, LAUNCH_TEMPLATE, LUSTRE, SECURITY_GROUP
from .wiring_aws import ROLE, _actions, _covers, _identities, mentions
from .wiring_slurm import Opening, _grants, _network, burst_ports, openings

MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"
INSTANCE_PROFILE = "aws:iam/instanceProfile:InstanceProfile"
FIX_SOURCE = "gpuforge/infra/aws/slurm.py declares the control plane's rules from gpuforge/catalog/data/flows.yaml"


@dataclass(frozen=True)
class Member:
    """One resource that plays a role: the security groups it carries and the IAM roles it runs as."""

    resource: Resource
    groups: frozenset[str]  # security group URNs
    iam_roles: tuple[Resource, ...] = field(default=())


def _groups_of(stack: Stack, holder: Resource, *props: str) -> frozenset[str]:
    return frozenset(sg.urn for sg in stack.of_type(SECURITY_GROUP) if any(mentions(holder, p, sg) for p in props))


def _node_group_members(stack: Stack, group: Resource) -> Member:
    templates = stack.children(group, LAUNCH_TEMPLATE)
    groups = frozenset().union(*(_groups_of(stack, lt, "networkInterfaces", "vpcSecurityGroupIds") for lt in templates))
    return Member(group, groups, tuple(stack.children(group, ROLE)))


def _profile_roles(stack: Stack, holder: Resource, prop: str) -> list[Resource]:
    """The IAM roles of the instance profile `holder.prop` names (by dependency, id, name or ARN suffix)."""
    arn = holder.get(prop, "arn")
    profiles = [
        p for p in stack.of_type(INSTANCE_PROFILE)
        if mentions(holder, prop, p) or (isinstance(arn, str) and arn.rsplit("/", 1)[-1].rsplit(":", 1)[-1] == p.name)
    ]
    return [r for p in profiles for r in stack.of_type(ROLE) if stack.refers_to(p, "role", r)]


def _controller(stack: Stack, instance: Resource) -> Member:
    roles = _profile_roles(stack, instance, "iamInstanceProfile")
    for lt in stack.of_type(LAUNCH_TEMPLATE):
        if mentions(instance, "launchTemplate", lt):
            roles += _profile_roles(stack, lt, "iamInstanceProfile")
    return Member(instance, _groups_of(stack, instance, "vpcSecurityGroupIds", "securityGroups"), tuple(roles))


def role_members(stack: Stack) -> dict[str, list[Member]]:
    """Every role of the flow model with the plan's resources that play it."""
    monitoring = {str(a.get("readerNodeGroup")) for a in stack.of_type(ALERT_SECRETS) if a.get("readerNodeGroup")}
    members: dict[str, list[Member]] = {role: [] for role in load_flows().roles}
    for group in stack.of_type(NODE_GROUP):
        member = _node_group_members(stack, group)
        if group.get("role") == "login":
            members["login"].append(member)
        elif group.get("role") == "training" and group.get("orchestrator") == "slurm":
            members["compute"].append(member)
        if group.get("nodeGroup") in monitoring:
            members["monitoring"].append(member)
    for instance in stack.of_type(INSTANCE):
        tags = instance.get("tags")
        if isinstance(tags, Mapping) and tags.get(SLURM_ROLE_TAG) == "controller":
            members["controller"].append(_controller(stack, instance))
    members["database"] = [
        Member(db, _groups_of(stack, db, "vpcSecurityGroupIds")) for db in stack.of_type(RDS_INSTANCE)
    ]
    members["home"] = [Member(mt, _groups_of(stack, mt, "securityGroups")) for mt in stack.of_type(MOUNT_TARGET)]
    members["lustre"] = [Member(fs, _groups_of(stack, fs, "securityGroupIds")) for fs in stack.of_type(LUSTRE)]
    return members


# --- what a rule's peer is -----------------------------------------------------------------------


class _Network:
    """Security groups by identity, and the VPC's CIDRs (a CIDR peer holding all of them reaches every member)."""

    def __init__(self, stack: Stack) -> None:
        self.groups = stack.of_type(SECURITY_GROUP)
        self.by_identity = {i: sg.urn for sg in self.groups for i in _identities(sg)}
        self.by_urn = {sg.urn: sg for sg in self.groups}
        self.vpcs = [
            ipaddress.ip_network(str(v.get("cidrBlock")), strict=False)
            for v in stack.of_type(VPC) if isinstance(v.get("cidrBlock"), str)
        ]

    def peer_groups(self, opening: Opening) -> set[str]:
        """The security groups an opening admits (ingress) or reaches (egress): a separate rule's referenced
        group by the engine's dependencies or by value, an inline rule's groups by value, `self` its own."""
        owner = opening.owner
        found = {
            sg.urn for sg in self.groups
            if owner.type != SECURITY_GROUP
            and (mentions(owner, "referencedSecurityGroupId", sg) or mentions(owner, "sourceSecurityGroupId", sg))
        }
        for peer in opening.peers:
            if peer.kind in ("nodes", "group"):
                found.add(opening.group.urn if peer.value == "self" else self.by_identity.get(peer.value, ""))
        return found - {""}

    def whole_vpc(self, opening: Opening) -> bool:
        nets = [n for p in opening.peers if p.kind == "cidr" and (n := _network(p)) is not None and n.version == 4]
        return any(
            n.prefixlen == 0 or (bool(self.vpcs) and all(v.subnet_of(n) for v in self.vpcs))  # type: ignore[arg-type]
            for n in nets
        )

    def name(self, urn: str) -> str:
        return self.by_urn[urn].name if urn in self.by_urn else urn

    def names(self, urns: frozenset[str] | set[str]) -> str:
        return ", ".join(sorted(self.name(u) for u in urns)) or "no security group"


def _ports(low: int, high: int, protocol: str = "tcp") -> str:
    if protocol == "all" or (low <= 0 and high >= 65535):
        return "all traffic"
    return f"tcp {low}" if low == high else f"tcp {low}-{high}"


def _covered(low: int, high: int, ranges: list[tuple[int, int]]) -> bool:
    point = low
    for lo, hi in sorted(ranges):
        if lo > point:
            break
        point = max(point, hi + 1)
        if point > high:
            return True
    return point > high


def _context(stack: Stack) -> tuple[Resource, FlowModel, dict[str, list[Member]]] | None:
    planes = stack.of_type(SLURM_CONTROL_PLANE)
    if not planes:
        return None  # the model is a Slurm cluster's on AWS (a hybrid burst has wiring-slurm-burst-ports)
    return planes[0], load_flows(), role_members(stack)


# --- wiring-flows-security-groups ----------------------------------------------------------------------------


@stack_rule(
    "wiring-flows-security-groups",
    why="Every daemon of a Slurm cluster needs the flows its role declares (slurmd and clients to slurmctld on "
    "6817, slurmctld to slurmd on 6818, slurmctld and slurmd back to srun in SrunPortRange on login nodes, "
    "slurmctld and sacct to slurmdbd on 6819, slurmdbd to the database on 3306, NFS to /home, Prometheus to the "
    "exporters); a security group without one hangs or fails exactly that path (an srun that had to queue never "
    "starts), and a rule no flow needs opens a daemon to hosts that have no business there (the accounting "
    "database to every login node). Flows: gpuforge/catalog/data/flows.yaml, from the Slurm Network "
    "Configuration Guide (slurm.schedmd.com/network.html) and the exporters' and AWS services' documentation.",
    fix="add the named SecurityGroupIngressRule (and egress) between the roles' groups on the flow's ports, and "
    "remove rules no flow needs (gpuforge/infra/aws/slurm.py declares the control plane's from flows.yaml; a flow "
    "the cluster really needs belongs in flows.yaml with its source)",
)
def flows_security_groups(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    rule = "wiring-flows-security-groups"
    found = _context(stack)
    if found is None:
        return
    plane, model, members = found
    ports = burst_ports(plane)  # the catalog's Slurm ports with the stack's override, as recorded
    net = _Network(stack)
    ingress = openings(stack, net.groups, "ingress")
    egress = openings(stack, net.groups, "egress")
    present = {role for role, m in members.items() if m}

    # Missing: every flow between roles the stack has, member by member.
    for flow in model.flows:
        if not {flow.source_role, flow.target_role} <= present:
            continue
        low, high = model.port_range(flow, ports)
        what = (
            f"{_ports(low, high, flow.protocol)} from {flow.source_role} to {flow.target_role} "
            f"({flow.why}; {flow.source})"
        )
        for b in members[flow.target_role]:
            sources = [a for a in members[flow.source_role] if a.resource.urn != b.resource.urn]
            admits = [o for o in ingress if o.group.urn in b.groups and o.covers(low, high)]
            lacking = [a for a in sources if not any(net.peer_groups(o) & a.groups or net.whole_vpc(o) for o in admits)]
            if lacking:
                from_groups = net.names(frozenset().union(*(a.groups for a in lacking)))
                yield Violation(
                    rule, b.resource.urn,
                    f"{b.resource.name} ({flow.target_role}): no ingress rule on {net.names(b.groups)} admits "
                    f"{what}; add a SecurityGroupIngressRule on the {flow.target_role} group from {from_groups} "
                    f"for {_ports(low, high, flow.protocol)} ({FIX_SOURCE})",
                )
        for a in members[flow.source_role]:
            targets = [b for b in members[flow.target_role] if b.resource.urn != a.resource.urn]
            leaves = [o for o in egress if o.group.urn in a.groups and o.covers(low, high)]
            blocked = [b for b in targets if not any(net.peer_groups(o) & b.groups or net.whole_vpc(o) for o in leaves)]
            if blocked:
                yield Violation(
                    rule, a.resource.urn,
                    f"{a.resource.name} ({flow.source_role}): no egress rule of {net.names(a.groups)} lets out "
                    f"{what}; add a SecurityGroupEgressRule to the {flow.target_role} group (or 0.0.0.0/0, as the "
                    "tier groups have)",
                )

    role_groups = {role: frozenset().union(*(m.groups for m in ms)) for role, ms in members.items()}
    modelled = frozenset().union(*role_groups.values())

    # Exclusive roles (controllers, the database): a group of their own, carried by no other role.
    for role in sorted(r for r in present if model.roles[r].exclusive):
        for member in members[role]:
            for group in sorted(member.groups):
                sharing = sorted(r for r in present if r != role and group in role_groups[r])
                if sharing:
                    yield Violation(
                        rule, member.resource.urn,
                        f"{member.resource.name} ({role}): carries {net.name(group)}, also carried by "
                        f"{', '.join(sharing)}, so whatever reaches one reaches the other; give the {role} a "
                        f"security group of its own ({FIX_SOURCE})",
                    )

    # External flows the stack turned on (slurmrestd from the pipelines' ranges): each range admitted on its port.
    ranges = client_ranges(plane)
    yield from _external_missing(rule, model, members, ingress, ranges)

    # Unneeded: ingress on a role's group, from a role's group or an address range, that no flow asks for.
    for o in ingress:
        if o.group.urn not in modelled:
            continue
        for peer in o.peers:
            if peer.kind == "cidr" and _allowed_range(model, role_groups, ranges, o, peer.value):
                continue
            if peer.kind in ("cidr", "prefix list"):
                yield Violation(
                    rule, o.owner.urn,
                    f"{o.owner.name}: admits {o.ports} on {o.group.name} from {peer.kind} {peer.value}; the roles "
                    "carrying that group talk only to the roles of the flow model, by security group; remove the "
                    "rule or reference the source role's group",
                )
        for source in sorted(net.peer_groups(o) & modelled):
            needs = [
                f for f in model.flows
                if {f.source_role, f.target_role} <= present
                and o.group.urn in role_groups[f.target_role] and source in role_groups[f.source_role]
            ]
            if not _covered(o.low, o.high, [model.port_range(f, ports) for f in needs]):
                wanted = "; ".join(_flow_text(model, f, ports) for f in needs) or "none"
                yield Violation(
                    rule, o.owner.urn,
                    f"{o.owner.name}: admits {o.ports} on {o.group.name} from {net.name(source)}, which no flow of "
                    f"the model needs (flows from the roles carrying {net.name(source)} to those carrying "
                    f"{o.group.name}: {wanted}); narrow or remove the rule, or add the flow to "
                    "gpuforge/catalog/data/flows.yaml with its source",
                )
                continue
            # An exclusive role is reached only by roles that have a flow to it: a tier group shared with a role
            # that never talks to it (login nodes beside the database's client) lets that role in too.
            for target in sorted(r for r in present if model.roles[r].exclusive and o.group.urn in role_groups[r]):
                strangers = sorted(
                    r for r in present if source in role_groups[r] and r != target
                    and not any((f.source_role, f.target_role) == (r, target) for f in needs)
                )
                if strangers:
                    yield Violation(
                        rule, o.owner.urn,
                        f"{o.owner.name}: admits {o.ports} on {o.group.name} ({target}) from {net.name(source)}, "
                        f"also carried by {', '.join(strangers)}, and no flow goes from "
                        f"{' or '.join(strangers)} to {target}; reference a group only the {target}'s clients "
                        f"carry ({FIX_SOURCE})",
                    )


def client_ranges(plane: Resource) -> dict[str, list[str]]:
    """The ranges each external flow admits, as the control plane recorded them (clientRanges)."""
    recorded = plane.get("clientRanges")
    if not isinstance(recorded, Mapping):
        return {}
    return {str(k): [str(c) for c in as_list(v)] for k, v in recorded.items()}


def _allowed_range(
    model: FlowModel, role_groups: Mapping[str, frozenset[str]], ranges: Mapping[str, list[str]], o: Opening,
    cidr: str,
) -> bool:
    """An ingress from *cidr* that an external flow turned on asks for: on its role's group, within its ports."""
    for flow in model.external_flows:
        low, high = model.ports[flow.ports].ports
        if (cidr in ranges.get(flow.name, []) and o.group.urn in role_groups.get(flow.target_role, frozenset())
                and low <= o.low and o.high <= high):
            return True
    return False


def _external_missing(
    rule: str, model: FlowModel, members: Mapping[str, list[Member]], ingress: list[Opening],
    ranges: Mapping[str, list[str]],
) -> Iterator[Violation]:
    for flow in model.external_flows:
        low, high = model.ports[flow.ports].ports
        for member in members.get(flow.target_role, []):
            admits = [o for o in ingress if o.group.urn in member.groups and o.covers(low, high)]
            for cidr in ranges.get(flow.name, []):
                if not any(p.kind == "cidr" and p.value == cidr for o in admits for p in o.peers):
                    yield Violation(
                        rule, member.resource.urn,
                        f"{member.resource.name} ({flow.target_role}): no ingress rule admits {_ports(low, high)} "
                        f"from {cidr}, which {flow.allowed_from} allows ({flow.why}; {flow.source}); add a "
                        f"SecurityGroupIngressRule on the {flow.target_role} group from {cidr} for "
                        f"{_ports(low, high)} ({FIX_SOURCE})",
                    )


def _flow_text(model: FlowModel, flow: Flow, ports: object) -> str:
    low, high = model.port_range(flow, ports)  # type: ignore[arg-type]
    return f"{flow.source_role} -> {flow.target_role} {_ports(low, high, flow.protocol)}"


# --- wiring-flows-iam ---------------------------------------------------------------------------------------


@stack_rule(
    "wiring-flows-iam",
    why="The daemons of each role call AWS with their instance role: munge reads the munge key, slurmdbd the "
    "database password, gpuforge-lifecycle scales and replaces the groups, the topology timer reads EC2 "
    "instance topology, Prometheus' ec2_sd_configs lists the instances it scrapes (ec2:DescribeInstances); "
    "without the permission the call is refused and that part of the cluster silently stops (Prometheus sees "
    "no target, so no alert ever fires). Calls: gpuforge/catalog/data/flows.yaml aws_calls, with their "
    "sources.",
    fix="grant the named actions in a RolePolicy on the role's instance role (gpuforge/infra/aws/slurm.py for the "
    "controllers and the munge key, gpuforge/infra/aws/placement.py for Prometheus' service discovery)",
)
def flows_iam(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    rule = "wiring-flows-iam"
    found = _context(stack)
    if found is None:
        return
    _, model, members = found
    grants = _grants(stack)
    for role, calls in sorted(model.aws_calls.items()):
        for member in members.get(role, []):
            docs = [doc for _, doc, roles in grants if any(r.urn in {m.urn for m in member.iam_roles} for r in roles)]
            if not member.iam_roles or any(doc is None for doc in docs):
                continue  # no instance role in the plan (another rule's concern), or a document unknown in preview
            statements = [
                st for doc in docs if doc is not None for st in as_list(doc.get("Statement"))
                if isinstance(st, Mapping) and st.get("Effect") == "Allow" and not is_unknown(st.get("Action"))
            ]
            for call in calls:
                missing = [a for a in call.actions if not any(_covers(_actions(st), a) for st in statements)]
                if missing:
                    yield Violation(
                        rule, member.resource.urn,
                        f"{member.resource.name} ({role}): its instance role "
                        f"{', '.join(r.name for r in member.iam_roles)} is not allowed {', '.join(missing)}, which "
                        f"{call.caller} calls ({call.source}); grant them in a RolePolicy on that role",
                    )
