"""Booted machines: systemd-nspawn --boot containers with a real systemd and sshd, reached over loopback.

Every machine shares the host's network namespace and gets an address of its own, 127.0.1.N (all of
127.0.0.0/8 is local on Linux, no interface to configure), so daemons keep their standard ports and
configurations: sshd on 127.0.1.N:22, slurmd on 6818, node_exporter on 9100, each bound to its machine's
address. /etc/hosts on every machine lists all machines of its group.

A group may instead get a network of its own (``own_network``): each machine its own network namespace,
joined by a veth pair to a bridge of the group's, on a /24 of 198.18.0.0/15 (RFC 2544's benchmarking range,
never routed), the bridge holding .1 so the host reaches every machine (SSH, Ansible) and the machines
reach each other, and nothing else: the host forwards nothing, so such machines have no internet. Their
daemons then bind what they like, every address included, without meeting another group's (two Slurm
controllers, each binding SlurmctldPort on every address: tests/slurm/test_slurm_failover.py). The harness
makes the namespaces and links before the machines boot (systemd-nspawn --network-namespace-path) and
deletes them after.

Addresses are leased across test sessions on this host (several run at once here): a lease is a lock
file under /run/gpuforge-machines held for the session's lifetime and naming the machine's systemd-nspawn
process (and its network namespace, or its group's bridge). A session that died without stopping its
machines leaves an unlocked lease behind; the next session stops that process (by its id, after checking it
is that machine), unmounts its root and deletes the namespace and bridge its lease names.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from . import namespaces, vpc
from .images import ADMIN_USER, Image, build, mount_overlay

LEASES_DIR = Path("/run/gpuforge-machines")
ADDRESS_PREFIX = "127.0.1."
# .1 to .254 of 127.0.1.0/24; Debian maps the host's own name to 127.0.1.1 in /etc/hosts, so skip it.
ADDRESS_HOSTS = range(2, 255)
# Networks of their own: 198.18.N.0/24 per group, the bridge gf-brN at .1, machines from .2.
NETWORK_PREFIX = "198.18."
NETWORK_NUMBERS = range(1, 255)
NETWORK_HOSTS = range(2, 255)
BRIDGE_PREFIX = "gf-br"
VPC_LEASE = "vpc"  # the lease of the one VPC a host holds at a time (tests/machines/vpc.py)
NETNS_DIR = Path("/run/netns")  # where `ip netns` keeps its namespaces
IP_TIMEOUT_S = 30
BOOT_TIMEOUT_S = 180
STOP_TIMEOUT_S = 60
AUTOFS_DEVICE = Path("/dev/autofs")
# The cgroup hierarchies a container's systemd manages here (cgroups v1 + unified, hybrid).
CGROUP_HIERARCHIES = (Path("/sys/fs/cgroup/systemd"), Path("/sys/fs/cgroup/unified"))


class MachineError(RuntimeError):
    """A machine did not boot, or a command on it failed."""


@dataclass
class Machine:
    """One booted machine. ``run`` executes a shell command on it over SSH as the admin user."""

    name: str
    address: str
    root: Path  # the machine's merged root file system, as the host sees it
    key_path: Path
    known_hosts: Path
    log_path: Path
    user: str = ADMIN_USER
    ssh_port: int = 22
    writable_proc_sys: bool = False
    netns: str | None = None  # its own network namespace (a group with own_network), else the host's
    binds: tuple[str, ...] = ()  # systemd-nspawn --bind= arguments (host path:machine path)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def ssh_options(self) -> list[str]:
        return [
            "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "StrictHostKeyChecking=yes",
            "-o", "ConnectTimeout=5",
            "-i", str(self.key_path),
            "-p", str(self.ssh_port),
        ]  # fmt: skip

    def run(
        self, command: str, *, root: bool = False, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """Run *command* (a shell line) on the machine over SSH; with *root*, through sudo."""
        remote = f"sudo -n sh -c {shlex.quote(command)}" if root else command
        result = subprocess.run(
            ["ssh", *self.ssh_options(), f"{self.user}@{self.address}", remote],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and result.returncode != 0:
            raise MachineError(
                f"{self.name}: `{command}` exited {result.returncode}\n{result.stdout}\n{result.stderr}".rstrip()
            )
        return result

    def ansible_vars(self) -> dict[str, Any]:
        """Inventory variables that reach this machine the way production nodes are reached: SSH and sudo."""
        return {
            "ansible_host": self.address,
            "ansible_port": self.ssh_port,
            "ansible_user": self.user,
            "ansible_ssh_private_key_file": str(self.key_path),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes",
            "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_become": True,
            # Machines on the host's network bind their own address (the module's docstring): the role's
            # wildcard ":9100" would take the port from every other machine booted in the session.
            **({} if self.netns else {"node_exporter_listen": f"{self.address}:9100"}),
        }


@dataclass
class Machines:
    """A group of machines booted together from one image (they know each other by name)."""

    image: Image
    machines: list[Machine]

    def __iter__(self) -> Any:
        return iter(self.machines)

    def __len__(self) -> int:
        return len(self.machines)

    def __getitem__(self, index: int) -> Machine:
        return self.machines[index]

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.machines]

    def inventory(
        self,
        group: str = "gpu_nodes",
        host_vars: dict[str, Any] | None = None,
        per_host: Callable[[Machine], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """An Ansible inventory (the YAML structure) with every machine in *group*, with *host_vars* for
        all of them and ``per_host(machine)`` for each (a listen address, say)."""
        hosts = {
            m.name: {**m.ansible_vars(), **(host_vars or {}), **(per_host(m) if per_host else {})}
            for m in self.machines
        }
        return {"all": {"children": {group: {"hosts": hosts}}}}


class MachinePool:
    """Boots machines and stops every one of them on ``close`` (a session fixture's finalizer)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._leases: dict[str, IO[str]] = {}  # address (or network) -> its lock file, held until close()
        self._groups: dict[str, Machines] = {}
        self._booted: list[Machine] = []
        self._netns: list[Machine] = []  # machines with a network namespace of their own, made by this pool
        self._bridges: list[str] = []
        self._vpcs: list[str] = []  # the CIDRs of the VPCs this pool made (tests/machines/vpc.py)
        self._key, self._known_hosts = self._client_key()
        stop_stale_machines()

    @property
    def client_key(self) -> Path:
        """The admin user's SSH key every machine of this pool authorizes (a VM's too: tests/machines/vm.py)."""
        return self._key

    def _client_key(self) -> tuple[Path, Path]:
        key = self.workdir / "id_ed25519"
        _keygen(key, "gpuforge-tests")
        known_hosts = self.workdir / "known_hosts"
        known_hosts.touch()
        return key, known_hosts

    def group(
        self,
        prefix: str,
        count: int,
        image: Image,
        *,
        writable_proc_sys: bool = False,
        own_network: bool = False,
        binds: Mapping[Path, str] | None = None,
    ) -> Machines:
        """*count* machines named ``<prefix>1..N`` booted from *image*; a second call with the same
        prefix returns the same machines (the pool is shared by the whole session).

        *writable_proc_sys*: /proc/sys and /sys writable inside (systemd-nspawn mounts them read-only),
        for roles that apply sysctls live. The kernel is the host's: what they set, the host gets.
        *own_network*: the group's own network (the module's docstring); its machines' package lists are
        refreshed through the host's network before they boot, since they cannot reach a mirror themselves.
        *binds*: host directories bound into every machine at the given paths (what a file server shares)."""
        existing = self._groups.get(prefix)
        if existing is not None:
            if existing.image.key != image.key or len(existing) < count:
                raise ValueError(
                    f"machines {prefix!r} already booted as {len(existing)} x {existing.image.name}; "
                    f"use another prefix for {count} x {image.name}"
                )
            return existing
        build(image)
        names = [f"{prefix}{i}" for i in range(1, count + 1)]
        if own_network:
            if shutil.which("ip") is None:
                raise MachineError("a group with its own network needs ip (apt-get install iproute2)")
            bridge, subnet = self._lease_network()
            addresses = [self._lease_address(subnet, NETWORK_HOSTS, check_in_use=False) for _ in names]
        else:
            addresses = [self._lease_address() for _ in names]
        hosts = "".join(f"{addr}\t{name}\n" for name, addr in zip(names, addresses, strict=True))
        machines = [self._prepare(name, addr, image, hosts) for name, addr in zip(names, addresses, strict=True)]
        for machine in machines:
            machine.writable_proc_sys = writable_proc_sys
            machine.binds = tuple(f"{host}:{path}" for host, path in (binds or {}).items())
        if own_network:
            for machine in machines:
                self._attach(machine, bridge)
            _refresh_package_lists(machines)
        return self._boot(prefix, image, machines)

    def _boot(self, prefix: str, image: Image, machines: list[Machine]) -> Machines:
        """Boot *machines* (prepared, networked) as the group *prefix*."""
        for machine in machines:  # start all, then wait for all: they boot in parallel
            self._start(machine)
        for machine in machines:
            self._wait_for_ssh(machine)
        # As on a real host, every namespace made from now on (a Slurm job's) is newer than the machines'.
        namespaces.advance_past([pid for m in machines if m.pid and (pid := _container_init(m.pid))])
        group = Machines(image=image, machines=machines)
        self._groups[prefix] = group
        return group

    def vpc_group(self, prefix: str, image: Image, vpc_cidr: str, hosts: list[vpc.VpcHost]) -> Machines:
        """Machines named and addressed as *hosts* say, each in a network namespace of its own on its subnet of a
        VPC (tests/machines/vpc.py) behind its nftables ruleset; a second call with the same prefix returns them.
        One VPC per host at a time (its router namespace has a fixed name): a second session's call fails."""
        existing = self._groups.get(prefix)
        if existing is not None:
            return existing
        build(image)
        lease = _take_lease(VPC_LEASE)
        if lease is None:
            raise MachineError(f"another session's VPC is up on this host (lease {LEASES_DIR / VPC_LEASE})")
        self._leases[VPC_LEASE] = lease
        _write_lease(lease, {"vpc": vpc_cidr})
        for host in hosts:
            if (address_lease := _take_lease(host.address)) is None:
                raise MachineError(f"{host.address} is leased by another session")
            self._leases[host.address] = address_lease
        names = "".join(f"{h.address}\t{h.name}\n" for h in hosts)  # what VPC DNS answers for EC2's names
        machines = [self._prepare(h.name, h.address, image, names) for h in hosts]
        self._vpcs.append(vpc_cidr)
        vpc.make_router(vpc_cidr, hosts)
        for index, (machine, host) in enumerate(zip(machines, hosts, strict=True)):
            machine.netns = _netns_name(machine.address)
            _write_lease(self._leases[machine.address], {"netns": machine.netns, "name": machine.name})
            self._netns.append(machine)
            vpc.attach(machine.netns, index, host, hosts)
        _refresh_package_lists(machines)
        return self._boot(prefix, image, machines)

    def reboot(self, machines: Machines) -> None:
        """Reboot *machines*: each powers off cleanly (what lives in the kernel and under /run is gone) and boots
        again from its own disk (the overlay's upper directory, kept), with the same name, address and host key."""
        for machine in machines:
            _stop(machine.process, machine.root)
            _remove_cgroups(machine.address)  # the next boot starts from empty cgroups, as a real one does
            self._booted.remove(machine)
        for machine in machines:
            base = machine.root.parent
            mount_overlay(machine.root, machines.image.layers(), base / "upper", base / "work")
            self._start(machine)
        for machine in machines:
            self._wait_for_ssh(machine)
        namespaces.advance_past([pid for m in machines if m.pid and (pid := _container_init(m.pid))])

    def _lease_address(
        self, prefix: str = ADDRESS_PREFIX, hosts: range = ADDRESS_HOSTS, *, check_in_use: bool = True
    ) -> str:
        for host in hosts:
            address = f"{prefix}{host}"
            lease = _take_lease(address)
            if lease is None:
                continue
            if check_in_use and _in_use(address):  # something else on this host listens there: not ours to take
                lease.close()
                continue
            self._leases[address] = lease
            return address
        raise MachineError(f"no free address in {prefix}0/24 (leases in {LEASES_DIR})")

    def _lease_network(self) -> tuple[str, str]:
        """A /24 of its own for a group, with its bridge up at .1: (bridge, address prefix "198.18.N.")."""
        for number in NETWORK_NUMBERS:
            prefix = f"{NETWORK_PREFIX}{number}."
            bridge = _bridge_name(f"{prefix}0")
            if Path("/sys/class/net", bridge).exists():
                continue  # not ours (a stale one of ours is gone: stop_stale_machines ran first)
            lease = _take_lease(f"{prefix}0")
            if lease is None:
                continue
            self._leases[f"{prefix}0"] = lease
            _write_lease(lease, {"bridge": bridge})  # before it exists: a crash from here on is cleaned up
            self._bridges.append(bridge)
            _ip("link", "add", "name", bridge, "type", "bridge")
            _ip("addr", "add", f"{prefix}1/24", "dev", bridge)
            _ip("link", "set", bridge, "up")
            return bridge, prefix
        raise MachineError(f"no free network in {NETWORK_PREFIX}0.0/16 (leases in {LEASES_DIR})")

    def _attach(self, machine: Machine, bridge: str) -> None:
        """Give *machine* its network namespace: its end of a veth pair (eth0) holds its address, the other
        end is on the group's *bridge*. Made before it boots, so sshd finds its address there."""
        machine.netns, veth = _netns_name(machine.address), _veth_name(machine.address)
        _write_lease(self._leases[machine.address], {"netns": machine.netns, "name": machine.name})
        self._netns.append(machine)
        _ip("netns", "add", machine.netns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", machine.netns)
        _ip("link", "set", veth, "master", bridge, "up")
        _ip("-n", machine.netns, "addr", "add", f"{machine.address}/24", "dev", "eth0")
        _ip("-n", machine.netns, "link", "set", "eth0", "up")
        _ip("-n", machine.netns, "link", "set", "lo", "up")

    def _prepare(self, name: str, address: str, image: Image, hosts: str) -> Machine:
        """The machine's root: an overlay of the image with its own identity written into the upper layer."""
        base = self.workdir / name
        upper, work, merged = base / "upper", base / "work", base / "root"
        for d in (upper, work, merged):
            d.mkdir(parents=True)
        mount_overlay(merged, image.layers(), upper, work)
        machine = Machine(
            name=name,
            address=address,
            root=merged,
            key_path=self._key,
            known_hosts=self._known_hosts,
            log_path=base / "console.log",
        )
        (merged / "etc/hostname").write_text(f"{name}\n")
        (merged / "etc/hosts").write_text(f"127.0.0.1\tlocalhost\n{address}\t{name}\n{hosts}")
        (merged / "etc/ssh/sshd_config.d/gpuforge-test.conf").write_text(
            f"# Each test machine listens on its own loopback address (host network shared).\n"
            f"ListenAddress {address}\nPasswordAuthentication no\nPermitRootLogin no\n"
        )
        host_key = merged / "etc/ssh/ssh_host_ed25519_key"
        _keygen(host_key, f"root@{name}")
        key_type, public_key = host_key.with_suffix(".pub").read_text().split()[:2]
        with self._known_hosts.open("a") as known:  # so SSH checks each machine's host key
            known.write(f"{address} {key_type} {public_key}\n")
        home = merged / "home" / ADMIN_USER
        ssh_dir = home / ".ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        shutil.copyfile(self._key.with_suffix(".pub"), ssh_dir / "authorized_keys")
        owner = home.stat()
        for path in (ssh_dir, ssh_dir / "authorized_keys"):
            os.chown(path, owner.st_uid, owner.st_gid)
        return machine

    def _start(self, machine: Machine) -> None:
        # /dev/autofs: systemd's automount units (fstab's x-systemd.automount, as the site's mounts use)
        # need the autofs control device, which nspawn's minimal /dev leaves out.
        devices = [f"--bind={AUTOFS_DEVICE}"] if AUTOFS_DEVICE.exists() else []
        devices += [f"--bind={bind}" for bind in machine.binds]
        if machine.netns:
            devices.append(f"--network-namespace-path={NETNS_DIR / machine.netns}")
        with machine.log_path.open("wb") as log:
            # --register=no and --keep-unit: this host has no systemd as PID 1 to register with.
            machine.process = subprocess.Popen(
                [
                    "systemd-nspawn", "-D", str(machine.root), "-M", machine.name, "--hostname", machine.name,
                    "--boot", "--register=no", "--keep-unit", "--console=read-only", *devices,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C to pytest must not kill it halfway; close() stops it
                preexec_fn=lambda: _enter_own_cgroup(machine.address),
                env={**os.environ, "SYSTEMD_NSPAWN_API_VFS_WRITABLE": "1"} if machine.writable_proc_sys else None,
            )  # fmt: skip
        self._booted.append(machine)
        # What a later session needs to stop this machine should this one die without doing so.
        record = {"pid": machine.pid, "root": str(machine.root), "name": machine.name}
        if machine.netns:
            record["netns"] = machine.netns
        _write_lease(self._leases[machine.address], record)

    def _wait_for_ssh(self, machine: Machine) -> None:
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while True:
            assert machine.process is not None
            if machine.process.poll() is not None:
                raise MachineError(f"{machine.name} exited while booting:\n{_tail(machine.log_path)}")
            if machine.run("true", check=False, timeout=10).returncode == 0:
                # sshd answers once multi-user.target is on its way; wait for the boot to finish.
                machine.run("systemctl is-system-running --wait >/dev/null || true", root=True, timeout=120)
                return
            if time.monotonic() > deadline:
                raise MachineError(f"{machine.name}: no SSH on {machine.address} after {BOOT_TIMEOUT_S}s:\n"
                                   f"{_tail(machine.log_path)}")  # fmt: skip
            time.sleep(1)

    def close(self) -> None:
        """Stop every machine this pool booted (by its own process id), unmount its root, drop the leases."""
        errors = []
        for machine in reversed(self._booted):
            try:
                _stop(machine.process, machine.root)
                _remove_cgroups(machine.address)
            except Exception as exc:  # keep stopping the others; report at the end
                errors.append(f"{machine.name}: {exc}")
        self._booted.clear()
        self._groups.clear()
        # The networks once no machine is in them: a namespace (and its veth pair) first, then the bridge.
        for machine in self._netns:
            try:
                _delete_netns(machine.address)
            except Exception as exc:
                errors.append(f"{machine.name}'s network namespace: {exc}")
        self._netns.clear()
        for bridge in self._bridges:
            try:
                _delete_link(bridge)
            except Exception as exc:
                errors.append(f"bridge {bridge}: {exc}")
        self._bridges.clear()
        for cidr in self._vpcs:
            vpc.delete_router(cidr)
        self._vpcs.clear()
        for lease in self._leases.values():
            Path(lease.name).unlink(missing_ok=True)
            lease.close()
        self._leases.clear()
        if errors:
            raise MachineError("could not stop: " + "; ".join(errors))


def _stop(process: subprocess.Popen[bytes] | None, root: Path) -> None:
    # SIGTERM to systemd-nspawn powers the container off cleanly (its init gets SIGRTMIN+3).
    if process is not None and process.poll() is None:
        init = _container_init(process.pid)
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # The halt hung. Killing systemd-nspawn alone would orphan the container: without systemd on
            # this host nothing reaps it, and its daemons keep their ports on the shared host network
            # (a later Slurm cluster's slurmctld then cannot bind 6817). Killing the container's init
            # ends its whole PID namespace; systemd-nspawn then exits by itself.
            if init is not None and _is_child_of(init, process.pid):
                os.kill(init, signal.SIGKILL)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT_S)
    _unmount(root)


def _machine_cgroups(address: str) -> list[Path]:
    return [hierarchy / "gpuforge-machines" / address for hierarchy in CGROUP_HIERARCHIES if hierarchy.is_dir()]


def _enter_own_cgroup(address: str) -> None:
    """Move the starting systemd-nspawn into a cgroup of its own, before it execs.

    With --keep-unit and no systemd on the host, systemd-nspawn gives its container the caller's cgroup,
    so every machine's systemd managed one shared system.slice: one container removed a unit's cgroup
    that another was attaching to ("Failed to attach to cgroup /system.slice/systemd-sysusers.service:
    No such file or directory"), and a machine came up degraded with a random unit failed.
    """
    for cgroup in _machine_cgroups(address):
        cgroup.mkdir(parents=True, exist_ok=True)
        (cgroup / "cgroup.procs").write_text("0")


def _remove_cgroups(address: str) -> None:
    """Remove a stopped machine's cgroups, deepest first (a cgroup with processes left stays)."""
    for cgroup in _machine_cgroups(address):
        if cgroup.is_dir():
            for directory in sorted((p for p in cgroup.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                directory.rmdir()
            cgroup.rmdir()


def _container_init(nspawn_pid: int) -> int | None:
    """The container's init (PID 1 inside it): systemd-nspawn's child."""
    try:
        children = Path(f"/proc/{nspawn_pid}/task/{nspawn_pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def _is_child_of(pid: int, parent: int) -> bool:
    """Whether *pid* is still *parent*'s child (not a reused process id)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return int(stat.rsplit(")", 1)[1].split()[1]) == parent


def _unmount(root: Path) -> None:
    if os.path.ismount(root):
        subprocess.run(["umount", str(root)], check=True, capture_output=True)


def stop_stale_machines() -> None:
    """Stop machines whose test session died: their lease is no longer locked by anyone."""
    if not LEASES_DIR.is_dir():
        return
    for path in LEASES_DIR.iterdir():
        with path.open("a+") as lease:
            try:
                fcntl.flock(lease, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live session holds it
            lease.seek(0)
            try:
                record = json.loads(lease.read() or "{}")
            except json.JSONDecodeError:
                record = {}
            pid, root = record.get("pid"), record.get("root")
            if isinstance(pid, int) and isinstance(root, str) and _is_machine_process(pid, root):
                os.kill(pid, signal.SIGTERM)
                _wait_gone(pid)
            if isinstance(root, str):
                _unmount(Path(root))
            _remove_cgroups(path.name)
            # What the lease names, and only if it has this harness's own name for that address.
            if record.get("netns") == _netns_name(path.name):
                _delete_netns(path.name)
            if path.name == VPC_LEASE and isinstance(record.get("vpc"), str):
                vpc.delete_router(record["vpc"])
            bridge = record.get("bridge")
            if isinstance(bridge, str) and path.name.startswith(NETWORK_PREFIX) and bridge == _bridge_name(path.name):
                _delete_link(bridge)
            path.unlink(missing_ok=True)


def _is_machine_process(pid: int, root: str) -> bool:
    """Whether *pid* is still the systemd-nspawn that booted *root* (not a reused process id)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(argv) and argv[0].endswith(b"systemd-nspawn") and root.encode() in argv


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    if Path(f"/proc/{pid}").exists():
        os.kill(pid, signal.SIGKILL)


def _take_lease(name: str) -> IO[str] | None:
    """The lease file *name* under LEASES_DIR, locked for this session; None when another session holds it."""
    LEASES_DIR.mkdir(parents=True, exist_ok=True)
    path = LEASES_DIR / name
    lease = open(path, "a+")  # noqa: SIM115 - held open for the session
    try:
        fcntl.flock(lease, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lease.close()
        return None
    if not path.exists() or os.stat(path).st_ino != os.fstat(lease.fileno()).st_ino:
        lease.close()  # its owner released and removed it while we locked: not a lease
        return None
    return lease


def _write_lease(lease: IO[str], record: dict[str, Any]) -> None:
    lease.seek(0)
    lease.truncate()
    lease.write(json.dumps(record))
    lease.flush()


def _netns_name(address: str) -> str:
    return f"gf-{address}"


def _veth_name(address: str) -> str:
    """The host's end of a machine's veth pair: gf-v<N>-<M> for 198.18.N.M (interface names: 15 bytes)."""
    _, _, network, host = address.split(".")
    return f"gf-v{network}-{host}"


def _bridge_name(network_address: str) -> str:
    return f"{BRIDGE_PREFIX}{network_address.split('.')[2]}"


def _ip(*args: str) -> None:
    try:
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    except subprocess.CalledProcessError as exc:
        raise MachineError(f"ip {' '.join(args)}: {exc.stderr.strip()}") from None


def _delete_netns(address: str) -> None:
    """Delete a machine's network namespace and its veth pair (deleting one end deletes both). A VPC machine's
    pair has its other end in the VPC's router namespace, not on the host: only an own network's is here."""
    if address.startswith(NETWORK_PREFIX):
        _delete_link(_veth_name(address))
    if (NETNS_DIR / _netns_name(address)).exists():
        _ip("netns", "delete", _netns_name(address))


def _delete_link(name: str) -> None:
    if Path("/sys/class/net", name).exists():
        _ip("link", "delete", name)


def _refresh_package_lists(machines: list[Machine]) -> None:
    """apt-get update in each machine's root before it boots, through the host's network (systemd-nspawn
    without --boot, as an image layer is built): booted in a network of their own, the machines reach no
    mirror, and the roles' apt tasks (cache_valid_time) would otherwise try to refresh lists the image made."""
    # With the stamp Ubuntu's update-notifier-common writes after every successful update: Ansible's apt module
    # takes the lists' age from it (else from the lists directory, which an update that found nothing new
    # leaves as old as the image).
    script = "apt-get update -qq && mkdir -p /var/lib/apt/periodic && touch /var/lib/apt/periodic/update-success-stamp"
    nspawn = ["systemd-nspawn", "--quiet", "--register=no", "--keep-unit"]
    runs = [
        subprocess.Popen(
            [*nspawn, "-M", m.name, "-D", str(m.root), "/bin/sh", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for m in machines
    ]
    failed = []
    for machine, run in zip(machines, runs, strict=True):
        try:
            out, _ = run.communicate(timeout=BOOT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            run.kill()
            out, _ = run.communicate()
        if run.returncode != 0:
            failed.append(f"{machine.name}: {out.decode(errors='replace').strip()}")
    if failed:
        raise MachineError("apt-get update before boot failed: " + "; ".join(failed))


def _in_use(address: str) -> bool:
    """Whether something on this host already listens on *address*:22 (or on every address, port 22)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((address, 22))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def _keygen(path: Path, comment: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    for p in (path, path.with_suffix(".pub")):
        p.unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True, capture_output=True
    )


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no console log)"
