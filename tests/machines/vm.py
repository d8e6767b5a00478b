"""A virtual machine with its own kernel, for what a container on this host cannot show: this host's cgroup
hierarchy is v1 (hybrid), production's is v2, and cgroups are the kernel's, so only a kernel of its own boots
a machine on cgroup v2.

qemu-system-x86_64 under software emulation (TCG: /dev/kvm exists here but does not run guests) boots
Debian's kernel and initramfs straight from an image's layers (-kernel/-initrd), the image's root file
system on a virtio disk, a serial console to a log file, and user-mode networking with SSH forwarded from
a port of 127.0.0.1. The machine is reached like a booted container (tests/machines.Machine: SSH as the admin
user, sudo), so the same playbooks and helpers run on it.

The disk is cached beside the image layers (``.cache/machines/vm/<image>-<key>/``: the ext4 root file system
made from the image's merged layers, the kernel and the initramfs); each boot writes to a qcow2 overlay of
its own, so the cached disk is never changed. What makes the machine itself (its name, SSH host key and the
admin user's authorized key) comes in through QEMU's firmware configuration device, read at boot by the
gpuforge-seed unit that VM_SETUP installs, before sshd starts.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .boot import Machine, MachineError, _keygen, _tail
from .images import ADMIN_USER, LAYERS_DIR, Image, _building, build

VM_DIR = LAYERS_DIR.parent / "vm"
QEMU = "qemu-system-x86_64"
# The guest's address on QEMU's user-mode network (its built-in DHCP server's first lease, always this).
GUEST_ADDRESS = "10.0.2.15"
FW_CFG = "/sys/firmware/qemu_fw_cfg/by_name/opt/gpuforge"
# Booting under TCG on a loaded two-core host: the kernel, the initramfs and systemd take minutes.
SSH_TIMEOUT_S = 900

# What an image needs on top of the SSH image to boot as a VM: Debian's kernel (its initramfs is built when
# it installs), the root on the virtio disk, DHCP on the user-mode network, and the seed unit.
VM_PACKAGES = ("linux-image-amd64", "initramfs-tools")
VM_SETUP = (
    "echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' > /etc/fstab",
    "printf '[Match]\\nName=en*\\n\\n[Network]\\nDHCP=ipv4\\n' > /etc/systemd/network/20-wired.network",
    "systemctl enable systemd-networkd",
    f"""cat > /usr/local/sbin/gpuforge-seed <<'EOF'
#!/bin/sh
# The machine's identity from QEMU's firmware configuration (tests/machines/vm.py).
set -eu
modprobe qemu_fw_cfg 2>/dev/null || true
seed={FW_CFG}
name=$(cat "$seed/hostname/raw")
echo "$name" > /etc/hostname
hostname "$name"
printf '127.0.0.1\\tlocalhost\\n{GUEST_ADDRESS}\\t%s\\n' "$name" > /etc/hosts
install -m 0600 "$seed/ssh_host_ed25519_key/raw" /etc/ssh/ssh_host_ed25519_key
ssh-keygen -y -f /etc/ssh/ssh_host_ed25519_key > /etc/ssh/ssh_host_ed25519_key.pub
install -d -o {ADMIN_USER} -g {ADMIN_USER} -m 0700 /home/{ADMIN_USER}/.ssh
install -o {ADMIN_USER} -g {ADMIN_USER} -m 0600 "$seed/authorized_keys/raw" /home/{ADMIN_USER}/.ssh/authorized_keys
EOF""",
    "chmod 0755 /usr/local/sbin/gpuforge-seed",
    """cat > /etc/systemd/system/gpuforge-seed.service <<'EOF'
[Unit]
Description=The test machine's name and SSH keys from QEMU's firmware configuration
After=local-fs.target
Before=ssh.service network-pre.target
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/gpuforge-seed

[Install]
WantedBy=multi-user.target
EOF""",
    "systemctl enable gpuforge-seed.service",
)


@dataclass(frozen=True)
class VmDisk:
    """A VM's cached boot files: the root file system (raw ext4), the kernel and its initramfs."""

    root: Path
    kernel: Path
    initrd: Path


def vm_disk(image: Image, size_mib: int = 6144) -> VmDisk:
    """The cached disk of *image* (built with its layers when missing): its merged layers as an ext4 file
    system (mke2fs -d), and the kernel and initramfs its packages installed in /boot."""
    build(image)
    VM_DIR.mkdir(parents=True, exist_ok=True)
    path = VM_DIR / f"{image.name}-{image.key}"
    with _building(path) as staging:
        if staging is not None:
            _make_disk(image, staging, size_mib)
    return VmDisk(path / "root.ext4", path / "vmlinuz", path / "initrd.img")


def _make_disk(image: Image, staging: Path, size_mib: int) -> None:
    merged = staging.with_name(staging.name + ".merged")
    merged.mkdir(exist_ok=True)
    # An overlay of lower layers only is read-only: the layers stay as they are.
    lower = ":".join(str(layer) for layer in image.layers())
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={lower}", str(merged)],
                   check=True, capture_output=True, text=True)  # fmt: skip
    try:
        kernels = sorted((merged / "boot").glob("vmlinuz-*"))
        if not kernels:
            raise MachineError(f"image {image.name} has no kernel in /boot: derive it with VM_PACKAGES")
        version = kernels[-1].name.removeprefix("vmlinuz-")
        (staging / "vmlinuz").write_bytes(kernels[-1].read_bytes())
        (staging / "initrd.img").write_bytes((merged / "boot" / f"initrd.img-{version}").read_bytes())
        subprocess.run(
            ["mkfs.ext4", "-q", "-F", "-L", "root", "-d", str(merged), str(staging / "root.ext4"), f"{size_mib}M"],
            check=True, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
    finally:
        subprocess.run(["umount", str(merged)], check=False, capture_output=True)
        merged.rmdir()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def booted_vm(
    disk: VmDisk, name: str, workdir: Path, key: Path, known_hosts: Path, memory_mib: int = 3072, cpus: int = 2
) -> Iterator[Machine]:
    """Boot *disk* as machine *name* (its files under *workdir*): the admin user logs in with *key*, whose
    public half is *key*.pub; its host key is added to *known_hosts*. Powered off when the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    overlay = workdir / f"{name}.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(disk.root), str(overlay)],
                   check=True, capture_output=True, text=True)  # fmt: skip
    host_key = workdir / f"{name}-ssh_host_ed25519_key"
    _keygen(host_key, f"root@{name}")
    port = _free_port()
    key_type, public_key = host_key.with_suffix(".pub").read_text().split()[:2]
    with known_hosts.open("a") as known:
        known.write(f"[127.0.0.1]:{port} {key_type} {public_key}\n")
    console = workdir / f"{name}-console.log"
    command = [
        QEMU, "-machine", "q35,accel=tcg", "-cpu", "max", "-smp", str(cpus), "-m", str(memory_mib),
        "-display", "none", "-monitor", "none", "-serial", f"file:{console}",
        "-kernel", str(disk.kernel), "-initrd", str(disk.initrd),
        "-append", "root=/dev/vda rw console=ttyS0 panic=-1",
        "-drive", f"file={overlay},if=virtio,format=qcow2,cache=unsafe",
        "-netdev", f"user,id=net0,hostfwd=tcp:127.0.0.1:{port}-:22", "-device", "virtio-net-pci,netdev=net0",
        "-fw_cfg", f"name=opt/gpuforge/hostname,string={name}",
        "-fw_cfg", f"name=opt/gpuforge/ssh_host_ed25519_key,file={host_key}",
        "-fw_cfg", f"name=opt/gpuforge/authorized_keys,file={key.with_suffix('.pub')}",
        "-no-reboot",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    machine = Machine(name=name, address="127.0.0.1", root=workdir, key_path=key, known_hosts=known_hosts,
                      log_path=console, ssh_port=port)  # fmt: skip
    machine.process = process
    try:
        _wait_for_ssh(machine, process)
        yield machine
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        overlay.unlink(missing_ok=True)


def _wait_for_ssh(machine: Machine, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + SSH_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            error = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise MachineError(f"{QEMU} exited {process.returncode}: {error}\n{_tail(machine.log_path)}")
        if machine.run("true", check=False, timeout=30).returncode == 0:
            return
        time.sleep(5)
    raise MachineError(f"{machine.name}: no SSH after {SSH_TIMEOUT_S}s\n{_tail(machine.log_path)}")
