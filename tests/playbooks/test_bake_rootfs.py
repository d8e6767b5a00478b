"""bake-image.yml run for real into a Debian 12 root file system through the chroot connection, for an
EFA p5.48xlarge node group and a rail-optimized InfiniBand node group, every production package source
pointed at the stand-ins of tests/standins (nothing switched off): it converges, a second run changes
nothing, and the root file system holds what a booted node needs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuforge.render.nccl import NcclInputs, parse_nccl_conf, render_nccl_env
from tests.standins import packages as standin

from .conftest import Baked
from .profiles import IB_RAILS
from .rootfs import dpkg_status, enabled_units

pytestmark = pytest.mark.slow

# NVIDIA's CUDA repository (the stand-in): the branch metapackage and what it pulls in, at the branch's newest.
DRIVER = {f"cuda-drivers-{standin.DRIVER_BRANCH}", "nvidia-driver-cuda", "nvidia-persistenced"}


def _held(baked: Baked) -> set[str]:
    out = subprocess.run(
        ["chroot", str(baked.path), "dpkg", "--get-selections"], check=True, capture_output=True, text=True
    ).stdout
    return {line.split()[0].split(":")[0] for line in out.splitlines() if line.split()[-1] == "hold"}


def _nccl_inputs(baked: Baked, libfabric: str | None) -> NcclInputs:
    fields = NcclInputs.model_fields
    values = {
        key.removeprefix("nccl_tuning_"): value
        for key, value in baked.host_vars.items()
        if key.startswith("nccl_tuning_") and key.removeprefix("nccl_tuning_") in fields
    }
    values["ib_hcas"] = tuple(values.get("ib_hcas", ()))
    if libfabric is not None:
        values["libfabric_version"] = libfabric
    return NcclInputs(**values)


# --- EFA p5.48xlarge ---------------------------------------------------------------------------


def test_efa_bake_converges(efa_rootfs: Baked) -> None:
    result = efa_rootfs.first
    assert result.ok, [f"{f.task}: {f.message}" for f in result.failures]
    assert result.changed > 0
    assert result.failed_hosts == []


def test_efa_second_bake_changes_nothing(efa_rootfs: Baked) -> None:
    assert efa_rootfs.second.ok
    assert efa_rootfs.second.hosts["rootfs"].changed == 0, efa_rootfs.second.stdout[-4000:]


def test_efa_nccl_conf_is_what_gpuforge_renders(efa_rootfs: Baked) -> None:
    conf = (efa_rootfs.path / "etc/nccl.conf").read_text()
    profile = (efa_rootfs.path / "etc/profile.d/nccl.sh").read_text()
    # The role read libfabric's version from the installed package; Python gets it from dpkg.
    libfabric = dpkg_status(efa_rootfs.path)["libfabric1-aws"]
    inputs = _nccl_inputs(efa_rootfs, libfabric)
    assert conf == render_nccl_env(inputs, "conf")
    assert profile == render_nccl_env(inputs, "profile")
    assert f"libfabric {libfabric.split('-')[0]}" in conf
    env = parse_nccl_conf(conf)
    # plugin 1.13 on p5: no FI_EFA_USE_DEVICE_RDMA, no FI_PROVIDER, no NCCL_PROTO.
    assert env == {"NCCL_SOCKET_IFNAME": "en"}


def test_efa_packages_installed_and_held(efa_rootfs: Baked) -> None:
    installed = dpkg_status(efa_rootfs.path)
    wanted = DRIVER | {
        f"nvidia-fabricmanager-{standin.DRIVER_BRANCH}",
        "libfabric1-aws",  # the EFA installer's
        "libnccl-ofi",
        "libnccl2",
        "datacenter-gpu-manager-4-core",
        "lustre-client-modules-aws",
        f"cuda-nvcc-{standin.CUDA_VERSION.replace('.', '-')}",
        "prometheus-node-exporter",
        "numactl",
        "pciutils",
    }
    assert wanted <= set(installed), wanted - set(installed)
    assert installed[f"cuda-drivers-{standin.DRIVER_BRANCH}"] == standin.DRIVER_VERSIONS[-1]
    assert installed["libnccl2"] == standin.NCCL_PINNED
    held = _held(efa_rootfs)
    assert {f"cuda-drivers-{standin.DRIVER_BRANCH}", f"nvidia-fabricmanager-{standin.DRIVER_BRANCH}"} <= held
    assert "libnccl2" in held
    assert "infiniband-diags" not in installed  # the rdma role is for IB/RoCE groups only
    # nccl-tests, built in the image from the pinned commit.
    assert (efa_rootfs.path / "opt/nccl-tests/build/all_reduce_perf").is_file()


def test_efa_units_enabled_not_started(efa_rootfs: Baked) -> None:
    units = enabled_units(efa_rootfs.path)
    assert {
        "prometheus-node-exporter.service",
        "nvidia-persistenced.service",
        "nvidia-fabricmanager.service",
        "nvidia-dcgm.service",
        "gpuforge-cpu-governor.service",
    } <= units
    assert (efa_rootfs.path / "etc/systemd/system/gpuforge-cpu-governor.service").is_file()
    # The textfile collectors of an EFA node with an FSx mount: EFA hw_counters and the Lustre client's health.
    assert {"gpuforge-efa-metrics.timer", "gpuforge-lustre-metrics.timer"} <= units
    lustre = (efa_rootfs.path / "etc/systemd/system/gpuforge-lustre-metrics.service").read_text()
    assert "ExecStart=/usr/local/libexec/gpuforge/lustre-client /var/lib/prometheus/node-exporter /fsx\n" in lustre
    assert os.access(efa_rootfs.path / "usr/local/libexec/gpuforge/lustre-client", os.X_OK)
    # LNet for the EFA-enabled FSx: the unit is enabled for the first boot, with FSx's number of EFA devices
    # for p5, its peer credits, discovery and the efa preference (the inventory's values); it never ran here.
    assert "gpuforge-lnet.service" in units
    lnet = (efa_rootfs.path / "etc/systemd/system/gpuforge-lnet.service").read_text()
    assert "Before=remote-fs-pre.target\n" in lnet and "After=network-online.target\n" in lnet
    assert "--efa-interfaces 8 --peer-credits 32 --udsp-priority 0 --discovery 1 --sysfs /sys\n" in lnet
    assert os.access(efa_rootfs.path / "usr/local/sbin/gpuforge-lnet", os.X_OK)
    assert not (efa_rootfs.path / "run/lustre-standin").exists()
    # Nothing ran inside the image: no PID files, no sockets of started services.
    assert not (efa_rootfs.path / "run/nvidia-persistenced").exists()


def test_efa_image_reports_the_software_it_was_baked_with(efa_rootfs: Baked, tmp_path: Path) -> None:
    """The software collector the bake installed, run over the baked tree as its timer runs it on the booted
    node: the driver package (no module loads in an image), CUDA, NCCL and the EFA installer the roles pinned."""
    units = enabled_units(efa_rootfs.path)
    assert "gpuforge-software-metrics.timer" in units
    script = efa_rootfs.path / "usr/local/libexec/gpuforge/software-versions"
    subprocess.run([str(script), str(tmp_path), "--root", str(efa_rootfs.path)], check=True, timeout=60)
    lines = set((tmp_path / "software.prom").read_text().splitlines())
    for component, version, source in (
        ("nvidia_driver", standin.DRIVER_VERSIONS[-1], "dpkg"),
        ("cuda", standin.CUDA_VERSION, "dpkg"),
        ("nccl", standin.NCCL_PINNED, "dpkg"),
        ("efa_installer", standin.EFA_INSTALLER_VERSION, "installer"),
    ):
        series = f'gpuforge_node_software_info{{component="{component}",version="{version}",source="{source}"}} 1'
        assert series in lines, sorted(lines)


def test_efa_limits_sysctls_modules_and_mount(efa_rootfs: Baked) -> None:
    root = efa_rootfs.path
    limits = (root / "etc/security/limits.d/90-gpuforge-memlock.conf").read_text()
    assert "*    hard    memlock    unlimited" in limits
    assert "DefaultLimitMEMLOCK=infinity" in (root / "etc/systemd/system.conf.d/90-gpuforge-memlock.conf").read_text()
    sysctl = (root / "etc/sysctl.d/90-gpuforge.conf").read_text()
    assert "kernel.numa_balancing = 0" in sysctl
    assert "net.ipv4.conf.all.arp_ignore = 1" in sysctl
    assert (root / "etc/modules-load.d/gpuforge-efa.conf").read_text().splitlines()[-1] == "efa"
    # Shared-memory transfers between ranks (CMA) need Yama's ptrace scope 0 on EFA nodes, at boot.
    assert "kernel.yama.ptrace_scope=0" in (root / "etc/sysctl.d/91-gpuforge-efa.conf").read_text().replace(" ", "")
    assert not (root / "etc/modules-load.d/gpuforge-rdma.conf").exists()
    fstab = (root / "etc/fstab").read_text()
    # An EFA-enabled file system: the entry requires the unit that configures LNet at boot (FSx's fstab line).
    assert (
        "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh /fsx lustre "
        "relatime,flock,_netdev,x-systemd.automount,x-systemd.requires=network-online.target,"
        "x-systemd.requires=gpuforge-lnet.service,x-systemd.after=gpuforge-lnet.service 0 0"
    ) in fstab
    held = (root / "etc/apt/apt.conf.d/51gpuforge-hold").read_text()
    assert '"^linux-image-";' in held and '"^nvidia-";' in held
    exporter = (root / "etc/default/prometheus-node-exporter").read_text()
    assert "--web.listen-address=:9100" in exporter


# --- InfiniBand, 8 rails, rail-optimized ---------------------------------------------------------


def test_ib_check_mode_on_a_fresh_root_passes_and_reports_changes(ib_rootfs: Baked) -> None:
    assert ib_rootfs.check is not None
    assert ib_rootfs.check.ok, [f"{f.task}: {f.message}" for f in ib_rootfs.check.failures]
    assert ib_rootfs.check.changed > 0  # it reports what it would do


def test_ib_bake_converges_and_is_idempotent(ib_rootfs: Baked) -> None:
    assert ib_rootfs.first.ok, [f"{f.task}: {f.message}" for f in ib_rootfs.first.failures]
    assert ib_rootfs.second.ok
    assert ib_rootfs.second.hosts["rootfs"].changed == 0, ib_rootfs.second.stdout[-4000:]


def test_ib_nccl_conf_pins_rails(ib_rootfs: Baked) -> None:
    conf = (ib_rootfs.path / "etc/nccl.conf").read_text()
    assert conf == render_nccl_env(_nccl_inputs(ib_rootfs, None), "conf")
    env = parse_nccl_conf(conf)
    assert env["NCCL_IB_HCA"] == "=" + ",".join(IB_RAILS)
    assert env["NCCL_CROSS_NIC"] == "0"
    assert not any(key.startswith("FI_") for key in env)


def test_ib_rdma_stack_installed_from_doca(ib_rootfs: Baked) -> None:
    installed = dpkg_status(ib_rootfs.path)
    assert {"rdma-core", "infiniband-diags", "ibverbs-utils", "perftest", "libnccl2"} | DRIVER <= set(installed)
    # DOCA-OFED from NVIDIA's DOCA repository (the stand-in), trusted through the key the role installed.
    assert installed["doca-ofed"] == standin.DOCA_VERSION
    assert installed["mlnx-ofed-kernel-utils"] == standin.DOCA_OFED_VERSION
    sources = (ib_rootfs.path / "etc/apt/sources.list.d/nvidia-doca.sources").read_text()
    assert f"/doca/{standin.DOCA_VERSION.split('-')[0]}/debian12.5/x86_64/" in sources
    assert "Signed-By: /etc/apt/keyrings/nvidia-doca.asc" in sources and "trusted" not in sources.lower()
    assert "libfabric-bin" not in installed  # the efa role is for EFA groups only
    modules = (ib_rootfs.path / "etc/modules-load.d/gpuforge-rdma.conf").read_text().split()
    assert {"ib_umad", "ib_uverbs", "rdma_ucm", "ib_ipoib"} <= set(modules)
    assert "lustre" not in (ib_rootfs.path / "etc/fstab").read_text()


# --- health checks on the baked image (no GPU in a chroot, one EFA device short: the node must fail) ----


def test_healthcheck_names_the_node_without_gpus_and_an_efa_device_short(efa_rootfs: Baked) -> None:
    """The checks a node without GPUs and NVLinks, and with 31 of a p5's 32 EFA devices, fails, DCGM
    diagnostics included: the stand-in dcgmi prints a real `dcgmi diag` output, here with its PCIe row
    failed, and the stand-in fi_info that the EFA installer put in /opt/amazon/efa/bin (not on Ansible's
    PATH) lists the EFA devices of the stand-in sysfs (tests/standins/packages.py)."""
    from gpuforge.nodes.bake import rootfs_inventory
    from gpuforge.nodes.check import run_checks

    efa_devices = [f"rdmap{bus}s0" for bus in range(10, 41)]
    sysfs = efa_rootfs.path / standin.STANDIN_SYSFS.lstrip("/")
    subprocess.run(["sh", "-c", standin.rdma_sysfs_script(efa_devices, str(sysfs))], check=True)

    recorded = standin.DCGMI_DIAG_RECORDED.read_text()
    failed = recorded.replace(
        "| PCIe                      | Pass - All                                     |",
        "| PCIe                      | Fail - GPU: 3                                  |\n"
        "| Error                     | GPU 3 NvLink link 4 is down                    |",
    )
    assert failed != recorded
    override = efa_rootfs.path / standin.DCGMI_STANDIN_OUTPUT.lstrip("/")
    override.parent.mkdir(parents=True, exist_ok=True)
    override.write_text(failed)
    inventory = rootfs_inventory(efa_rootfs.path, efa_rootfs.host_vars)
    try:
        report = run_checks(inventory, checks=("gpu", "dcgm", "nvlink", "xid", "fabric"), drain="slurm")
    finally:
        override.unlink()
        shutil.rmtree(sysfs)
    assert report.failing == ["rootfs"]
    assert not report.ok
    problems = report.nodes[0].problems
    assert "found 0 GPUs, expected 8" in problems
    assert "EFA devices 31, expected 32" in problems
    # `dcgmi diag -r 2 -p pcie.gpu_nvlinks_expected_up=18` and `nvidia-smi nvlink --status` ran, and were judged.
    assert "dcgmi diag PCIe: Fail - GPU: 3 (Error: GPU 3 NvLink link 4 is down)" in problems
    assert "NVLinks up 0, expected 144" in problems
    # Ansible failed the node with the same findings, in its own words.
    assert report.playbook.failed_hosts == ["rootfs"]
    ansible_message = " ".join(f.message for f in report.playbook.failures)
    assert "nvidia-smi failed" in ansible_message and "EFA devices 31, expected 32" in ansible_message
    assert report.drain_commands[0][:4] == ["scontrol", "update", "nodename=rootfs", "state=drain"]
    metrics = (efa_rootfs.path / "var/lib/prometheus/node-exporter/gpuforge_healthcheck.prom").read_text()
    assert "gpuforge_healthcheck_ok 0" in metrics


def test_efa_image_carries_enroot_and_the_scratch_unit_not_pyxis(efa_rootfs: Baked) -> None:
    """prod's p5 group: enroot at the catalog's release with the group's enroot.conf (paths on /scratch), the
    toolkit for its GPU hook, and gpuforge-scratch enabled for every boot and required by slurmd; pyxis,
    built per Slurm release, comes with the Slurm play."""
    from gpuforge.render.slurm import ENROOT_CONF
    from gpuforge.render.templates import render

    root = efa_rootfs.path
    config = efa_rootfs.host_vars["slurm_config"]
    installed = dpkg_status(root)
    assert installed["enroot"] == installed["enroot+caps"] == config["containers"]["enroot"]["version"]
    toolkit = config["containers"]["nvidia_container_toolkit"]
    assert all(installed[p] == toolkit["version"] for p in toolkit["packages"])
    assert "nvslurm-plugin-pyxis" not in installed
    # The same bytes `gpuforge render slurm prod` prints for the group (enroot.conf.train).
    rendered = render(ENROOT_CONF, enroot_settings=config["containers"]["enroot"]["settings"]["train"])
    assert (root / "etc/enroot/enroot.conf").read_text() == rendered
    tmpfiles = (root / "etc/tmpfiles.d/gpuforge-enroot.conf").read_text()
    assert "d /scratch/enroot/data 1777 root root -\n" in tmpfiles
    # The scratch: enabled at boot, ordered before and required by slurmd, with the inventory's selection
    # and job_container's BasePath bound onto it; it never ran here.
    assert "gpuforge-scratch.service" in enabled_units(root)
    assert (root / "etc/systemd/system/slurmd.service.requires/gpuforge-scratch.service").is_symlink()
    unit = (root / "etc/systemd/system/gpuforge-scratch.service").read_text()
    assert "Before=slurmd.service systemd-user-sessions.service\n" in unit
    settings = (root / "etc/default/gpuforge-scratch").read_text()
    assert "SCRATCH_MODEL='Amazon EC2 NVMe Instance Storage'\n" in settings
    assert "SCRATCH_REQUIRED=yes\n" in settings
    assert f"SCRATCH_BINDS={config['job_container']['base_path']}\n" in settings
    assert os.access(root / "usr/local/sbin/gpuforge-scratch", os.X_OK)
    assert {"mdadm", "xfsprogs"} <= set(installed)


# Last in the module: it changes the baked root file system (and the run puts every change back).
def test_efa_rebake_writes_back_a_changed_file(efa_rootfs: Baked) -> None:
    """A re-bake skips a role's template or copy when the role's one find shows the file as it would write it
    (docs/benchmarks.md): a file changed since (content, mode, owner, or gone) is still written back, by its
    task, and nothing else changes."""
    from typing import Any

    from gpuforge.nodes.bake import rootfs_inventory, run_playbook

    root = efa_rootfs.path
    tampered = {
        "etc/sysctl.d/90-gpuforge.conf": "os_tuning : Write kernel parameters",
        "etc/apt/apt.conf.d/51gpuforge-hold": (
            "os_tuning : Keep kernel, driver and fabric packages out of unattended upgrades"
        ),
        "usr/local/libexec/gpuforge/efa-counters": "node_textfile_collectors : Install the collectors",
        "etc/systemd/system/gpuforge-efa-metrics.timer": "node_textfile_collectors : Install the collectors' timers",
        "etc/default/gpuforge-scratch": "local_scratch : Configure the scratch devices and mount",
        "usr/local/sbin/gpuforge-scratch": "local_scratch : Install the script that assembles and mounts the scratch",
        "etc/dcgm-exporter/default-counters.csv": "dcgm_exporter : Write the exported counters",
        "etc/nccl.conf": "nccl_tuning : Write the NCCL configuration file",
    }
    before = {rel: ((root / rel).read_bytes(), (root / rel).stat()) for rel in tampered}
    with (root / "etc/sysctl.d/90-gpuforge.conf").open("a") as f:
        f.write("vm.swappiness = 60\n")
    (root / "etc/apt/apt.conf.d/51gpuforge-hold").chmod(0o600)
    os.chown(root / "usr/local/libexec/gpuforge/efa-counters", 65534, 65534)
    (root / "etc/systemd/system/gpuforge-efa-metrics.timer").unlink()
    (root / "etc/default/gpuforge-scratch").write_text("SCRATCH_REQUIRED=no\n")
    (root / "usr/local/sbin/gpuforge-scratch").chmod(0o644)
    (root / "etc/dcgm-exporter/default-counters.csv").write_text("")
    (root / "etc/nccl.conf").write_text((root / "etc/nccl.conf").read_text().replace("\n", "\n\n", 1))

    changed: set[str] = set()

    def note(event: dict[str, Any]) -> None:
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_item_on_ok") and (data.get("res") or {}).get("changed"):
            changed.add(f"{data.get('role', '')} : {data.get('task', '')}".strip(" :"))

    result = run_playbook("bake-image.yml", rootfs_inventory(root, efa_rootfs.host_vars), on_event=note)
    assert result.ok, [f"{f.task}: {f.message}" for f in result.failures]
    for rel, (content, stat) in before.items():
        now = (root / rel).stat()
        assert (root / rel).read_bytes() == content, rel
        assert (now.st_mode, now.st_uid, now.st_gid) == (stat.st_mode, stat.st_uid, stat.st_gid), rel
    # The tampered files' tasks and nothing else (the handler the new timer notifies reloads systemd, which a
    # chroot skips: reported changed or not).
    assert changed - {"node_textfile_collectors : Reload systemd for the collectors"} == set(tampered.values())
