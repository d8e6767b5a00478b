"""Security pack, AWS wiring: transport and at-rest protections that live on resources next to the
ones they protect (a bucket's policy, a log group's key, a tunnel's options, a role's trust).
Values come from gpuforge/catalog/data/aws_wiring.yaml where AWS defines them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.catalog.tokens import EFS, LOG_GROUP, ROLE
from gpuforge.catalog.tokens import FSX_LUSTRE as LUSTRE

from .base import (
    Resource,
    RuleContext,
    Stack,
    Violation,
    as_list,
    is_unknown,
    policy_document,
    resource_rule,
    stack_rule,
)
from .security import BUCKETS

BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
EFS_POLICY = "aws:efs/fileSystemPolicy:FileSystemPolicy"
# What an NFS client needs to mount and write an EFS file system (EFS's default policy grants them to all).
EFS_CLIENT_ACTIONS = ("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite")
VPN_CONNECTION = "aws:ec2/vpnConnection:VpnConnection"
# Services that put aws:SourceAccount / aws:SourceArn on the AssumeRole call, so a trust policy can
# bind the role to this account's own resources: gpuforge/catalog/data/aws_wiring.yaml
# trust_source_keys (EC2 is not one of them).
SOURCE_KEY_SERVICES = load_aws_wiring().trust_source_keys.services


def _denies_insecure_transport(doc: Mapping[str, Any]) -> bool:
    for st in as_list(doc.get("Statement")):
        if not isinstance(st, Mapping) or st.get("Effect") != "Deny":
            continue
        condition = st.get("Condition")
        bool_ = condition.get("Bool") if isinstance(condition, Mapping) else None
        if not isinstance(bool_, Mapping) or str(bool_.get("aws:SecureTransport")).lower() != "false":
            continue
        actions = [str(a) for a in as_list(st.get("Action"))]
        resources = [str(r) for r in as_list(st.get("Resource"))]
        if any(a in ("s3:*", "*") for a in actions) and any(r.endswith("/*") for r in resources):
            return True
    return False


@stack_rule(
    "security-bucket-tls-only",
    why="S3 answers plain HTTP unless the bucket policy refuses it: without a Deny on aws:SecureTransport "
    "false, a misconfigured client sends training data and credentials-signed requests in clear text (S3 "
    "User Guide, 'Security best practices for Amazon S3': enforce encryption of data in transit).",
    fix="add a BucketPolicy with Deny s3:* on the bucket and bucket/* when aws:SecureTransport is false",
)
def bucket_tls_only(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for bucket in stack.of_type(*BUCKETS):
        policies = [p for p in stack.of_type(BUCKET_POLICY) if stack.refers_to(p, "bucket", bucket, "bucket")]
        docs = [policy_document(p.get("policy")) for p in policies]
        if any(is_unknown(p.get("policy")) for p in policies):
            continue
        if not any(d is not None and _denies_insecure_transport(d) for d in docs):
            yield Violation(
                "security-bucket-tls-only",
                bucket.urn,
                f"{bucket.name}: no bucket policy denies requests without TLS; add a BucketPolicy statement "
                "Deny s3:* when aws:SecureTransport is false",
            )


def _denies_without_tls(doc: Mapping[str, Any]) -> bool:
    """A statement that denies every action to every principal when aws:SecureTransport is false."""
    for st in as_list(doc.get("Statement")):
        if not isinstance(st, Mapping) or st.get("Effect") != "Deny" or st.get("Principal") not in ("*", {"AWS": "*"}):
            continue
        condition = st.get("Condition")
        bool_ = condition.get("Bool") if isinstance(condition, Mapping) else None
        if not isinstance(bool_, Mapping) or str(bool_.get("aws:SecureTransport")).lower() != "false":
            continue
        if any(str(a) in ("*", "elasticfilesystem:*") for a in as_list(st.get("Action"))):
            return True
    return False


def _lets_clients_mount(doc: Mapping[str, Any]) -> bool:
    """An Allow of ClientMount and ClientWrite to every principal, unconditioned or through mount targets only:
    what EFS's default policy gave the NFS clients, which an explicit policy replaces."""
    granted: set[str] = set()
    for st in as_list(doc.get("Statement")):
        if not isinstance(st, Mapping) or st.get("Effect") != "Allow" or st.get("Principal") not in ("*", {"AWS": "*"}):
            continue
        condition = st.get("Condition")
        if condition and condition != {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}}:
            continue
        actions = {str(a) for a in as_list(st.get("Action"))}
        granted |= set(EFS_CLIENT_ACTIONS) if actions & {"*", "elasticfilesystem:*"} else actions
    return set(EFS_CLIENT_ACTIONS) <= granted


@stack_rule(
    "security-efs-tls-only",
    why="EFS accepts plain NFS from any client that reaches a mount target unless the file system's policy refuses "
    "it: without a Deny on aws:SecureTransport false, a node mounted without the mount helper's tls sends users' "
    "homes and the Slurm controllers' state in clear text (EFS User Guide, 'Enforcing encryption in transit'). An "
    "explicit policy replaces EFS's default one, so it must also grant ClientMount and ClientWrite to the clients, "
    "or every mount is refused.",
    fix="add an aws.efs.FileSystemPolicy on the file system with Deny * to every principal when aws:SecureTransport "
    "is false, and Allow elasticfilesystem:ClientMount, ClientWrite (and ClientRootAccess) when "
    "elasticfilesystem:AccessedViaMountTarget is true (gpuforge/infra/aws/slurm.py transit_encrypted_policy)",
)
def efs_tls_only(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for fs in stack.of_type(EFS):
        policies = [p for p in stack.of_type(EFS_POLICY) if stack.refers_to(p, "fileSystemId", fs)]
        if any(is_unknown(p.get("policy")) for p in policies):
            continue
        docs = [d for d in (policy_document(p.get("policy")) for p in policies) if d is not None]
        if not any(_denies_without_tls(d) for d in docs):
            yield Violation(
                "security-efs-tls-only",
                fs.urn,
                f"{fs.name}: no file system policy denies requests without TLS; add a FileSystemPolicy statement "
                "Deny * to every principal when aws:SecureTransport is false",
            )
        elif not any(_lets_clients_mount(d) for d in docs):
            yield Violation(
                "security-efs-tls-only",
                fs.urn,
                f"{fs.name}: its file system policy grants no client ClientMount and ClientWrite, so every mount "
                "is refused; allow them to every principal when elasticfilesystem:AccessedViaMountTarget is true",
            )


@resource_rule(
    "security-loggroup-kms",
    types=(LOG_GROUP,),
    why="Flow logs, control-plane audit logs and tunnel logs name every peer and principal; encrypted with the "
    "cluster key their reading is logged and revocable (CloudWatch Logs User Guide, 'Encrypt log data in "
    "CloudWatch Logs using AWS KMS').",
    fix="set kmsKeyId to the cluster key (whose policy allows logs.<region>.amazonaws.com)",
)
def loggroup_kms(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    key = r.get("kmsKeyId")
    if not key and not is_unknown(key):
        yield Violation(
            "security-loggroup-kms",
            r.urn,
            f"{r.name}: log group not encrypted with a customer-managed key; set kmsKeyId to the cluster key",
        )


@resource_rule(
    "security-lustre-root-squash",
    types=(LUSTRE,),
    why="Without root squash, root on any client (any pod that escapes to its node) is root on the shared "
    "file system: every team's checkpoints and datasets (FSx for Lustre User Guide, 'Lustre root squash').",
    fix="set rootSquashConfiguration.rootSquash to 65534:65534 (noSquashNids only for admin hosts)",
)
def lustre_root_squash(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    squash = r.get("rootSquashConfiguration", "rootSquash")
    if is_unknown(squash):
        return
    if not squash or str(squash) in ("0:0", "0"):
        yield Violation(
            "security-lustre-root-squash",
            r.urn,
            f"{r.name}: root squash off (rootSquash {squash or 'unset'}); set rootSquashConfiguration.rootSquash "
            f"to {load_aws_wiring().lustre.root_squash}",
        )


def _tunnel_problems(r: Resource, tunnel: str) -> list[str]:
    crypto = load_aws_wiring().vpn_tunnel
    allowed: dict[str, tuple[Any, ...]] = {
        "IkeVersions": crypto.ike_versions,
        "Phase1DhGroupNumbers": crypto.phase1_dh_group_numbers,
        "Phase2DhGroupNumbers": crypto.phase2_dh_group_numbers,
        "Phase1EncryptionAlgorithms": crypto.phase1_encryption_algorithms,
        "Phase2EncryptionAlgorithms": crypto.phase2_encryption_algorithms,
        "Phase1IntegrityAlgorithms": crypto.phase1_integrity_algorithms,
        "Phase2IntegrityAlgorithms": crypto.phase2_integrity_algorithms,
    }
    problems = []
    for option, values in allowed.items():
        value = r.get(f"{tunnel}{option}")
        if is_unknown(value):
            continue
        given = as_list(value)
        extra = [v for v in given if v not in values]
        if not given:
            problems.append(f"{tunnel}{option} unset (AWS allows legacy values by default)")
        elif extra:
            problems.append(f"{tunnel}{option} allows {', '.join(map(str, extra))}")
    enabled = r.get(f"{tunnel}LogOptions", "cloudwatchLogOptions", "logEnabled")
    if not is_unknown(enabled) and enabled is not True:
        problems.append(f"{tunnel} logging off")
    return problems


@resource_rule(
    "security-vpn-tunnel-crypto",
    types=(VPN_CONNECTION,),
    why="Site-to-Site VPN tunnels accept IKEv1, DH group 2 and SHA-1 unless told otherwise, and log nothing: "
    "pin both tunnels to IKEv2, elliptic-curve DH groups, AES-256-GCM and SHA-2, with tunnel logging on (AWS "
    "Site-to-Site VPN User Guide, 'Tunnel options for your Site-to-Site VPN connection', 'AWS Site-to-Site "
    "VPN logs'; NIST SP 800-77r1).",
    fix="set tunnel1/tunnel2 IKE versions, DH groups, encryption and integrity algorithms to the values in "
    "aws_wiring.yaml vpn_tunnel, and tunnel*LogOptions.cloudwatchLogOptions.logEnabled true",
)
def vpn_tunnel_crypto(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    problems = _tunnel_problems(r, "tunnel1") + _tunnel_problems(r, "tunnel2")
    if problems:
        yield Violation(
            "security-vpn-tunnel-crypto",
            r.urn,
            f"{r.name}: {'; '.join(problems)}; pin the tunnel options to aws_wiring.yaml vpn_tunnel "
            "(IKEv2, DH 19-21, AES256-GCM-16, SHA2-384/512) and enable tunnel logs",
        )


def _has_source_condition(statement: Mapping[str, Any]) -> bool:
    condition = statement.get("Condition")
    if not isinstance(condition, Mapping):
        return False
    keys = {str(k).lower() for block in condition.values() if isinstance(block, Mapping) for k in block}
    return bool(keys & {"aws:sourceaccount", "aws:sourcearn"})


@resource_rule(
    "security-iam-trust-confused-deputy",
    types=(ROLE,),
    why="A service principal in a trust policy can be asked by anyone's resource to assume the role; "
    "aws:SourceAccount / aws:SourceArn bind it to this account's own flow logs, DataSync tasks, replication "
    "rules and EKS clusters (IAM User Guide, 'The confused deputy problem'; each service's cross-service "
    "confused deputy prevention page).",
    fix="add Condition StringEquals aws:SourceAccount (and ArnLike aws:SourceArn) to the trust statement "
    "(gpuforge/infra/aws/iam.py assume_role_policy source_account/source_arn)",
)
def trust_confused_deputy(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    doc = policy_document(r.get("assumeRolePolicy"))
    if doc is None:
        return
    for st in as_list(doc.get("Statement")):
        if not isinstance(st, Mapping) or st.get("Effect") != "Allow":
            continue
        principal = st.get("Principal")
        services = [str(s) for s in as_list(principal.get("Service"))] if isinstance(principal, Mapping) else []
        exposed = [s for s in services if s in SOURCE_KEY_SERVICES]
        if exposed and not _has_source_condition(st):
            yield Violation(
                "security-iam-trust-confused-deputy",
                r.urn,
                f"{r.name}: trusts {', '.join(exposed)} with no aws:SourceAccount/aws:SourceArn condition; add "
                "them so the service assumes it only for this account's resources",
            )
