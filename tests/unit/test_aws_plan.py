"""What a reviewer checks in the AWS plan, asserted on the registrations the real program makes
under Pulumi's mock monitor (gpuforge.plan runs it to completion, all RPCs awaited)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuforge.plan.engine import plan_stack
from gpuforge.plan.model import Plan, PlanResource
from tests.support import REPO as PROJECT_ROOT

LT = "aws:ec2/launchTemplate:LaunchTemplate"


def one(plan: Plan, type_: str, name: str) -> PlanResource:
    (found,) = [r for r in plan.resources if r.type == type_ and r.name == name]
    return found


def test_p5_gets_32_efa_interfaces_at_the_right_card_and_device(prod_plan: Plan) -> None:
    interfaces = one(prod_plan, LT, "forge-prod-train-lt").inputs["networkInterfaces"]
    slots = [(i["networkCardIndex"], i["deviceIndex"], i.get("interfaceType", "interface")) for i in interfaces]
    assert slots[0] == (0, 0, "interface"), "the primary is ENA on card 0, device 0"
    assert slots[1] == (0, 1, "efa-only")
    assert slots[2:] == [(card, 0, "efa-only") for card in range(1, 32)]
    assert sum(1 for s in slots if s[2] == "efa-only") == 32


def test_non_efa_group_has_only_the_primary_interface(prod_plan: Plan) -> None:
    interfaces = one(prod_plan, LT, "forge-prod-login-lt").inputs["networkInterfaces"]
    assert [(i["networkCardIndex"], i["deviceIndex"]) for i in interfaces] == [(0, 0)]
    assert "interfaceType" not in interfaces[0]


def test_efa_group_on_an_odcr_uses_the_reservations_placement_group_in_one_az(prod_plan: Plan) -> None:
    # An ODCR serves only launches into the placement group it was made in: no new one is created.
    assert not prod_plan.by_type("aws:ec2/placementGroup:PlacementGroup")
    asg = one(prod_plan, "aws:autoscaling/group:Group", "forge-prod-train-asg")
    assert asg.inputs["placementGroup"] == "forge-prod-train-cluster"
    assert asg.inputs["vpcZoneIdentifiers"] == ["forge-prod-net-compute-us-east-1a-id"]
    assert not [r for r in prod_plan.resources if r.name == "forge-prod-login-pg"], "no placement group for login"


def test_one_asg_of_count_plus_spares_on_the_capacity_reservation(prod_plan: Plan) -> None:
    asg = one(prod_plan, "aws:autoscaling/group:Group", "forge-prod-train-asg")
    assert asg.inputs["desiredCapacity"] == asg.inputs["minSize"] == asg.inputs["maxSize"] == 66
    lt = one(prod_plan, LT, "forge-prod-train-lt").inputs
    target = lt["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target["capacityReservationId"] == "cr-0a1b2c3d4e5f67890"


def test_efa_security_group_references_itself_both_ways(prod_plan: Plan) -> None:
    sg_id = "forge-prod-net-efa-sg-id"
    rules = [r for r in prod_plan.resources if r.inputs.get("securityGroupId") == sg_id]
    ingress = [r for r in rules if r.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"]
    egress = [r for r in rules if r.type == "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"]
    assert [(r.inputs["ipProtocol"], r.inputs["referencedSecurityGroupId"]) for r in ingress] == [("-1", sg_id)]
    assert [(r.inputs["ipProtocol"], r.inputs["referencedSecurityGroupId"]) for r in egress] == [("-1", sg_id)]
    train_lt = one(prod_plan, LT, "forge-prod-train-lt").inputs
    assert all(sg_id in i["securityGroups"] for i in train_lt["networkInterfaces"])


def test_every_launch_template_requires_imdsv2_with_hop_limit_1(prod_plan: Plan, dev_plan: Plan) -> None:
    templates = prod_plan.by_type(LT) + dev_plan.by_type(LT)
    assert len(templates) == 8  # node groups (5) and Slurm controllers (prod 2, dev 1)
    for lt in templates:
        assert lt.inputs["metadataOptions"]["httpTokens"] == "required", lt.name
        assert lt.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1, lt.name


def test_no_public_ip_on_compute(prod_plan: Plan) -> None:
    for lt in prod_plan.by_type(LT):
        if "SlurmControlPlane" in lt.urn:  # the controller instance sets its own interface (below)
            continue
        primary = lt.inputs["networkInterfaces"][0]
        assert primary["associatePublicIpAddress"] == "false", lt.name
    for instance in prod_plan.by_type("aws:ec2/instance:Instance"):
        assert instance.inputs["associatePublicIpAddress"] is False, instance.name
    for subnet in prod_plan.by_type("aws:ec2/subnet:Subnet"):
        assert subnet.inputs["mapPublicIpOnLaunch"] is False, subnet.name


def test_no_ingress_from_anywhere_unless_the_spec_opens_it(prod_plan: Plan) -> None:
    opened = [
        r.name
        for r in prod_plan.by_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.inputs.get("cidrIpv4") == "0.0.0.0/0"
    ]
    assert opened == []


def test_encryption_everywhere_with_the_cluster_key(prod_plan: Plan) -> None:
    key = "arn:aws:kms:mock:123456789012:forge-prod-kms-key"
    for lt in prod_plan.by_type(LT):
        ebs = lt.inputs["blockDeviceMappings"][0]["ebs"]
        assert (ebs["encrypted"], ebs["kmsKeyId"]) == ("true", key), lt.name
    sse = prod_plan.by_type("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    assert len(sse) == 4  # data, checkpoints, artifacts, and the checkpoint replica
    for config in sse:
        assert config.inputs["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    fs = one(prod_plan, "aws:fsx/lustreFileSystem:LustreFileSystem", "forge-prod-lustre-fs")
    assert fs.inputs["kmsKeyId"] == key
    kms = prod_plan.by_type("aws:kms/key:Key")
    assert all(k.inputs["enableKeyRotation"] for k in kms)


def test_lustre_is_sized_from_the_stated_workload(prod_plan: Plan) -> None:
    fs = one(prod_plan, "aws:fsx/lustreFileSystem:LustreFileSystem", "forge-prod-lustre-fs").inputs
    # 512 GPUs x 50 MB/s = 25,600 MB/s beats the checkpoint write (2400 GiB in 120 s = 21,475 MB/s);
    # at 1000 MB/s/TiB that is 26,215 GiB, rounded up to EFA's 4800 GiB step: 28,800 GiB.
    assert fs["storageCapacity"] == 28800
    assert fs["perUnitStorageThroughput"] == 1000
    assert fs["deploymentType"] == "PERSISTENT_2"
    assert fs["efaEnabled"] is True
    assert fs["metadataConfiguration"] == {"mode": "AUTOMATIC"}
    assert prod_plan.summary.parallel_fs_throughput_mbps == 28125


def test_data_repository_associations_link_buckets(prod_plan: Plan) -> None:
    dras = {r.name: r.inputs for r in prod_plan.by_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")}
    assert set(dras) == {"forge-prod-lustre-dra-datasets", "forge-prod-lustre-dra-checkpoints"}
    checkpoints = dras["forge-prod-lustre-dra-checkpoints"]
    assert checkpoints["dataRepositoryPath"] == "s3://forge-prod-checkpoints-bucket/"
    assert checkpoints["s3"]["autoExportPolicy"]["events"] == ["NEW", "CHANGED"]
    assert "autoExportPolicy" not in dras["forge-prod-lustre-dra-datasets"]["s3"]


def test_checkpoints_are_versioned_and_replicated_to_another_region(prod_plan: Plan) -> None:
    versioning = {r.name: r.inputs for r in prod_plan.by_type("aws:s3/bucketVersioning:BucketVersioning")}
    assert all(v["versioningConfiguration"]["status"] == "Enabled" for v in versioning.values())
    (replication,) = prod_plan.by_type("aws:s3/bucketReplicationConfig:BucketReplicationConfig")
    rule = replication.inputs["rules"][0]
    assert rule["destination"]["bucket"].endswith("forge-prod-checkpoints-replica-bucket")
    replica = one(prod_plan, "aws:s3/bucket:Bucket", "forge-prod-checkpoints-replica-bucket")
    providers = {r.urn: r for r in prod_plan.by_type("pulumi:providers:aws")}
    assert {p.inputs["region"] for p in providers.values()} == {"us-east-1", "us-west-2"}
    assert replica.parent and "ObjectStore" in replica.parent


def test_public_access_is_blocked_on_every_bucket(prod_plan: Plan) -> None:
    buckets = prod_plan.by_type("aws:s3/bucket:Bucket")
    blocks = prod_plan.by_type("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert len(blocks) == len(buckets) == 4
    for block in blocks:
        flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
        assert all(block.inputs[f] is True for f in flags)


def test_stateful_resources_are_protected_in_prod_only(prod_plan: Plan, dev_plan: Plan) -> None:
    protected = {r.type for r in prod_plan.resources if r.protect}
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
    assert all(r.retain_on_delete for r in prod_plan.by_type("aws:s3/bucket:Bucket"))
    assert [r.name for r in dev_plan.resources if r.protect] == []


def test_node_count_never_multiplies_resources(prod_plan: Plan, tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.big.yaml"
    text = (PROJECT_ROOT / "stacks" / "Pulumi.prod.yaml").read_text()
    stack.write_text(text.replace("count: 64", "count: 1024").replace("spares: 2", "spares: 32"))
    big = plan_stack(stack)
    assert big.summary.nodes == prod_plan.summary.nodes - 64 + 1024
    assert len(big.resources) == len(prod_plan.resources)


def test_summary_reports_the_stated_nodes_gpus_and_efa(prod_plan: Plan) -> None:
    s = prod_plan.summary
    assert (s.nodes, s.spare_nodes, s.gpus, s.efa_interfaces) == (68, 2, 512, 64 * 32)
    # 66 p5 at 10.2 kW plus login and services (674.4 kW IT), times AWS's PUE 1.14 from the catalog
    assert s.power_kw == pytest.approx(674.4 * 1.14, abs=1)


def test_children_are_parented_and_named_after_their_component(prod_plan: Plan) -> None:
    urns = {r.urn: r for r in prod_plan.resources}
    for r in prod_plan.resources:
        if r.type == "gpuforge:index:TrainingCluster":
            continue
        parent = urns.get(r.parent or "")
        assert parent is not None, f"{r.name} has no component parent"
        assert r.name.startswith(parent.name), f"{r.name} is not named after {parent.name}"
