"""The shared /home and the controllers' shared state directory: every Slurm host (controller, login, compute)
mounts /home through slurm.yml's site_mounts, on AWS (the cluster's EFS), on a site (its NFS export) and
hybrid; a cloud node from an image gets the same fstab entry through its user data; on AWS through the EFS
mount helper with TLS, which the file systems' policy requires; prod's two controllers mount one state file
system at StateSaveLocation and slurmctld requires it. The booted proof is in
test_slurm_cluster.py (fstab entry and automount unit on every machine)."""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.infra.aws.node_group import EFS_MOUNT_OPTIONS
from gpuforge.nodes.bake import PLAYBOOKS_DIR
from gpuforge.nodes.inventory import build_inventory
from gpuforge.plan.model import Plan
from tests.support import planned

SLURM = "gpuforge:aws:SlurmControlPlane"
HOME_DNS = "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com"
STATE_DNS = "fs-0fedcba9876543210.efs.us-east-1.amazonaws.com"
SITE_MOUNTS = PLAYBOOKS_DIR / "roles" / "site_mounts"


def _deployed(stack: str) -> dict[str, Any]:
    """The plan's outputs as a deployed stack has them: the EFS file systems' real ids and names."""
    outputs = copy.deepcopy(dict(planned(stack).outputs))
    slurm = outputs.get("slurm")
    if slurm:
        slurm.update(homeFileSystem="fs-0123456789abcdef0", homeDnsName=HOME_DNS, databaseEndpoint="db.example")
        if "stateDnsName" in slurm:
            slurm.update(stateFileSystem="fs-0fedcba9876543210", stateDnsName=STATE_DNS)
    return outputs


def _ansible(args: list[str], inventory: dict[str, Any], tmp_path: Path) -> str:
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(PLAYBOOKS_DIR / "roles"), "ANSIBLE_NOCOLOR": "True"}
    ansible = Path(sys.executable).parent / "ansible-playbook"
    return subprocess.run([str(ansible), *args, "-i", str(path), str(PLAYBOOKS_DIR / "slurm.yml")],
                          capture_output=True, text=True, env=env, timeout=120, check=True).stdout


def _by_play(out: str) -> dict[str, list[str]]:
    """ansible-playbook --list-hosts / --list-tasks output: play name -> its lines."""
    plays: dict[str, list[str]] = {}
    current = ""
    for line in out.splitlines():
        text = line.strip()
        if text.startswith("play #"):
            current = text.split("): ", 1)[1].split("\t")[0]
            plays[current] = []
        elif current and text and not text.startswith(("pattern:", "hosts (", "tasks:")):
            plays[current].append(text.split("\t")[0])
    return plays


# One host in each node group the inventory lists no hosts for (AWS: the aws_ec2 plugin finds them at run time).
CLOUD_HOSTS = {"dev": {"ng_train": "train-0", "ng_login": "login-0"},
               "prod": {"ng_train": "train-0", "ng_login": "login-0"},
               "hybrid": {"ng_cloud": "cloud-0"},
               "onprem-lab": {}}


@pytest.mark.parametrize("stack", ["dev", "prod", "onprem-lab", "hybrid"])
def test_every_slurm_host_mounts_the_shared_home(stack: str, tmp_path: Path) -> None:
    inventory = build_inventory(stack, outputs=_deployed(stack))
    for group, host in CLOUD_HOSTS[stack].items():
        inventory["all"]["children"][group]["hosts"] = {host: {}}
    config = inventory["all"]["vars"]["slurm_config"]
    home = config["home"]
    assert home["mount_point"] == "/home"
    if stack in ("dev", "prod"):
        assert (home["kind"], home["server"], home["export"]) == ("efs", HOME_DNS, "/")
        assert home["nfs_options"] == load_aws_wiring().efs.nfs_options
    else:  # the site's NFS export at /home (hybrid: the cloud nodes mount it over the link)
        site_home = _deployed(stack)["site"]["parallelFs"]["home"]  # what site.yml's site_mounts mounts
        assert {k: home[k] for k in ("kind", "server", "export", "version")} == {
            k: site_home[k] for k in ("kind", "server", "export", "version")}
    hosts = _by_play(_ansible(["--list-hosts"], inventory, tmp_path))
    tasks = _by_play(_ansible(["--list-tasks"], inventory, tmp_path))
    expected = {
        "Configure the Slurm controller": [c["name"] for c in config["controllers"]],
        "Configure the Slurm login nodes": [*(h for g, h in CLOUD_HOSTS[stack].items() if g == "ng_login"),
                                            *(h["name"] for h in config["login_hosts"])],
        "Configure the Slurm compute nodes": None,  # every compute host: checked below
    }
    for play, names in expected.items():
        assert hosts[play], (stack, play)
        if names is not None:
            assert set(names) <= set(hosts[play]), (stack, play, hosts[play])
        # /home is in fstab (site_mounts) before the users exist (slurm_users), in every play.
        lines = tasks[play]
        fstab = lines.index("site_mounts : Write the site's file systems into fstab")
        assert fstab < lines.index("slurm_users : Create each cluster user with the same uid on every node")
    computes = set(hosts["Configure the Slurm compute nodes"])
    if stack == "onprem-lab":
        assert computes == {f"dgx-{r}0{i}" for r in "ab" for i in range(1, 5)}
    elif stack == "hybrid":
        assert "cloud-0" in computes and len(computes) > 1  # the site's static hosts and the cloud node
    else:
        assert "train-0" in computes


def test_the_mount_is_passed_as_slurm_config_home_in_every_play() -> None:
    plays = yaml.safe_load((PLAYBOOKS_DIR / "slurm.yml").read_text())
    for play in plays:
        mounts = [r for r in play["roles"] if r["role"] == "site_mounts"]
        assert [m["vars"]["site_mounts_mounts"] for m in mounts] == [["{{ slurm_config.home }}"]], play["name"]


def test_homes_are_made_once_by_the_primary_controller() -> None:
    defaults = yaml.safe_load((PLAYBOOKS_DIR / "roles/slurm_users/defaults/main.yml").read_text())
    assert defaults["slurm_users_create_home"] == (
        "{{ inventory_hostname == (slurm_config.controllers | default([{}]) | first).name | default('') }}")
    tasks = yaml.safe_load((PLAYBOOKS_DIR / "roles/slurm_users/tasks/main.yml").read_text())
    (user,) = [t for t in tasks if "ansible.builtin.user" in t]
    assert user["ansible.builtin.user"]["create_home"] == "{{ slurm_users_create_home | bool }}"


def _user_data(plan: Plan, name: str) -> dict[str, Any]:
    (lt,) = [r for r in plan.resources if r.name == name]
    return yaml.safe_load(base64.b64decode(lt.inputs["userData"]).decode())


def test_a_cloud_slurm_node_mounts_home_from_its_user_data_as_slurm_yml_does() -> None:
    """An Auto Scaling instance boots from its image with no Ansible run: its user data carries the /home
    entry, with the options site_mounts writes for the efs kind (AWS's NFS options, then its own: tls first),
    through the EFS mount helper (`<fs-id>:/ /home efs ...`, as the EFS User Guide's fstab entry)."""
    plan = planned("dev")
    helper = load_aws_wiring().efs.mount_helper
    source = f"{plan.outputs['slurm']['homeFileSystem']}:/"
    defaults = yaml.safe_load((SITE_MOUNTS / "defaults/main.yml").read_text())
    role_options = f"{load_aws_wiring().efs.nfs_options},{defaults['site_mounts_options']['efs']}"
    assert role_options == EFS_MOUNT_OPTIONS
    options = role_options.split(",")
    assert {"nfsvers=4.1", "noresvport", helper.tls_option, "_netdev", "x-systemd.automount"} <= set(options)
    for group in ("train", "login"):
        document = _user_data(plan, f"forge-dev-{group}-lt")
        (fstab,) = [f for f in document["write_files"] if f["path"] == "/etc/fstab"]
        assert f"{source} /home {helper.fstype} {role_options} 0 0" in fstab["content"].splitlines(), group
        assert " nfs4 " not in fstab["content"], group
        # Started through the script that keeps what the image holds in /home (its default user's home and keys).
        assert ["/usr/local/sbin/gpuforge-mount-keeping", "/home", "home.automount"] in document["runcmd"], group
        (script,) = [f for f in document["write_files"] if f["path"] == "/usr/local/sbin/gpuforge-mount-keeping"]
        assert script["content"] == (SITE_MOUNTS / "files/gpuforge-mount-keeping").read_text(), group


def test_the_efs_kind_mounts_through_the_mount_helper_with_tls() -> None:
    """site_mounts' efs kind: the catalog's mount helper package (from the repositories the role adds), its
    /sbin/mount.efs as the client check, and the EFS User Guide's entry: <fs-id>:/ <dir> efs ...,tls,_netdev."""
    helper = load_aws_wiring().efs.mount_helper
    defaults = yaml.safe_load((SITE_MOUNTS / "defaults/main.yml").read_text())
    assert defaults["site_mounts_packages"]["efs"] == [helper.package]
    assert defaults["site_mounts_client_files"]["efs"] == f"/sbin/mount.{helper.fstype}"
    assert defaults["site_mounts_options"]["efs"].split(",")[0] == helper.tls_option
    tasks = yaml.safe_load((SITE_MOUNTS / "tasks/main.yml").read_text())
    (fstab,) = [t for t in tasks if t["name"] == "Write the site's file systems into fstab"]
    assert fstab["vars"]["__site_mounts_fstype"]["efs"] == helper.fstype
    # The id (slurm.homeFileSystem / stateFileSystem), not the DNS name: the helper finds the mount target.
    assert fstab["vars"]["__site_mounts_src"]["efs"].startswith("{{ item.source")
    # An AWS Slurm image carries the helper (its user data writes the entry): bake-image-slurm.yml installs it.
    (bake,) = yaml.safe_load((PLAYBOOKS_DIR / "bake-image-slurm.yml").read_text())
    (install,) = [t for t in bake["tasks"] if t["name"].startswith("Install the EFS mount helper")]
    assert install["ansible.builtin.include_role"] == {"name": "site_mounts", "tasks_from": "clients.yml"}
    assert "slurm_config.home.kind == 'efs'" in install["when"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_efs_file_system_refuses_clients_without_tls(stack: str) -> None:
    """Each EFS file system of the cluster (/home, prod's state) has a policy that denies any request not over
    TLS, and keeps what EFS's default policy grants clients that reach a mount target (no IAM on the nodes)."""
    plan = planned(stack)
    file_systems = {r.name for r in plan.resources if r.type == "aws:efs/fileSystem:FileSystem" and SLURM in r.urn}
    policies = {r.name: r for r in plan.resources if r.type == "aws:efs/fileSystemPolicy:FileSystemPolicy"}
    assert {f"{fs}-policy" for fs in file_systems} == set(policies) and file_systems
    slurm = plan.outputs["slurm"]
    ids = {slurm["homeFileSystem"], *([slurm["stateFileSystem"]] if slurm.get("stateFileSystem") else [])}
    assert {policies[f"{fs}-policy"].inputs["fileSystemId"] for fs in file_systems} == ids
    for fs in file_systems:
        policy = policies[f"{fs}-policy"]
        # The file system's id, of EFS's form (the offline plan's mock makes one per file system).
        assert re.fullmatch(r"fs-[0-9a-f]{17}", policy.inputs["fileSystemId"]), policy.inputs["fileSystemId"]
        statements = json.loads(policy.inputs["policy"])["Statement"]
        arn = f"arn:aws:efs:mock:123456789012:{fs}"  # the plan engine's mock ARN
        (deny,) = [s for s in statements if s["Effect"] == "Deny"]
        assert (deny["Principal"], deny["Action"], deny["Resource"]) == ({"AWS": "*"}, "*", arn)
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        (allow,) = [s for s in statements if s["Effect"] == "Allow"]
        assert set(allow["Action"]) == {"elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite",
                                        "elasticfilesystem:ClientRootAccess"}
        assert allow["Condition"] == {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}}
        assert "aws:SecureTransport" not in json.dumps(allow)


def test_prod_controllers_share_a_state_file_system_of_their_own() -> None:
    plan = planned("prod")
    file_systems = {r.name: r for r in plan.resources if r.type == "aws:efs/fileSystem:FileSystem" and SLURM in r.urn}
    assert set(file_systems) == {"forge-prod-slurm-home", "forge-prod-slurm-state"}
    for fs in file_systems.values():
        assert fs.protect and fs.inputs["encrypted"] and fs.inputs["kmsKeyId"]
    backups = {r.name for r in plan.resources if r.type == "aws:efs/backupPolicy:BackupPolicy"}
    assert {"forge-prod-slurm-home-backup", "forge-prod-slurm-state-backup"} <= backups
    targets = [r for r in plan.resources if r.type == "aws:efs/mountTarget:MountTarget" and "-state-" in r.name]
    assert len(targets) == len({r.inputs["subnetId"] for r in targets}) >= 2  # one per AZ: both controllers reach it
    assert plan.outputs["slurm"]["stateDnsName"]
    # Both controllers mount it at StateSaveLocation, slurm's, from the deployed stack's name.
    config = build_inventory("prod", outputs=_deployed("prod"))["all"]["vars"]["slurm_config"]
    assert len(config["controllers"]) == 2
    state = config["state_shared"]
    assert (state["kind"], state["server"], state["mount_point"]) == ("efs", STATE_DNS, config["state_save_location"])
    assert (state["owner"], state["group"], state["mode"]) == ("slurm", "slurm", "0750")


def test_one_controller_has_no_state_file_system() -> None:
    plan = planned("dev")
    assert not [r for r in plan.resources if r.name.startswith("forge-dev-slurm-state")]
    assert "stateDnsName" not in plan.outputs["slurm"]
    assert build_inventory("dev", outputs=_deployed("dev"))["all"]["vars"]["slurm_config"]["state_shared"] == {}


def test_the_controller_role_mounts_the_state_and_slurmctld_requires_it() -> None:
    tasks = yaml.safe_load((PLAYBOOKS_DIR / "roles/slurm_controller/tasks/main.yml").read_text())
    by_name = {t["name"]: t for t in tasks}
    mount = by_name["Mount the state directory both controllers share"]
    assert mount["ansible.builtin.include_role"]["name"] == "site_mounts"
    assert mount["vars"]["site_mounts_mounts"] == ["{{ slurm_config.state_shared }}"]
    dropin = by_name["Make slurmctld require the shared state directory's mount"]["ansible.builtin.copy"]
    assert dropin["dest"] == "/etc/systemd/system/slurmctld.service.d/gpuforge-state.conf"
    assert "RequiresMountsFor={{ slurm_config.state_save_location }}" in dropin["content"]
    names = [t["name"] for t in tasks]
    # Mounted (and slurmctld bound to it) before the directory is made and before slurmctld starts.
    assert names.index("Mount the state directory both controllers share") < names.index(
        "Create the state and log directories") < names.index("Start slurmctld")


def test_a_site_state_mount_is_its_export_at_state_save_location() -> None:
    from gpuforge.plan.stacks import load_stack
    from gpuforge.render.slurm import slurm_config
    from gpuforge.spec import resolve

    lab = load_stack("onprem-lab").cluster
    lab["site"]["storage"]["mounts"]["slurm-state"] = {
        "kind": "nfs", "server": "10.64.8.21", "export": "/export/slurm-state", "mount_point": "/srv/slurm-state"}
    lab["scheduler"]["controller"]["hosts"]["slurm-02"] = "10.64.1.8"
    lab["scheduler"]["controller"]["state_mount"] = "slurm-state"
    state = slurm_config(resolve(lab, "onprem-lab"))["state_shared"]
    assert state == {"kind": "nfs", "server": "10.64.8.21", "export": "/export/slurm-state", "version": "4.2",
                     "mount_point": "/var/spool/slurmctld", "name": "slurm-state", "mount": "slurm-state",
                     "owner": "slurm", "group": "slurm", "mode": "0750"}


def _run_server_check(mounts: list[dict[str, Any]], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """site_mounts' check that every NFS mount names its server and every EFS mount its file system id, run
    as written in the role (the task copied into a play on localhost)."""
    variables = {"site_mounts_mounts": mounts}
    return _run_role_task("main.yml", "Check every NFS mount names its server", variables, tmp_path)


def _run_role_task(
    tasks_file: str, name: str, variables: dict[str, Any], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """One site_mounts task, as written in the role, in a play on localhost with the role's defaults."""
    tasks = yaml.safe_load((SITE_MOUNTS / "tasks" / tasks_file).read_text())
    (check,) = [t for t in tasks if t["name"].startswith(name)]
    defaults = yaml.safe_load((SITE_MOUNTS / "defaults/main.yml").read_text())
    play = [{"hosts": "localhost", "gather_facts": False, "vars": {**defaults, **variables}, "tasks": [check]}]
    path = tmp_path / "check.yml"
    path.write_text(yaml.safe_dump(play))
    ansible = Path(sys.executable).parent / "ansible-playbook"
    env = {**os.environ, "ANSIBLE_NOCOLOR": "True", "ANSIBLE_LOCALHOST_WARNING": "False"}
    return subprocess.run([str(ansible), "-c", "local", "-i", "localhost,", str(path)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


def test_an_efs_mount_without_its_file_system_id_is_refused(tmp_path: Path) -> None:
    """The mount helper's entry names the file system by id: an inventory with none (read from the offline plan)
    or with the DNS name in its place is refused, naming the mount point and where the id comes from."""
    efs = {"name": "home", "kind": "efs", "mount_point": "/home", "export": "/", "server": HOME_DNS}
    assert _run_server_check([{**efs, "source": "fs-0123456789abcdef0"}], tmp_path).returncode == 0
    for source in ("", HOME_DNS, None):
        mount = {**efs, "source": source} if source is not None else efs
        refused = _run_server_check([mount], tmp_path)
        assert refused.returncode != 0, source
        assert "No server for the mount(s) /home" in refused.stdout and "slurm.homeFileSystem" in refused.stdout


def test_an_efs_mount_with_no_repository_for_the_mount_helper_is_refused(tmp_path: Path) -> None:
    """amazon-efs-utils is in no distribution: a host without it and no repository to install it from is refused
    with the fix, before apt would say only "No package matching"."""
    efs = {"name": "home", "kind": "efs", "mount_point": "/home", "export": "/", "source": "fs-0123456789abcdef0"}
    task = "Refuse an EFS mount when no repository serves the EFS mount helper"
    installed = {"amazon-efs-utils": [{"version": "1.34.1-1"}]}
    repository = {"name": "gpuforge-slurm", "uris": "https://repo.example/slurm", "suites": ["noble"], "signed_by": "K"}
    admitted = [
        {"site_mounts_mounts": [efs], "ansible_facts": {"packages": installed}},
        {"site_mounts_mounts": [efs], "ansible_facts": {"packages": {}}, "site_mounts_repositories": [repository]},
        {"site_mounts_mounts": [{**efs, "kind": "nfs", "server": "10.0.0.2"}], "ansible_facts": {"packages": {}}},
    ]
    for variables in admitted:
        assert _run_role_task("clients.yml", task, variables, tmp_path).returncode == 0, variables
    missing = {"site_mounts_mounts": [efs], "ansible_facts": {"packages": {}}}
    refused = _run_role_task("clients.yml", task, missing, tmp_path)
    assert refused.returncode != 0
    assert "The EFS mount(s) /home need amazon-efs-utils" in refused.stdout
    assert "name that repository in site_mounts_repositories" in refused.stdout
