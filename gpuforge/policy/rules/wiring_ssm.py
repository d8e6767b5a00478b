"""Wiring pack, login access through SSM Session Manager (gpuforge/infra/aws/session_manager.py): a Slurm cluster
on AWS is reached through Session Manager, so the account's session preferences and the node roles that write
the session log decide whether a session is a passwordless sudoer with no record, or a named user whose every
keystroke lands encrypted in the cluster's log group.

Sources (Session Manager User Guide): "Start a default shell session by specifying the default session document
in IAM policies" (SSM-SessionManagerRunShell holds the preferences), "Session document schema" (inputs),
"Turn on Run As support for Linux and macOS managed nodes" (without it sessions run as ssm-user, which the agent
makes a sudoer), "Turn on KMS key encryption of session data" and "Logging session data using Amazon CloudWatch
Logs", "Step 2: Verify or add instance permissions for Session Manager" (kms:Decrypt, logs:PutLogEvents on the
instance profile).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from gpuforge.catalog.tokens import LOG_GROUP, NODE_GROUP, ROLE_POLICY_ATTACHMENT, SLURM_CONTROL_PLANE

from .base import Resource, RuleContext, Stack, Violation, is_unknown, policy_document, stack_rule, truthy
from .wiring_aws import KMS_KEY, ROLE, ROLE_POLICY, _allows, mentions

RULE = "wiring-ssm-session-preferences"
DOCUMENT = "aws:ssm/document:Document"
PREFERENCES = "SSM-SessionManagerRunShell"
SSM_CORE = "AmazonSSMManagedInstanceCore"
PRIVILEGED_USERS = ("", "root", "ssm-user")
FIX_SOURCE = "gpuforge/infra/aws/session_manager.py"


@stack_rule(
    RULE,
    why="Without Session Manager preferences a session runs as ssm-user, which the SSM agent makes a passwordless "
    "sudoer, and nothing records it; the preferences (the SSM-SessionManagerRunShell Session document) turn on "
    "Run As, encrypt session data with a customer key and stream every session to an encrypted CloudWatch Logs "
    "group, which the nodes' roles must be allowed to write and the key to decrypt (Session Manager User Guide: "
    "'Turn on Run As support', 'Turn on KMS key encryption of session data', 'Logging session data using Amazon "
    "CloudWatch Logs', 'Step 2: Verify or add instance permissions for Session Manager').",
    fix="declare the SSM-SessionManagerRunShell document (documentType Session) with runAsEnabled true and an "
    "unprivileged runAsDefaultUser, kmsKeyId the cluster key, cloudWatchLogGroupName a log group encrypted with "
    "it and cloudWatchEncryptionEnabled true; grant each SSM-managed node role logs:PutLogEvents on that group "
    f"and kms:Decrypt on the key ({FIX_SOURCE})",
)
def ssm_session_preferences(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    planes = stack.of_type(SLURM_CONTROL_PLANE)
    if not planes:
        return  # login access through SSM is the Slurm cluster's on AWS
    documents = [d for d in stack.of_type(DOCUMENT) if d.get("name") == PREFERENCES]
    if not documents:
        yield Violation(
            RULE,
            planes[0].urn,
            f"{planes[0].name}: login nodes are reached through Session Manager but the stack declares no "
            f"{PREFERENCES} preferences document; sessions would run as ssm-user (a passwordless sudoer), "
            f"unencrypted beyond TLS and unlogged; declare it ({FIX_SOURCE})",
        )
        return
    document = documents[0]
    content = document.get("content")
    if is_unknown(content):
        return  # known at `up`
    inputs = _inputs(content)
    problems = _document_problems(document, inputs)
    key = next((k for k in stack.of_type(KMS_KEY) if mentions(document, "content", k)), None)
    group_name = inputs.get("cloudWatchLogGroupName")
    group = next((g for g in stack.of_type(LOG_GROUP) if group_name and g.get("name") == group_name), None)
    if group_name and group is None:
        problems.append(f"cloudWatchLogGroupName {group_name} is no log group of this stack; declare it, encrypted")
    elif group is not None and not group.get("kmsKeyId") and not is_unknown(group.get("kmsKeyId")):
        problems.append(f"log group {group.name} is not encrypted with a customer key; set its kmsKeyId")
    for problem in problems:
        yield Violation(RULE, document.urn, f"{document.name}: {problem}")
    yield from _node_roles(stack, group, key)


def _inputs(content: Any) -> Mapping[str, Any]:
    try:
        doc = json.loads(content) if isinstance(content, str) else content
    except json.JSONDecodeError:
        return {}
    inputs = doc.get("inputs") if isinstance(doc, Mapping) else None
    return inputs if isinstance(inputs, Mapping) else {}


def _document_problems(document: Resource, inputs: Mapping[str, Any]) -> list[str]:
    problems = []
    if document.get("documentType") != "Session":
        kind = document.get("documentType")
        problems.append(f"documentType {kind!r}: preferences are a Session document; set Session")
    user = str(inputs.get("runAsDefaultUser") or "")
    if not truthy(inputs.get("runAsEnabled")):
        problems.append("runAsEnabled is not true: every session runs as ssm-user, a passwordless sudoer; turn on "
                        "Run As (principals tagged SSMSessionRunAs get their own Linux user)")
    elif user in PRIVILEGED_USERS:
        problems.append(f"runAsDefaultUser {user or '(empty)'!s} gives an untagged principal a privileged shell; "
                        "name an unprivileged user")
    if not inputs.get("kmsKeyId"):
        problems.append("no kmsKeyId: session data is encrypted by TLS only; set the cluster key")
    if not inputs.get("cloudWatchLogGroupName"):
        problems.append("no cloudWatchLogGroupName: sessions leave no record; stream them to the cluster's log group")
    elif not truthy(inputs.get("cloudWatchEncryptionEnabled")):
        problems.append("cloudWatchEncryptionEnabled is not true: the agent would log to an unencrypted group; "
                        "set it true")
    return problems


def _node_roles(stack: Stack, group: Resource | None, key: Resource | None) -> Iterator[Violation]:
    """Every SSM-managed role of the cluster's node groups and Slurm controllers writes the session log and
    decrypts the session key: a session to a node whose role cannot fails to start."""
    owners = [*stack.of_type(NODE_GROUP), *stack.of_type(SLURM_CONTROL_PLANE)]
    roles = [r for owner in owners for r in stack.children(owner, ROLE)]
    attachments = stack.of_type(ROLE_POLICY_ATTACHMENT)
    policies = stack.of_type(ROLE_POLICY)
    for role in roles:
        if not any(str(a.get("policyArn") or "").endswith(SSM_CORE) and stack.refers_to(a, "role", role)
                   for a in attachments):
            continue  # not an SSM-managed instance's role
        granted = [p for p in policies if stack.refers_to(p, "role", role)]
        missing = []
        for action, target in (("logs:PutLogEvents", group), ("kms:Decrypt", key)):
            if target is not None and not any(_grants(p, action, target) for p in granted):
                missing.append(f"{action} on {target.name}")
        if missing:
            yield Violation(
                RULE,
                role.urn,
                f"{role.name}: an SSM-managed node role without {' and '.join(missing)}; its sessions cannot be "
                f"logged and decrypted, so Session Manager refuses them; grant them ({FIX_SOURCE})",
            )


def _grants(policy: Resource, action: str, target: Resource) -> bool:
    if is_unknown(policy.get("policy")):
        return True  # judged at `up`
    doc = policy_document(policy.get("policy"))
    return bool(doc and _allows(doc, lambda _: True, [action])) and mentions(policy, "policy", target)
