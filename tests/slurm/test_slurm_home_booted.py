"""A Slurm node's first boot mounts the shared /home without losing what its image holds there (issue 23, defect
10), proven on a booted machine the way EC2 boots one: the dev stack's planned user data of the train group,
unmodified, run by real cloud-init, which first makes the image's default user with its key (as from an EC2
key pair) and at the end mounts the shared /home.

What stands in, and why:
- EC2's instance metadata and user data: cloud-init's NoCloud seed directory (the same modules run; the
  datasource differs), with the instance's hostname as EC2 names it.
- EFS: this kernel has no NFS client. The image's mount.efs is the stand-in helper of tests/standins (it refuses
  a mount without tls, as the file system's policy does) and binds a host directory, the file system's contents,
  which the test reads and seeds as another node would have.
- The machine keeps the host key the machine pool gave it (cloud-init would make new ones, as on EC2, which the
  test's known_hosts would refuse), and cloud-init leaves its network alone (the pool made it).
The site_mounts role's path (a controller's /home mounted over an administrator's SSH session) is proven in
tests/playbooks/test_site_booted.py, at /home.
"""

from __future__ import annotations

import base64
import dataclasses
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from gpuforge.catalog.aws_wiring import load_aws_wiring
from tests.machines import ADMIN_USER, SSH_IMAGE, MachinePool
from tests.standins.packages import mount_helper
from tests.support import planned

pytestmark = pytest.mark.slow

SEED = "/var/lib/cloud/seed/nocloud"
EXPORTS = "/var/lib/gpuforge-standin/exports"  # where the stand-in mount helper finds a shared file system
# Debian's cloud image names its default user debian (Ubuntu's: ubuntu); cloud.cfg makes it at first boot.
DEFAULT_USER = "debian"
HELPER = load_aws_wiring().efs.mount_helper
BENCH_CLOUD_CFG = """\
datasource_list: [NoCloud]
# The machine pool gave this machine its host key (tests/machines) and its network.
ssh_deletekeys: false
ssh_genkeytypes: []
network: {config: disabled}
"""
CLOUD_INIT_IMAGE = SSH_IMAGE.derive(
    "cloud-init",
    packages=("cloud-init", "locales"),
    setup=(
        # The locale cloud-init's locale module sets (en_US.UTF-8), generated as a cloud image has it.
        "sed -i 's/^# *en_US.UTF-8 UTF-8/en_US.UTF-8 UTF-8/' /etc/locale.gen && locale-gen",
        f"printf '%s' {shlex.quote(BENCH_CLOUD_CFG)} > /etc/cloud/cloud.cfg.d/90-gpuforge-bench.cfg",
        f"printf '%s' {shlex.quote(mount_helper(HELPER.fstype, HELPER.package))} > /sbin/mount.{HELPER.fstype}",
        f"chmod 0755 /sbin/mount.{HELPER.fstype}",
    ),
)


def _train_user_data() -> str:
    (template,) = [r for r in planned("dev").resources if r.name == "forge-dev-train-lt"]
    return base64.b64decode(template.inputs["userData"]).decode()


def _home_file_system(user_data: str) -> str:
    """The file system id of the user data's /home entry (fs-...)."""
    (fstab,) = [f for f in yaml.safe_load(user_data)["write_files"] if f["path"] == "/etc/fstab"]
    (entry,) = [line.split() for line in fstab["content"].splitlines() if line.split()[1:2] == ["/home"]]
    return entry[0].split(":")[0]


def test_a_node_keeps_its_image_homes_when_its_user_data_mounts_the_shared_home(
    machine_pool: MachinePool, tmp_path: Path
) -> None:
    user_data = _train_user_data()
    file_system = tmp_path / "exports" / _home_file_system(user_data)
    file_system.mkdir(parents=True)
    # What the cluster already shares: the admin's .profile another node put there stays as it is.
    shared_profile = file_system / ADMIN_USER / ".profile"
    shared_profile.parent.mkdir()
    shared_profile.write_text("# the cluster's shared profile\n")
    user_key = tmp_path / "default-user-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", DEFAULT_USER, "-f", str(user_key)], check=True)
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "user-data").write_text(user_data)
    (seed / "meta-data").write_text(
        yaml.safe_dump(
            {
                "instance-id": "i-0a1b2c3d4e5f60718",
                "local-hostname": "ip-10-20-0-57",
                "public-keys": [user_key.with_suffix(".pub").read_text().strip()],
            }
        )
    )

    (node,) = machine_pool.group("cinode", 1, CLOUD_INIT_IMAGE, binds={seed: SEED, tmp_path / "exports": EXPORTS})
    # The boot the pool waited for ran cloud-init's final stage, where the user data mounts /home.
    status = node.run("cloud-init status --wait --long", root=True, check=False, timeout=300).stdout
    assert "status: done" in status, status
    assert node.run("hostname").stdout.strip() == "ip-10-20-0-57"

    # /home is the shared file system, mounted by the EFS mount helper with TLS.
    records = node.run("cat /run/efs-standin/mounts", root=True).stdout.split()
    assert records[:1] == ["/home"] and HELPER.tls_option in records[1].split(","), records
    # Both of the image's accounts are there with their keys: the admin this test logs in as (this command
    # ran after the mount), and the default user cloud-init made, who logs in with the instance's key.
    assert (file_system / ADMIN_USER / ".ssh" / "authorized_keys").is_file()
    kept = (file_system / DEFAULT_USER / ".ssh" / "authorized_keys").read_text()
    assert user_key.with_suffix(".pub").read_text().split()[1] in kept
    as_default_user = dataclasses.replace(node, user=DEFAULT_USER, key_path=user_key)
    assert as_default_user.run("id -un; df --output=target ~ | tail -n 1").stdout.split() == [DEFAULT_USER, "/home"]
    # What the file system already held is never overwritten, and nothing was left aside.
    assert shared_profile.read_text() == "# the cluster's shared profile\n"
    assert node.run("ls -d /var/lib/gpuforge/before-mount.* 2>/dev/null | wc -l", root=True).stdout.strip() == "0"
