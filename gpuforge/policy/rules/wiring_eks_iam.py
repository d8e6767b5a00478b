"""Wiring pack, EKS IAM scope: what a role for pods may reach on a shared cluster. A team's role writes only
under its own prefix of the buckets; the FSx CSI controller's role acts only on the stack's file systems.
Both plan cleanly with wider grants, and a wider grant is one team overwriting another's checkpoints or a
controller able to delete any file system in the account.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.catalog.tokens import HELM_RELEASE, ROLE

from .base import RuleContext, Stack, Violation, as_list, is_unknown, policy_document, stack_rule
from .security import LUSTRE
from .wiring_aws import ROLE_POLICY, _actions, _covers, mentions

TEAM_TAG = "gpuforge:team"
# Object-writing actions a team role must confine to its prefix (s3:* and s3:Put* cover them too).
S3_WRITES = ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:RestoreObject")


def _policies(stack: Stack, role: Any) -> Iterator[tuple[Any, list[Mapping[str, Any]]]]:
    """Each inline policy of `role` with its Allow statements."""
    for policy in stack.of_type(ROLE_POLICY):
        if not stack.refers_to(policy, "role", role):
            continue
        doc = policy_document(policy.get("policy")) or {}
        yield (
            policy,
            [st for st in as_list(doc.get("Statement")) if isinstance(st, Mapping) and st.get("Effect") == "Allow"],
        )


def _statements(stack: Stack, role: Any) -> Iterator[Mapping[str, Any]]:
    for _, statements in _policies(stack, role):
        yield from statements


@stack_rule(
    "wiring-eks-team-bucket-prefix",
    why="On a shared EKS cluster each team's IRSA role writes only under its own prefix of the buckets, so no "
    "team overwrites another's checkpoints (issue 25; S3 User Guide, 'Example: Allow a user to list and access "
    "objects under their prefix').",
    fix="grant the team role's s3:PutObject, s3:DeleteObject and s3:AbortMultipartUpload only on "
    "'<bucket ARN>/<team>/*' (gpuforge.infra.aws.iam.team_bucket_policy)",
)
def eks_team_bucket_prefix(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for role in stack.of_type(ROLE):
        team = role.get("tags", TEAM_TAG)
        if not isinstance(team, str) or not team:
            continue
        for st in _statements(stack, role):
            writes = [a for a in S3_WRITES if _covers(_actions(st), a)]
            if not writes:
                continue
            resources = as_list(st.get("Resource"))
            outside = sorted(str(r) for r in resources if not is_unknown(r) and not str(r).endswith(f"/{team}/*"))
            if outside:
                yield Violation(
                    "wiring-eks-team-bucket-prefix",
                    role.urn,
                    f"{role.name}: team {team}'s role may {', '.join(writes)} on {', '.join(outside)}, outside "
                    f"its prefix {team}/; grant them only on '<bucket ARN>/{team}/*'",
                )


@stack_rule(
    "wiring-eks-fsx-csi-role-scope",
    why="The FSx CSI controller mounts the stack's own file system as a static volume, so its role needs only to "
    "describe and update that file system: the driver's documented create, delete, tag, IAM and S3 actions, or "
    "any action on '*', would let it create or delete any file system in the account (kubernetes-sigs/"
    "aws-fsx-csi-driver docs/install.md, 'Set up driver permissions').",
    fix="give the controller's IRSA role only the actions in aws_wiring.yaml fsx_csi_controller, on the ARNs of "
    "the stack's FSx for Lustre file systems",
)
def eks_fsx_csi_role_scope(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    facts = load_aws_wiring().fsx_csi_controller
    file_systems = {fs.urn for fs in stack.of_type(LUSTRE)}
    for release in stack.of_type(HELM_RELEASE):
        if release.get("chart") != "aws-fsx-csi-driver":
            continue
        for role in (r for r in stack.of_type(ROLE) if mentions(release, "values", r)):
            problems: list[str] = []
            for policy, statements in _policies(stack, role):
                from_file_systems = bool(file_systems & set(policy.dependencies.get("policy", ())))
                for st in statements:
                    extra = [a for a in _actions(st) if a not in facts.actions]
                    if extra:
                        problems.append(f"{', '.join(extra)}, which a static volume does not need")
                    resources = [str(r) for r in as_list(st.get("Resource")) if not is_unknown(r)]
                    wide = [r for r in resources if "*" in r]
                    if wide:
                        problems.append(f"actions on {', '.join(wide)}")
                    elif resources and not from_file_systems:
                        problems.append(f"actions on {', '.join(resources)}, not taken from the stack's file systems")
            if problems:
                yield Violation(
                    "wiring-eks-fsx-csi-role-scope",
                    role.urn,
                    f"{role.name}: the FSx CSI controller's role allows {'; '.join(problems)}; allow only "
                    f"{', '.join(facts.actions)} on the stack's file systems' ARNs",
                )
