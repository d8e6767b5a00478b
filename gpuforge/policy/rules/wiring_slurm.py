"""Wiring pack, hybrid Slurm burst (`hybrid.burst.mechanism: slurm`, gpuforge/infra/hybrid/slurm_burst.py): the
site's slurmctld drives cloud slurmd over the link, so the cloud nodes' security groups and the credentials the
burst hands out are what make it work and what keep it narrow. Spec checks refuse a bad spec; these rules see
what a resource-level change does (a security group rule edited by hand, a hand-added grant).

The ports are the catalog's (gpuforge/catalog/data/facts.yaml `slurm.ports`), the same object the rendered
slurm.conf writes SlurmdPort and SrunPortRange from; a stack that overrides them in its `catalog:` has the
overridden values recorded on the SlurmBurst component, which the rules apply over the catalog's.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpuforge.catalog.models import SlurmPorts, load_catalog
from gpuforge.catalog.tokens import NODE_GROUP, ROLE_POLICY_ATTACHMENT

from .base import (
    Resource,
    RuleContext,
    Stack,
    Violation,
    as_list,
    is_unknown,
    policy_document,
    stack_rule,
    truthy,
)
from .security import INGRESS_RULE, LAUNCH_TEMPLATE, SECURITY_GROUP, SECURITY_GROUP_RULE
from .wiring_aws import KMS_KEY, ROLE, ROLE_POLICY, SECRET, _allows, _principals, mentions

SLURM_BURST = "gpuforge:hybrid:SlurmBurst"
EGRESS_RULE = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
IAM_POLICY = "aws:iam/policy:Policy"
SECRET_POLICY = "aws:secretsmanager/secretPolicy:SecretPolicy"
CLUSTER_KEY = "gpuforge:aws:ClusterKey"
TRUST_ANCHOR = "aws:rolesanywhere/trustAnchor:TrustAnchor"
RA_PROFILE = "aws:rolesanywhere/profile:Profile"
ROLES_ANYWHERE = "rolesanywhere.amazonaws.com"
CN_TAG = "aws:PrincipalTag/x509Subject/CN"
READ_SECRET = "secretsmanager:GetSecretValue"
FIX_SOURCE = "gpuforge/infra/hybrid/slurm_burst.py"


# --- the burst's facts ---------------------------------------------------------------------------


def burst_ports(burst: Resource) -> SlurmPorts:
    """The catalog's Slurm ports, with what the stack's catalog overrides (recorded on the component)."""
    ports = load_catalog().slurm.ports
    recorded = burst.get("ports")
    if not isinstance(recorded, Mapping):
        return ports
    update: dict[str, Any] = {}
    for daemon in ("slurmctld", "slurmd"):
        if isinstance(recorded.get(daemon), int):
            update[daemon] = recorded[daemon]
    if isinstance(recorded.get("srun"), str) and re.fullmatch(r"\d+-\d+", recorded["srun"]):
        low, high = recorded["srun"].split("-")
        update["srun"] = (int(low), int(high))
    return ports.model_copy(update=update)


def _hosts(burst: Resource, prop: str) -> dict[str, ipaddress.IPv4Address]:
    hosts = burst.get(prop)
    if not isinstance(hosts, Mapping):
        return {}
    found = {}
    for name, address in hosts.items():
        try:
            found[str(name)] = ipaddress.IPv4Address(str(address))
        except ValueError:
            continue
    return found


def _cloud_groups(stack: Stack, burst: Resource) -> list[Resource]:
    names = {str(g) for g in as_list(burst.get("cloudNodeGroups"))}
    return [g for g in stack.of_type(NODE_GROUP) if g.get("nodeGroup") in names]


def _node_security_groups(stack: Stack, groups: list[Resource]) -> list[Resource] | None:
    """The security groups the cloud nodes' interfaces carry (a node gets the union of their rules);
    None when no launch template of those groups is in the stack."""
    templates = [lt for g in groups for lt in stack.children(g, LAUNCH_TEMPLATE)]
    if not templates:
        return None
    return [
        sg
        for sg in stack.of_type(SECURITY_GROUP)
        if any(mentions(lt, "networkInterfaces", sg) or mentions(lt, "vpcSecurityGroupIds", sg) for lt in templates)
    ]


# --- security group openings, whichever resource declares them ---------------------------------------


@dataclass(frozen=True)
class Peer:
    kind: str  # "cidr" (IPv4 or IPv6), "nodes" (a security group the cloud nodes carry), "group", "prefix list"
    value: str


@dataclass(frozen=True)
class Opening:
    """One rule of a security group: who declares it, the group it opens, the tcp range, the peers."""

    owner: Resource
    group: Resource
    low: int
    high: int
    peers: tuple[Peer, ...]

    def overlaps(self, low: int, high: int) -> bool:
        return self.low <= high and low <= self.high

    def covers(self, low: int, high: int) -> bool:
        return self.low <= low and high <= self.high

    @property
    def ports(self) -> str:
        if self.low <= 0 and self.high >= 65535:
            return "all ports"
        return f"tcp {self.low}" if self.low == self.high else f"tcp {self.low}-{self.high}"


def _tcp_range(protocol: Any, low: Any, high: Any) -> tuple[int, int] | None:
    """The tcp ports a rule opens; None for other protocols and unknown values."""
    proto = str(protocol).lower() if protocol is not None else "-1"
    if proto in ("-1", "all"):
        return 0, 65535
    if proto not in ("tcp", "6") or is_unknown(low) or is_unknown(high):
        return None
    return (int(low) if low is not None else 0), (int(high) if high is not None else 65535)


def _group_peer(stack: Stack, node_groups: list[Resource], holder: Resource, prop: str, value: Any) -> Peer:
    if any(mentions(holder, prop, sg) for sg in node_groups):
        return Peer("nodes", str(value))
    return Peer("group", str(value))


def _peers(stack: Stack, node_groups: list[Resource], r: Resource, inline: Mapping[str, Any] | None) -> list[Peer]:
    peers: list[Peer] = []
    if inline is None and r.type in (INGRESS_RULE, EGRESS_RULE):
        for prop in ("cidrIpv4", "cidrIpv6"):
            if isinstance(r.get(prop), str):
                peers.append(Peer("cidr", r.get(prop)))
        if r.get("prefixListId"):
            peers.append(Peer("prefix list", str(r.get("prefixListId"))))
        if r.get("referencedSecurityGroupId"):
            referenced = r.get("referencedSecurityGroupId")
            peers.append(_group_peer(stack, node_groups, r, "referencedSecurityGroupId", referenced))
        return peers
    source: Mapping[str, Any] = inline if inline is not None else r.inputs
    cidrs = [*as_list(source.get("cidrBlocks")), *as_list(source.get("ipv6CidrBlocks"))]
    peers += [Peer("cidr", str(c)) for c in cidrs if not is_unknown(c)]
    peers += [Peer("prefix list", str(p)) for p in as_list(source.get("prefixListIds")) if not is_unknown(p)]
    if truthy(source.get("self")):
        peers.append(Peer("nodes", "self"))
    if inline is None and r.get("sourceSecurityGroupId"):
        peers.append(_group_peer(stack, node_groups, r, "sourceSecurityGroupId", r.get("sourceSecurityGroupId")))
    for group in (g for g in as_list(source.get("securityGroups")) if not is_unknown(g)):
        known = any(str(group) in {sg.name, str(sg.get("id") or ""), str(sg.get("arn") or "")} for sg in node_groups)
        peers.append(Peer("nodes" if known else "group", str(group)))
    return peers


def openings(stack: Stack, node_groups: list[Resource], direction: str) -> list[Opening]:
    """Every tcp opening (ingress or egress) of the cloud nodes' security groups: separate ingress/egress rule
    resources, legacy SecurityGroupRules and the groups' inline rules."""
    separate = INGRESS_RULE if direction == "ingress" else EGRESS_RULE
    found: list[Opening] = []
    for sg in node_groups:
        for r in stack.of_type(separate, SECURITY_GROUP_RULE):
            if r.type == SECURITY_GROUP_RULE and r.get("type") != direction:
                continue
            if not stack.refers_to(r, "securityGroupId", sg):
                continue
            protocol = r.get("ipProtocol") if r.type == separate else r.get("protocol")
            ports = _tcp_range(protocol, r.get("fromPort"), r.get("toPort"))
            if ports:
                found.append(Opening(r, sg, *ports, tuple(_peers(stack, node_groups, r, None))))
        for inline in as_list(sg.get(direction)):
            if not isinstance(inline, Mapping):
                continue
            ports = _tcp_range(inline.get("protocol"), inline.get("fromPort"), inline.get("toPort"))
            if ports:
                found.append(Opening(sg, sg, *ports, tuple(_peers(stack, node_groups, sg, inline))))
    return found


def _network(peer: Peer) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(peer.value, strict=False)
    except ValueError:
        return None


def _reaches(opening: Opening, address: ipaddress.IPv4Address) -> bool:
    return any(
        p.kind == "cidr" and (net := _network(p)) is not None and net.version == 4 and address in net
        for p in opening.peers
    )


# --- wiring-slurm-burst-ports --------------------------------------------------------------------------


@stack_rule(
    "wiring-slurm-burst-ports",
    why="A cloud partition of a site's Slurm works only when the site's slurmctld and srun reach slurmd on 6818 "
    "and job steps reach srun inside SrunPortRange, and slurmd reaches slurmctld on 6817; those ports run "
    "jobs as any user, so only the site's controller and login hosts may reach them, never the whole site or "
    "the internet (Slurm Network Configuration Guide, slurm.schedmd.com/network.html; slurm.conf(5) "
    "SrunPortRange).",
    fix="admit tcp slurmd and the srun range (catalog slurm.ports) on the cloud nodes' security group from each "
    "site controller and login host's /32 only, allow egress to slurmctld (and srun) at the site, and remove "
    "wider sources (gpuforge/infra/hybrid/slurm_burst.py)",
)
def slurm_burst_ports(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    rule = "wiring-slurm-burst-ports"
    for burst in stack.of_type(SLURM_BURST):
        groups = _node_security_groups(stack, _cloud_groups(stack, burst))
        if groups is None:
            continue  # no cloud node of this stack (or not known yet)
        ports = burst_ports(burst)
        controllers, logins = _hosts(burst, "controllers"), _hosts(burst, "loginHosts")
        hosts = {**controllers, **logins}
        host_nets = {ipaddress.ip_network(f"{a}/32"): n for n, a in hosts.items()}
        allowed = ", ".join(f"{a}/32 ({n})" for n, a in sorted(hosts.items()))
        srun = ports.srun
        wanted = {"slurmd": (ports.slurmd, ports.slurmd), "srun": srun}
        catalog = f"tcp {ports.slurmd} (SlurmdPort) and tcp {srun[0]}-{srun[1]} (SrunPortRange)"
        where = ", ".join(sg.name for sg in groups) or "none"
        ingress = openings(stack, groups, "ingress")

        # Too wide: a Slurm port reachable from anything but a site Slurm host's /32 or the cloud nodes.
        for o in ingress:
            hit = [d for d, (lo, hi) in wanted.items() if o.overlaps(lo, hi)]
            if not hit:
                continue
            for peer in o.peers:
                if peer.kind == "nodes":
                    continue
                net = _network(peer) if peer.kind == "cidr" else None
                if net is not None and net in host_nets:
                    if (o.low, o.high) not in wanted.values():
                        yield Violation(
                            rule,
                            o.owner.urn,
                            f"{o.owner.name}: admits {o.ports} on {o.group.name} from {peer.value} "
                            f"({host_nets[net]}); expected exactly {catalog} from the catalog (slurm.ports, "
                            f"what slurm.conf's SrunPortRange reads); set fromPort/toPort to those ranges",
                        )
                    continue
                yield Violation(
                    rule,
                    o.owner.urn,
                    f"{o.owner.name}: admits {o.ports} ({' and '.join(hit)}) on {o.group.name} from "
                    f"{_describe(peer, net, hosts)}; expected only the site's Slurm hosts {allowed}; narrow the "
                    f"source to those /32s or delete the rule ({FIX_SOURCE} opens them)",
                )

        # Missing: each site Slurm host must reach slurmd and the srun range.
        missing = [
            f"{'tcp ' + str(lo) if lo == hi else f'tcp {lo}-{hi}'} ({daemon}) from {address}/32 ({name})"
            for name, address in sorted(hosts.items())
            for daemon, (lo, hi) in wanted.items()
            if not any(o.covers(lo, hi) and _reaches(o, address) for o in ingress)
        ]
        if missing:
            yield Violation(
                rule,
                burst.urn,
                f"{burst.name}: the cloud nodes' security groups ({where}) do not admit {'; '.join(missing)}; "
                f"expected {catalog} from each site controller and login host; add SecurityGroupIngressRules for "
                f"them ({FIX_SOURCE})",
            )

        # Egress: slurmd registers with slurmctld, job steps call srun on the login hosts.
        egress = openings(stack, groups, "egress")
        needed = [(n, a, (ports.slurmctld, ports.slurmctld), "slurmctld") for n, a in sorted(controllers.items())]
        needed += [(n, a, srun, "srun") for n, a in sorted(logins.items())]
        unreachable = [
            f"{'tcp ' + str(lo) if lo == hi else f'tcp {lo}-{hi}'} ({daemon}) to {address} ({name})"
            for name, address, (lo, hi), daemon in needed
            if not any(o.covers(lo, hi) and _reaches(o, address) for o in egress)
        ]
        if unreachable:
            yield Violation(
                rule,
                burst.urn,
                f"{burst.name}: the cloud nodes' security groups ({where}) allow no egress {'; '.join(unreachable)}; "
                "cloud slurmd cannot register with the site's controller; add SecurityGroupEgressRules to those "
                "/32s (or keep the compute tier's egress through the link)",
            )


def _describe(peer: Peer, net: Any, hosts: Mapping[str, ipaddress.IPv4Address]) -> str:
    if peer.kind != "cidr":
        return f"{peer.kind} {peer.value} (not one of the site's Slurm hosts)"
    if net is None:
        return peer.value
    if net.prefixlen == 0:
        return f"{peer.value} (anyone)"
    inside = sorted(n for n, a in hosts.items() if a in net)
    if inside:
        return f"{peer.value} (wider than the /32 of {', '.join(inside)})"
    return f"{peer.value} (not a site Slurm host)"


# --- wiring-slurm-burst-credentials --------------------------------------------------------------------


Grant = tuple[Resource, Mapping[str, Any] | None, list[Resource]]


def _grants(stack: Stack) -> list[Grant]:
    """Identity policy documents with the roles they apply to: inline RolePolicies and customer managed
    Policies attached through RolePolicyAttachments. A document unknown during preview is None."""
    roles = stack.of_type(ROLE)
    found: list[Grant] = []
    for p in stack.of_type(ROLE_POLICY):
        doc = None if is_unknown(p.get("policy")) else policy_document(p.get("policy"))
        if doc is not None or is_unknown(p.get("policy")):
            found.append((p, doc, [r for r in roles if stack.refers_to(p, "role", r)]))
    attachments = stack.of_type(ROLE_POLICY_ATTACHMENT)
    for p in stack.of_type(IAM_POLICY):
        doc = None if is_unknown(p.get("policy")) else policy_document(p.get("policy"))
        if doc is None and not is_unknown(p.get("policy")):
            continue
        attached = [a for a in attachments if stack.refers_to(a, "policyArn", p, "arn")]
        found.append((p, doc, [r for r in roles if any(stack.refers_to(a, "role", r) for a in attached)]))
    return found


def _secret_wildcards(statement: Mapping[str, Any], secret_name: str) -> list[str]:
    """The statement's wildcard resources that match the secret (ARN ...:secret:<name>-<6 random chars>)."""
    hits = []
    for resource in as_list(statement.get("Resource")):
        if not isinstance(resource, str) or "*" not in resource:
            continue
        parts = resource.split(":", 6)
        if resource == "*" or (
            len(parts) == 7
            and _glob(parts[2], "secretsmanager")
            and _glob(parts[5], "secret")
            and _glob(parts[6], f"{secret_name}-AbCdEf")
        ):
            hits.append(resource)
    return hits


def _glob(pattern: str, value: str) -> bool:
    return re.fullmatch(re.escape(pattern).replace(r"\*", ".*").replace(r"\?", "."), value) is not None


def _munge_secrets(stack: Stack, burst: Resource) -> list[Resource]:
    name = burst.get("mungeSecretName")
    return [
        s for s in stack.of_type(SECRET) if s.parent == burst.urn or (isinstance(name, str) and s.get("name") == name)
    ]


@stack_rule(
    "wiring-slurm-burst-credentials",
    why="Cloud slurmd authenticates to the site's controller with the munge key, which lets whoever holds it run "
    "jobs as any user: it must be encrypted with the cluster key and readable by the cloud Slurm nodes' roles "
    "only; the site's scaler gets AWS credentials through IAM Roles Anywhere, so the role must trust only the "
    "site CA's trust anchor and only the controllers' certificates (munge(7); Secrets Manager User Guide, "
    "'Secret encryption and decryption in AWS Secrets Manager'; IAM Roles Anywhere User Guide, 'Trust model').",
    fix="encrypt the munge secret with the cluster key, grant secretsmanager:GetSecretValue on it (and "
    "kms:Decrypt on the key) to each cloud Slurm node role and no other principal, and condition the Roles "
    "Anywhere trust on aws:SourceArn of the burst's trust anchor and aws:PrincipalTag/x509Subject/CN of the "
    "controller hosts (gpuforge/infra/hybrid/slurm_burst.py)",
)
def slurm_burst_credentials(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    """Partitions are not visible on resources: a cloud node learns its partition from the slurm.conf the site's
    controller serves (configless, rendered from the spec and checked by the spec checks and golden files), and
    its user data names only its node group. What a resource-level change can break is who may join the
    cluster and who may scale it: the munge key's encryption and readers, and the scaler role's trust."""
    rule = "wiring-slurm-burst-credentials"
    grants = _grants(stack)
    cluster_keys = [k for k in stack.of_type(KMS_KEY) if stack.by_urn.get(k.parent or "", k).type == CLUSTER_KEY]
    keys = cluster_keys or stack.of_type(KMS_KEY)
    for burst in stack.of_type(SLURM_BURST):
        node_roles = {
            r.urn: (g.get("nodeGroup"), r) for g in _cloud_groups(stack, burst) for r in stack.children(g, ROLE)
        }
        for secret in _munge_secrets(stack, burst):
            yield from _munge_key(stack, rule, secret, keys, node_roles, grants)
        yield from _scaler_trust(stack, rule, burst)


def _munge_key(
    stack: Stack,
    rule: str,
    secret: Resource,
    keys: list[Resource],
    node_roles: Mapping[str, tuple[Any, Resource]],
    grants: list[Grant],
) -> Iterator[Violation]:
    key_id = secret.get("kmsKeyId")
    key = next((k for k in keys if mentions(secret, "kmsKeyId", k)), None)
    if key is None and not is_unknown(key_id):
        used = key_id or "the AWS managed aws/secretsmanager key (no kmsKeyId)"
        want = " or ".join(k.name for k in keys) or "the cluster key"
        yield Violation(
            rule,
            secret.urn,
            f"{secret.name}: munge key encrypted with {used}; "
            f"expected the cluster key ({want}), so that reading it takes kms:Decrypt on a key this stack "
            "controls; set kmsKeyId to the cluster key's ARN",
        )
    name = str(secret.get("name") or secret.name)
    readers: dict[str, list[Resource]] = {}
    for policy, doc, roles in grants:
        if doc is None:  # unknown until `up`: may be the read grant, judged then
            for role in roles:
                readers.setdefault(role.urn, []).append(policy)
            continue
        reads = _allows(doc, lambda _: True, [READ_SECRET])
        wide = [w for st in reads for w in _secret_wildcards(st, name)]
        named = bool(reads) and mentions(policy, "policy", secret)
        for role in roles:
            if role.urn in node_roles:
                if named:
                    readers.setdefault(role.urn, []).append(policy)
                if wide:
                    yield Violation(
                        rule,
                        policy.urn,
                        f"{policy.name}: grants {READ_SECRET} on {wide[0]} to cloud node role {role.name}, every "
                        f"secret of the account; expected the munge secret {secret.name} only; name its ARN",
                    )
            elif named or wide:
                allowed = ", ".join(sorted(r.name for _, r in node_roles.values())) or "none"
                yield Violation(
                    rule,
                    policy.urn,
                    f"{policy.name}: grants {READ_SECRET} on {wide[0] if wide else secret.name} (the munge key) to "
                    f"role {role.name}; expected only the cloud Slurm node roles ({allowed}); remove the grant "
                    "(anyone with the key can run jobs as any user)",
                )
    for urn, (group, role) in sorted(node_roles.items()):
        policies = readers.get(urn, [])
        problems = [] if policies else [f"{READ_SECRET} on {secret.name}"]
        if key is not None and not any(
            doc is None or (_allows(doc, lambda _: True, ["kms:Decrypt"]) and mentions(p, "policy", key))
            for p, doc, roles in grants
            if any(r.urn == urn for r in roles)
        ):
            problems.append(f"kms:Decrypt on {key.name}")
        if problems:
            yield Violation(
                rule,
                role.urn,
                f"{role.name}: cloud Slurm node role of group {group} lacks {' and '.join(problems)}, so slurmd "
                "cannot fetch the munge key and never joins the site's controller; grant them "
                "(gpuforge/infra/aws/iam.py secret_read_policy)",
            )
    for policy in stack.of_type(SECRET_POLICY):
        if not stack.refers_to(policy, "secretArn", secret):
            continue
        doc = policy_document(policy.get("policy")) or {}
        role_names = [r.name for _, r in node_roles.values()]
        for st in _allows(doc, lambda _: True, [READ_SECRET]):
            others = [p for p in _principals(st, "AWS") if not any(p.endswith(f"/{n}") for n in role_names)]
            if others or st.get("Principal") == "*":
                yield Violation(
                    rule,
                    policy.urn,
                    f"{policy.name}: resource policy of {secret.name} grants {READ_SECRET} to "
                    f"{', '.join(others) or '*'}; expected only the cloud Slurm node roles "
                    f"({', '.join(role_names) or 'none'}); remove the statement",
                )


def _scaler_trust(stack: Stack, rule: str, burst: Resource) -> Iterator[Violation]:
    controllers = set(_hosts(burst, "controllers"))
    anchors = stack.children(burst, TRUST_ANCHOR)
    profiled = {
        r.urn
        for profile in stack.children(burst, RA_PROFILE)
        for r in stack.of_type(ROLE)
        if mentions(profile, "roleArns", r)
    }
    for role in stack.of_type(ROLE):
        doc = policy_document(role.get("assumeRolePolicy"))
        if doc is None:
            continue
        trusts = _allows(doc, lambda st: ROLES_ANYWHERE in _principals(st, "Service"), ["sts:AssumeRole"])
        for st in trusts:
            source = _first_condition(st, ("ArnEquals", "ArnLike", "StringEquals", "StringLike"), "aws:SourceArn")
            bound = [a for a in anchors if role.urn in profiled or mentions(role, "assumeRolePolicy", a)]
            if source is None:
                yield Violation(
                    rule,
                    role.urn,
                    f"{role.name}: trusts {ROLES_ANYWHERE} without an aws:SourceArn condition, so a certificate of "
                    f"any trust anchor in the account assumes it; expected aws:SourceArn = the burst's trust anchor "
                    f"({', '.join(a.name for a in anchors) or 'the site CA'}); add the condition",
                )
                continue
            if not bound:
                continue  # another anchor's role: not the burst's
            if not any(mentions(role, "assumeRolePolicy", a) for a in anchors):
                yield Violation(
                    rule,
                    role.urn,
                    f"{role.name}: Roles Anywhere trust bound to aws:SourceArn {source}; expected the burst's trust "
                    f"anchor ({', '.join(a.name for a in anchors) or 'the site CA'}); set aws:SourceArn to its ARN",
                )
            names = [str(v) for v in as_list(_first_condition(st, ("StringEquals",), CN_TAG))]
            loose = _first_condition(st, ("StringLike",), CN_TAG)
            strangers = sorted(set(names) - controllers)
            if not names or strangers or loose is not None:
                got = ", ".join(strangers) if strangers else (f"StringLike {loose}" if loose else "no CN condition")
                yield Violation(
                    rule,
                    role.urn,
                    f"{role.name}: Roles Anywhere trust admits certificates with {CN_TAG} {got}; expected "
                    f"StringEquals the controller hosts ({', '.join(sorted(controllers))}) only, since every "
                    "certificate of the site CA would otherwise scale the cloud groups; narrow the condition",
                )


def _first_condition(statement: Mapping[str, Any], operators: Iterable[str], key: str) -> Any:
    condition = statement.get("Condition")
    if not isinstance(condition, Mapping):
        return None
    for operator in operators:
        block = condition.get(operator)
        if isinstance(block, Mapping) and key in block:
            return block[key]
    return None
