"""Node groups whose image is not pinned, as the plan shows them (issue 12).

A launch template whose image is ``resolve:ssm:<parameter>`` boots what the parameter names at each
launch, so a spare or replacement can run another driver, NCCL or EFA stack than the rest of the job.
`gpuforge pin-images STACK` resolves the parameter once, with AWS credentials, and writes
``image.ami_id``; a plan has no credentials, so it can only say which groups are left to pin. A warning,
not a policy violation: the shipped stacks stay unpinned until someone pins them against their account.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuforge.catalog.tokens import LAUNCH_TEMPLATE
from gpuforge.plan.model import Plan
from gpuforge.plan.summary import NODE_GROUP

SSM_PREFIX = "resolve:ssm:"


@dataclass(frozen=True)
class UnpinnedImage:
    group: str
    image: str  # resolve:ssm:<parameter>

    def text(self, stack: str) -> str:
        return (
            f"{self.group}: {self.image}, resolved at each launch ⚠ spares and replacements may boot a newer "
            f"image: run `gpuforge pin-images {stack}` (writes node_groups[{self.group}].image.ami_id)"
        )


def unpinned_images(plan: Plan) -> list[UnpinnedImage]:
    """Each node group whose launch template names an SSM parameter instead of an AMI id (EKS managed
    groups name none: EKS picks the AMI by release version)."""
    groups = {r.urn: r for r in plan.by_type(NODE_GROUP)}
    found = []
    for template in plan.by_type(LAUNCH_TEMPLATE):
        group = groups.get(template.parent or "")
        image = template.inputs.get("imageId")
        if group is not None and isinstance(image, str) and image.startswith(SSM_PREFIX):
            found.append(UnpinnedImage(str(group.inputs.get("nodeGroup") or group.name), image))
    return found


def pin_warnings(plan: Plan) -> list[str]:
    """The plan's warning lines: prod only, where a mixed image under one job costs the most."""
    if plan.resolved.spec.environment != "prod":
        return []
    return [u.text(plan.stack) for u in unpinned_images(plan)]
