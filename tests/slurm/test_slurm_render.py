"""The Slurm configuration rendered once from the spec and the catalog: golden files, facts from the
catalog, options Slurm 22.05 knows, and Ansible's renderer agreeing byte for byte (one template, two
renderers)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuforge.nodes.bake import run_playbook
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import TEMPLATES, hostlist, render_slurm, slurm_config
from gpuforge.spec import resolve
from tests.support import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / "slurm"
SLURM_STACKS = ("dev", "prod", "onprem-lab", "hybrid")


def _config(stack: str, **kwargs: bool) -> dict:
    return slurm_config(resolve(load_stack(stack).cluster, stack), **kwargs)


@pytest.mark.parametrize("stack", SLURM_STACKS)
def test_rendered_files_match_golden(stack: str) -> None:
    files = render_slurm(_config(stack))
    golden_dir = GOLDEN / stack
    if os.environ.get("GPUFORGE_UPDATE_GOLDEN"):
        golden_dir.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (golden_dir / name).write_text(text)
    assert sorted(files) == sorted(p.name for p in golden_dir.iterdir())
    for name, text in files.items():
        assert text == (golden_dir / name).read_text(), f"{stack}/{name} differs from its golden file"


def test_config_is_plain_json() -> None:
    config = _config("dev")
    assert json.loads(json.dumps(config)) == config


def test_cloud_nodes_carry_catalog_facts() -> None:
    config = _config("dev")
    (train,) = config["dynamic_groups"]
    # g5.12xlarge: 48 vCPUs = 24 cores x 2 threads, 196608 MiB, 4x A10G (DescribeInstanceTypes).
    assert train["conf"].startswith("CPUs=48 CoresPerSocket=24 ThreadsPerCore=2 RealMemory=186777 Gres=gpu:a10g:4")
    assert int(196608 * 0.95) == 186777
    assert config["groups"]["train"]["local_nvme"] is True
    assert config["max_node_count"] == 2


def test_stand_in_gpus_list_device_files() -> None:
    gres = render_slurm(_config("dev", stand_in_gpus=True))["gres.conf"]
    assert "AutoDetect=off" in gres
    assert "Name=gpu Type=a10g File=/dev/nvidia[0-3]" in gres


def test_hostlist_compresses_like_slurm() -> None:
    assert hostlist(["dgx-a02", "dgx-a01", "dgx-a03", "dgx-b01"]) == "dgx-a[01-03],dgx-b01"
    assert hostlist(["n1", "n3", "n4", "login"]) == "login,n[1,3-4]"


@pytest.fixture(scope="module", params=["dev", "onprem-lab"])
def ansible_rendered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """A cloud cluster (dynamic nodes, EC2 topology) and a site (static nodes, the fabric's tree)."""
    out = tmp_path_factory.mktemp("slurm-ansible")
    config = _config(request.param)
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                 "ansible_python_interpreter": os.sys.executable}}}}
    files = {name: t for name, t in TEMPLATES.items() if name in render_slurm(config)}
    result = run_playbook(
        Path(__file__).with_name("render_slurm.yml"),
        inventory,
        extravars={"slurm_config": config, "slurm_files": files, "slurm_out_dir": str(out),
                   "slurm_templates_dir": str(REPO / "gpuforge" / "assets" / "playbooks" / "templates"),
                   "slurm_roles_dir": str(REPO / "gpuforge" / "assets" / "playbooks" / "roles")},
    )
    if not result.ok:
        skip_or_fail(f"ansible-playbook failed: {[f'{f.task}: {f.message}' for f in result.failures]}")
    return config, out


def test_ansible_renders_the_same_bytes(ansible_rendered: tuple[dict, Path]) -> None:
    config, out = ansible_rendered
    for name, text in render_slurm(config).items():
        assert (out / name).read_text() == text, name


def test_site_nodes_are_static_with_catalog_facts_and_the_fabric_tree() -> None:
    """onprem-lab: the DGX H100 hosts as one static node line (CPU layout and memory of the catalog's
    dgx-h100), configless slurmd against the site controller, the fabric's SU under its spines."""
    config = _config("onprem-lab")
    assert config["dynamic_groups"] == [] and config["controllers"] == [{"name": "slurm-01", "address": "10.64.1.6"}]
    (node,) = config["nodes"]
    assert node["names"] == "dgx-a[01-04],dgx-b[01-04]"
    assert node["addresses"].split(",")[0] == "10.64.1.11" and len(node["addresses"].split(",")) == 8
    # dgx-h100: 2 sockets x 56 cores x 2 threads = 224, 2048 GiB x 0.95.
    assert (node["cpus"], node["sockets"], node["cores_per_socket"], node["threads_per_core"]) == (224, 2, 56, 2)
    assert node["real_memory"] == int(2048 * 1024 * 0.95) and node["gres"] == "gpu:h100:8"
    files = render_slurm(config)
    assert files["slurmd.train"].strip().endswith('SLURMD_OPTIONS="--conf-server 10.64.1.6"')
    assert "SwitchName=su1-leaves Nodes=dgx-a[01-04],dgx-b[01-04]" in files["topology.conf"]
    assert "SwitchName=spines Switches=su1-leaves" in files["topology.conf"]
    assert "MaxNodeCount" not in files["slurm.conf"]  # static nodes only: no room kept for dynamic ones
    # The site's /home as the site_mounts role takes a mount (slurm.yml mounts it on every Slurm host).
    assert config["home"] == {"name": "home", "kind": "nfs", "server": "10.64.8.20", "export": "/export/home",
                              "mount_point": "/home", "source": "10.64.8.20:/export/home", "version": "4.2"}
    assert config["login_hosts"] == [{"name": "login-01", "address": "10.64.1.7"}]
    assert config["secrets"]["munge_key"] == {"store": "ansible_vault", "id": "vault_slurm_munge_key"}


def test_a_cloud_node_starts_slurmd_under_its_instance_name(ansible_rendered: tuple[dict, Path]) -> None:
    """The compute role's slurmd drop-in: a cloud group's slurmd gets -N <group>-<instance id> from the
    instance metadata (gpuforge/nodes/instance_name.py, tested against a stand-in IMDS in
    test_instance_name.py; booted in test_slurm_cluster.py); a static node (onprem-lab) keeps its host name."""
    config, out = ansible_rendered
    if not config["groups"]["train"]["dynamic"]:
        static = (out / "slurmd.service.d.train").read_text()
        assert "[Service]" not in static and "ExecStart" not in static and "ConditionPathExists=" in static
        return
    cloud = (out / "slurmd.service.d.train").read_text().splitlines()
    assert "[Service]" in cloud
    (pre,) = [line for line in cloud if line.startswith("ExecStartPre=")]
    assert pre.split("=", 1)[1].split() == [
        "/usr/bin/python3", "/usr/local/lib/gpuforge/instance_name.py", "--group", "train",
        "--output", "/run/gpuforge/slurmd-node-name", "--endpoint", "http://169.254.169.254",
        # pam_slurm_adopt's lines with nodename=<that name>, which sshd includes (the module cannot find a
        # dynamic node in slurm.conf by its host name).
        "--pam-template", "/etc/gpuforge/pam-slurm-adopt.in", "--pam-output", "/etc/pam.d/gpuforge-slurm-adopt",
    ]  # fmt: skip
    assert "EnvironmentFile=-/run/gpuforge/slurmd-node-name" in cloud
    # The packaged ExecStart (slurm-wlm's slurmd.service) is reset, then given the name.
    starts = [line for line in cloud if line.startswith("ExecStart=")]
    assert starts == ["ExecStart=", "ExecStart=/usr/sbin/slurmd -D -s $SLURMD_OPTIONS -N ${GPUFORGE_SLURMD_NODENAME}"]


def test_hybrid_renders_a_site_and_a_cloud_partition_that_never_mix() -> None:
    """stacks/Pulumi.hybrid.yaml: the DGX hosts static under the site's switch, the cloud group dynamic, each
    in its own partition; the fabric gate's partition holds the cloud only; srun's range is the catalog's,
    the one the security groups and the site firewall open."""
    from gpuforge.catalog import load_catalog

    config = _config("hybrid")
    files = render_slurm(config)
    conf = files["slurm.conf"]
    assert "PartitionName=site Nodes=ns_train Default=YES" in conf
    assert "PartitionName=cloud Nodes=ns_cloud Default=NO" in conf
    assert "PartitionName=gpuforge-gate Nodes=ns_cloud " in conf
    low, high = load_catalog().slurm.ports.srun
    assert f"SrunPortRange={low}-{high}\n" in conf
    assert "NodeName=dgx-[01-04] NodeAddr=10.72.1.11" in conf and "Gres=gpu:h100:8" in conf
    assert "SwitchName=su1-leaves Nodes=dgx-[01-04]" in files["topology.conf"]
    assert "TopologyPlugin=topology/tree" in conf
    assert "--conf-server 10.72.1.6 -Z" in files["slurmd.cloud"] and "Gres=gpu:h100:8" in files["slurmd.cloud"]
    assert config["secrets"]["munge_key"] == {"store": "ansible_vault", "id": "vault_slurm_munge_key"}
    assert config["secrets"]["cloud_munge_key"]["store"] == "aws_secretsmanager"
    assert config["lifecycle"]["aws_credentials"]["kind"] == "roles_anywhere"
