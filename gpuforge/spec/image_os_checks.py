"""Images the playbooks can configure: a group the playbooks bake (Slurm or plain instances) or the image
pipeline's parent must boot a distribution the roles have values for.

Each role that differs by distribution loads `vars/<distribution>-<major version>.yml` (Ansible's
`ansible_facts.distribution` and `distribution_major_version`: Ubuntu-24.yml, Debian-12.yml) and fails on
a node whose file it lacks, after the deploy. The files themselves are the list of what is supported: a
distribution is supported when every such role has its file. An image parameter names its distribution
(the Deep Learning AMI's, Canonical's, Amazon Linux's and Debian's do); a fixed ami_id does not, and is
left to the roles on the node.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from gpuforge.assets import PLAYBOOKS_DIR

from .errors import SpecIssue
from .models import DLAMI_2404_SSM, UBUNTU_2404_SSM, ClusterSpec
from .paths import NODE_GROUPS

# (pattern in an SSM parameter name, Ansible's distribution name, its major version or the group holding it)
_DISTRIBUTIONS = (
    (re.compile(r"ubuntu(?:-|/server/)(\d{2})\.\d{2}(?:/|$)"), "Ubuntu", None),
    (re.compile(r"amazon-linux-2023|al2023"), "Amazon", "2023"),
    (re.compile(r"amazon-linux-2(?!\d)|amzn2"), "Amazon", "2"),
    (re.compile(r"/debian/release/(\d+)/"), "Debian", None),
    (re.compile(r"rocky-?(\d+)|rhel-?(\d+)"), "RedHat", None),
)
NAMES = {"Ubuntu": "Ubuntu", "Amazon": "Amazon Linux", "Debian": "Debian", "RedHat": "RHEL/Rocky"}
PLAYBOOK_ORCHESTRATORS = ("slurm", "none")  # EKS and Kubernetes groups boot EKS's own images


def image_distribution(ssm_parameter: str) -> tuple[str, str] | None:
    """(Ansible distribution, major version) an AMI parameter names; None when its name does not say."""
    for pattern, distribution, major in _DISTRIBUTIONS:
        match = pattern.search(ssm_parameter)
        if match:
            version = major or next(group for group in match.groups() if group)
            return distribution, version
    return None


@lru_cache(maxsize=4)
def playbook_distributions(playbooks: Path = PLAYBOOKS_DIR) -> frozenset[tuple[str, str]]:
    """Distributions every role with per-distribution vars has a file for (Ubuntu-24.yml -> (Ubuntu, 24))."""
    per_role: list[set[tuple[str, str]]] = []
    for vars_dir in sorted((playbooks / "roles").glob("*/vars")):
        found = {
            (name.rsplit("-", 1)[0], name.rsplit("-", 1)[1])
            for name in (path.stem for path in vars_dir.glob("*-*.yml"))
        }
        if found:
            per_role.append(found)
    return frozenset(set.intersection(*per_role)) if per_role else frozenset()


def describe(distributions: frozenset[tuple[str, str]]) -> str:
    return ", ".join(f"{NAMES.get(d, d)} {v}" for d, v in sorted(distributions))


def check_image_os(spec: ClusterSpec) -> list[SpecIssue]:
    supported = playbook_distributions()
    if spec.placement.kind == "onprem" or not supported:
        return []  # site hosts are installed by the site; the roles check them on the node
    issues: list[SpecIssue] = []
    for name, group in sorted(spec.node_groups.items()):
        parameter = group.image.ssm_parameter
        if group.orchestrator in PLAYBOOK_ORCHESTRATORS and parameter:
            issues += _unsupported(NODE_GROUPS.key(name).field("image", "ssm_parameter"), parameter, supported)
    pipeline = spec.image_pipeline
    if pipeline is not None:
        issues += _unsupported(
            "cluster.image_pipeline.parent_image_ssm_parameter", pipeline.parent_image_ssm_parameter, supported
        )
    return issues


def _unsupported(path: str, parameter: str, supported: frozenset[tuple[str, str]]) -> list[SpecIssue]:
    found = image_distribution(parameter)
    if found is None or found in supported:
        return []
    distribution, major = found
    return [
        SpecIssue(
            path,
            f"{parameter} boots {NAMES.get(distribution, distribution)} {major}, which the playbooks do not "
            f"configure: their roles load vars/<distribution>-<version>.yml and none has "
            f"{distribution}-{major}.yml (supported: {describe(supported)})",
            f"name an image of one of those, e.g. {DLAMI_2404_SSM} (the Deep Learning AMI, Ubuntu 24.04) or "
            f"{UBUNTU_2404_SSM}",
        )
    ]
