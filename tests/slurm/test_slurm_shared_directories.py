"""Shared directories beside /home (scheduler.shared_directories, issue 28 item 1: ParallelCluster's /apps): on AWS an
EFS file system of their own each, set up as /home's EFS (encrypted, TLS required, AWS Backup, mount targets in the
storage group, protected in prod), in every Slurm node's user data and in slurm.yml's site_mounts on every Slurm
host; on a site a named site mount, which the Slurm hosts then mount too. The AWS plan is
tests/fixtures/stacks/Pulumi.prod-openzfs.yaml (prod with /apps shared)."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
import yaml

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.catalog.tokens import EFS
from gpuforge.infra.aws.node_group import EFS_MOUNT_OPTIONS
from gpuforge.nodes.bake import PLAYBOOKS_DIR
from gpuforge.nodes.inventory import build_inventory
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import slurm_config
from gpuforge.spec import SpecError, resolve
from tests.support import REPO, planned

STACK = str(REPO / "tests" / "fixtures" / "stacks" / "Pulumi.prod-openzfs.yaml")
APPS = "forge-prod-zfs-slurm-shared-apps"


def test_apps_is_an_efs_of_its_own_set_up_as_homes_was() -> None:
    plan = planned(STACK)
    (fs,) = [r for r in plan.resources if r.type == EFS and r.name == APPS]
    assert fs.protect and fs.inputs["encrypted"] is True and fs.inputs["kmsKeyId"]
    children = {r.type: r for r in plan.resources if r.name.startswith(f"{APPS}-")}
    assert "aws:efs/fileSystemPolicy:FileSystemPolicy" in children  # TLS only (security-efs-tls-only)
    assert children["aws:efs/backupPolicy:BackupPolicy"].inputs["backupPolicy"] == {"status": "ENABLED"}
    targets = [r for r in plan.resources if r.type == "aws:efs/mountTarget:MountTarget" and r.name.startswith(APPS)]
    assert len(targets) == 2 and {tuple(t.inputs["securityGroups"]) for t in targets} == {
        ("forge-prod-zfs-net-storage-sg-id",)}
    shared = plan.outputs["slurm"]["sharedFileSystems"]
    assert list(shared) == ["apps"] and shared["apps"]["dnsName"].startswith(shared["apps"]["fileSystem"])
    assert plan.policy is not None and not plan.policy.blocking


def test_every_slurm_node_mounts_apps_from_its_user_data() -> None:
    plan = planned(STACK)
    file_system = plan.outputs["slurm"]["sharedFileSystems"]["apps"]["fileSystem"]
    fstype = load_aws_wiring().efs.mount_helper.fstype
    for group in ("train", "login"):
        (lt,) = [r for r in plan.resources if r.name == f"forge-prod-zfs-{group}-lt"]
        document = yaml.safe_load(base64.b64decode(lt.inputs["userData"]).decode())
        (fstab,) = [f for f in document["write_files"] if f["path"] == "/etc/fstab"]
        assert f"{file_system}:/ /apps {fstype} {EFS_MOUNT_OPTIONS} 0 0" in fstab["content"].splitlines(), group
        assert ["systemctl", "start", "apps.automount"] in document["runcmd"], group
    # A stack without shared directories gets no such entry: /home's mount stays the last command.
    dev = planned("dev")
    (lt,) = [r for r in dev.resources if r.name == "forge-dev-train-lt"]
    runcmd = yaml.safe_load(base64.b64decode(lt.inputs["userData"]).decode())["runcmd"]
    assert runcmd[-1] == ["/usr/local/sbin/gpuforge-mount-keeping", "/home", "home.automount"]


def test_slurm_yml_mounts_the_deployed_apps_on_every_slurm_host() -> None:
    outputs = copy.deepcopy(dict(planned(STACK).outputs))
    outputs["slurm"]["sharedFileSystems"] = {"apps": {"fileSystem": "fs-0aaaaaaaaaaaaaaaa",
                                                      "dnsName": "fs-0aaaaaaaaaaaaaaaa.efs.us-east-1.amazonaws.com"}}
    config = build_inventory(STACK, outputs=outputs)["all"]["vars"]["slurm_config"]
    (apps,) = config["shared_mounts"]
    assert {k: apps[k] for k in ("name", "kind", "mount_point", "source", "server", "export")} == {
        "name": "apps", "kind": "efs", "mount_point": "/apps", "source": "fs-0aaaaaaaaaaaaaaaa",
        "server": "fs-0aaaaaaaaaaaaaaaa.efs.us-east-1.amazonaws.com", "export": "/"}
    assert apps["nfs_options"] == load_aws_wiring().efs.nfs_options
    plays = yaml.safe_load((PLAYBOOKS_DIR / "slurm.yml").read_text())
    for play in plays:
        (mounts,) = [r for r in play["roles"] if r["role"] == "site_mounts"]
        assert mounts["vars"]["site_mounts_mounts"] == "{{ [slurm_config.home] + slurm_config.shared_mounts }}"


def _lab() -> dict[str, Any]:
    data = copy.deepcopy(load_stack("onprem-lab").cluster)
    data["site"]["storage"]["mounts"]["apps"] = {"kind": "nfs", "server": "10.64.8.20", "export": "/export/apps",
                                                 "mount_point": "/apps"}
    return data


def test_on_a_site_a_named_mount_is_shared_with_the_slurm_hosts() -> None:
    data = _lab()
    data["scheduler"]["shared_directories"] = {"apps": {"kind": "site", "mount": "apps"}}
    (apps,) = slurm_config(resolve(data, "lab"))["shared_mounts"]
    assert {k: apps[k] for k in ("name", "kind", "server", "export", "mount_point", "source")} == {
        "name": "apps", "kind": "nfs", "server": "10.64.8.20", "export": "/export/apps", "mount_point": "/apps",
        "source": "10.64.8.20:/export/apps"}
    assert slurm_config(resolve(_lab(), "lab"))["shared_mounts"] == []  # only what the spec names


def test_bad_shared_directories_are_refused_all_at_once() -> None:
    data = _lab()
    data["scheduler"]["shared_directories"] = {
        "cloud": {"kind": "efs", "mount_point": "/apps"},  # an AWS kind on a site
        "missing": {"kind": "site", "mount": "tools"},  # no such site mount
        "homes": {"kind": "site", "mount": "home"},  # /home is mounted already
        "scratch": {"kind": "site", "mount": "scratch"},  # fine: /lustre
        "again": {"kind": "site", "mount": "scratch"},  # the same mount point twice
    }
    with pytest.raises(SpecError) as err:
        resolve(data, "lab")
    paths = {issue.path: issue.message for issue in err.value.issues}
    base = "cluster.scheduler.shared_directories"
    assert set(paths) == {f"{base}[cloud].kind", f"{base}[missing].mount", f"{base}[homes].mount", f"{base}[again]"}
    assert "already scratch's mount point" in paths[f"{base}[again]"]
    aws = copy.deepcopy(load_stack("prod").cluster)
    aws["scheduler"]["shared_directories"] = {"site": {"kind": "site", "mount": "apps"},
                                              "etc": {"kind": "efs", "mount_point": "/etc"},
                                              "home": {"kind": "efs", "mount_point": "/home/"}}
    with pytest.raises(SpecError) as err:
        resolve(aws, "prod")
    assert {i.path for i in err.value.issues} == {f"{base}[site].kind", f"{base}[etc]", f"{base}[home]"}
