"""Slurm node groups boot an OS whose packaged Slurm the rendered configuration runs on.

The Slurm roles install the distribution's own slurm-wlm (catalog slurm.production), so the image decides
the release: Ubuntu 22.04 ships 21.08.5, which lacks dynamic nodes (`slurmd -Z --conf`), MaxNodeCount and the
cgroup/v2 plugin its own cgroup v2 hierarchy needs, so slurmd and slurmctld would not start (every gap, what
fails and SchedMD's files that show it: catalog slurm.distributions.<os>.lacks). A group's image names its
distribution when it is an SSM parameter of the Deep Learning AMI or Canonical's (ubuntu-22.04,
ubuntu/server/24.04); a fixed ami_id does not say (a site's own Slurm build goes there), and the
slurm_version role refuses an old Slurm on the node instead.
"""

from __future__ import annotations

from gpuforge.catalog import Catalog
from gpuforge.catalog.models import SlurmPackaged

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


def what_fails(os: str, packaged: SlurmPackaged, minimum: str) -> str:
    """Why a distribution's Slurm is refused: each thing the configuration uses that it lacks, and how it fails."""
    gaps = "; ".join(f"({n}) {gap.name}: {gap.fails}" for n, gap in enumerate(packaged.lacks, 1))
    return (
        f"the Slurm configuration needs {minimum} or newer; on {packaged.version}: {gaps} "
        f"(sources: catalog slurm.distributions.{os}.lacks)"
    )


# A Slurm the site builds itself reaches a node through an image gpuforge cannot name the distribution of.
OWN_BUILD_FIX = (
    "or bake your own Slurm build ({minimum} or newer) into an image and give it as image.ami_id (the Slurm "
    "roles check its release on the node)"
)


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
        if parameter and os and old is not None:
            issues.append(
                SpecIssue(
                    NODE_GROUPS.key(name).field("image", "ssm_parameter"),
                    f"{parameter} is {os}, whose packaged Slurm is {old.version}; {what_fails(os, old, minimum)}",
                    f"remove ssm_parameter (Slurm groups default to {DLAMI_2404_SSM}, Slurm "
                    f"{facts.distributions['ubuntu-24.04'].version}), or name an Ubuntu 24.04 image, "
                    + OWN_BUILD_FIX.format(minimum=minimum),
                )
            )
    pipeline = spec.image_pipeline
    if pipeline_users and pipeline is not None:
        os = image_os(pipeline.parent_image_ssm_parameter)
        old = facts.too_old(os) if os else None
        if os and old is not None:
            issues.append(
                SpecIssue(
                    "cluster.image_pipeline.parent_image_ssm_parameter",
                    f"the Slurm groups {', '.join(pipeline_users)} boot the pipeline's image, baked on {os}, whose "
                    f"packaged Slurm is {old.version}; {what_fails(os, old, minimum)}",
                    f"set parent_image_ssm_parameter to {UBUNTU_2404_SSM} (Slurm "
                    f"{facts.distributions['ubuntu-24.04'].version}), " + OWN_BUILD_FIX.format(minimum=minimum),
                )
            )
    return issues
