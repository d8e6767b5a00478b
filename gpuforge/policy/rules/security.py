"""Security pack: instance metadata, encryption, network exposure, buckets, IAM, EKS."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any

from gpuforge.catalog.tokens import EKS_CLUSTER, INSTANCE, LAUNCH_TEMPLATE, ROLE_POLICY_ATTACHMENT, SLURM_ROLE_TAG
from gpuforge.catalog.tokens import FSX_LUSTRE as LUSTRE

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

EBS_VOLUME = "aws:ebs/volume:Volume"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SECURITY_GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
POLICY_DOCUMENT_TYPES = (
    "aws:iam/rolePolicy:RolePolicy",
    "aws:iam/policy:Policy",
    "aws:iam/userPolicy:UserPolicy",
    "aws:iam/groupPolicy:GroupPolicy",
)
# pulumi-aws 7 renamed the V2 bucket resources back to the plain names and aliases the old ones;
# match both so a stack on either token is checked.
BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
SSE_CONFIGS = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
VERSIONING_CONFIGS = ("aws:s3/bucketVersioning:BucketVersioning", "aws:s3/bucketVersioningV2:BucketVersioningV2")
ADMIN_POLICIES = ("arn:aws:iam::aws:policy/AdministratorAccess", "arn:aws:iam::aws:policy/PowerUserAccess")
EKS_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
OPEN_CIDRS = ("0.0.0.0/0", "::/0")


# --- instance metadata --------------------------------------------------------------------------


@resource_rule(
    "security-launchtemplate-imdsv2",
    types=(LAUNCH_TEMPLATE, INSTANCE),
    why="IMDSv1 answers any SSRF'd GET with the node's IAM credentials; IMDSv2 needs a session token.",
    fix="set metadataOptions.httpTokens = required (or httpEndpoint = disabled)",
)
def imdsv2(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    endpoint = r.get("metadataOptions", "httpEndpoint")
    tokens = r.get("metadataOptions", "httpTokens")
    if endpoint == "disabled" or is_unknown(tokens) or tokens == "required":
        return
    yield Violation(
        "security-launchtemplate-imdsv2",
        r.urn,
        f"{r.name}: instance metadata allows IMDSv1 (httpTokens={tokens or 'unset, AWS default optional'}); "
        "set metadataOptions.httpTokens to 'required'",
    )


@resource_rule(
    "security-launchtemplate-imds-hop-limit",
    types=(LAUNCH_TEMPLATE, INSTANCE),
    why="A hop limit above what the node needs lets containers (or forwarded traffic) reach the node's role.",
    fix="set metadataOptions.httpPutResponseHopLimit to 1 (2 where pods must reach IMDS)",
    params={
        "max_hop_limit": Param(
            1, {"type": "integer", "minimum": 1, "maximum": 64}, "highest allowed IMDS PUT response hop limit"
        )
    },
)
def imds_hop_limit(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    if r.get("metadataOptions", "httpEndpoint") == "disabled":
        return
    limit = r.get("metadataOptions", "httpPutResponseHopLimit")
    allowed = int(ctx.param("max_hop_limit"))
    if is_unknown(limit) or (limit is not None and int(limit) <= allowed):
        return
    yield Violation(
        "security-launchtemplate-imds-hop-limit",
        r.urn,
        f"{r.name}: IMDS hop limit is {limit if limit is not None else 'unset'}, above {allowed}; "
        f"set metadataOptions.httpPutResponseHopLimit to {allowed} or less",
    )


# --- encryption and exposure of compute ---------------------------------------------------------


def _unencrypted_volumes(r: Resource) -> list[str]:
    """Device names (or roles) of EBS volumes this resource declares without encryption."""
    bad: list[str] = []
    if r.type == LAUNCH_TEMPLATE:
        for m in as_list(r.get("blockDeviceMappings")):
            ebs = m.get("ebs") if isinstance(m, Mapping) else None
            if isinstance(ebs, Mapping) and not is_unknown(ebs.get("encrypted")) and not truthy(ebs.get("encrypted")):
                bad.append(str(m.get("deviceName", "?")))
    elif r.type == INSTANCE:
        root = r.get("rootBlockDevice")
        if not isinstance(root, Mapping) or (
            not is_unknown(root.get("encrypted")) and not truthy(root.get("encrypted"))
        ):
            bad.append("root")
        for d in as_list(r.get("ebsBlockDevices")):
            if isinstance(d, Mapping) and not is_unknown(d.get("encrypted")) and not truthy(d.get("encrypted")):
                bad.append(str(d.get("deviceName", "?")))
    elif r.type == EBS_VOLUME and not is_unknown(r.get("encrypted")) and not truthy(r.get("encrypted")):
        bad.append("volume")
    return bad


@resource_rule(
    "security-volume-encrypted",
    types=(LAUNCH_TEMPLATE, INSTANCE, EBS_VOLUME),
    why="Root and data volumes hold credentials, datasets and checkpoints; unencrypted EBS leaks through snapshots.",
    fix="set ebs.encrypted = true (and kmsKeyId to the cluster key) on every block device",
)
def volume_encrypted(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    bad = _unencrypted_volumes(r)
    if bad:
        yield Violation(
            "security-volume-encrypted",
            r.urn,
            f"{r.name}: EBS volume(s) {', '.join(bad)} not encrypted; set encrypted = true with the cluster KMS key",
        )


@resource_rule(
    "security-compute-no-public-ip",
    types=(LAUNCH_TEMPLATE, INSTANCE),
    why="GPU nodes sit in private subnets behind NAT; a public address puts them on the internet.",
    fix="set associatePublicIpAddress = false; reach nodes through SSM or the login nodes",
)
def no_public_ip(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    if r.type == INSTANCE:
        # The one instance meant to be reached from outside: the Slurm bastion in the ingress tier, whose
        # security group security-securitygroup-open-ingress keeps off 0.0.0.0/0.
        public = truthy(r.get("associatePublicIpAddress")) and r.get("tags", SLURM_ROLE_TAG) != "bastion"
    else:
        public = any(
            isinstance(n, Mapping) and truthy(n.get("associatePublicIpAddress"))
            for n in as_list(r.get("networkInterfaces"))
        )
    if public:
        yield Violation(
            "security-compute-no-public-ip",
            r.urn,
            f"{r.name}: compute gets a public IP address; set associatePublicIpAddress = false",
        )


# --- security groups -----------------------------------------------------------------------------


def _is_open(cidr: Any) -> bool:
    if not isinstance(cidr, str):
        return False
    try:
        return ipaddress.ip_network(cidr, strict=False).prefixlen == 0
    except ValueError:
        return False


def _exposed(protocol: Any, from_port: Any, to_port: Any, ports: list[int]) -> str | None:
    """What an opening exposes: 'all ports', 'port 22', or None."""
    proto = str(protocol).lower() if protocol is not None else "-1"
    if proto in ("-1", "all"):
        return "all ports"
    if proto not in ("tcp", "6"):
        return None
    if is_unknown(from_port) or is_unknown(to_port):
        return None
    lo = int(from_port) if from_port is not None else 0
    hi = int(to_port) if to_port is not None else 65535
    if lo <= 0 and hi >= 65535:
        return "all ports"
    hit = [p for p in ports if lo <= p <= hi]
    return f"port {', '.join(map(str, hit))}" if hit else None


@resource_rule(
    "security-securitygroup-open-ingress",
    types=(SECURITY_GROUP, SECURITY_GROUP_RULE, INGRESS_RULE),
    why="SSH or every port open to the internet is the most scanned door there is.",
    fix="narrow the source to an office/VPN CIDR or a security group, or reach nodes through SSM",
    params={
        "ports": Param(
            [22],
            {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 65535}},
            "ports that must not be open to 0.0.0.0/0 or ::/0"
        )
    },
)
def open_ingress(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    ports = [int(p) for p in ctx.param("ports")]
    openings: list[tuple[str, str]] = []  # (cidr, what)
    if r.type == SECURITY_GROUP:
        for rule in as_list(r.get("ingress")):
            if not isinstance(rule, Mapping):
                continue
            cidrs = as_list(rule.get("cidrBlocks")) + as_list(rule.get("ipv6CidrBlocks"))
            what = _exposed(rule.get("protocol"), rule.get("fromPort"), rule.get("toPort"), ports)
            openings += [(c, what) for c in cidrs if what and _is_open(c)]
    elif r.type == SECURITY_GROUP_RULE:
        if r.get("type") == "ingress":
            cidrs = as_list(r.get("cidrBlocks")) + as_list(r.get("ipv6CidrBlocks"))
            what = _exposed(r.get("protocol"), r.get("fromPort"), r.get("toPort"), ports)
            openings += [(c, what) for c in cidrs if what and _is_open(c)]
    else:
        what = _exposed(r.get("ipProtocol"), r.get("fromPort"), r.get("toPort"), ports)
        cidrs = [r.get("cidrIpv4"), r.get("cidrIpv6")]
        openings += [(c, what) for c in cidrs if what and _is_open(c)]
    for cidr, what in openings:
        yield Violation(
            "security-securitygroup-open-ingress",
            r.urn,
            f"{r.name}: ingress opens {what} to {cidr}; restrict the source to a known CIDR or security group "
            "(network.allowed_ingress), or use SSM",
        )


# --- buckets (stack rules: the bucket and its separate configuration resources) ------------------


def _configs_of(stack: Stack, bucket: Resource, types: tuple[str, ...]) -> list[Resource]:
    return [c for c in stack.of_type(*types) if stack.refers_to(c, "bucket", bucket, "bucket")]


@stack_rule(
    "security-bucket-public-access-block",
    why="One public ACL or policy on a dataset or checkpoint bucket publishes it; the block overrides them.",
    fix="add a BucketPublicAccessBlock with all four settings true for the bucket",
)
def bucket_public_access_block(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    for bucket in stack.of_type(*BUCKETS):
        blocks = _configs_of(stack, bucket, (PUBLIC_ACCESS_BLOCK,))
        if not blocks:
            yield Violation(
                "security-bucket-public-access-block",
                bucket.urn,
                f"{bucket.name}: no public access block; add aws.s3.BucketPublicAccessBlock with "
                f"{', '.join(flags)} all true",
            )
            continue
        off = sorted({f for b in blocks for f in flags if not is_unknown(b.get(f)) and not truthy(b.get(f))})
        if off:
            yield Violation(
                "security-bucket-public-access-block",
                bucket.urn,
                f"{bucket.name}: public access block leaves {', '.join(off)} off; set them true",
            )


def _inline_sse(bucket: Resource) -> bool:
    rules = as_list(bucket.get("serverSideEncryptionConfiguration", "rule")) + as_list(
        bucket.get("serverSideEncryptionConfigurations")
    )
    return any(isinstance(x, Mapping) and x for x in rules)


@stack_rule(
    "security-bucket-encryption",
    why="Buckets hold training data and checkpoints: encrypt them with a key whose use is logged and revocable.",
    fix="add a BucketServerSideEncryptionConfiguration (sseAlgorithm aws:kms with the cluster key)",
    params={"require_kms": Param(False, {"type": "boolean"}, "demand aws:kms (or aws:kms:dsse), not SSE-S3")},
)
def bucket_encryption(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for bucket in stack.of_type(*BUCKETS):
        configs = _configs_of(stack, bucket, SSE_CONFIGS)
        algorithms = [
            rule.get("applyServerSideEncryptionByDefault", {}).get("sseAlgorithm")
            for c in configs
            for rule in as_list(c.get("rules"))
            if isinstance(rule, Mapping) and isinstance(rule.get("applyServerSideEncryptionByDefault"), Mapping)
        ]
        inline = bucket.get("serverSideEncryptionConfiguration", "rule", "applyServerSideEncryptionByDefault")
        if isinstance(inline, Mapping):
            algorithms.append(inline.get("sseAlgorithm"))
        if not algorithms and not _inline_sse(bucket):
            yield Violation(
                "security-bucket-encryption",
                bucket.urn,
                f"{bucket.name}: no server-side encryption configuration; add "
                "aws.s3.BucketServerSideEncryptionConfiguration with sseAlgorithm aws:kms",
            )
        elif ctx.param("require_kms") and not any(is_unknown(a) or str(a).startswith("aws:kms") for a in algorithms):
            yield Violation(
                "security-bucket-encryption",
                bucket.urn,
                f"{bucket.name}: encrypted with {', '.join(map(str, algorithms))}, not KMS; use sseAlgorithm aws:kms",
            )


@stack_rule(
    "security-bucket-versioning",
    why="Without versions an overwrite or delete (a bad job, a leaked key) destroys data for good.",
    fix="add a BucketVersioning with versioningConfiguration.status = Enabled",
    levels={"prod": "mandatory", "staging": "mandatory", "dev": "advisory"},
)
def bucket_versioning(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for bucket in stack.of_type(*BUCKETS):
        if bucket.get("bucket") is not None and str(bucket.get("bucket")).endswith("--x-s3"):
            continue  # S3 Express directory buckets cannot be versioned
        statuses = [c.get("versioningConfiguration", "status") for c in _configs_of(stack, bucket, VERSIONING_CONFIGS)]
        if truthy(bucket.get("versioning", "enabled")) or any(s == "Enabled" or is_unknown(s) for s in statuses):
            continue
        state = f"status {', '.join(map(str, statuses))}" if statuses else "no versioning configuration"
        yield Violation(
            "security-bucket-versioning",
            bucket.urn,
            f"{bucket.name}: versioning not enabled ({state}); add aws.s3.BucketVersioning with status Enabled",
        )


# --- file systems, IAM ---------------------------------------------------------------------------


@resource_rule(
    "security-lustre-kms",
    types=(LUSTRE,),
    why="A customer-managed key makes access to the file system's data auditable and revocable.",
    fix="use a PERSISTENT deployment type with kmsKeyId set to the cluster key (SCRATCH cannot take a key)",
)
def lustre_kms(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    key = r.get("kmsKeyId")
    if is_unknown(key) or key:
        return
    deployment = r.get("deploymentType") or "SCRATCH_1"
    hint = (
        "SCRATCH file systems only take the FSx-managed key; use PERSISTENT_2 with kmsKeyId"
        if str(deployment).startswith("SCRATCH")
        else "set kmsKeyId to the cluster KMS key"
    )
    yield Violation("security-lustre-kms", r.urn, f"{r.name}: {deployment} Lustre without a KMS key; {hint}")


def _wildcard_statements(doc: Mapping[str, Any]) -> list[int]:
    found = []
    for i, st in enumerate(as_list(doc.get("Statement"))):
        if not isinstance(st, Mapping) or st.get("Effect", "Allow") != "Allow":
            continue
        actions = [str(a) for a in as_list(st.get("Action"))]
        resources = [str(a) for a in as_list(st.get("Resource"))]
        if any(a in ("*", "*:*") for a in actions) and "*" in resources:
            found.append(i)
    return found


@resource_rule(
    "security-iam-no-wildcard-admin",
    types=(*POLICY_DOCUMENT_TYPES, ROLE_POLICY_ATTACHMENT),
    why="A node role with '*' on '*' turns any code on any GPU node into an account administrator.",
    fix="list the actions and resources the role needs (buckets, the cluster key), not '*'",
)
def iam_wildcard(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    if r.type == ROLE_POLICY_ATTACHMENT:
        arn = r.get("policyArn")
        if isinstance(arn, str) and arn in ADMIN_POLICIES:
            yield Violation(
                "security-iam-no-wildcard-admin",
                r.urn,
                f"{r.name}: attaches {arn.rsplit('/', 1)[-1]}; attach a policy scoped to what the role needs",
            )
        return
    doc = policy_document(r.get("policy"))
    if doc is None:
        return
    for i in _wildcard_statements(doc):
        yield Violation(
            "security-iam-no-wildcard-admin",
            r.urn,
            f"{r.name}: statement {i} allows action '*' on resource '*'; name the actions and resources instead",
        )


# --- EKS -----------------------------------------------------------------------------------------


@resource_rule(
    "security-eks-endpoint-private",
    types=(EKS_CLUSTER,),
    why="A public Kubernetes API open to 0.0.0.0/0 is one leaked kubeconfig from a cluster takeover.",
    fix="set vpcConfig.endpointPublicAccess = false (private endpoint), or publicAccessCidrs to known CIDRs",
)
def eks_endpoint(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    public = r.get("vpcConfig", "endpointPublicAccess")
    if is_unknown(public) or (public is not None and not truthy(public)):
        return
    cidrs = r.get("vpcConfig", "publicAccessCidrs")
    if is_unknown(cidrs):
        return
    cidrs = as_list(cidrs) or ["0.0.0.0/0"]  # AWS default when unset
    if any(_is_open(c) for c in cidrs):
        yield Violation(
            "security-eks-endpoint-private",
            r.urn,
            f"{r.name}: public API endpoint open to {', '.join(c for c in cidrs if _is_open(c))}; "
            "set vpcConfig.endpointPublicAccess = false or restrict publicAccessCidrs",
        )


@resource_rule(
    "security-eks-secrets-encryption",
    types=(EKS_CLUSTER,),
    why="Kubernetes secrets sit in etcd; envelope encryption with a KMS key protects them at rest.",
    fix="set encryptionConfig = {resources: [secrets], provider: {keyArn: <cluster KMS key>}}",
)
def eks_secrets(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    config = r.get("encryptionConfig")
    if is_unknown(config):
        return
    configs = as_list(config)
    ok = any(
        isinstance(c, Mapping) and "secrets" in as_list(c.get("resources")) and (c.get("provider") or {}).get("keyArn")
        for c in configs
    )
    if not ok:
        yield Violation(
            "security-eks-secrets-encryption",
            r.urn,
            f"{r.name}: secrets are not envelope-encrypted; "
            "set encryptionConfig with resources [secrets] and a KMS key",
        )


@resource_rule(
    "security-eks-control-plane-logs",
    types=(EKS_CLUSTER,),
    why="Audit and authenticator logs are the only record of who did what to the cluster.",
    fix=f"set enabledClusterLogTypes to {list(EKS_LOG_TYPES)}",
)
def eks_logs(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    enabled = r.get("enabledClusterLogTypes")
    if is_unknown(enabled):
        return
    missing = [t for t in EKS_LOG_TYPES if t not in as_list(enabled)]
    if missing:
        yield Violation(
            "security-eks-control-plane-logs",
            r.urn,
            f"{r.name}: control-plane log types {', '.join(missing)} not enabled; add them to enabledClusterLogTypes",
        )
