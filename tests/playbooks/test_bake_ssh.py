"""`gpuforge bake` and `gpuforge check` as a user runs them: over SSH, on two booted Debian 12 machines
(systemd, sshd on loopback, a non-root admin with sudo), with the stack's inventory merged with a hosts
file given by -i, the SSH user and key given by --user and --private-key, and the test package sources
given by -e @FILE (tests/playbooks/debian_test_sources.yml says what stands in for what)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from tests.machines.boot import MachinePool, Machines
from tests.machines.images import SSH_IMAGE

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
STACK = str(HERE.parent / "fixtures" / "stacks" / "Pulumi.booted-lab.yaml")
TEST_SOURCES = HERE / "debian_test_sources.yml"
runner = CliRunner()


@pytest.fixture(scope="module")
def lab(machine_pool: MachinePool) -> Machines:
    """lab1 and lab2: the booted-lab stack's two hosts."""
    machines = machine_pool.group("lab", 2, SSH_IMAGE)
    # Stand-in for the site's Lustre client (Whamcloud/DDN packages; none for Debian 12): the mount helper
    # whose presence the site_mounts role checks. No kernel module: the fstab entry is written, not mounted.
    for machine in machines:
        machine.run("install -m 0755 /bin/true /sbin/mount.lustre", root=True)
    return machines


def _hosts_file(lab: Machines, directory: Path) -> Path:
    """What a user writes for -i: the stack's hosts with the addresses Ansible reaches them on. The SSH user
    and key are left to --user and --private-key."""
    hosts: dict[str, Any] = {}
    for machine in lab:
        hosts[machine.name] = {
            "ansible_host": machine.address,
            "ansible_port": machine.ssh_port,
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={machine.known_hosts} -o StrictHostKeyChecking=yes",
            "ansible_python_interpreter": "/usr/bin/python3",
        }
    path = directory / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"ng_train": {"hosts": hosts}}}}))
    return path


def _cli(lab: Machines, tmp: Path, command: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    args = [
        command,
        STACK,
        "-i",
        str(_hosts_file(lab, tmp)),
        "--user",
        lab[0].user,
        "--private-key",
        str(lab[0].key_path),
        "--forks",
        "2",
        "--json",
        *extra,
    ]
    result = runner.invoke(app, args)
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"gpuforge {command} printed no JSON (exit {result.exit_code}):\n{result.output[-4000:]}")
    return result.exit_code, report, result.output


@pytest.fixture(scope="module")
def baked(lab: Machines, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, dict[str, Any], str]]:
    """Two `gpuforge bake` runs over SSH: the converge and the idempotence run."""
    tmp = tmp_path_factory.mktemp("bake-ssh")
    # What a booted nspawn machine cannot do, given as KEY=VALUE extra vars: it has no GPU, so the
    # driver's persistence daemon cannot start, and /proc/sys is read-only in the container, so
    # sysctls are written for boot but not applied live. (The stand-in package sources of the
    # booted-site tests replace the first; docs/testing.md.)
    # (A YAML mapping, not KEY=VALUE: ansible-playbook -e KEY=VALUE gives strings, and "false" is truthy.)
    no_gpu_no_sysctl = '{"nvidia_driver_service_started": false, "os_tuning_apply_runtime": false}'
    return [_cli(lab, tmp, "bake", "-e", f"@{TEST_SOURCES}", "-e", no_gpu_no_sysctl) for _ in range(2)]


def test_bake_over_ssh_converges_both_machines(baked: list[tuple[int, dict[str, Any], str]]) -> None:
    code, report, output = baked[0]
    assert code == 0, report.get("failures") or output[-4000:]
    assert report["ok"] is True and sorted(report["hosts"]) == ["lab1", "lab2"]
    assert all(host["changed"] > 0 and host["failed"] == 0 for host in report["hosts"].values())


def test_second_bake_over_ssh_changes_nothing(baked: list[tuple[int, dict[str, Any], str]]) -> None:
    code, report, output = baked[1]
    assert code == 0, report.get("failures") or output[-4000:]
    assert {name: host["changed"] for name, host in report["hosts"].items()} == {"lab1": 0, "lab2": 0}


def test_baked_machines_carry_the_catalog_facts_and_the_site_mounts(
    lab: Machines, baked: list[tuple[int, dict[str, Any], str]]
) -> None:
    """The DGX H100 rail-order HCAs reached NCCL; the site's NFS and Lustre mounts are systemd units."""
    for machine in lab:
        conf = machine.run("cat /etc/nccl.conf").stdout
        assert "NCCL_IB_HCA==mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11" in conf
        fstab = machine.run("cat /etc/fstab").stdout
        assert "10.64.8.20:/export/home /shared/home nfs vers=4.2,_netdev,x-systemd.automount" in fstab
        assert "10.64.8.10@o2ib:10.64.8.11@o2ib:/lab01 /lustre lustre _netdev,x-systemd.automount" in fstab
        # systemd read the fstab: the mounts are automount units waiting for first access.
        units = machine.run("systemctl list-units --all --no-legend --plain 'shared-home.*' 'lustre.*'", root=True)
        assert "shared-home.automount" in units.stdout and "lustre.automount" in units.stdout, units.stdout
        assert machine.run("dpkg-query -W -f '${Status}' nfs-common").stdout == "install ok installed"


def test_check_over_ssh_names_failing_machines_and_their_reasons(
    lab: Machines, baked: list[tuple[int, dict[str, Any], str]], tmp_path: Path
) -> None:
    """The machines have no GPUs: `gpuforge check` must fail both, naming each and saying why."""
    code, report, output = _cli(lab, tmp_path, "check", "--checks", "gpu,nccl")
    assert code == 1, output[-4000:]
    assert report["ok"] is False and report["checked"] == 2
    assert report["failing"] == ["lab1", "lab2"]
    for name in ("lab1", "lab2"):
        problems = report["nodes"][name]["problems"]
        assert any(problem.startswith("nvidia-smi") for problem in problems), problems
        # The nccl check says what is missing, not only that no bandwidth came back.
        assert any("nccl-tests" in problem and "missing" in problem for problem in problems), problems
