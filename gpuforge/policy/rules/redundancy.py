"""Redundancy pack: spares, availability zones, durable storage, protection of stateful resources.

GPU training groups are deliberately single-AZ (EFA traffic does not cross AZs, and a cluster
placement group keeps the fabric short): the AZ rules require exactly one AZ for EFA groups and
two or more for everything around them (login, services, control plane).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

from gpuforge.catalog.tokens import DRA, NODE_GROUP, OBJECT_STORE, SLURM_ROLE_TAG
from gpuforge.spec.node_group import RESERVED_CAPACITY

from .base import (
    PROD_ONLY,
    Param,
    Resource,
    RuleContext,
    Stack,
    Violation,
    as_list,
    is_unknown,
    resource_rule,
    stack_rule,
)
from .security import BUCKETS, LUSTRE, VERSIONING_CONFIGS

REPLICATION_CONFIG = "aws:s3/bucketReplicationConfig:BucketReplicationConfig"
STATEFUL = (
    *BUCKETS,
    "aws:kms/key:Key",
    LUSTRE,
    "aws:fsx/ontapFileSystem:OntapFileSystem",
    "aws:fsx/openZfsFileSystem:OpenZfsFileSystem",
    "aws:efs/fileSystem:FileSystem",
    # Slurm: the accounting database and the munge key / database password
    "aws:rds/instance:Instance",
    "aws:secretsmanager/secret:Secret",
)
SLURM_CONTROL_PLANES = ("gpuforge:aws:SlurmControlPlane", "gpuforge:onprem:SlurmControlPlane")


def _is_gpu_group(r: Resource) -> bool:
    return r.get("role") == "training" or (r.get("gpusPerNode") or 0) > 0


@resource_rule(
    "redundancy-nodegroup-spares",
    types=(NODE_GROUP,),
    why="A multi-node job stops when one GPU node fails; a hot spare replaces it without a new capacity request.",
    fix="raise the group's spares to at least one per nodes_per_spare active nodes",
    params={
        "nodes_per_spare": Param(32, {"type": "integer", "minimum": 1}, "active nodes one spare covers"),
        "min_spares_prod": Param(1, {"type": "integer", "minimum": 0}, "spares any prod GPU group keeps at least"),
    },
)
def nodegroup_spares(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    # An elastic group (scaling: min-max) launches a replacement when it needs one; it holds no spares.
    if not _is_gpu_group(r) or r.get("scaling"):
        return
    count, spares = r.get("count") or 0, r.get("spares") or 0
    if is_unknown(count) or is_unknown(spares) or count == 0:
        return
    need = math.ceil(count / int(ctx.param("nodes_per_spare")))
    if ctx.prod:
        need = max(need, int(ctx.param("min_spares_prod")))
    if spares < need:
        yield Violation(
            "redundancy-nodegroup-spares",
            r.urn,
            f"{r.name}: {spares} spare(s) for {count} nodes, needs {need} "
            f"(one per {ctx.param('nodes_per_spare')}); set node_groups[{r.get('nodeGroup')}].spares: {need}",
        )


@resource_rule(
    "redundancy-efa-single-az",
    types=(NODE_GROUP,),
    why="EFA traffic does not cross AZs: an EFA group split over AZs cannot run one job across its nodes.",
    fix="pin the EFA group to one availability_zone (where its capacity reservation is)",
)
def efa_single_az(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    azs = r.get("availabilityZones")
    if r.get("fabric") != "efa" or is_unknown(azs):
        return
    if len(as_list(azs)) != 1:
        yield Violation(
            "redundancy-efa-single-az",
            r.urn,
            f"{r.name}: EFA group spans {len(as_list(azs))} AZs ({', '.join(map(str, as_list(azs)))}); "
            f"set node_groups[{r.get('nodeGroup')}].availability_zone to one AZ",
        )


@resource_rule(
    "redundancy-efa-placement-group",
    types=(NODE_GROUP,),
    why="A cluster placement group keeps EFA nodes on a short, non-blocking network path.",
    fix="leave placement unset (cluster is the EFA default) or set placement: cluster; reserved capacity "
    "(Capacity Blocks, ODCRs) is placed by its reservation",
)
def efa_placement(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    placement = r.get("placement")
    # Reserved capacity is placed by its reservation: a Capacity Block is already placed together and
    # takes no placement group; an ODCR uses the group it was created in, or none (ParallelCluster
    # ec2_validators; wiring-placementgroup-capacity checks the launch side).
    if r.get("capacity") in RESERVED_CAPACITY:
        return
    if r.get("fabric") == "efa" and not is_unknown(placement) and placement != "cluster":
        yield Violation(
            "redundancy-efa-placement-group",
            r.urn,
            f"{r.name}: EFA group uses placement {placement or 'none'!r}, not a cluster placement group; "
            f"set node_groups[{r.get('nodeGroup')}].placement: cluster",
        )


@resource_rule(
    "redundancy-nodegroup-multi-az",
    types=(NODE_GROUP,),
    why="Login and service nodes are how people and schedulers reach the cluster: one AZ outage must not cut them.",
    fix="give login/services groups at least two nodes across at least two availability zones",
    levels=PROD_ONLY,
    params={"min_azs": Param(2, {"type": "integer", "minimum": 1}, "AZs non-training groups span at least")},
)
def nodegroup_multi_az(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    if _is_gpu_group(r) or r.get("fabric") == "efa":
        return
    azs, count = as_list(r.get("availabilityZones")), r.get("count") or 0
    need = int(ctx.param("min_azs"))
    if is_unknown(count):
        return
    if len(azs) < need or count < need:
        yield Violation(
            "redundancy-nodegroup-multi-az",
            r.urn,
            f"{r.name}: {r.get('role')} group has {count} node(s) in {len(azs)} AZ(s); needs at least {need} nodes "
            f"over {need} AZs (network.availability_zones, node_groups[{r.get('nodeGroup')}].count)",
        )


@resource_rule(
    "redundancy-lustre-persistent",
    types=(LUSTRE,),
    why="SCRATCH Lustre is not replicated: one failed server loses the data and the running job's checkpoints.",
    fix="use deployment_type PERSISTENT_2 (or PERSISTENT_1) for prod",
    levels=PROD_ONLY,
)
def lustre_persistent(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    deployment = r.get("deploymentType") or "SCRATCH_1"
    if not is_unknown(deployment) and not str(deployment).startswith("PERSISTENT"):
        yield Violation(
            "redundancy-lustre-persistent",
            r.urn,
            f"{r.name}: {deployment} file system is not replicated; set storage.parallel_fs.deployment_type: "
            "PERSISTENT_2",
        )


@stack_rule(
    "redundancy-lustre-backup",
    why="Checkpoints that live only in Lustre die with it; export them to S3 or keep backups.",
    fix="set storage.parallel_fs.backup_retention_days (PERSISTENT), or export_events on one of "
    "storage.parallel_fs.data_repository_associations",
    levels=PROD_ONLY,
)
def lustre_backup(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    for fs in stack.of_type(LUSTRE):
        retention = fs.get("automaticBackupRetentionDays")
        if is_unknown(retention) or (retention or 0) > 0 or fs.get("exportPath"):
            continue
        exported = any(
            as_list(dra.get("s3", "autoExportPolicy", "events"))
            for dra in stack.of_type(DRA)
            if stack.refers_to(dra, "fileSystemId", fs)
        )
        if not exported:
            yield Violation(
                "redundancy-lustre-backup",
                fs.urn,
                f"{fs.name}: no automatic backups and nothing exported to S3; set "
                "storage.parallel_fs.backup_retention_days: 7 (PERSISTENT types), or export_events: [NEW, CHANGED] "
                "on a data_repository_associations entry for /checkpoints",
            )


@stack_rule(
    "redundancy-bucket-checkpoint-replication",
    why="Checkpoints are weeks of GPU time: keep them versioned and replicated to a second region.",
    fix="set object_stores[<checkpoints>].versioning: true and replication_region to another region",
    levels=PROD_ONLY,
)
def checkpoint_replication(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    cluster = stack.cluster()
    home = cluster.get("region") if cluster else None
    for store in stack.of_type(OBJECT_STORE):
        if store.get("purpose") != "checkpoints":
            continue
        problems = []
        target = store.get("replicationRegion")
        if store.get("versioning") is False:
            problems.append("versioning is off")
        if not target:
            problems.append("no replication_region")
        elif home and target == home:
            problems.append(f"replicates within its own region {home}")
        buckets = stack.children(store, *BUCKETS)
        replications = stack.children(store, REPLICATION_CONFIG)
        enabled = any(
            isinstance(rule, Mapping) and rule.get("status") == "Enabled"
            for rc in replications
            for rule in as_list(rc.get("rules"))
        )
        if target and not enabled:
            problems.append("no enabled replication rule on the bucket")
        if target and buckets:
            versioned = [
                b
                for b in buckets
                if any(
                    stack.refers_to(v, "bucket", b, "bucket")
                    and v.get("versioningConfiguration", "status") == "Enabled"
                    for v in stack.of_type(*VERSIONING_CONFIGS)
                )
                or b.get("versioning", "enabled") is True
            ]
            if len(versioned) < len(buckets):
                problems.append("source or replica bucket not versioned")
        if problems:
            yield Violation(
                "redundancy-bucket-checkpoint-replication",
                store.urn,
                f"{store.name}: checkpoint store not protected against a regional loss ({'; '.join(problems)}); "
                "set versioning: true and replication_region to a second region",
            )


@resource_rule(
    "redundancy-stateful-protected",
    types=STATEFUL,
    why="A stray `pulumi destroy` or a replacement must not delete file systems, buckets or keys in prod.",
    fix="set protect=True (and retain_on_delete) on the resource; gpuforge does this for environment: prod",
    levels=PROD_ONLY,
)
def stateful_protected(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    if not r.protect:
        yield Violation(
            "redundancy-stateful-protected",
            r.urn,
            f"{r.name}: stateful {r.type.rsplit(':', 1)[-1]} is not protected; set ResourceOptions(protect=True)",
        )


@resource_rule(
    "redundancy-slurm-backup-controller",
    types=SLURM_CONTROL_PLANES,
    why="With one slurmctld, a controller failure stops scheduling for the whole cluster: no job starts, "
    "no node registers, until someone rebuilds it; a backup controller on the shared state takes over.",
    fix="set scheduler.controller.backup: true (AWS: a second controller in the second AZ), or on a site a second "
    "controller host with state_mount, or waive the rule",
    levels=PROD_ONLY,
)
def slurm_backup_controller(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    controllers = r.get("controllers")
    if not is_unknown(controllers) and (controllers or 0) < 2:
        yield Violation(
            "redundancy-slurm-backup-controller",
            r.urn,
            f"{r.name}: {controllers} Slurm controller, no backup; set scheduler.controller.backup: true (AWS) "
            "or list a second controller host with state_mount (site)",
        )


@resource_rule(
    "redundancy-slurm-controller-protected",
    types=("aws:ec2/instance:Instance",),
    why="slurmctld keeps the queue and job state on its controller: a replaced or deleted controller loses "
    "running work's bookkeeping.",
    fix="set protect=True on the controller instances; gpuforge does this for environment: prod",
    levels=PROD_ONLY,
)
def slurm_controller_protected(r: Resource, ctx: RuleContext) -> Iterator[Violation]:
    if r.get("tags", SLURM_ROLE_TAG) == "controller" and not r.protect:
        yield Violation(
            "redundancy-slurm-controller-protected",
            r.urn,
            f"{r.name}: Slurm controller instance is not protected; set ResourceOptions(protect=True)",
        )
