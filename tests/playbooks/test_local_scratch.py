"""gpuforge-scratch (gpuforge/assets/playbooks/roles/local_scratch/files), the script gpuforge-scratch.service runs at
every
boot, run for real on loop devices: it finds the instance store by the NVMe model in sysfs (a stand-in
sysfs tree whose nvme names resolve to loop devices; an "EBS" device beside it must stay untouched), makes
XFS and mounts it with the role's options, binds Slurm's job_container BasePath onto it, re-creates the
tmpfiles.d entries under it, keeps the file system across a reboot, makes a new one after a stop/start,
refuses to overwrite a device that holds something else, and does nothing where the type has no
NVMe (fails where the catalog says it has some). Several devices become an mdadm RAID0 where the kernel
has md (this sandbox's kernel has none: that test skips, saying so).

Every loop device and mount a test makes is removed by the fixture, also when the test fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.render.slurm import JOB_TMPFS_BASE
from tests.support import skip_or_fail

SCRIPT = Path(__file__).resolve().parents[2] / "gpuforge/assets/playbooks/roles/local_scratch/files/gpuforge-scratch"
MODEL = load_aws_wiring().instance_store.nvme_model
EBS_MODEL = "Amazon Elastic Block Store"
# The role's default mount options (defaults/main.yml).
OPTIONS = "noatime,nodev,nosuid"
SIZE = 320 * 1024 * 1024  # mkfs.xfs's smallest file system is 300 MiB; the files are sparse


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root: loop devices and mounts (CI runs as root)"
    for tool, package in (("losetup", "mount"), ("mkfs.xfs", "xfsprogs"), ("mdadm", "mdadm"), ("blkid", "util-linux")):
        if shutil.which(tool) is None:
            return f"{tool} not installed (apt-get install {package}; .ci/run installs it)"
    if not Path("/dev/loop-control").exists():
        return "no /dev/loop-control: this machine cannot make loop devices"
    return None


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120).stdout


@dataclass
class Node:
    """A stand-in node: its sysfs NVMe controllers, /dev names for them, and the paths the script uses."""

    root: Path
    loops: list[str] = field(default_factory=list)
    tmpfiles: Path | None = None

    @property
    def mount(self) -> Path:
        return self.root / "scratch"

    @property
    def base_path(self) -> Path:
        return self.root / JOB_TMPFS_BASE.lstrip("/")

    def disk(self, name: str, model: str) -> str:
        """An NVMe namespace `name` with controller `model`, backed by a new loop device."""
        image = self.root / f"{name}.img"
        with image.open("wb") as f:
            f.truncate(SIZE)
        loop = _run("losetup", "--find", "--show", str(image)).strip()
        self.loops.append(loop)
        controller = self.root / "sys/block" / name / "device"
        controller.mkdir(parents=True)
        (controller / "model").write_text(f"{model:<40}\n")  # sysfs pads the model with spaces
        (self.root / "dev").mkdir(exist_ok=True)
        (self.root / "dev" / name).symlink_to(loop)
        return loop

    def scratch(self, *, required: bool = False, devices: str = "") -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": "/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
            "SCRATCH_MOUNT": str(self.mount),
            "SCRATCH_MODEL": MODEL,
            "SCRATCH_DEVICES": devices,
            "SCRATCH_REQUIRED": "yes" if required else "no",
            "SCRATCH_BINDS": str(self.base_path),
            "SCRATCH_MOUNT_OPTIONS": OPTIONS,
            "SCRATCH_SYSFS": str(self.root / "sys"),
            "SCRATCH_DEV": str(self.root / "dev"),
        }
        return subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300)

    def mounts(self) -> list[str]:
        """Mount points under this node's root, deepest last (as findmnt lists them)."""
        out = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True).stdout
        return [line for line in out.splitlines() if line.startswith(f"{self.root}/")]

    def unmount(self) -> None:
        for target in reversed(self.mounts()):
            subprocess.run(["umount", target], check=True, capture_output=True)

    def cleanup(self) -> None:
        for target in reversed(self.mounts()):
            subprocess.run(["umount", "-l", target], capture_output=True)
        holders = [Path(f"/sys/class/block/{Path(loop).name}/holders") for loop in self.loops]
        arrays = {md.name for directory in holders for md in directory.glob("md*")}
        for md in arrays:
            subprocess.run(["mdadm", "--stop", f"/dev/{md}"], capture_output=True)
        for loop in self.loops:
            subprocess.run(["losetup", "-d", loop], capture_output=True)
        if self.tmpfiles is not None:
            self.tmpfiles.unlink(missing_ok=True)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    reason = _skip_reason()
    if reason:
        skip_or_fail(reason)
    stand_in = Node(root=tmp_path / "node")
    stand_in.root.mkdir()
    try:
        yield stand_in
    finally:
        stand_in.cleanup()


def _fs(device: str) -> dict[str, str]:
    out = subprocess.run(["blkid", "-p", "-o", "export", device], capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def _findmnt(target: Path, column: str) -> str:
    return _run("findmnt", "-n", "-o", column, "--mountpoint", str(target)).strip()


def test_instance_store_found_by_model_made_xfs_and_mounted(node: Node) -> None:
    ebs = node.disk("nvme0n1", EBS_MODEL)
    _run("mkfs.ext4", "-q", "-L", "root", ebs)
    store = node.disk("nvme1n1", MODEL)
    result = node.scratch(required=True)
    assert result.returncode == 0, result.stderr
    assert _fs(store)["TYPE"] == "xfs" and _fs(store)["LABEL"] == "scratch"
    assert _findmnt(node.mount, "SOURCE") == store
    assert set(OPTIONS.split(",")) <= set(_findmnt(node.mount, "OPTIONS").split(","))
    # The EBS volume is neither formatted nor mounted.
    assert _fs(ebs)["TYPE"] == "ext4" and _fs(ebs)["LABEL"] == "root"
    assert not [m for m in node.mounts() if _findmnt(Path(m), "SOURCE").startswith(ebs)]
    # job_container's BasePath lives on the scratch file system: a file written there is on the NVMe.
    assert _findmnt(node.base_path, "SOURCE") == f"{store}[/{node.base_path.name}]"
    (node.base_path / "job-1").mkdir()
    assert (node.mount / node.base_path.name / "job-1").is_dir()


def test_second_run_changes_nothing(node: Node) -> None:
    store = node.disk("nvme1n1", MODEL)
    assert node.scratch().returncode == 0
    before, mounts = _fs(store)["UUID"], node.mounts()
    again = node.scratch()
    assert again.returncode == 0, again.stderr
    assert _fs(store)["UUID"] == before and node.mounts() == mounts
    assert "is mounted" in again.stderr


def test_reboot_keeps_the_file_system_and_a_stop_start_gets_a_new_one(node: Node) -> None:
    store = node.disk("nvme1n1", MODEL)
    # enroot's per-user parents come from tmpfiles.d (the enroot role); the script re-creates them on the
    # scratch after mounting it.
    parent = node.mount / "enroot" / "data"
    node.tmpfiles = Path("/run/tmpfiles.d") / f"gpuforge-test-{uuid.uuid4().hex}.conf"
    node.tmpfiles.parent.mkdir(parents=True, exist_ok=True)
    node.tmpfiles.write_text(f"d {parent} 1777 root root -\n")
    assert node.scratch().returncode == 0
    assert parent.is_dir() and oct(parent.stat().st_mode & 0o7777) == "0o1777"
    (node.mount / "kept").write_text("job data\n")
    first = _fs(store)["UUID"]

    node.unmount()  # a reboot: instance store keeps its data
    result = node.scratch()
    assert result.returncode == 0, result.stderr
    assert "keeping it" in result.stderr
    assert _fs(store)["UUID"] == first and (node.mount / "kept").read_text() == "job data\n"

    node.unmount()  # a stop/start: the instance gets blank instance store
    _run("wipefs", "-a", store)
    result = node.scratch()
    assert result.returncode == 0, result.stderr
    assert _fs(store)["UUID"] != first and not (node.mount / "kept").exists()
    assert parent.is_dir() and oct(parent.stat().st_mode & 0o7777) == "0o1777"


def test_a_device_holding_something_else_is_refused(node: Node) -> None:
    store = node.disk("nvme1n1", MODEL)
    _run("mkfs.ext4", "-q", "-L", "keepme", store)
    result = node.scratch()
    assert result.returncode == 1
    assert "carries a ext4 signature: refusing to overwrite it" in result.stderr
    assert _fs(store)["LABEL"] == "keepme" and not node.mounts()


def test_no_local_nvme_mounts_nothing_unless_the_type_has_some(node: Node) -> None:
    node.disk("nvme0n1", EBS_MODEL)
    result = node.scratch()
    assert result.returncode == 0, result.stderr
    assert "no local NVMe: nothing to assemble" in result.stderr and not node.mounts()
    required = node.scratch(required=True)
    assert required.returncode == 1
    assert "no local NVMe found" in required.stderr and "this node's type has some" in required.stderr


def test_a_site_device_list_is_used_instead_of_the_model(node: Node) -> None:
    listed = node.disk("nvme2n1", "SAMSUNG MZWLR3T8HBLS-00007")
    result = node.scratch(devices=listed)
    assert result.returncode == 0, result.stderr
    assert _findmnt(node.mount, "SOURCE") == listed
    missing = node.scratch(devices="/dev/gpuforge-no-such-disk")
    assert missing.returncode == 0  # already mounted: nothing to find
    node.unmount()
    missing = node.scratch(devices="/dev/gpuforge-no-such-disk")
    assert missing.returncode == 1 and "is not a block device" in missing.stderr


def test_several_devices_become_one_raid0(node: Node) -> None:
    if not Path("/proc/mdstat").exists():
        pytest.skip("this kernel has no md driver (no /proc/mdstat): mdadm cannot assemble RAID0 here")
    devices = [node.disk(f"nvme{i}n1", MODEL) for i in (1, 2)]
    result = node.scratch(required=True)
    assert result.returncode == 0, result.stderr
    source = _findmnt(node.mount, "SOURCE")
    assert Path(source).name.startswith("md")
    detail = _run("mdadm", "--detail", source)
    assert "raid0" in detail and all(d in detail for d in devices)
    first = _fs(source)["UUID"]
    node.unmount()
    _run("mdadm", "--stop", source)
    again = node.scratch(required=True)  # a reboot: the members are assembled again, the file system kept
    assert again.returncode == 0, again.stderr
    assert _fs(_findmnt(node.mount, "SOURCE"))["UUID"] == first
