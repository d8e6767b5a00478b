"""The spec checks, each with an id and a level, like the policy rules (`gpuforge policies`).

A check is one function that judges a part of the spec and returns its problems (ParallelCluster's
validators: a name, a failure level, the fields). `resolve` tags every problem with the id of the check
that found it (`SpecIssue.check`), so a report, a test or the docs can say which rule a problem breaks;
REGISTRY lists every check, and docs/spec.md's "Checks" table lists the same ids (a test compares them).

Every check is an error today: the spec is refused until it is fixed. "warning" is the level a check
would carry whose problems are reported without refusing the spec; none does yet.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from .errors import SpecIssue

Level = Literal["error", "warning"]


@dataclass(frozen=True)
class SpecCheck:
    id: str  # spec-<section>[-<what>], the way policy rule ids read <area>-<resource>-<rule>
    level: Level
    section: str  # the spec key it judges
    summary: str

    def tag(self, issues: list[SpecIssue]) -> list[SpecIssue]:
        """The check's problems, each carrying the check's id (one a nested check tagged keeps its own)."""
        return [issue if issue.check else replace(issue, check=self.id) for issue in issues]


REGISTRY: dict[str, SpecCheck] = {}


def _check(id: str, section: str, summary: str, level: Level = "error") -> SpecCheck:
    if id in REGISTRY:
        raise ValueError(f"spec check {id} is registered twice")
    REGISTRY[id] = check = SpecCheck(id, level, section, summary)
    return check


MODELS = _check("spec-models", "cluster", "Each field's type, range, pattern and the models' own validators (the "
                "JSON Schema's rules and more).")
CATALOG = _check("spec-catalog", "catalog", "The stack's catalog overrides parse and keep every fact a check reads.")
PLACEMENT = _check("spec-placement", "placement", "The sections a placement needs (site, hybrid link, network, "
                   "node groups) and no others; the region and AZs are ones the catalog knows; renamed_from names no "
                   "live group.")
SUBNETS = _check("spec-network-subnets", "network", "The subnet plan: every tier's per-AZ subnets fit the VPC CIDR "
                 "without overlapping.")
SITE = _check("spec-site", "site", "Racks, hosts, fabric, storage and power of the site model agree with each "
              "other and the catalog.")
HYBRID = _check("spec-hybrid", "hybrid", "The site-to-cloud link, burst and object sync of a hybrid placement.")
NODE_GROUP = _check("spec-node-group", "node_groups", "Each group's instance type, AZ, fabric, placement, capacity "
                    "and image against the catalog and the region.")
LUSTRE = _check("spec-storage-lustre", "storage", "The FSx for Lustre file system's size, throughput, metadata and "
                "EFA against the catalog's rules and the workload.")
OBJECT_STORES = _check("spec-storage-object-stores", "storage", "A replicated object store is versioned and "
                       "replicates to another region the catalog knows.")
BUCKET_NAMES = _check("spec-storage-bucket-names", "storage", "The bucket names gpuforge derives fit S3's naming "
                      "rules.")
KUBERNETES = _check("spec-kubernetes", "kubernetes", "Orchestrators against the kubernetes section, and teams' "
                    "GPU quotas against the nodes that serve them.")
IMAGE_PIPELINE = _check("spec-image-pipeline", "image_pipeline", "Groups with image: {pipeline: true} have a "
                        "pipeline; its build instance type is in the catalog and offered in the network's AZs.")
SCHEDULER = _check("spec-scheduler", "scheduler", "Slurm's controller, accounting, partitions, login nodes, users "
                   "and containers.")
MONITORING = _check("spec-monitoring", "monitoring", "The Prometheus server exists where the placement can run "
                    "it, and a power budget is known where one is watched.")
HOST_ADDRESSES = _check("spec-site-addresses", "site", "One address, one host: site hosts and BMCs, subnet "
                        "managers, Slurm and monitoring hosts and storage endpoints, across sections.")
SOFTWARE = _check("spec-software", "software", "The NCCL and CUDA pair is a build NVIDIA publishes (catalog "
                  "nccl.builds).")
SLURM_OS = _check("spec-slurm-os", "node_groups", "Slurm groups boot an OS whose packaged Slurm the rendered "
                  "configuration runs on.")
SLURM_SETTINGS = _check("spec-slurm-settings", "scheduler", "Settings passed through to slurm.conf are keys gpuforge "
                        "does not render, with values in slurm.conf(5)'s form for the stack's Slurm release.")
RESERVATIONS = _check("spec-node-group-reservations", "node_groups", "Groups sharing a reservation or Capacity "
                      "Block agree on its type and AZ and fit its size.")
IMAGE_OS = _check("spec-node-group-image-os", "node_groups", "Groups the playbooks bake, and the image "
                  "pipeline's parent, boot a distribution the roles have values for.")


def checks_table() -> str:
    """docs/spec.md's "Checks" table: one row per check, in the order resolve runs them."""
    rows = ["| check | level | section | what it checks |", "| --- | --- | --- | --- |"]
    rows += [f"| `{c.id}` | {c.level} | `{c.section}` | {c.summary} |" for c in REGISTRY.values()]
    return "\n".join(rows) + "\n"
