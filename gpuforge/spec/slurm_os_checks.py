"""Slurm node groups boot an OS whose packaged Slurm the rendered configuration runs on.

The Slurm roles install the distribution's own slurm-wlm (catalog slurm.production), so the image decides
the release: Ubuntu 22.04 ships 21.08.5, which has no dynamic nodes (`slurmd -Z --conf`), and a cloud node
on it would never register. A group's image names its distribution when it is an SSM parameter of the Deep
Learning AMI or Canonical's (ubuntu-22.04, ubuntu/server/24.04); a fixed ami_id does not say, and the
slurm_version role refuses an old Slurm on the node instead.
"""

from __future__ import annotations

from gpuforge.catalog import Catalog

from .errors import SpecIssue
from .models import DLAMI_2404_SSM, UBUNTU_2404_SSM, ClusterSpec, NodeGroup, default_image_parameter, image_os
from .paths import NODE_GROUPS


def slurm_image_os(spec: ClusterSpec, group: NodeGroup) -> str | None:
    """The distribution a Slurm group's image boots (its SSM parameter, the pipeline's parent image, or the
    default Slurm image), or None where the image does not say (a fixed ami_id, a parameter gpuforge does not
    know)."""
    if group.image.ami_id:
        return None
    if group.image.pipeline:
        return image_os(spec.image_pipeline.parent_image_ssm_parameter) if spec.image_pipeline else None
    return image_os(group.image.ssm_parameter or default_image_parameter("slurm"))


def check_slurm_os(spec: ClusterSpec, catalog: Catalog) -> list[SpecIssue]:
    if spec.placement.kind == "onprem":
        return []  # site hosts are installed by the site; the slurm_version role checks them
    facts = catalog.slurm
    minimum = facts.minimum.version
    issues: list[SpecIssue] = []
    pipeline_users: list[str] = []
    for name, group in sorted(spec.node_groups.items()):
        if group.orchestrator != "slurm":
            continue
        if group.image.pipeline:
            pipeline_users.append(name)
            continue
        parameter = group.image.ssm_parameter
        os = slurm_image_os(spec, group)
        old = facts.too_old(os) if os else None
        if parameter and old is not None:
            issues.append(
                SpecIssue(
                    NODE_GROUPS.key(name).field("image", "ssm_parameter"),
                    f"{parameter} is {os}, whose packaged Slurm is {old.version}; the Slurm configuration needs "
                    f"{minimum} or newer (dynamic nodes: slurmd -Z --conf; catalog slurm.minimum)",
                    f"remove ssm_parameter (Slurm groups default to {DLAMI_2404_SSM}, Slurm "
                    f"{facts.distributions['ubuntu-24.04'].version}), or name an Ubuntu 24.04 image",
                )
            )
    pipeline = spec.image_pipeline
    if pipeline_users and pipeline is not None:
        os = image_os(pipeline.parent_image_ssm_parameter)
        old = facts.too_old(os) if os else None
        if old is not None:
            issues.append(
                SpecIssue(
                    "cluster.image_pipeline.parent_image_ssm_parameter",
                    f"the Slurm groups {', '.join(pipeline_users)} boot the pipeline's image, baked on {os}, whose "
                    f"packaged Slurm is {old.version}; the Slurm configuration needs {minimum} or newer (dynamic "
                    "nodes: slurmd -Z --conf; catalog slurm.minimum)",
                    f"set parent_image_ssm_parameter to {UBUNTU_2404_SSM} (Slurm "
                    f"{facts.distributions['ubuntu-24.04'].version})",
                )
            )
    return issues
