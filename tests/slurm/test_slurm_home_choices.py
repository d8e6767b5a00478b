"""/home choices on AWS (scheduler.home, issue 28 item 1): FSx for OpenZFS instead of EFS. The plan of
tests/fixtures/stacks/Pulumi.prod-openzfs.yaml (prod with its /home on OpenZFS) declares the file system as the
control plane's /home (encrypted with the cluster key, in the storage tier's security group, exported to the VPC
only, backed up, protected in prod); every Slurm node mounts it over NFS the same way from its user data and from
slurm.yml's site_mounts; the flow rules count it as /home; bad values are refused with the field and the catalog's
values. EFS stays the default (every existing stack plans as before)."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.catalog.tokens import EFS, OPENZFS
from gpuforge.infra.aws.node_group import NFS_HOME_OPTIONS
from gpuforge.nodes.bake import PLAYBOOKS_DIR, image_slurm_vars
from gpuforge.nodes.inventory import build_inventory
from gpuforge.plan.model import Plan
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.policy.rules import REGISTRY, RuleContext
from gpuforge.spec import SpecError, resolve
from tests.support import REPO, planned

OPENZFS_STACK = str(REPO / "tests" / "fixtures" / "stacks" / "Pulumi.prod-openzfs.yaml")
SLURM = "gpuforge:aws:SlurmControlPlane"
ZFS_DNS = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
SITE_MOUNTS = PLAYBOOKS_DIR / "roles" / "site_mounts"


def _plan() -> Plan:
    return planned(OPENZFS_STACK)


def _home(plan: Plan) -> Any:
    (fs,) = [r for r in plan.resources if r.type == OPENZFS]
    return fs


def test_the_control_plane_declares_home_on_openzfs_secured() -> None:
    plan = _plan()
    fs = _home(plan)
    assert SLURM in fs.urn and fs.name == "forge-prod-zfs-slurm-home"
    inputs = fs.inputs
    assert (inputs["deploymentType"], inputs["storageCapacity"], inputs["throughputCapacity"]) == (
        "SINGLE_AZ_HA_2", 2048, 320)
    # The cluster key and the storage tier's group, as the state EFS and its mount targets have them.
    (state,) = [r for r in plan.resources if r.type == EFS and r.name == "forge-prod-zfs-slurm-state"]
    targets = [r for r in plan.resources if r.type == "aws:efs/mountTarget:MountTarget"]
    assert inputs["kmsKeyId"] == state.inputs["kmsKeyId"]
    assert inputs["securityGroupIds"] == targets[0].inputs["securityGroups"]
    assert inputs["subnetIds"] == [targets[0].inputs["subnetId"]]  # one AZ's storage subnet
    assert inputs["automaticBackupRetentionDays"] == 7 and inputs["skipFinalBackup"] is False
    assert fs.protect, "prod's /home is protected like its EFS was"
    (export,) = inputs["rootVolumeConfiguration"]["nfsExports"]["clientConfigurations"]
    spec_cidr = resolve(yaml.safe_load(Path(OPENZFS_STACK).read_text())["config"]["gpuforge:cluster"]).spec.network
    assert spec_cidr is not None and export["clients"] == spec_cidr.cidr  # the VPC only, never "*"
    assert "no_root_squash" in export["options"]  # the controller creates users' homes as root
    # No EFS for /home; prod's backup controller keeps its state on EFS (and /apps has its own).
    efs = {r.name for r in plan.resources if r.type == EFS}
    assert efs == {"forge-prod-zfs-slurm-state", "forge-prod-zfs-slurm-shared-apps"}
    assert plan.outputs["slurm"]["homeFileSystem"] != plan.outputs["slurm"]["stateFileSystem"]


def _user_data(plan: Plan, name: str) -> dict[str, Any]:
    (lt,) = [r for r in plan.resources if r.name == name]
    return yaml.safe_load(base64.b64decode(lt.inputs["userData"]).decode())


def test_a_cloud_node_mounts_openzfs_home_over_nfs_as_site_mounts_does() -> None:
    plan = _plan()
    facts = load_aws_wiring().openzfs
    defaults = yaml.safe_load((SITE_MOUNTS / "defaults/main.yml").read_text())
    assert f"vers={facts.nfs_version},{defaults['site_mounts_options']['nfs']}" == NFS_HOME_OPTIONS
    dns = plan.outputs["slurm"]["homeDnsName"]
    for group in ("train", "login"):
        document = _user_data(plan, f"forge-prod-zfs-{group}-lt")
        (fstab,) = [f for f in document["write_files"] if f["path"] == "/etc/fstab"]
        lines = fstab["content"].splitlines()
        assert f"{dns}:{facts.root_export} /home nfs {NFS_HOME_OPTIONS} 0 0" in lines, group
        assert not [line for line in lines if " /home efs " in line], group
        assert ["/usr/local/sbin/gpuforge-mount-keeping", "/home", "home.automount"] in document["runcmd"], group


def test_slurm_yml_mounts_the_deployed_openzfs_as_an_nfs_home() -> None:
    outputs = copy.deepcopy(dict(_plan().outputs))
    outputs["slurm"].update(homeFileSystem="fs-0123456789abcdef0", homeDnsName=ZFS_DNS, databaseEndpoint="db.x",
                            stateFileSystem="fs-0fedcba9876543210", stateDnsName="fs-0fedcba9876543210.efs.x")
    home = build_inventory(OPENZFS_STACK, outputs=outputs)["all"]["vars"]["slurm_config"]["home"]
    facts = load_aws_wiring().openzfs
    assert {k: home[k] for k in ("kind", "server", "export", "version", "mount_point")} == {
        "kind": "nfs", "server": ZFS_DNS, "export": facts.root_export, "version": facts.nfs_version,
        "mount_point": "/home"}


def _flow_violations(resources: list[Any]) -> list[Any]:
    rule = REGISTRY["wiring-flows-security-groups"]
    ctx = RuleContext("prod", {k: p.default for k, p in rule.params.items()})
    return list(rule.run(to_rule_resources(resources), ctx))


def test_the_flow_rules_count_openzfs_as_home() -> None:
    """Negative control: without the compute nodes' NFS rule on the storage group, the rule names the
    OpenZFS file system (it plays /home in the flow model, as EFS's mount targets do)."""
    plan = _plan()
    assert _flow_violations(list(plan.resources)) == []
    fs = _home(plan)
    without = [r for r in plan.resources if not r.name.endswith("-storage-in-nfs-compute")]
    assert len(without) == len(plan.resources) - 1
    found = _flow_violations(without)
    assert found and any(fs.name in v.message or v.urn == fs.urn for v in found), found


def _spec(home: dict[str, Any], placement: str = "aws") -> dict[str, Any]:
    stack = "prod" if placement == "aws" else "onprem-lab"
    spec = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]["gpuforge:cluster"]
    spec["scheduler"]["home"] = home
    return spec


def test_bad_openzfs_values_are_refused_all_at_once_with_the_catalogs_values() -> None:
    with pytest.raises(SpecError) as err:
        resolve(_spec({"kind": "fsx_openzfs", "deployment_type": "SINGLE_AZ_2", "storage_gib": 10,
                       "throughput_mbps": 128}))
    text = str(err.value)
    assert "cluster.scheduler.home.storage_gib" in text and "64-524288" in text
    assert "cluster.scheduler.home.throughput_mbps" in text and "160, 320, 640" in text


def test_an_aws_home_on_a_site_is_refused() -> None:
    with pytest.raises(SpecError) as err:
        resolve(_spec({"kind": "efs"}, placement="onprem"))
    assert "cluster.scheduler.home" in str(err.value) and "site.storage.mounts" in str(err.value)


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(SpecError) as err:
        resolve(_spec({"kind": "fsx_ontap"}))
    assert "cluster.scheduler.home" in str(err.value)


def test_an_image_carries_the_nfs_client_not_the_entry() -> None:
    """An image is baked apart from `pulumi up`: the /home and /apps made with the stack are marked from_stack, with
    no server, so bake-image-slurm.yml installs their clients and leaves the fstab entries to user data."""
    inventory = build_inventory(OPENZFS_STACK)
    image = image_slurm_vars(inventory, "train")["slurm_config"]
    assert image["home"]["from_stack"] is True and image["home"]["server"] == ""
    (apps,) = image["shared_mounts"]
    assert apps["from_stack"] is True and (apps["server"], apps["source"]) == ("", "")
    bake = yaml.safe_load((PLAYBOOKS_DIR / "bake-image-slurm.yml").read_text())[0]
    (fstab,) = [r for r in bake["roles"] if r["role"] == "site_mounts"]
    assert "not (slurm_config.home.from_stack | default(false))" in fstab["when"]
