"""`gpuforge bake` and `gpuforge check` as a user runs them: over SSH, on two booted Debian 12 machines
(systemd, sshd on loopback, a non-root admin with sudo), with the stack's inventory merged with a hosts
file given by -i, the SSH user and key given by --user and --private-key, and the package sources given
by -e @FILE: a site's mirror, here the stand-ins of tests/standins. Every production task runs with its
production default (nothing switched off). The machines are the booted site.yml test's (gpu1, gpu2):
this module bakes them from nothing first, that one re-runs site.yml on them after.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from tests.machines import SSH_IMAGE, MachinePool, Machines
from tests.standins import packages as standin
from tests.standins.repo import StandinSources

pytestmark = pytest.mark.slow

STACK = str(Path(__file__).resolve().parent.parent / "fixtures" / "stacks" / "Pulumi.booted-lab.yaml")
# The stand-in nccl-tests reads the bus bandwidth it reports from here (tests/standins/nccl-tests).
BUSBW_FILE = "/etc/nccl-tests-standin/busbw"
ALL_REDUCE = "/opt/nccl-tests/build/all_reduce_perf"
runner = CliRunner()

Run = tuple[int, dict[str, Any], str]


@pytest.fixture(scope="module")
def lab(machine_pool: MachinePool, ipoib_interface: str) -> Machines:
    """gpu1 and gpu2: the booted-lab stack's two hosts (writable /proc/sys: site.yml applies sysctls live), with
    the IPoIB interface (ibp170s0f0) the stack's Lustre names for LNet's o2ib network."""
    machines = machine_pool.group("gpu", 2, SSH_IMAGE, writable_proc_sys=True)
    # The site's Lustre client is the vendor's (Whamcloud/DDN; none for Debian 12), in the site's own image: the
    # stand-in client's files (lnetctl, mount.lustre, the modprobe rules that stand in for the kernel modules).
    # site_mounts checks the mount helper is there, and configures LNet's o2ib network with lnetctl.
    for machine in machines:
        for package in standin.lustre_repository():
            for path, content in package.files.items():
                data = base64.b64encode(content if isinstance(content, bytes) else content.encode()).decode()
                mode = "0755" if path in package.executables else "0644"
                machine.run(f"mkdir -p {Path(path).parent} && echo {data} | base64 -d > {path} && chmod {mode} {path}",
                            root=True)  # fmt: skip
    assert ipoib_interface == "ibp170s0f0"
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
            # The machines share one network namespace: each exporter binds its own machine's address.
            "node_exporter_listen": f"{machine.address}:9100",
        }
    path = directory / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"ng_train": {"hosts": hosts}}}}))
    return path


def _cli(lab: Machines, tmp: Path, command: str, *extra: str) -> Run:
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
def baked(lab: Machines, standin_sources: StandinSources, tmp_path_factory: pytest.TempPathFactory) -> list[Run]:
    """Two `gpuforge bake` runs over SSH: the converge and the idempotence run."""
    tmp = tmp_path_factory.mktemp("bake-ssh")
    sources = tmp / "sources.yml"  # the site's package mirrors, as a user passes them
    sources.write_text(yaml.safe_dump(standin_sources.variables()))
    return [_cli(lab, tmp, "bake", "-e", f"@{sources}") for _ in range(2)]


def _failures(run: Run) -> Any:
    _, report, output = run
    return report.get("failures") or output[-4000:]


def test_bake_over_ssh_converges_both_machines(baked: list[Run]) -> None:
    code, report, _ = baked[0]
    assert code == 0, _failures(baked[0])
    assert report["ok"] is True and sorted(report["hosts"]) == ["gpu1", "gpu2"]
    assert all(host["changed"] > 0 and host["failed"] == 0 for host in report["hosts"].values())


def test_second_bake_over_ssh_changes_nothing(baked: list[Run]) -> None:
    code, report, _ = baked[1]
    assert code == 0, _failures(baked[1])
    assert {name: host["changed"] for name, host in report["hosts"].items()} == {"gpu1": 0, "gpu2": 0}


def test_baked_machines_carry_the_catalog_facts_and_the_site_mounts(lab: Machines, baked: list[Run]) -> None:
    """The DGX H100 rail-order HCAs reached NCCL; the site's NFS and Lustre mounts are in fstab and
    systemd's automount units for them are active (the file systems mount on first access)."""
    for machine in lab:
        conf = machine.run("cat /etc/nccl.conf").stdout
        assert "NCCL_IB_HCA==mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11" in conf
        fstab = machine.run("cat /etc/fstab").stdout
        assert "10.64.8.20:/export/home /shared/home nfs vers=4.2,_netdev,x-systemd.automount" in fstab
        assert "10.64.8.10@o2ib:10.64.8.11@o2ib:/lab01 /lustre lustre _netdev,x-systemd.automount" in fstab
        # The Lustre's MGS NIDs are on o2ib: its entry requires the LNet unit, which put o2ib on ibp170s0f0.
        assert "x-systemd.requires=gpuforge-lnet.service" in fstab
        assert "- net type: o2ib" in machine.run("lnetctl net show --net o2ib", root=True).stdout
        units = ["shared-home.automount", "lustre.automount", "gpuforge-lnet.service"]
        states = machine.run(f"systemctl is-active {' '.join(units)}", check=False).stdout.split()
        assert states == ["active", "active", "active"], machine.run("systemctl status --no-pager " + " ".join(units),
                                                           root=True, check=False).stdout  # fmt: skip
        assert machine.run("dpkg-query -W -f '${Status}' nfs-common").stdout == "install ok installed"


def test_nccl_tests_built_from_the_pinned_commit_against_cuda_and_nccl(
    lab: Machines, standin_sources: StandinSources, baked: list[Run]
) -> None:
    for machine in lab:
        head = machine.run("git -C /opt/nccl-tests rev-parse HEAD", root=True).stdout.strip()
        assert head == standin_sources.nccl_tests_commit
        nvcc = machine.run(f"{standin.CUDA_HOME}/bin/nvcc --version").stdout
        assert f"release {standin.CUDA_VERSION}, V{standin.CUDA_NVCC_VERSION.split('-')[0]}" in nvcc
        for collective in standin.NCCL_TESTS_COLLECTIVES:
            machine.run(f"test -x /opt/nccl-tests/build/{collective}_perf")


def _failing_pcie_diag() -> str:
    """The recorded `dcgmi diag` with its PCIe row failed as DCGM reports a down NVLink (as test_health.py does)."""
    return standin.DCGMI_DIAG_RECORDED.read_text().replace(
        "| PCIe                      | Pass - All                                     |",
        "| PCIe                      | Fail - GPU: 3                                  |\n"
        "| Error                     | GPU 3 NvLink link 4 is down                    |",
    )


def test_check_over_ssh_names_failing_machines_and_their_reasons(
    lab: Machines, baked: list[Run], tmp_path: Path
) -> None:
    """Every check, as `gpuforge check` runs by default. No GPUs: nvidia-smi fails on both, and so does its
    NVLink status. gpu1's nccl-tests reports a bus bandwidth below the DGX H100 floor; gpu2's nccl-tests is
    gone and its DCGM diagnostics fail PCIe (the stand-in dcgmi prints a real run's output, gpu2's edited).
    `gpuforge check` fails both, naming each and every reason."""
    gpu1, gpu2 = lab
    gpu1.run(f"mkdir -p {Path(BUSBW_FILE).parent} && echo 120.5 > {BUSBW_FILE}", root=True)
    gpu2.run(f"mv {ALL_REDUCE} {ALL_REDUCE}.away", root=True)
    diag = Path(standin.DCGMI_STANDIN_OUTPUT)
    encoded = base64.b64encode(_failing_pcie_diag().encode()).decode()
    gpu2.run(f"mkdir -p {diag.parent} && echo {encoded} | base64 -d > {diag}", root=True)
    try:
        code, report, output = _cli(lab, tmp_path, "check")
    finally:
        gpu2.run(f"mv {ALL_REDUCE}.away {ALL_REDUCE} && rm -f {diag}", root=True)
    assert code == 1, output[-4000:]
    assert report["ok"] is False and report["checked"] == 2
    assert report["failing"] == ["gpu1", "gpu2"]
    problems = {name: report["nodes"][name]["problems"] for name in ("gpu1", "gpu2")}
    for name in ("gpu1", "gpu2"):
        assert any(p.startswith("nvidia-smi failed (rc 9)") for p in problems[name]), problems
    # The floor: the catalog's single-node DGX H100 figure (450 GB/s) x the default 0.8.
    assert "all_reduce_perf busbw 120.5 GB/s at 8589934592 B is below the floor 360 GB/s" in problems["gpu1"]
    # The role read the rows too (it once matched none: "reported no bus bandwidth"), worded as the parsers.
    assert not any("no bus bandwidth" in p for p in problems["gpu1"]), problems
    assert sum("below the floor" in p for p in problems["gpu1"]) == 1, problems
    assert report["nodes"]["gpu1"]["busbw_gbps"] == 120.5
    assert any(p.startswith(f"nccl-tests missing: no {ALL_REDUCE}") for p in problems["gpu2"]), problems
    # DCGM: `dcgmi diag -r 2 -p pcie.gpu_nvlinks_expected_up=18` ran on both; gpu1's recorded run passes.
    assert not any(p.startswith("dcgmi") for p in problems["gpu1"]), problems
    assert "dcgmi diag PCIe: Fail - GPU: 3 (Error: GPU 3 NvLink link 4 is down)" in problems["gpu2"]
    for name in ("gpu1", "gpu2"):
        # A DGX H100's 18 NVLinks per GPU, none up without a driver; its 8 compute HCAs, none present.
        assert "NVLinks up 0, expected 144" in problems[name], problems
        assert any(p.startswith("InfiniBand ports") for p in problems[name]), problems
    # The one-line reason names each failing machine with its problems.
    assert report["reason"].startswith("2 of 2 node(s) failing: gpu1: nvidia-smi failed")
    assert "gpu2: nvidia-smi failed" in report["reason"] and "nccl-tests missing" in report["reason"]
