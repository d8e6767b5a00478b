"""An Auto Scaling instance booted from a compute group's image joins the booted Slurm cluster
(tests/slurm/cluster.py) by itself: no Ansible runs on it after its boot.

The cluster's cloud machine is made into such an instance: what slurm.yml put on it (the MUNGE key, slurmd's
configuration and drop-in, the prolog and epilog) is removed and munged and slurmd are disabled; then only
the Slurm part of the image bake (playbooks/bake-image-slurm.yml, which bake-image.yml imports) runs on it in
image mode, with the variables `gpuforge bake --target rootfs:` gives a compute group (bake.image_slurm_vars:
the key's store, id and region; no key). The key goes into Secrets Manager and the machine reboots: its
gpuforge-munge-key.service reads the key with the instance role, munged starts, slurmd registers as
<group>-<instance id> in its partition with its gres, and a user's job runs there.

What stands in, and why:
- AWS Secrets Manager: moto_server on 127.0.0.1 (the machines share the host's network); the image's
  endpoint URL points there, as a VPC interface endpoint's DNS name would be baked.
- The instance role: the stand-in IMDSv2 of the cluster (tests/standins/imds.py) answers the role's
  temporary credentials (moto accepts any), the way boto3's default chain reads them on EC2.
- What a GPU host's kernel and driver give at boot: a stand-in unit on the machine makes the GPU device
  files and remounts the cgroup v1 controllers writable before slurmd starts (cluster.prepare_machine does
  the same from the host when the cluster is built; a reboot loses both, as /dev and mounts are per boot).
The machine is left as the cluster fixture made it: the cloud node registered as its instance, with the
same key (the cluster's), and the instance metadata with no role again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3  # type: ignore[import-untyped,unused-ignore]
import pytest

from gpuforge.nodes.bake import PlaybookResult, run_playbook
from tests.machines import MachinePool, Machines
from tests.standins.imds import CREDENTIALS_PATH
from tests.standins.moto_server import boto3_args, moto_server

from .cluster import CGROUPS_WRITABLE, CLOUD_GROUP, CLUSTER, GPU_TYPE, GPUS, SlurmCluster, wait_for

pytestmark = pytest.mark.slow

REGION = "us-east-1"
ROLE = "gpuforge-slurm-node"
SECRET = f"gpuforge/{CLUSTER}/slurm/munge-key"  # the id the Pulumi program gives the key (aws/slurm)
KEY = "/etc/munge/munge.key"
# What slurm.yml wrote on the cloud machine that the image bake must bring back on its own.
CONFIGURED = (
    KEY,
    "/etc/default/slurmd",
    "/etc/systemd/system/slurmd.service.d/gpuforge.conf",
    "/etc/slurm/prolog.d/50-gpuforge-healthcheck",
    "/etc/slurm/epilog.d/50-gpuforge-healthcheck",
    # pam_slurm_adopt's lines: the image's, named at boot by slurmd's unit (nodename=).
    "/etc/gpuforge/pam-slurm-adopt.in",
    "/etc/pam.d/gpuforge-slurm-adopt",
)
STANDIN_HOST = "/usr/local/sbin/gpuforge-standin-host"
STANDIN_HOST_SCRIPT = (
    "#!/bin/sh\n# gpuforge test stand-in: what a GPU host's driver and kernel give at boot.\n"
    + "".join(f"[ -e /dev/nvidia{i} ] || mknod -m 0666 /dev/nvidia{i} c 195 {i}\n" for i in range(GPUS))
    + CGROUPS_WRITABLE
    + "\n"
)
STANDIN_HOST_UNIT = f"""[Unit]
Description=GPU device files and writable cgroups (gpuforge test stand-in for a GPU host)
Before=slurmd.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={STANDIN_HOST}
[Install]
WantedBy=multi-user.target
"""


@dataclass
class BakedNode:
    cluster: SlurmCluster
    bake: PlaybookResult
    key_missing: Any  # the boot unit's run while the secret did not exist yet (CompletedProcess)
    key_missing_log: str
    before_boot: dict[str, str]  # what the machine showed after the bake, before its boot


def _image_vars(cluster: SlurmCluster, endpoint: str) -> dict[str, Any]:
    """The cloud group's image variables: the cluster's (slurm_config, container sources) without any
    secret value, and what image_slurm_vars adds for a compute group, endpoints pointed at the stand-ins."""
    cloud = cluster.cloud
    cluster_vars = {k: v for k, v in cluster.inventory["all"]["vars"].items() if not k.startswith("vault_")}
    return {
        **cluster_vars,
        **cloud.ansible_vars(),
        "gpuforge_node_group": CLOUD_GROUP,
        "munge_key_ref": {"store": "aws_secretsmanager", "id": SECRET},
        "munge_key_aws_region": REGION,
        "munge_key_aws_endpoint_url": endpoint,
        "munge_imds_endpoint": cluster.imds.endpoint,
        "slurm_compute_imds_endpoint": cluster.imds.endpoint,
    }


@pytest.fixture(scope="module")
def baked_node(
    slurm_cluster: SlurmCluster, machine_pool: MachinePool, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BakedNode]:
    cluster = slurm_cluster
    cloud = cluster.cloud
    start = time.monotonic()
    with moto_server(tmp_path_factory.mktemp("moto-baked")) as endpoint:
        # The machine forgets its configuration: nothing of slurm.yml's is left to help it join.
        cloud.run("systemctl stop slurmd munge && systemctl disable slurmd munge", root=True)
        cluster.scontrol("delete", f"nodename={cluster.cloud_node}")
        cloud.run("rm -f " + " ".join(CONFIGURED), root=True)
        bake = run_playbook("bake-image-slurm.yml", {"all": {"hosts": {cloud.name: _image_vars(cluster, endpoint)}}})
        assert bake.ok, [f"{f.host} {f.task}: {f.message}" for f in bake.failures]
        states = "systemctl is-enabled {0}; systemctl is-active {0}"
        before = {
            unit: cloud.run(states.format(unit), root=True, check=False).stdout
            for unit in ("gpuforge-munge-key", "munge", "slurmd")
        }
        before["key"] = "present" if (cloud.root / KEY.lstrip("/")).exists() else "absent"
        # The instance role cannot read a secret that is not there: the unit fails, naming it.
        cluster.imds.role = ROLE
        since = cloud.run("date +%s", root=True).stdout.strip()
        missing = cloud.run("systemctl start gpuforge-munge-key.service", root=True, check=False)
        journal = f"journalctl -u gpuforge-munge-key --no-pager -o cat --since @{since}"
        missing_log = cloud.run(journal, root=True).stdout
        # The Pulumi program's secret, in the cluster's region; then the instance boots from its image.
        secretsmanager = boto3.client("secretsmanager", **boto3_args(endpoint, REGION))
        secretsmanager.create_secret(Name=SECRET, SecretString=cluster.secrets["munge_key"])
        _install(cloud, STANDIN_HOST, STANDIN_HOST_SCRIPT, 0o755)
        _install(cloud, "/etc/systemd/system/gpuforge-standin-host.service", STANDIN_HOST_UNIT, 0o644)
        wants = cloud.root / "etc/systemd/system/multi-user.target.wants/gpuforge-standin-host.service"
        wants.unlink(missing_ok=True)
        wants.symlink_to("/etc/systemd/system/gpuforge-standin-host.service")
        machine_pool.reboot(Machines(cluster.machines.image, [cloud]))
        print(f"\nbaked cloud node: bake and reboot {time.monotonic() - start:.1f}s")
        try:
            yield BakedNode(cluster, bake, missing, missing_log, before)
        finally:
            cluster.imds.role = None


def _install(machine: Any, path: str, content: str, mode: int) -> None:
    target = machine.root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    target.chmod(mode)


def test_the_image_holds_no_key_and_starts_nothing(baked_node: BakedNode) -> None:
    before = baked_node.before_boot
    assert before["key"] == "absent"
    for unit in ("gpuforge-munge-key", "munge", "slurmd"):
        assert before[unit].split() == ["enabled", "inactive"], (unit, before[unit])
    assert baked_node.bake.changed > 0


def test_a_key_it_cannot_read_fails_its_unit_naming_the_secret_and_the_permission(baked_node: BakedNode) -> None:
    assert baked_node.key_missing.returncode != 0
    log = baked_node.key_missing_log
    assert f"could not read the MUNGE key {SECRET}" in log, log
    assert "secretsmanager:GetSecretValue" in log and "ResourceNotFoundException" in log, log


def test_the_booted_instance_reads_its_key_with_its_role(baked_node: BakedNode) -> None:
    cluster = baked_node.cluster
    cloud = cluster.cloud
    active = "systemctl is-active munge"
    wait_for("munged", lambda: cloud.run(active, root=True, check=False).stdout.strip() == "active")
    assert cloud.run(f"stat -c '%U:%G %a' {KEY}", root=True).stdout.split() == ["munge:munge", "400"]
    assert (cloud.root / KEY.lstrip("/")).read_text() == cluster.secrets["munge_key"]
    assert ("GET", CREDENTIALS_PATH + ROLE, True) in cluster.imds.requests
    log = cloud.run("journalctl -b -u gpuforge-munge-key --no-pager -o cat", root=True).stdout
    assert f"wrote {KEY} from aws_secretsmanager {SECRET}" in log, log
    assert cluster.secrets["munge_key"][:32] not in log
    # A credential made on the instance decodes on the controller: the cluster's key.
    cred = cloud.run("munge -n").stdout.strip()
    assert cluster.controller.run(f"echo {cred} | unmunge", check=False).returncode == 0


def test_the_booted_instance_registers_in_its_partition_and_runs_a_job(baked_node: BakedNode) -> None:
    cluster = baked_node.cluster
    name = cluster.cloud_node
    assert name == f"{CLOUD_GROUP}-{cluster.imds.instance_id}"
    partition = f"sinfo -h -p {CLOUD_GROUP} -o %N"
    wait_for(f"{name} in partition {CLOUD_GROUP}", lambda: cluster.as_user(partition).split() == [name])
    node = cluster.scontrol("--oneliner", "show", "node", name)
    assert f"Gres=gpu:{GPU_TYPE}:{GPUS}" in node and "Partitions=cloud" in node, node
    hostname = cluster.cloud.run("hostname").stdout.strip()
    out = cluster.as_user(f"srun -p {CLOUD_GROUP} -N1 -w {name} hostname", timeout=120)
    assert out.strip() == hostname
