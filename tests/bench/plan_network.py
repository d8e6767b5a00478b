"""A stack's network as its plan declares it, for the bench: the subnets, the machines at their planned private
addresses with the names EC2 gives them, and each machine's security groups as an nftables ruleset.

Everything here is read from the plan (``gpuforge.plan.engine.plan_stack``), never from the spec:
- A controller is an ``aws:ec2/instance:Instance``: its ``privateIp``, ``subnetId`` and ``vpcSecurityGroupIds``.
- A node group is an ``aws:autoscaling/group:Group``: its first subnet (``vpcZoneIdentifiers``) and the security
  groups of its launch template's primary network interface. An Auto Scaling group's instances get whatever
  free address EC2 picks in the subnet; the bench picks them deterministically from ``ASG_FIRST_HOST`` on.
- EC2 names an instance after its private address: ``ip-10-20-128-10`` (the "IP name" hostname type, the
  default for a subnet; AWS, "Amazon EC2 instance hostname types").

Security groups become nftables in each machine's own network namespace, as AWS enforces them at each network
interface: deny by default both ways, stateful (``ct state established,related``: a security group admits a
connection's replies), one accept per ingress and egress rule of every group the machine is in. A rule that
references a group admits that group's members' addresses; a CIDR rule its CIDR. Terraform's AWS provider, under
Pulumi's, removes the allow-all egress rule AWS gives a new group (registry.terraform.io, aws_security_group:
"Terraform will remove this default rule"), so egress is the plan's egress rules only.

One accept is not from the plan: SSH from the harness's address (``HarnessAccess``), how the tests reach every
machine, as operators reach them through Session Manager in production (no security-group rule needed there).
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from gpuforge.plan.model import Plan, PlanResource

INSTANCE = "aws:ec2/instance:Instance"
ASG = "aws:autoscaling/group:Group"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
ID_SUFFIX = "-id"  # the offline engine's mock id of a resource: its name + "-id" (gpuforge/plan/engine.py)
# Where the bench's Auto Scaling instances start in their subnet: above AWS's reserved first four addresses and
# the controllers' planned host .10 (gpuforge/infra/aws/slurm.py).
ASG_FIRST_HOST = 100
TABLE = "gpuforge_security_groups"


class PlanNetworkError(ValueError):
    """The plan declares something the bench cannot reproduce (a rule it cannot express, say)."""


@dataclass(frozen=True)
class Subnet:
    name: str
    cidr: str
    tier: str

    @property
    def router(self) -> str:
        """The subnet's first host: the VPC router's address in every AWS subnet (AWS reserves it), so no
        instance ever has it. On the bench the VPC router namespace holds it."""
        return str(next(ipaddress.ip_network(self.cidr).hosts()))

    @property
    def prefix_length(self) -> int:
        return ipaddress.ip_network(self.cidr).prefixlen


@dataclass(frozen=True)
class PlannedMachine:
    """One instance of the stack: a controller, or one of a node group's instances."""

    key: str  # the controller's Name tag, or <node group>-<n>
    node_group: str  # the gpuforge:node-group tag (slurm_controllers for the controllers)
    subnet: Subnet
    address: str
    security_groups: tuple[str, ...]  # security group resource names
    user_data: str = ""  # its launch template's user data (a #cloud-config document), decoded

    @property
    def ec2_hostname(self) -> str:
        """The name EC2 gives the instance before anything renames it (IP name)."""
        return "ip-" + self.address.replace(".", "-")


@dataclass(frozen=True)
class Rule:
    """One security-group rule of the plan, as the bench enforces it."""

    name: str
    group: str  # the group it belongs to
    direction: str  # "in" or "out"
    protocol: str  # "tcp", "udp", "icmp" or "-1" (all)
    ports: tuple[int, int] | None  # None: every port
    peer_group: str | None  # a referenced security group...
    cidr: str | None  # ...or a CIDR


@dataclass
class PlanNetwork:
    vpc_cidr: str
    subnets: dict[str, Subnet]
    machines: list[PlannedMachine]
    rules: list[Rule]
    node_groups: dict[str, list[PlannedMachine]] = field(default_factory=dict)

    def members(self, group: str) -> list[PlannedMachine]:
        return [m for m in self.machines if group in m.security_groups]

    def machine(self, key: str) -> PlannedMachine:
        (found,) = [m for m in self.machines if m.key == key]
        return found


@dataclass(frozen=True)
class HarnessAccess:
    """The harness's address: SSH from it is admitted everywhere (the module's docstring says why)."""

    address: str


def _by_id(plan: Plan, type_: str) -> dict[str, PlanResource]:
    return {r.name + ID_SUFFIX: r for r in plan.by_type(type_)}


def plan_network(plan: Plan, instances: dict[str, int] | None = None) -> PlanNetwork:
    """The network of *plan*'s stack with *instances* running in each node group (by gpuforge:node-group tag;
    a group not named runs its desired capacity)."""
    subnets_by_id = {
        rid: Subnet(r.name, r.inputs["cidrBlock"], r.inputs.get("tags", {}).get("gpuforge:tier", ""))
        for rid, r in _by_id(plan, SUBNET).items()
    }
    groups_by_id = {rid: r.name for rid, r in _by_id(plan, SECURITY_GROUP).items()}
    (vpc,) = plan.by_type("aws:ec2/vpc:Vpc")
    templates = _by_id(plan, LAUNCH_TEMPLATE)
    machines: list[PlannedMachine] = []
    for resource in plan.by_type(INSTANCE):
        tags = resource.inputs.get("tags", {})
        machines.append(PlannedMachine(
            key=tags["Name"],
            node_group=tags.get("gpuforge:node-group", ""),
            subnet=subnets_by_id[resource.inputs["subnetId"]],
            address=resource.inputs["privateIp"],
            security_groups=tuple(groups_by_id[g] for g in resource.inputs.get("vpcSecurityGroupIds", [])),
            user_data=_user_data(templates[resource.inputs["launchTemplate"]["id"]]),
        ))
    taken = {m.address for m in machines}
    node_groups: dict[str, list[PlannedMachine]] = {}
    for asg in plan.by_type(ASG):
        template = templates[asg.inputs["launchTemplate"]["id"]].inputs
        group = _template_tag(template, "gpuforge:node-group")
        primary = [n for n in template.get("networkInterfaces", []) if int(n.get("deviceIndex", 0)) == 0]
        security_groups = tuple(groups_by_id[g] for g in (primary[0]["securityGroups"] if primary else []))
        subnet = subnets_by_id[asg.inputs["vpcZoneIdentifiers"][0]]
        count = (instances or {}).get(group, int(asg.inputs.get("desiredCapacity", asg.inputs.get("minSize", 0))))
        hosts = (str(h) for h in list(ipaddress.ip_network(subnet.cidr).hosts())[ASG_FIRST_HOST - 1:])
        members = []
        for n in range(1, count + 1):
            address = next(h for h in hosts if h not in taken)
            taken.add(address)
            members.append(PlannedMachine(f"{group}-{n}", group, subnet, address, security_groups,
                                          _user_data(templates[asg.inputs["launchTemplate"]["id"]])))
        node_groups[group] = members
        machines += members
    rules = [_rule(r, groups_by_id, "in") for r in plan.by_type(INGRESS)]
    rules += [_rule(r, groups_by_id, "out") for r in plan.by_type(EGRESS)]
    return PlanNetwork(vpc.inputs["cidrBlock"], {s.name: s for s in subnets_by_id.values()}, machines, rules,
                       node_groups)


def _user_data(template: PlanResource) -> str:
    encoded = template.inputs.get("userData")
    return base64.b64decode(encoded).decode() if isinstance(encoded, str) else ""


def _template_tag(template: dict[str, Any], key: str) -> str:
    for spec in template.get("tagSpecifications", []):
        if spec.get("resourceType") == "instance" and key in spec.get("tags", {}):
            return str(spec["tags"][key])
    raise PlanNetworkError(f"launch template without an instance tag {key!r}")


def _rule(resource: PlanResource, groups_by_id: dict[str, str], direction: str) -> Rule:
    inputs = resource.inputs
    protocol = str(inputs["ipProtocol"])
    if protocol not in ("tcp", "udp", "icmp", "-1"):
        raise PlanNetworkError(f"{resource.name}: protocol {protocol!r} is not one the bench enforces")
    if inputs.get("cidrIpv6") or inputs.get("prefixListId"):
        raise PlanNetworkError(f"{resource.name}: IPv6 and prefix-list rules are not enforced on the bench")
    ports = None if protocol in ("-1", "icmp") else (int(inputs["fromPort"]), int(inputs["toPort"]))
    peer = inputs.get("referencedSecurityGroupId")
    return Rule(
        name=resource.name,
        group=groups_by_id[inputs["securityGroupId"]],
        direction=direction,
        protocol=protocol,
        ports=ports,
        peer_group=groups_by_id[peer] if peer else None,
        cidr=inputs.get("cidrIpv4"),
    )


def without_rules(plan: Plan, *names: str) -> Plan:
    """*plan* less the security-group rules named *names* (what a test removes to see a journey fail)."""
    known = {r.name for r in plan.resources if r.type in (INGRESS, EGRESS)}
    if unknown := sorted(set(names) - known):
        raise PlanNetworkError(f"no such security-group rule in the plan: {unknown}")
    kept = [r for r in plan.resources if not (r.type in (INGRESS, EGRESS) and r.name in names)]
    return replace(plan, resources=kept)


def nft_ruleset(network: PlanNetwork, machine: PlannedMachine, harness: HarnessAccess) -> str:
    """The nftables ruleset that enforces *machine*'s security groups in its network namespace."""
    lines = [
        f"# {machine.key} ({machine.address}): security groups {', '.join(machine.security_groups)}",
        f"table inet {TABLE} {{",
        "  chain input {",
        "    type filter hook input priority filter; policy drop;",
        '    iif "lo" accept',
        "    ct state established,related accept",
        f'    ip saddr {harness.address} tcp dport 22 accept comment "bench harness (Session Manager in production)"',
        *(f"    {line}" for line in _accepts(network, machine, "in")),
        "  }",
        "  chain output {",
        "    type filter hook output priority filter; policy drop;",
        '    oif "lo" accept',
        "    ct state established,related accept",
        *(f"    {line}" for line in _accepts(network, machine, "out")),
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _accepts(network: PlanNetwork, machine: PlannedMachine, direction: str) -> Iterable[str]:
    peer_field = "saddr" if direction == "in" else "daddr"
    for rule in sorted(network.rules, key=lambda r: r.name):
        if rule.direction != direction or rule.group not in machine.security_groups:
            continue
        if rule.peer_group is not None:
            peers = sorted({m.address for m in network.members(rule.peer_group)})
            if not peers:
                yield f"# {rule.name}: no member of {rule.peer_group} on the bench"
                continue
            match = f"ip {peer_field} {{ {', '.join(peers)} }}"
        else:
            match = "" if rule.cidr == "0.0.0.0/0" else f"ip {peer_field} {rule.cidr}"
        match = match or "meta nfproto ipv4"
        if rule.protocol == "-1":
            service = ""
        elif rule.ports is None:
            service = f"meta l4proto {rule.protocol}"
        else:
            low, high = rule.ports
            service = f"{rule.protocol} dport {low if low == high else f'{low}-{high}'}"
        yield " ".join(part for part in (match, service, f'accept comment "{rule.name}"') if part)
