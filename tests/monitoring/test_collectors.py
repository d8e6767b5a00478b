"""The textfile collectors node_exporter reads: what they write parses (`promtool check metrics`) and
carries the series the alert rules select."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
FILES = ROOT / "gpuforge" / "assets" / "playbooks" / "roles" / "node_textfile_collectors" / "files"
SLURM = ROOT / "tests" / "fixtures" / "monitoring" / "slurm"


def promtool_check_metrics(text: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        skip_or_fail("promtool is not installed (Debian: prometheus)")
    assert promtool is not None
    run = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    # promtool also lints naming (a gauge ending in _total, ...); a problem of any kind fails.
    assert run.returncode == 0 and not run.stdout.strip(), run.stdout + run.stderr


def fake_slurm(bin_dir: Path, answers: bool = True) -> dict[str, str]:
    """sinfo, squeue and sdiag on PATH that print the recorded outputs (or fail: controller down)."""
    bin_dir.mkdir()
    for tool in ("sinfo", "squeue", "sdiag"):
        script = bin_dir / tool
        body = (
            f"cat {SLURM / (tool + '.txt')}"
            if answers
            else "echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1"
        )
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TZ": "UTC"}


def run_collector(script: str, out: Path, *args: str, env: dict[str, str] | None = None) -> str:
    out.mkdir(exist_ok=True)
    subprocess.run([str(FILES / script), str(out), *args], check=True, env=env, timeout=60)
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "a temporary file was left behind"
    return "\n".join(p.read_text() for p in sorted(out.glob("*.prom")))


def test_slurm_collector_reports_unavailable_nodes_jobs_and_the_scheduler(tmp_path: Path) -> None:
    text = run_collector("slurm-textfile-collector", tmp_path / "out", env=fake_slurm(tmp_path / "bin"))
    promtool_check_metrics(text)
    lines = set(text.splitlines())
    assert "gpuforge_slurm_up 1" in lines
    assert 'gpuforge_slurm_node_unavailable{slurm_node="gpu-a02",state="drained",reason="XID 79 on GPU 3"} 1' in lines
    assert 'gpuforge_slurm_node_unavailable{slurm_node="gpu-a03",state="down",reason="Not responding"} 1' in lines
    assert (
        'gpuforge_slurm_node_unavailable{slurm_node="gpu-a06",state="draining",reason="row remap pending"} 1' in lines
    )
    assert not any("gpu-a04" in line or "gpu-a01" in line for line in lines), "healthy nodes are not unavailable"
    assert 'gpuforge_slurm_nodes{state="allocated"} 1' in lines, "a node listed in two partitions counts once"
    assert 'gpuforge_slurm_jobs{state="PENDING"} 2' in lines
    oldest = next(line for line in lines if line.startswith("gpuforge_slurm_oldest_pending_job_seconds"))
    assert oldest.startswith(
        'gpuforge_slurm_oldest_pending_job_seconds{job_id="4242",partition="train",account="llm"} '
    )
    assert "gpuforge_slurm_scheduler_last_cycle_seconds 0.001234" in lines
    assert 'gpuforge_slurm_job_info{job_id="4240",partition="train",account="llm",user="alice"} 1' in lines
    assert not any('job_id="4242"' in line for line in lines if line.startswith("gpuforge_slurm_job_info"))
    assert "gpuforge_slurm_dbd_agent_queue_size 2" in lines


def test_slurm_collector_says_when_the_controller_does_not_answer(tmp_path: Path) -> None:
    text = run_collector("slurm-textfile-collector", tmp_path / "out", env=fake_slurm(tmp_path / "bin", answers=False))
    promtool_check_metrics(text)
    assert "gpuforge_slurm_up 0" in text.splitlines()


def sysfs_device(root: Path, name: str, driver: str, counters: dict[str, str]) -> None:
    drivers = root / "bus" / "pci" / "drivers" / driver
    drivers.mkdir(parents=True, exist_ok=True)
    pci = root / "devices" / f"pci-{name}"
    pci.mkdir(parents=True)
    (pci / "driver").symlink_to(drivers)
    device = root / "class" / "infiniband" / name
    (device / "ports" / "1" / "hw_counters").mkdir(parents=True)
    (device / "device").symlink_to(pci)
    for counter, value in counters.items():
        (device / "ports" / "1" / "hw_counters" / counter).write_text(value + "\n")


def test_efa_collector_exports_hw_counters_of_efa_devices_only(tmp_path: Path) -> None:
    sysfs = tmp_path / "sys"
    sysfs_device(sysfs, "rdmap16s27", "efa", {"rx_drops": "5", "unresponsive_remote_events": "0", "tx_bytes": "123"})
    sysfs_device(sysfs, "mlx5_0", "mlx5_core", {"out_of_buffer": "9"})
    text = run_collector("efa-counters", tmp_path / "out", str(sysfs))
    promtool_check_metrics(text)
    lines = set(text.splitlines())
    assert 'gpuforge_efa_hw_total{device="rdmap16s27",port="1",counter="rx_drops"} 5' in lines
    assert 'gpuforge_efa_hw_total{device="rdmap16s27",port="1",counter="tx_bytes"} 123' in lines
    assert "mlx5_0" not in text, "InfiniBand HCAs are node_exporter's infiniband collector's"


@pytest.mark.parametrize("script", ["slurm-textfile-collector", "efa-counters", "lustre-client", "software-versions"])
def test_collectors_run_on_the_nodes_python(script: str) -> None:
    assert (FILES / script).read_text().startswith("#!/usr/bin/python3\n")
    assert os.access(FILES / script, os.X_OK)


def lustre_client_root(root: Path, mounts: list[str], llite: dict[str, str]) -> None:
    """A node's /proc/mounts (lustre and autofs lines) and llite instance directories (base -> instance)."""
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "mounts").write_text("".join(line + "\n" for line in mounts))
    for base, instance in llite.items():
        (root / base / instance).mkdir(parents=True)
        (root / base / instance / "stats").write_text("snapshot_time 1700000000.1 secs.nsecs\n")
    for line in mounts:
        (root / line.split()[1].lstrip("/")).mkdir(parents=True, exist_ok=True)


def fake_lctl(bin_dir: Path, health: str) -> dict[str, str]:
    bin_dir.mkdir()
    lctl = bin_dir / "lctl"
    lctl.write_text(f'#!/bin/sh\n[ "$*" = "get_param -n health_check" ] && echo "{health}" && exit 0\nexit 2\n')
    lctl.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_lustre_collector_reports_a_healthy_client(tmp_path: Path) -> None:
    root = tmp_path / "node"
    lustre_client_root(
        root,
        ["10.0.0.5@tcp:/abcdefgh /fsx lustre rw,flock,lazystatfs 0 0"],
        {"sys/kernel/debug/lustre/llite": "abcdefgh-ffff8d1c0bb6d000"},  # Lustre 2.12+: stats in debugfs
    )
    env = fake_lctl(tmp_path / "bin", "healthy")
    text = run_collector("lustre-client", tmp_path / "out", "/fsx", "--root", str(root), env=env)
    promtool_check_metrics(text)
    lines = set(text.splitlines())
    assert 'gpuforge_lustre_mount_present{mountpoint="/fsx"} 1' in lines
    assert 'gpuforge_lustre_client_check{check="statfs",mountpoint="/fsx"} 1' in lines
    assert 'gpuforge_lustre_client_check{check="llite",mountpoint="/fsx"} 1' in lines
    assert 'gpuforge_lustre_client_check{check="health_check"} 1' in lines


def test_lustre_collector_reports_a_missing_mount_a_lost_client_and_not_healthy(tmp_path: Path) -> None:
    root = tmp_path / "node"
    lustre_client_root(
        root,
        [
            "systemd-1 /fsx autofs rw,relatime,fd=46,pgrp=1,timeout=0,minproto=5,maxproto=5,direct 0 0",
            "10.64.2.10@o2ib:/home /lustre/home lustre rw,flock 0 0",
        ],
        {"proc/fs/lustre/llite": "scratch-ffff9b1c00000000"},  # an instance of another file system only
    )
    env = fake_lctl(tmp_path / "bin", "NOT HEALTHY")
    text = run_collector("lustre-client", tmp_path / "out", "/fsx", "/lustre/home", "--root", str(root), env=env)
    promtool_check_metrics(text)
    lines = set(text.splitlines())
    assert 'gpuforge_lustre_mount_present{mountpoint="/fsx"} 0' in lines
    assert 'gpuforge_lustre_mount_present{mountpoint="/lustre/home"} 1' in lines
    assert 'gpuforge_lustre_client_check{check="llite",mountpoint="/lustre/home"} 0' in lines
    assert 'gpuforge_lustre_client_check{check="health_check"} 0' in lines
    assert not any('mountpoint="/fsx"' in line for line in lines if line.startswith("gpuforge_lustre_client_check"))


def test_lustre_collector_without_lctl_reports_no_health_check(tmp_path: Path) -> None:
    root = tmp_path / "node"
    lustre_client_root(root, ["10.0.0.5@tcp:/abcdefgh /fsx lustre rw 0 0"], {"proc/fs/lustre/llite": "abcdefgh-1"})
    if shutil.which("lctl"):
        pytest.skip("this host has a Lustre client (lctl): the case needs a node without one")
    text = run_collector("lustre-client", tmp_path / "out", "/fsx", "--root", str(root))
    promtool_check_metrics(text)
    assert "health_check" not in text.split("# TYPE gpuforge_lustre_client_check gauge")[1]
    assert 'gpuforge_lustre_client_check{check="llite",mountpoint="/fsx"} 1' in text.splitlines()


def dpkg_status(packages: dict[str, str], removed: tuple[str, ...] = (), held: tuple[str, ...] = ()) -> str:
    """/var/lib/dpkg/status as dpkg writes it: one stanza per package, held ones "hold ok installed" (apt-mark
    hold), removed ones "deinstall ok config-files"."""
    stanzas = [
        f"Package: {name}\nStatus: {'hold' if name in held else 'install'} ok installed\nPriority: optional\n"
        f"Architecture: amd64\nVersion: {version}\n"
        f"Description: {name}\n multi-line description\n"
        for name, version in packages.items()
    ]
    stanzas += [f"Package: {name}\nStatus: deinstall ok config-files\nVersion: 0.1-1\n" for name in removed]
    return "\n".join(stanzas)


def software_root(root: Path, *, module: str | None, efa: bool) -> Path:
    """A GPU node's tree with the bench's stand-in package versions (tests/standins/packages.py: the production
    names and versions the roles install)."""
    from tests.standins.packages import (
        CUDA_CUDART_VERSION,
        CUDA_VERSION,
        DOCA_VERSION,
        DRIVER_BRANCH,
        DRIVER_VERSIONS,
        EFA_INSTALLER_VERSION,
        NCCL_PINNED,
    )

    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.1.0-28-cloud-amd64\n")
    (root / "var/lib/dpkg").mkdir(parents=True)
    packages = {
        f"cuda-drivers-{DRIVER_BRANCH}": DRIVER_VERSIONS[0],
        f"cuda-cudart-{CUDA_VERSION.replace('.', '-')}": CUDA_CUDART_VERSION,
        "libnccl2": NCCL_PINNED,
        "doca-ofed": DOCA_VERSION,
        "rdma-core": "44.0-2",
    }
    # The roles hold the driver and NCCL at their pins (apt-mark hold), as on a baked node.
    held = (f"cuda-drivers-{DRIVER_BRANCH}", "libnccl2")
    (root / "var/lib/dpkg/status").write_text(dpkg_status(packages, removed=("cuda-cudart-11-8",), held=held))
    if module is not None:
        (root / "sys/module/nvidia").mkdir(parents=True)
        (root / "sys/module/nvidia/version").write_text(module + "\n")
    if efa:
        (root / "opt/amazon").mkdir(parents=True)
        (root / "opt/amazon/efa_installed_packages").write_text(
            f"# EFA installer version: {EFA_INSTALLER_VERSION}\n"
            "libfabric1-aws 2.1.0amzn5.0\n"
        )
    return root


def test_software_collector_reports_what_the_node_runs(tmp_path: Path) -> None:
    from tests.standins.packages import EFA_INSTALLER_VERSION, NCCL_PINNED

    root = software_root(tmp_path / "root", module="580.82.07", efa=True)
    text = run_collector("software-versions", tmp_path / "out", "--root", str(root))
    promtool_check_metrics(text)
    lines = set(text.splitlines())
    expected = [
        ("kernel", "6.1.0-28-cloud-amd64", "proc"),
        ("nvidia_driver", "580.82.07", "module"),
        ("cuda", "12.8", "dpkg"),
        ("nccl", NCCL_PINNED, "dpkg"),
        ("doca_ofed", "2.10.0-1", "dpkg"),
        ("rdma_core", "44.0-2", "dpkg"),
        ("efa_installer", EFA_INSTALLER_VERSION, "installer"),
    ]
    for component, version, source in expected:
        series = f'gpuforge_node_software_info{{component="{component}",version="{version}",source="{source}"}} 1'
        assert series in lines
    assert f"gpuforge_node_software_components {len(expected)}" in lines
    assert "11.8" not in text, "a removed package (config files left) is not installed"


def test_software_collector_before_the_driver_loads_and_on_a_bare_node(tmp_path: Path) -> None:
    """An image or a chroot has the driver package but no loaded module: the package's version, said so.
    A node with nothing of it (a controller) reports its kernel alone, and no component it lacks."""
    from tests.standins.packages import DRIVER_VERSIONS

    baked = software_root(tmp_path / "baked", module=None, efa=False)
    text = run_collector("software-versions", tmp_path / "out1", "--root", str(baked))
    promtool_check_metrics(text)
    assert (
        f'gpuforge_node_software_info{{component="nvidia_driver",version="{DRIVER_VERSIONS[0]}",source="dpkg"}} 1'
        in text.splitlines()
    )
    assert 'component="efa_installer"' not in text

    bare = tmp_path / "bare"
    (bare / "proc/sys/kernel").mkdir(parents=True)
    (bare / "proc/sys/kernel/osrelease").write_text("6.1.0-28-amd64\n")
    text = run_collector("software-versions", tmp_path / "out2", "--root", str(bare))
    promtool_check_metrics(text)
    info = [line for line in text.splitlines() if line.startswith("gpuforge_node_software_info")]
    assert info == ['gpuforge_node_software_info{component="kernel",version="6.1.0-28-amd64",source="proc"} 1']
    assert "gpuforge_node_software_components 1" in text.splitlines()
