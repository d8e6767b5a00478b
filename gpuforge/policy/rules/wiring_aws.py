"""Wiring pack, AWS: what no schema sees between resources, each a mistake that plans cleanly and
fails at deploy or launch. The facts (service-linked role names, endpoint services, add-on versions)
come from gpuforge/catalog/data/aws_wiring.yaml, the same data the components build from.

Every rule cites its source in `why`; docs/wiring.md says what each guards against.
"""

from __future__ import annotations

import base64
import binascii
import email
import ipaddress
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import yaml

from gpuforge.catalog.aws_wiring import load_aws_wiring, version_tuple
from gpuforge.catalog.tokens import (
    ALERT_SECRETS,
    ASG,
    DRA,
    EKS_CLUSTER,
    EKS_NODE_GROUP,
    HELM_RELEASE,
    LOG_GROUP,
    NODE_GROUP,
    ROLE,
    VPC,
)

from .base import (
    Param,
    Resource,
    RuleContext,
    Stack,
    Violation,
    as_list,
    is_unknown,
    policy_document,
    resource_rule,
    stack_rule,
    truthy,
)
from .security import INGRESS_RULE, LAUNCH_TEMPLATE, LUSTRE, SECURITY_GROUP, SSE_CONFIGS

KMS_KEY = "aws:kms/key:Key"
EKS_ADDON = "aws:eks/addon:Addon"
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
ACCESS_POLICY_ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
ROUTE_TABLE = "aws:ec2/routeTable:RouteTable"
ROUTE = "aws:ec2/route:Route"
ROUTE_TABLE_ASSOCIATION = "aws:ec2/routeTableAssociation:RouteTableAssociation"
VPC_ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
VGW_PROPAGATION = "aws:ec2/vpnGatewayRoutePropagation:VpnGatewayRoutePropagation"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
SITE_LINK = "gpuforge:hybrid:SiteLink"
DATASYNC_OBJECT_STORAGE = "aws:datasync/locationObjectStorage:LocationObjectStorage"
K8S_PROVIDER = "pulumi:providers:kubernetes"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
FSX_CSI_PROVISIONER = "fsx.csi.aws.com"
ROLE_ARN_ANNOTATION = "eks.amazonaws.com/role-arn"
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"


# --- helpers ------------------------------------------------------------------------------------


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _identities(target: Resource, *extra: str) -> set[str]:
    known = {target.name, str(target.get("id") or ""), str(target.get("arn") or "")}
    known |= {str(target.get(i)) for i in extra if isinstance(target.get(i), str)}
    known.discard("")
    return known


def mentions(r: Resource, prop: str, target: Resource, *identities: str) -> bool:
    """Whether r.inputs[prop], at any depth, points at target: by the engine's property
    dependencies when recorded, else by value (target's name, id, arn or `identities`)."""
    deps = r.dependencies.get(prop)
    if deps:
        return target.urn in deps
    known = _identities(target, *identities)
    return any(s in known for s in _strings(r.get(prop)))


def _closure(stack: Stack, start: Resource) -> set[str]:
    """Every URN `start` waits for: its dependencies, its provider's, and theirs."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        r = todo.pop()
        for urn in (*r.depends_on, *(u for deps in r.dependencies.values() for u in deps), r.provider or ""):
            if urn and urn not in seen:
                seen.add(urn)
                if urn in stack.by_urn:
                    todo.append(stack.by_urn[urn])
    return seen


def _principals(statement: Mapping[str, Any], kind: str) -> list[str]:
    principal = statement.get("Principal")
    if principal == "*":
        return ["*"]
    if isinstance(principal, Mapping):
        return [str(p) for p in as_list(principal.get(kind))]
    return []


def _actions(statement: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in as_list(statement.get("Action"))]


def _covers(granted: Iterable[str], wanted: str) -> bool:
    """An IAM action list covers `wanted` (kms:* or kms:Encrypt* cover kms:Encrypt)."""
    for g in granted:
        pattern = "^" + re.escape(g).replace(r"\*", ".*") + "$"
        if re.match(pattern, wanted, re.IGNORECASE):
            return True
    return False


def _allows(doc: Mapping[str, Any], who: Any, actions: Iterable[str]) -> list[Mapping[str, Any]]:
    """Allow statements whose principal satisfies `who(statement)` and that grant every action."""
    wanted = list(actions)
    return [
        st
        for st in as_list(doc.get("Statement"))
        if isinstance(st, Mapping)
        and st.get("Effect") == "Allow"
        and who(st)
        and all(_covers(_actions(st), a) for a in wanted)
    ]


def _condition_value(statement: Mapping[str, Any], operator: str, key: str) -> Any:
    condition = statement.get("Condition")
    if not isinstance(condition, Mapping) or not isinstance(condition.get(operator), Mapping):
        return None
    return condition[operator].get(key)


# --- KMS key policy ------------------------------------------------------------------------------


def _key_users(stack: Stack, key: Resource) -> dict[str, list[str]]:
    """What depends on the key's policy, by need: launches (Auto Scaling), logs, fsx-s3."""
    needs: dict[str, list[str]] = {"launch": [], "logs": [], "fsx": []}
    for lt in stack.of_type(LAUNCH_TEMPLATE):
        if mentions(lt, "blockDeviceMappings", key):
            needs["launch"].append(lt.name)
    for group in stack.of_type(LOG_GROUP):
        if mentions(group, "kmsKeyId", key):
            needs["logs"].append(group.name)
    kms_buckets = [
        c.get("bucket") for c in stack.of_type(*SSE_CONFIGS) if mentions(c, "rules", key) and c.get("bucket")
    ]
    for dra in stack.of_type(DRA):
        path = dra.get("dataRepositoryPath")
        deps = set(dra.dependencies.get("dataRepositoryPath", ()))
        for c in stack.of_type(*SSE_CONFIGS):
            if not mentions(c, "rules", key):
                continue
            bucket_deps = set(c.dependencies.get("bucket", ()))
            by_value = isinstance(path, str) and any(isinstance(b, str) and f"//{b}/" in path for b in kms_buckets)
            if (deps and bucket_deps and deps & bucket_deps) or by_value:
                needs["fsx"].append(dra.name)
                break
    return needs


@stack_rule(
    "wiring-kms-key-policy",
    why="A customer-managed key is usable only by the principals its key policy names: without statements "
    "for Auto Scaling's service-linked role (use + CreateGrant for AWS resources) no node launches, without "
    "the logs service principal encrypted log groups cannot be written, and FSx's S3 access role cannot "
    "reach SSE-KMS buckets (EC2 Auto Scaling User Guide, 'Required AWS KMS key policy for use with encrypted "
    "volumes'; CloudWatch Logs User Guide, 'Encrypt log data in CloudWatch Logs using AWS KMS'; FSx for "
    "Lustre User Guide, 'Working with server-side encrypted Amazon S3 buckets').",
    fix="give the key a policy with the account root, AWSServiceRoleForAutoScaling (key use, and "
    "kms:CreateGrant with kms:GrantIsForAWSResource true), logs.<region>.amazonaws.com (under the "
    "aws:logs:arn context) and the AWSServiceRoleForFSxS3Access_* roles where data repositories use the key "
    "(gpuforge/infra/aws/iam.py cluster_key_policy)",
)
def kms_key_policy(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    facts = load_aws_wiring()
    use = facts.kms.key_use_actions
    autoscaling = facts.service_linked_roles["autoscaling"].path
    fsx = facts.service_linked_roles["fsx_s3_access"].path.removesuffix("*")
    for key in stack.of_type(KMS_KEY):
        needs = _key_users(stack, key)
        if not any(needs.values()):
            continue
        raw = key.get("policy")
        if is_unknown(raw):
            continue
        doc = policy_document(raw)
        if doc is None:
            yield Violation(
                "wiring-kms-key-policy",
                key.urn,
                f"{key.name}: no key policy, so only IAM policies of the account's own roles can use it and "
                f"Auto Scaling cannot launch {', '.join(needs['launch'] or needs['logs'] or needs['fsx'])}; "
                "write a key policy (gpuforge/infra/aws/iam.py cluster_key_policy)",
            )
            continue
        missing: list[str] = []
        if not _allows(doc, lambda st: any(p.endswith(":root") for p in _principals(st, "AWS")), ["kms:Decrypt"]):
            missing.append("the account root (IAM policies of the node, replication and service roles)")
        if needs["launch"]:

            def is_autoscaling(st: Mapping[str, Any]) -> bool:
                return any(p.endswith(autoscaling) for p in _principals(st, "AWS"))

            if not _allows(doc, is_autoscaling, use):
                missing.append(
                    f"AWSServiceRoleForAutoScaling: {', '.join(use)} (launches {', '.join(needs['launch'])})"
                )
            grants = _allows(doc, is_autoscaling, ["kms:CreateGrant"])
            if not any(
                str(_condition_value(st, "Bool", facts.kms.grant_condition_key)).lower() == "true" for st in grants
            ):
                missing.append(
                    f"AWSServiceRoleForAutoScaling: kms:CreateGrant with {facts.kms.grant_condition_key} true"
                )
        if needs["logs"] and not _allows(
            doc,
            lambda st: any(p.startswith("logs.") for p in _principals(st, "Service")),
            ["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"],
        ):
            missing.append(f"logs.<region>.amazonaws.com (log groups {', '.join(needs['logs'])})")
        if needs["fsx"]:

            def is_fsx(st: Mapping[str, Any]) -> bool:
                arns = _principals(st, "AWS") + [
                    str(v) for v in as_list(_condition_value(st, "ArnLike", "aws:PrincipalArn"))
                ]
                return any(fsx in a for a in arns)

            if not _allows(doc, is_fsx, use):
                missing.append(f"AWSServiceRoleForFSxS3Access_* (data repositories {', '.join(needs['fsx'])})")
        if missing:
            yield Violation(
                "wiring-kms-key-policy",
                key.urn,
                f"{key.name}: key policy does not allow {'; '.join(missing)}; add those statements "
                "(gpuforge/infra/aws/iam.py cluster_key_policy)",
            )


# --- launch templates, placement -----------------------------------------------------------------


@stack_rule(
    "wiring-launchtemplate-eks-imds-tags",
    why="EKS adds tags whose keys hold '/' (kubernetes.io/cluster/<name>), which are invalid as instance "
    "metadata tags: a managed node group whose launch template turns IMDS tags on fails to launch (EKS User "
    "Guide, 'Customize managed nodes with launch templates').",
    fix="set metadataOptions.instanceMetadataTags = disabled on launch templates of EKS node groups",
)
def eks_imds_tags(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for lt in stack.of_type(LAUNCH_TEMPLATE):
        if r_value := lt.get("metadataOptions", "instanceMetadataTags"):
            if is_unknown(r_value) or r_value != "enabled":
                continue
        else:
            continue
        users = [ng.name for ng in stack.of_type(EKS_NODE_GROUP) if mentions(ng, "launchTemplate", lt)]
        if users:
            yield Violation(
                "wiring-launchtemplate-eks-imds-tags",
                lt.urn,
                f"{lt.name}: instance metadata tags enabled on the launch template of EKS node group "
                f"{', '.join(users)}; set metadataOptions.instanceMetadataTags to disabled",
            )


@stack_rule(
    "wiring-placementgroup-capacity",
    why="Capacity Blocks are already placed together and a placement group can make their launches fail "
    "with insufficient capacity; an ODCR serves only launches into the placement group it was created in "
    "(aws-parallelcluster ec2_validators.py; EC2 User Guide, 'Capacity Blocks for ML' and 'Capacity "
    "Reservations for cluster placement groups').",
    fix="no placement group for Capacity Blocks; for an ODCR, the reservation's own placement group "
    "(node_groups.<g>.capacity.placement_group) or none, never a new one",
)
def placement_capacity(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    created = stack.of_type(PLACEMENT_GROUP)
    for lt in stack.of_type(LAUNCH_TEMPLATE):
        block = lt.get("instanceMarketOptions", "marketType") == "capacity-block"
        odcr = lt.get("capacityReservationSpecification", "capacityReservationTarget", "capacityReservationId")
        if not block and not odcr:
            continue
        groups = [lt.get("placement", "groupName")] + [
            asg.get("placementGroup") for asg in stack.of_type(ASG) if mentions(asg, "launchTemplate", lt)
        ]
        named = [g for g in groups if g and not is_unknown(g)]
        deps = {
            u
            for asg in stack.of_type(ASG)
            if mentions(asg, "launchTemplate", lt)
            for u in asg.dependencies.get("placementGroup", ())
        } | set(lt.dependencies.get("placement", ()))
        new = [pg.name for pg in created if pg.urn in deps or _identities(pg, "name") & {str(g) for g in named}]
        if block and (named or new):
            yield Violation(
                "wiring-placementgroup-capacity",
                lt.urn,
                f"{lt.name}: Capacity Block launched into placement group {', '.join(map(str, named or new))}; "
                "remove the placement group (the block's instances are already placed together)",
            )
        elif odcr and new:
            yield Violation(
                "wiring-placementgroup-capacity",
                lt.urn,
                f"{lt.name}: capacity reservation {odcr} launched into new placement group {', '.join(new)}, "
                "which cannot hold the reserved capacity; use the reservation's own placement group "
                "(capacity.placement_group) or none",
            )


@stack_rule(
    "wiring-eks-nodegroup-reserved-update",
    why="EKS's DEFAULT update strategy launches a new node before it terminates an old one; a reservation or "
    "Capacity Block sized to the group has no room for it, so a new AMI or launch template stalls the update "
    "inside a full block (EKS API NodegroupUpdateConfig.updateStrategy: MINIMAL terminates first, for "
    "constrained accelerator capacity).",
    fix="updateConfig.updateStrategy = MINIMAL on EKS managed node groups in a capacity reservation or "
    "Capacity Block (gpuforge/infra/aws/node_group.py does so for capacity.type capacity_reservation/capacity_block)",
)
def eks_reserved_update(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for ng in stack.of_type(EKS_NODE_GROUP):
        block = ng.get("capacityType") == "CAPACITY_BLOCK"
        reservation = any(
            lt.get("capacityReservationSpecification", "capacityReservationTarget", "capacityReservationId")
            for lt in stack.of_type(LAUNCH_TEMPLATE)
            if mentions(ng, "launchTemplate", lt)
        )
        strategy = ng.get("updateConfig", "updateStrategy", default="DEFAULT")
        if not (block or reservation) or is_unknown(strategy) or strategy == "MINIMAL":
            continue
        where = "a Capacity Block" if block else "a capacity reservation"
        yield Violation(
            "wiring-eks-nodegroup-reserved-update",
            ng.urn,
            f"{ng.name}: EKS managed node group in {where} updates with strategy {strategy}, which launches a "
            "node before terminating one and stalls in a full block; set updateConfig.updateStrategy to MINIMAL",
        )


# --- network: private egress, Lustre ports, site routes -------------------------------------------


def _default_route(rt: Resource, stack: Stack) -> bool:
    inline = any(isinstance(r, Mapping) and r.get("cidrBlock") == "0.0.0.0/0" for r in as_list(rt.get("routes")))
    separate = any(
        r.get("destinationCidrBlock") == "0.0.0.0/0" and stack.refers_to(r, "routeTableId", rt)
        for r in stack.of_type(ROUTE)
    )
    return inline or separate


@stack_rule(
    "wiring-network-private-endpoints",
    why="Private subnets without a NAT route reach AWS only through VPC endpoints: with the S3 gateway alone "
    "nodes cannot pull images (ECR), register with SSM, get STS credentials or ship logs (EKS User Guide, "
    "'Deploy private clusters with limited internet access'; Systems Manager User Guide, VPC endpoints).",
    fix="with network.nat: none, create interface endpoints (private DNS on) for the services in "
    "gpuforge/catalog/data/aws_wiring.yaml private_endpoints, or set network.nat: single/per_az",
)
def private_endpoints(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    services = load_aws_wiring().private_endpoints.services
    for vpc in stack.of_type(VPC):
        tables = [rt for rt in stack.of_type(ROUTE_TABLE) if stack.refers_to(rt, "vpcId", vpc)]
        used = [
            rt
            for rt in tables
            if any(stack.refers_to(a, "routeTableId", rt) for a in stack.of_type(ROUTE_TABLE_ASSOCIATION))
        ]
        if not used or all(_default_route(rt, stack) for rt in used):
            continue
        present = {
            str(e.get("serviceName")).split(".", 3)[-1]
            for e in stack.of_type(VPC_ENDPOINT)
            if stack.refers_to(e, "vpcId", vpc)
            and e.get("vpcEndpointType") == "Interface"
            and truthy(e.get("privateDnsEnabled"))
        }
        missing = [s for s in services if s not in present]
        if missing:
            yield Violation(
                "wiring-network-private-endpoints",
                vpc.urn,
                f"{vpc.name}: private route tables have no NAT route and no interface endpoint for "
                f"{', '.join(missing)}; create them (private DNS on) or set network.nat to single or per_az",
            )


def _opens(rule: Resource, low: int, high: int) -> bool:
    protocol = str(rule.get("ipProtocol"))
    if protocol in ("-1", "all"):
        return True
    if protocol not in ("tcp", "6") or is_unknown(rule.get("fromPort")):
        return False
    return int(rule.get("fromPort") or 0) <= low and int(rule.get("toPort") or 65535) >= high


@stack_rule(
    "wiring-securitygroup-lustre-ports",
    why="Lustre clients and servers talk on tcp 988 and 1018-1023, and FSx's servers talk to each other on "
    "them too: the file system's security group must allow both ranges from itself (FSx for Lustre User "
    "Guide, 'File system access control with Amazon VPC').",
    fix="add ingress rules from the file system's security group to itself for tcp 988 and tcp 1018-1023",
)
def lustre_ports(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    ports = load_aws_wiring().lustre.ports
    for fs in stack.of_type(LUSTRE):
        for sg in stack.of_type(SECURITY_GROUP):
            if not mentions(fs, "securityGroupIds", sg):
                continue
            selfs = [
                r
                for r in stack.of_type(INGRESS_RULE)
                if stack.refers_to(r, "securityGroupId", sg) and stack.refers_to(r, "referencedSecurityGroupId", sg)
            ]
            missing = [
                f"{lo}-{hi}" if lo != hi else str(lo) for lo, hi in ports if not any(_opens(r, lo, hi) for r in selfs)
            ]
            if missing:
                yield Violation(
                    "wiring-securitygroup-lustre-ports",
                    fs.urn,
                    f"{fs.name}: security group {sg.name} does not allow tcp {', '.join(missing)} from itself; "
                    "add self-referencing ingress rules for them",
                )


LNET_UNIT = "gpuforge-lnet.service"


def _user_data(lt: Resource) -> dict[str, Any] | None:
    """The cloud-config of a launch template's user data (base64; MIME multi-part on EKS), or None where it is
    unknown or not cloud-config."""
    raw = lt.get("userData")
    if not isinstance(raw, str) or not raw:
        return None
    try:
        text = base64.b64decode(raw, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    if text.startswith("MIME-Version"):
        message = email.message_from_string(text)
        parts = [p.get_payload() for p in message.walk() if p.get_content_type() == "text/cloud-config"]
        text = str(parts[0]) if parts else ""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return document if isinstance(document, dict) else None


def _lustre_mounts(cloud_config: Mapping[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(how, mount point, options) of each Lustre entry the user data puts in fstab: cloud-init's mounts
    module, or lines a write_files entry writes to /etc/fstab."""
    for entry in as_list(cloud_config.get("mounts")):
        if isinstance(entry, list) and len(entry) >= 4 and entry[2] == "lustre":
            yield "mounts", str(entry[1]), str(entry[3])
    for item in as_list(cloud_config.get("write_files")):
        if isinstance(item, Mapping) and item.get("path") == "/etc/fstab":
            for line in str(item.get("content") or "").splitlines():
                fields = line.split()
                if len(fields) >= 4 and not fields[0].startswith("#") and fields[2] == "lustre":
                    yield "fstab", fields[1], fields[3]


@stack_rule(
    "wiring-launchtemplate-lustre-lnet",
    why="An EFA-enabled FSx for Lustre file system moves data over EFA only once the client's LNet has an efa "
    "network, which is kernel state configured at every boot; a mount that runs first uses tcp alone. FSx's own "
    "fstab line for EFA-enabled file systems therefore requires the unit that configures LNet "
    "(x-systemd.requires= gives Requires= and After=), and only systemd honours it: cloud-init's mounts module "
    "runs `mount -a`, which ignores x-systemd options (FSx for Lustre User Guide, 'Configuring EFA clients' and "
    "'Mounting Amazon FSx file systems automatically'; systemd.mount(5)).",
    fix="write the file system's fstab entry with x-systemd.requires=gpuforge-lnet.service (the one template, "
    "templates/lustre/fsx-mount.yaml.j2) from write_files, not cloud-init's mounts module, and start its automount "
    "through systemd",
)
def lustre_lnet_mount(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    efa = [fs for fs in stack.of_type(LUSTRE) if truthy(fs.get("efaEnabled"))]
    for lt in stack.of_type(LAUNCH_TEMPLATE):
        mounted = [fs for fs in efa if mentions(lt, "userData", fs, "dnsName")]
        cloud_config = _user_data(lt) if mounted else None
        if cloud_config is None:
            continue
        for how, path, options in _lustre_mounts(cloud_config):
            if how == "mounts":
                problem = "by cloud-init's mounts module, whose `mount -a` ignores x-systemd.requires"
            elif f"x-systemd.requires={LNET_UNIT}" not in options.split(","):
                problem = f"without x-systemd.requires={LNET_UNIT}"
            else:
                continue
            yield Violation(
                "wiring-launchtemplate-lustre-lnet",
                lt.urn,
                f"{lt.name}: user data mounts EFA-enabled {', '.join(fs.name for fs in mounted)} at {path} {problem}, "
                f"so it can mount over tcp before LNet over EFA is configured; write the fstab entry from "
                f"templates/lustre/fsx-mount.yaml.j2 (it requires {LNET_UNIT}) and start its automount with systemctl",
            )


@stack_rule(
    "wiring-vpc-site-routes",
    why="A site link carries traffic only where the VPC routes it: a transit gateway attachment adds no VPC "
    "routes, so every private route table needs a route to each site CIDR (and each routed pod CIDR of the "
    "site, where its pods reach the cloud with their own addresses) through the transit gateway "
    "(Transit Gateways guide, 'Transit gateway attachments to a VPC': 'you must add a route to your subnet "
    "route tables'); a virtual private gateway needs route propagation (Site-to-Site VPN User Guide).",
    fix="route each site and routed pod CIDR from every private route table: aws.ec2.Route to the transit "
    "gateway, or a "
    "VpnGatewayRoutePropagation for a virtual private gateway",
)
def site_routes(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for link in stack.of_type(SITE_LINK):
        tables = [str(t) for t in as_list(link.get("routeTableIds")) if not is_unknown(t)]
        cidrs = [str(c) for c in [*as_list(link.get("siteCidrs")), *as_list(link.get("podCidrs"))]]
        children = [r for r in stack.resources if r.parent == link.urn]
        missing: list[str] = []
        for table in tables:
            if link.get("kind") == "vpn":
                if not any(p.get("routeTableId") == table for p in children if p.type == VGW_PROPAGATION):
                    missing.append(f"{table}: route propagation")
                continue
            for cidr in cidrs:
                if not any(
                    r.type == ROUTE
                    and r.get("routeTableId") == table
                    and r.get("destinationCidrBlock") == cidr
                    and r.get("transitGatewayId")
                    for r in children
                ):
                    missing.append(f"{table} -> {cidr}")
        if missing:
            yield Violation(
                "wiring-vpc-site-routes",
                link.urn,
                f"{link.name}: no route to the site from {'; '.join(missing)}; add a route to each site CIDR "
                "through the transit gateway (or propagation from the virtual private gateway)",
            )


# --- EKS -----------------------------------------------------------------------------------------


def _cluster_parts(stack: Stack, cluster: Resource, *types: str) -> list[Resource]:
    return [r for r in stack.of_type(*types) if stack.refers_to(r, "clusterName", cluster, "name")]


def _uses_efa_only(stack: Stack, node_groups: list[Resource]) -> bool:
    for lt in stack.of_type(LAUNCH_TEMPLATE):
        if any(mentions(ng, "launchTemplate", lt) for ng in node_groups) and any(
            isinstance(n, Mapping) and n.get("interfaceType") == "efa-only"
            for n in as_list(lt.get("networkInterfaces"))
        ):
            return True
    return False


@stack_rule(
    "wiring-eks-addons",
    why="An EKS cluster made through the API has only what it is given: the VPC CNI (at a version that "
    "ignores EFA-only interfaces, with network policy enforcement on so NetworkPolicies mean something, and "
    "its own IRSA role rather than the node role), CoreDNS, kube-proxy, the Pod Identity agent and the node "
    "monitoring agent (the GPU signal node auto repair acts on) are managed add-ons to declare, each at a pinned "
    "version (without one EKS installs its default of the day, so two `up`s of one commit differ), kube-proxy "
    "at the cluster's Kubernetes minor (EKS User Guide, 'Amazon EKS add-ons', 'Assign IPs to Pods with the "
    "Amazon VPC CNI', 'Limit Pod traffic with Kubernetes network policies', 'Manage kube-proxy in Amazon EKS "
    "clusters', 'Enable node auto repair and investigate node health issues').",
    fix="declare aws.eks.Addon for every add-on in aws_wiring.yaml (vpc-cni with enableNetworkPolicy true and "
    "serviceAccountRoleArn, coredns, kube-proxy, eks-pod-identity-agent, eks-node-monitoring-agent), each with "
    "addonVersion pinned",
)
def eks_addons(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    facts = load_aws_wiring().eks.addons
    for cluster in stack.of_type(EKS_CLUSTER):
        addons = {str(a.get("addonName")): a for a in _cluster_parts(stack, cluster, EKS_ADDON)}
        problems = [f"no {name} add-on" for name in facts if name not in addons]
        problems += [
            f"{name} unpinned (no addonVersion)" for name, a in sorted(addons.items()) if not a.get("addonVersion")
        ]
        minor = cluster.get("version")
        for name, addon in sorted(addons.items()):
            version = addon.get("addonVersion")
            per_minor = name in facts and facts[name].tracks_kubernetes_minor
            known = version and not is_unknown(version) and isinstance(minor, str) and not is_unknown(minor)
            if per_minor and known and not str(version).lstrip("v").startswith(f"{minor}."):
                problems.append(f"{name} {version} is built for another Kubernetes minor than the cluster's {minor}")
        cni = addons.get("vpc-cni")
        if cni is not None:
            want = facts["vpc-cni"]
            version = cni.get("addonVersion")
            floors = [want.min_version_network_policy or ""]
            if _uses_efa_only(stack, _cluster_parts(stack, cluster, EKS_NODE_GROUP)):
                floors.append(want.min_version_efa_only or "")
            floor = max(floors, key=version_tuple)
            if not is_unknown(version) and (not version or version_tuple(str(version)) < version_tuple(floor)):
                problems.append(f"vpc-cni version {version or 'unpinned'} below {floor}")
            config = cni.get("configurationValues")
            enforced = isinstance(config, str) and re.search(r'"enableNetworkPolicy"\s*:\s*"?true', config)
            if not is_unknown(config) and not enforced:
                problems.append("vpc-cni without enableNetworkPolicy true")
            if not cni.get("serviceAccountRoleArn"):
                problems.append("vpc-cni without its own role (serviceAccountRoleArn)")
        if problems:
            yield Violation(
                "wiring-eks-addons",
                cluster.urn,
                f"{cluster.name}: {'; '.join(problems)}; declare the managed add-ons as "
                "gpuforge/infra/aws/eks.py does (versions in aws_wiring.yaml)",
            )


@stack_rule(
    "wiring-eks-platform-order",
    why="Helm releases on an EKS cluster need nodes to run on, add-ons for pod networking, and an access "
    "entry that lets the deployer in (authentication mode API, no implicit creator admin): created before "
    "them, `up` fails or hangs (EKS User Guide, 'Grant IAM users access to Kubernetes with EKS access "
    "entries'; Pulumi docs, 'dependsOn').",
    fix="create the cluster's Kubernetes provider (or the releases) depending on the node groups, the "
    "add-ons and the access policy associations, including a cluster-scope admin entry for the deployer",
)
def eks_platform_order(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for cluster in stack.of_type(EKS_CLUSTER):
        parts = _cluster_parts(stack, cluster, EKS_NODE_GROUP, EKS_ADDON, ACCESS_POLICY_ASSOCIATION)
        admins = [
            a
            for a in _cluster_parts(stack, cluster, ACCESS_POLICY_ASSOCIATION)
            if str(a.get("policyArn") or "").endswith(CLUSTER_ADMIN_POLICY)
            and a.get("accessScope", "type") == "cluster"
        ]
        providers = {p.urn for p in stack.of_type(K8S_PROVIDER) if cluster.urn in _closure(stack, p)}
        for release in stack.of_type(HELM_RELEASE):
            if release.provider not in providers:
                continue
            waits = _closure(stack, release)
            missing = [p.name for p in parts if p.urn not in waits]
            if not any(a.urn in waits for a in admins):
                missing.append("a cluster-scope AmazonEKSClusterAdminPolicy access entry (the deployer's)")
            if missing:
                yield Violation(
                    "wiring-eks-platform-order",
                    release.urn,
                    f"{release.name}: installed without waiting for {', '.join(missing)}; make the cluster's "
                    "Kubernetes provider depend on them",
                )


@stack_rule(
    "wiring-eks-fsx-csi-role",
    why="The FSx CSI controller creates file systems through the FSx API: with a StorageClass that provisions "
    "dynamically it needs its own IAM role through IRSA, since pods must not borrow the node role (EKS User "
    "Guide, 'Deploy the FSx for Lustre driver').",
    fix="annotate the chart's controller service account (controller.serviceAccount.annotations) with an "
    "IRSA role, or use a static PersistentVolume for the file system Pulumi built",
)
def eks_fsx_csi_role(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    if not any(sc.get("provisioner") == FSX_CSI_PROVISIONER for sc in stack.of_type(STORAGE_CLASS)):
        return
    for release in stack.of_type(HELM_RELEASE):
        if release.get("chart") != "aws-fsx-csi-driver":
            continue
        role = release.get("values", "controller", "serviceAccount", "annotations", ROLE_ARN_ANNOTATION)
        if not role and not is_unknown(role):
            yield Violation(
                "wiring-eks-fsx-csi-role",
                release.urn,
                f"{release.name}: FSx CSI controller provisions file systems without an IAM role; set "
                f"values.controller.serviceAccount.annotations[{ROLE_ARN_ANNOTATION}] to its IRSA role",
            )


@stack_rule(
    "wiring-eks-node-role-buckets",
    why="Any pod that reaches a node's credentials acts as the node role: on EKS, bucket access belongs to "
    "the teams' IRSA roles, never the node role (EKS Best Practices Guide, 'Identity and Access "
    "Management': restrict access to the instance profile).",
    fix="give EKS node roles only the node policies (worker, ECR pull, SSM); grant buckets to service-account roles",
)
def eks_node_role_buckets(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    roles = [
        r for r in stack.of_type(ROLE) if any(mentions(ng, "nodeRoleArn", r) for ng in stack.of_type(EKS_NODE_GROUP))
    ]
    for role in roles:
        for policy in stack.of_type(ROLE_POLICY):
            if not stack.refers_to(policy, "role", role):
                continue
            doc = policy_document(policy.get("policy"))
            s3 = sorted(
                {
                    a
                    for st in as_list((doc or {}).get("Statement"))
                    if isinstance(st, Mapping)
                    for a in _actions(st)
                    if a.lower().startswith("s3:")
                }
            )
            if s3:
                yield Violation(
                    "wiring-eks-node-role-buckets",
                    policy.urn,
                    f"{policy.name}: EKS node role {role.name} is granted {', '.join(s3)}; remove it and grant "
                    "buckets through the teams' IRSA roles",
                )


@stack_rule(
    "wiring-eks-nodegroup-ami-match",
    why="The accelerated (NVIDIA) EKS AMI is for GPU instances and the standard one for the rest: a CPU group "
    "on the NVIDIA AMI (or a GPU group on the standard one) runs the wrong image (EKS User Guide, 'Create "
    "nodes with optimized Amazon Linux AMIs', amiType).",
    fix="use amiType AL2023_x86_64_STANDARD for groups without GPUs, AL2023_x86_64_NVIDIA for GPU groups",
)
def eks_ami_match(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for ng in stack.of_type(EKS_NODE_GROUP):
        component = stack.by_urn.get(ng.parent or "")
        if component is None or component.type != NODE_GROUP:
            continue
        gpus = component.get("gpusPerNode") or 0
        ami = str(ng.get("amiType") or "")
        if is_unknown(ng.get("amiType")) or not ami:
            continue
        nvidia = "NVIDIA" in ami
        if bool(gpus) != nvidia:
            want = load_aws_wiring().eks.gpu_ami_type if gpus else load_aws_wiring().eks.standard_ami_type
            yield Violation(
                "wiring-eks-nodegroup-ami-match",
                ng.urn,
                f"{ng.name}: amiType {ami} for a group with {gpus} GPU(s) per node; use {want}",
            )


# --- Auto Scaling --------------------------------------------------------------------------------


def _efa_template(stack: Stack, asg: Resource) -> bool:
    return any(
        mentions(asg, "launchTemplate", lt)
        and any(
            isinstance(n, Mapping) and n.get("interfaceType") in ("efa", "efa-only")
            for n in as_list(lt.get("networkInterfaces"))
        )
        for lt in stack.of_type(LAUNCH_TEMPLATE)
    )


@stack_rule(
    "wiring-asg-az-rebalance",
    why="AZRebalance moves instances to even out AZs: suspended on a group spanning AZs, an AZ's loss is "
    "never made good; left on for a single-AZ EFA group it has nothing to do (EC2 Auto Scaling User Guide, "
    "'Suspend and resume Amazon EC2 Auto Scaling processes').",
    fix="suspend AZRebalance only on single-AZ EFA groups",
)
def asg_az_rebalance(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for asg in stack.of_type(ASG):
        suspended = "AZRebalance" in [str(p) for p in as_list(asg.get("suspendedProcesses"))]
        subnets = as_list(asg.get("vpcZoneIdentifiers"))
        if suspended and (len(subnets) > 1 or not _efa_template(stack, asg)):
            yield Violation(
                "wiring-asg-az-rebalance",
                asg.urn,
                f"{asg.name}: AZRebalance suspended on a group across {len(subnets)} subnet(s) "
                f"{'with' if _efa_template(stack, asg) else 'without'} EFA; resume it (suspend only on "
                "single-AZ EFA groups)",
            )


@resource_rule(
    "wiring-asg-wait-for-capacity",
    types=(ASG,),
    why="With waitForCapacityTimeout 0 `up` reports success while every launch fails (key policy, capacity, "
    "quota); small groups come up in minutes, so `up` should wait for them (Pulumi aws.autoscaling.Group, "
    "'Waiting for Capacity').",
    fix="set waitForCapacityTimeout (e.g. 20m) on groups of up to max_nodes nodes",
    params={"max_nodes": Param(16, {"type": "integer", "minimum": 0}, "groups up to this size must wait for capacity")},
)
def asg_wait_for_capacity(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    size, timeout = r.get("desiredCapacity"), r.get("waitForCapacityTimeout")
    if is_unknown(size) or is_unknown(timeout) or size is None:
        return
    if int(size) <= int(ctx.param("max_nodes")) and str(timeout).strip() in ("0", "0s", "0m"):
        yield Violation(
            "wiring-asg-wait-for-capacity",
            r.urn,
            f"{r.name}: {size} node(s) with waitForCapacityTimeout {timeout}, so `up` succeeds even when no "
            "instance launches; set waitForCapacityTimeout to e.g. 20m",
        )


@stack_rule(
    "wiring-asg-health-check",
    why="A GPU node passes EC2 status checks long before its driver, Fabric Manager and EFA are up: a short "
    "grace period replaces nodes that are still booting, and ELB checks say nothing about GPUs (EC2 Auto "
    "Scaling User Guide, 'Health checks for instances in an Auto Scaling group'; GPU faults are reported "
    "by `gpuforge check` through SetInstanceHealth).",
    fix="use healthCheckType EC2 with healthCheckGracePeriod of at least min_grace_s seconds on GPU groups",
    params={"min_grace_s": Param(600, {"type": "integer", "minimum": 0}, "least grace period for GPU groups")},
)
def asg_health_check(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    floor = int(ctx.param("min_grace_s"))
    for asg in stack.of_type(ASG):
        component = stack.by_urn.get(asg.parent or "")
        if component is None or not (component.get("gpusPerNode") or 0):
            continue
        kind, grace = asg.get("healthCheckType") or "EC2", asg.get("healthCheckGracePeriod")
        if is_unknown(grace):
            continue
        grace_s = int(grace) if grace is not None else 300  # the AWS default
        if kind != "EC2" or grace_s < floor:
            yield Violation(
                "wiring-asg-health-check",
                asg.urn,
                f"{asg.name}: GPU group health check {kind} with a {grace_s}s grace period; use EC2 with at "
                f"least {floor}s",
            )


# --- DataSync ------------------------------------------------------------------------------------

INTERNAL_SUFFIXES = (".internal", ".local", ".lan", ".corp", ".home.arpa", ".intranet", ".private")


def _private_name(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host or host.lower().endswith(INTERNAL_SUFFIXES)
    return not address.is_global


@resource_rule(
    "wiring-datasync-server-certificate",
    types=(DATASYNC_OBJECT_STORAGE,),
    why="Public CAs issue no certificates for reserved IP addresses or internal names (CA/Browser Forum "
    "Baseline Requirements, 'Internal Names'), so an HTTPS site store at one has a private CA, which "
    "DataSync trusts only when given (DataSync User Guide, 'Configuring transfers with an object storage "
    "system', ServerCertificate).",
    fix="set the site store's ca_certificate (the private CA chain, PEM) so the location gets serverCertificate",
)
def datasync_server_certificate(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    host, protocol, cert = r.get("serverHostname"), r.get("serverProtocol"), r.get("serverCertificate")
    if is_unknown(host) or is_unknown(cert) or protocol != "HTTPS" or not isinstance(host, str):
        return
    if _private_name(host) and not cert:
        yield Violation(
            "wiring-datasync-server-certificate",
            r.urn,
            f"{r.name}: HTTPS to {host}, which no public CA certifies, without serverCertificate; set "
            "site.storage.object_store.ca_certificate to the store's CA chain",
        )


# --- monitoring ---------------------------------------------------------------------------------

SECRET = "aws:secretsmanager/secret:Secret"
READ_SECRET = "secretsmanager:GetSecretValue"


@stack_rule(
    "wiring-alert-secrets-reader",
    why="Alertmanager reads its receivers' credentials (PagerDuty routing key, Slack URL, webhook token, SMTP "
    "password) from Secrets Manager on the node it runs on: without GetSecretValue on those secrets, and "
    "kms:Decrypt on the customer key that encrypts them, no page is ever sent; a grant on '*' would hand every "
    "secret of the account to that node (Secrets Manager User Guide, 'Authentication and access control for "
    "AWS Secrets Manager' and 'Secret encryption and decryption in AWS Secrets Manager').",
    fix="attach a policy to the monitoring node group's role granting secretsmanager:GetSecretValue on exactly "
    "the alert secrets' ARNs and kms:Decrypt on their key (gpuforge.infra.aws.alert_secrets, iam.secret_read_policy)",
)
def alert_secrets_reader(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    rule = "wiring-alert-secrets-reader"
    for component in stack.of_type(ALERT_SECRETS):
        secrets = stack.children(component, SECRET)
        group = component.get("readerNodeGroup")
        if not secrets or not isinstance(group, str):
            continue  # no secrets, or no node of this stack runs Alertmanager (operator, site host)
        node_group = next((g for g in stack.of_type(NODE_GROUP) if g.get("nodeGroup") == group), None)
        role = next(iter(stack.children(node_group, ROLE)), None) if node_group else None
        if role is None:
            yield Violation(rule, component.urn, f"{component.name}: monitoring node group {group} has no IAM role; "
                "give it one that reads the alert secrets")
            continue
        policies = [p for p in stack.of_type(ROLE_POLICY) if stack.refers_to(p, "role", role)]
        unread = [s.name for s in secrets if not any(_grants(p, READ_SECRET, s) for p in policies)]
        if unread:
            yield Violation(
                rule,
                component.urn,
                f"{component.name}: role {role.name} of monitoring node group {group} cannot read "
                f"{', '.join(unread)}; grant {READ_SECRET} on them",
            )
        keys = sorted({u for s in secrets for u in s.dependencies.get("kmsKeyId", ()) if u in stack.by_urn})
        for key in (stack.by_urn[u] for u in keys):
            if not any(_grants(p, "kms:Decrypt", key) for p in policies):
                yield Violation(
                    rule,
                    component.urn,
                    f"{component.name}: role {role.name} of monitoring node group {group} cannot decrypt the "
                    f"alert secrets with {key.name}; grant kms:Decrypt on that key",
                )
        for policy in policies:
            doc = policy_document(policy.get("policy")) or {}
            wide = [st for st in _allows(doc, lambda _: True, [READ_SECRET]) if _wildcard(st.get("Resource"))]
            if wide:
                yield Violation(
                    rule,
                    policy.urn,
                    f"{policy.name}: grants {READ_SECRET} on {wide[0].get('Resource')} to monitoring node role "
                    f"{role.name}; name the alert secrets' ARNs",
                )


def _grants(policy: Resource, action: str, target: Resource) -> bool:
    """Whether a role policy allows `action` and its document points at `target` (by dependency or value)."""
    doc = policy_document(policy.get("policy"))
    return bool(doc and _allows(doc, lambda _: True, [action])) and mentions(policy, "policy", target)


def _wildcard(resources: Any) -> bool:
    return any(isinstance(r, str) and ("*" in r) for r in as_list(resources))
