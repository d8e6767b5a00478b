"""What a reviewer checks in the AWS plan, asserted on the registrations the real program makes
under Pulumi's mock monitor (gpuforge.plan runs it to completion, all RPCs awaited).

The input is stated here (tests/specs.py): a small production cluster on a capacity reservation, with
the storage and scheduler features these checks look at, and the same cluster as dev."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuforge.plan.model import Plan, PlanResource
from tests.specs import merged, minimal_aws_cluster, planned_cluster

LT = "aws:ec2/launchTemplate:LaunchTemplate"

# Four p5 (8 H100, 32 EFA each) and a spare on an ODCR made in a cluster placement group; a login group
# without EFA; two controllers and a managed accounting database; Lustre sized from a stated workload over
# three buckets, the checkpoints replicated to another region.
RESERVED: dict[str, Any] = minimal_aws_cluster(
    name="forge",
    environment="prod",
    node_groups={
        "train": {
            "instance_type": "p5.48xlarge",
            "count": 4,
            "spares": 1,
            "capacity": {
                "type": "capacity_reservation",
                "reservation_id": "cr-0a1b2c3d4e5f67890",
                "placement_group": "forge-train-cluster",
            },
        },
        "login": {"instance_type": "m7i.2xlarge", "count": 1, "role": "login", "orchestrator": "slurm"},
    },
    scheduler={
        "controller": {"instance_type": "m7i.2xlarge", "backup": True},
        "accounting": {"database": "managed", "instance_class": "db.m7g.large"},
        "login": {"node_groups": ["login"]},
    },
    storage={
        "parallel_fs": {
            "kind": "fsx_lustre",
            "deployment_type": "PERSISTENT_2",
            "per_unit_storage_throughput": 1000,
            "efa": True,
            "metadata": {"mode": "AUTOMATIC"},
            "workload": {"read_mbps_per_gpu": 200, "checkpoint_gib": 60, "checkpoint_window_s": 120},
            "data_repository_associations": {
                "datasets": {"file_system_path": "/datasets", "object_store": "data"},
                "checkpoints": {
                    "file_system_path": "/checkpoints",
                    "object_store": "checkpoints",
                    "export_events": ["NEW", "CHANGED"],
                },
            },
        },
        "object_stores": {
            "data": {"purpose": "data"},
            "checkpoints": {"purpose": "checkpoints", "replication_region": "us-west-2"},
            "artifacts": {"purpose": "artifacts"},
        },
    },
)


@pytest.fixture(scope="module")
def reserved(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    return planned_cluster(tmp_path_factory.mktemp("reserved"), RESERVED)


@pytest.fixture(scope="module")
def reserved_as_dev(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """The same cluster as dev."""
    return planned_cluster(tmp_path_factory.mktemp("reserved-dev"), merged(RESERVED, {"environment": "dev"}))


def one(plan: Plan, type_: str, name: str) -> PlanResource:
    (found,) = [r for r in plan.resources if r.type == type_ and r.name == name]
    return found


def test_p5_gets_32_efa_interfaces_at_the_right_card_and_device(reserved: Plan) -> None:
    interfaces = one(reserved, LT, "forge-train-lt").inputs["networkInterfaces"]
    slots = [(i["networkCardIndex"], i["deviceIndex"], i.get("interfaceType", "interface")) for i in interfaces]
    assert slots[0] == (0, 0, "interface"), "the primary is ENA on card 0, device 0"
    assert slots[1] == (0, 1, "efa-only")
    assert slots[2:] == [(card, 0, "efa-only") for card in range(1, 32)]
    assert sum(1 for s in slots if s[2] == "efa-only") == 32


def test_non_efa_group_has_only_the_primary_interface(reserved: Plan) -> None:
    interfaces = one(reserved, LT, "forge-login-lt").inputs["networkInterfaces"]
    assert [(i["networkCardIndex"], i["deviceIndex"]) for i in interfaces] == [(0, 0)]
    assert "interfaceType" not in interfaces[0]


def test_efa_group_on_an_odcr_uses_the_reservations_placement_group_in_one_az(reserved: Plan) -> None:
    # An ODCR serves only launches into the placement group it was made in: no new one is created.
    assert not reserved.by_type("aws:ec2/placementGroup:PlacementGroup")
    asg = one(reserved, "aws:autoscaling/group:Group", "forge-train-asg")
    assert asg.inputs["placementGroup"] == "forge-train-cluster"
    assert asg.inputs["vpcZoneIdentifiers"] == ["forge-net-compute-us-east-1a-id"]
    assert not [r for r in reserved.resources if r.name == "forge-login-pg"], "no placement group for login"


def test_one_asg_of_count_plus_spares_on_the_capacity_reservation(reserved: Plan) -> None:
    asg = one(reserved, "aws:autoscaling/group:Group", "forge-train-asg")
    assert asg.inputs["desiredCapacity"] == asg.inputs["minSize"] == asg.inputs["maxSize"] == 5
    lt = one(reserved, LT, "forge-train-lt").inputs
    target = lt["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target["capacityReservationId"] == "cr-0a1b2c3d4e5f67890"


def test_efa_security_group_references_itself_both_ways(reserved: Plan) -> None:
    sg_id = "forge-net-efa-sg-id"
    rules = [r for r in reserved.resources if r.inputs.get("securityGroupId") == sg_id]
    ingress = [r for r in rules if r.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"]
    egress = [r for r in rules if r.type == "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"]
    assert [(r.inputs["ipProtocol"], r.inputs["referencedSecurityGroupId"]) for r in ingress] == [("-1", sg_id)]
    assert [(r.inputs["ipProtocol"], r.inputs["referencedSecurityGroupId"]) for r in egress] == [("-1", sg_id)]
    train_lt = one(reserved, LT, "forge-train-lt").inputs
    assert all(sg_id in i["securityGroups"] for i in train_lt["networkInterfaces"])


def test_every_launch_template_requires_imdsv2_with_hop_limit_1(reserved: Plan, reserved_as_dev: Plan) -> None:
    templates = reserved.by_type(LT) + reserved_as_dev.by_type(LT)
    assert len(templates) == 8  # per plan: two node groups and two Slurm controllers
    for lt in templates:
        assert lt.inputs["metadataOptions"]["httpTokens"] == "required", lt.name
        assert lt.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1, lt.name


def test_no_public_ip_on_compute(reserved: Plan) -> None:
    for lt in reserved.by_type(LT):
        if "SlurmControlPlane" in lt.urn:  # the controller instance sets its own interface (below)
            continue
        primary = lt.inputs["networkInterfaces"][0]
        assert primary["associatePublicIpAddress"] == "false", lt.name
    for instance in reserved.by_type("aws:ec2/instance:Instance"):
        assert instance.inputs["associatePublicIpAddress"] is False, instance.name
    for subnet in reserved.by_type("aws:ec2/subnet:Subnet"):
        assert subnet.inputs["mapPublicIpOnLaunch"] is False, subnet.name


def test_no_ingress_from_anywhere_unless_the_spec_opens_it(reserved: Plan) -> None:
    opened = [
        r.name
        for r in reserved.by_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.inputs.get("cidrIpv4") == "0.0.0.0/0"
    ]
    assert opened == []


def test_encryption_everywhere_with_the_cluster_key(reserved: Plan) -> None:
    key = "arn:aws:kms:mock:123456789012:forge-kms-key"
    for lt in reserved.by_type(LT):
        ebs = lt.inputs["blockDeviceMappings"][0]["ebs"]
        assert (ebs["encrypted"], ebs["kmsKeyId"]) == ("true", key), lt.name
    sse = reserved.by_type("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    assert len(sse) == 4  # data, checkpoints, artifacts, and the checkpoint replica
    for config in sse:
        assert config.inputs["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    fs = one(reserved, "aws:fsx/lustreFileSystem:LustreFileSystem", "forge-lustre-fs")
    assert fs.inputs["kmsKeyId"] == key
    kms = reserved.by_type("aws:kms/key:Key")
    assert all(k.inputs["enableKeyRotation"] for k in kms)


def test_lustre_is_sized_from_the_stated_workload(reserved: Plan) -> None:
    fs = one(reserved, "aws:fsx/lustreFileSystem:LustreFileSystem", "forge-lustre-fs").inputs
    # 32 GPUs x 200 MB/s = 6,400 MB/s beats the checkpoint write (60 GiB in 120 s = 537 MB/s);
    # at 1000 MB/s/TiB that is 6,400 GiB, rounded up to EFA's 4800 GiB step: 9,600 GiB.
    assert fs["storageCapacity"] == 9600
    assert fs["perUnitStorageThroughput"] == 1000
    assert fs["deploymentType"] == "PERSISTENT_2"
    assert fs["efaEnabled"] is True
    assert fs["metadataConfiguration"] == {"mode": "AUTOMATIC"}
    assert reserved.summary.parallel_fs_throughput_mbps == 9375  # 9600 GiB at 1000 MB/s/TiB


def test_data_repository_associations_link_buckets(reserved: Plan) -> None:
    dras = {r.name: r.inputs for r in reserved.by_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")}
    assert set(dras) == {"forge-lustre-dra-datasets", "forge-lustre-dra-checkpoints"}
    checkpoints = dras["forge-lustre-dra-checkpoints"]
    assert checkpoints["dataRepositoryPath"] == "s3://forge-checkpoints-bucket/"
    assert checkpoints["s3"]["autoExportPolicy"]["events"] == ["NEW", "CHANGED"]
    assert "autoExportPolicy" not in dras["forge-lustre-dra-datasets"]["s3"]


def test_checkpoints_are_versioned_and_replicated_to_another_region(reserved: Plan) -> None:
    versioning = {r.name: r.inputs for r in reserved.by_type("aws:s3/bucketVersioning:BucketVersioning")}
    assert all(v["versioningConfiguration"]["status"] == "Enabled" for v in versioning.values())
    (replication,) = reserved.by_type("aws:s3/bucketReplicationConfig:BucketReplicationConfig")
    rule = replication.inputs["rules"][0]
    assert rule["destination"]["bucket"].endswith("forge-checkpoints-replica-bucket")
    replica = one(reserved, "aws:s3/bucket:Bucket", "forge-checkpoints-replica-bucket")
    providers = {r.urn: r for r in reserved.by_type("pulumi:providers:aws")}
    assert {p.inputs["region"] for p in providers.values()} == {"us-east-1", "us-west-2"}
    assert replica.parent and "ObjectStore" in replica.parent


def test_public_access_is_blocked_on_every_bucket(reserved: Plan) -> None:
    buckets = reserved.by_type("aws:s3/bucket:Bucket")
    blocks = reserved.by_type("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert len(blocks) == len(buckets) == 4
    for block in blocks:
        flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
        assert all(block.inputs[f] is True for f in flags)


def test_stateful_resources_are_protected_in_prod_only(reserved: Plan, reserved_as_dev: Plan) -> None:
    protected = {r.type for r in reserved.resources if r.protect}
    assert protected == {
        "aws:s3/bucket:Bucket",
        "aws:kms/key:Key",
        "aws:fsx/lustreFileSystem:LustreFileSystem",
        # Slurm: controllers (their state), the accounting database, /home, the munge key and DB password
        "aws:ec2/instance:Instance",
        "aws:rds/instance:Instance",
        "aws:efs/fileSystem:FileSystem",
        "aws:secretsmanager/secret:Secret",
        # the SSM session log: who ran what on the cluster (gpuforge/infra/aws/session_manager.py)
        "aws:cloudwatch/logGroup:LogGroup",
    }
    assert all(r.retain_on_delete for r in reserved.by_type("aws:s3/bucket:Bucket"))
    assert [r.name for r in reserved_as_dev.resources if r.protect] == []


def test_node_count_never_multiplies_resources(reserved: Plan, tmp_path: Path) -> None:
    big = planned_cluster(tmp_path, merged(RESERVED, {"node_groups": {"train": {"count": 1024, "spares": 32}}}))
    assert big.summary.nodes == reserved.summary.nodes - 4 + 1024
    assert len(big.resources) == len(reserved.resources)


def test_summary_reports_the_stated_nodes_gpus_and_efa(reserved: Plan) -> None:
    s = reserved.summary
    assert (s.nodes, s.spare_nodes, s.gpus, s.efa_interfaces) == (5, 1, 32, 4 * 32)
    # 5 p5 (the spare too) at 10.2 kW plus a login m7i.2xlarge (8 of the catalog's 192-vCPU 4600 W overhead:
    # 0.19 kW), 51.19 kW IT, times AWS's PUE 1.14 from the catalog
    assert s.power_kw == pytest.approx(51.19 * 1.14, abs=0.05)


def test_children_are_parented_and_named_after_their_component(reserved: Plan) -> None:
    urns = {r.urn: r for r in reserved.resources}
    for r in reserved.resources:
        if r.type == "gpuforge:index:TrainingCluster":
            continue
        parent = urns.get(r.parent or "")
        assert parent is not None, f"{r.name} has no component parent"
        assert r.name.startswith(parent.name), f"{r.name} is not named after {parent.name}"
