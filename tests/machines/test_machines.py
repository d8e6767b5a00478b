"""The harness itself: machines boot with systemd as PID 1, their own names and addresses and a real
sshd; the admin user is not root and may sudo; machines reach each other by name; Ansible reaches them
over SSH; and they are stopped by their own process ids."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpuforge.nodes.bake import run_playbook

from . import boot
from .boot import LEASES_DIR, MachinePool, Machines, stop_stale_machines
from .images import SSH_IMAGE

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent


def test_each_machine_boots_systemd_with_its_own_name_and_address(two_machines: Machines) -> None:
    assert two_machines.names == ["node1", "node2"]
    assert len({m.address for m in two_machines}) == 2
    for machine in two_machines:
        assert machine.run("hostname").stdout.strip() == machine.name
        assert machine.run("cat /proc/1/comm").stdout.strip() == "systemd"
        state = machine.run("systemctl is-system-running", root=True, check=False).stdout.strip()
        failed = machine.run("systemctl --failed --no-legend --plain", root=True).stdout
        assert state == "running", failed
        listening = machine.run("ss -Htln", root=True).stdout
        assert f"{machine.address}:22" in listening


def test_each_machine_has_cgroups_of_its_own(two_machines: Machines) -> None:
    # Machines sharing one cgroup shared one system.slice: their systemds raced on its unit cgroups.
    inits = [boot._container_init(m.pid) for m in two_machines if m.pid is not None]
    cgroups = [Path(f"/proc/{pid}/cgroup").read_text() for pid in inits if pid is not None]
    assert len(cgroups) == 2
    assert cgroups[0] != cgroups[1], cgroups


def test_admin_is_not_root_and_may_sudo(two_machines: Machines) -> None:
    machine = two_machines[0]
    assert machine.run("id -u").stdout.strip() != "0"
    assert machine.run("id -u", root=True).stdout.strip() == "0"
    # Password logins are off: only the generated key opens the machine.
    assert "passwordauthentication no" in machine.run("sshd -T", root=True).stdout


def test_host_keys_are_per_machine_and_checked(two_machines: Machines) -> None:
    first, second = two_machines[0], two_machines[1]
    fingerprints = {m.run("cat /etc/ssh/ssh_host_ed25519_key.pub").stdout.split()[1] for m in two_machines}
    assert len(fingerprints) == 2
    # Strict host key checking is on: the first machine's key does not pass for the second's address.
    known = first.known_hosts.read_text().splitlines()
    swapped = first.known_hosts.with_name("known_hosts.swapped")
    first_key = [line.split(" ", 1)[1] for line in known if line.startswith(f"{first.address} ")]
    swapped.write_text(f"{second.address} {first_key[0]}\n")
    result = subprocess.run(
        # ssh takes the first value of an option: the swapped file wins over the harness's own.
        ["ssh", "-o", f"UserKnownHostsFile={swapped}", *second.ssh_options(), f"admin@{second.address}", "true"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30,
    )  # fmt: skip
    assert result.returncode != 0 and "host key" in result.stderr.lower(), result.stderr


def test_machines_reach_each_other_by_name(two_machines: Machines) -> None:
    first, second = two_machines[0], two_machines[1]
    assert first.run(f"getent hosts {second.name}").stdout.split()[0] == second.address
    banner = first.run(f"timeout 5 bash -c 'exec 3<>/dev/tcp/{second.name}/22; head -c 7 <&3'").stdout
    assert banner == "SSH-2.0"


def test_a_new_mount_namespace_can_be_held_on_every_cpu(two_machines: Machines) -> None:
    """What Slurm's job_container/tmpfs does for every job (bind a new mount namespace's /proc/PID/ns/mnt
    to keep it), from the machine's own namespace, with the new namespace made on each CPU in turn: the
    kernel allows it only for a namespace newer than the caller's, which tests/machines/namespaces.py
    makes true as on a real host (else it fails at random: "Invalid argument")."""
    cpus = sorted(os.sched_getaffinity(0))
    for machine in two_machines:
        script = (
            "set -e; d=$(mktemp -d); mount --bind $d $d; mount --make-private $d; touch $d/ns; "
            + "; ".join(f"taskset -c {cpu} unshare --mount=$d/ns true; umount $d/ns" for cpu in cpus)
            + "; umount $d; rm $d/ns; rmdir $d"
        )
        result = machine.run(script, root=True, check=False)
        assert result.returncode == 0, f"{machine.name}: {result.stderr}"


def test_ansible_reaches_every_machine_over_ssh_with_become(two_machines: Machines) -> None:
    result = run_playbook(HERE / "playbooks" / "whoami.yml", two_machines.inventory())
    assert result.ok, [f"{f.host} {f.task}: {f.message}" for f in result.failures]
    assert sorted(result.hosts) == two_machines.names
    for name in two_machines.names:
        assert f"{name} root" in result.stdout


def test_close_stops_machines_by_pid_and_unmounts(tmp_path: Path) -> None:
    pool = MachinePool(tmp_path / "pool")
    try:
        machine = pool.group("stop", 1, SSH_IMAGE)[0]
        pid = machine.pid
        assert pid is not None and Path(f"/proc/{pid}").exists()
        assert os.path.ismount(machine.root)
        assert (LEASES_DIR / machine.address).is_file()
    finally:
        pool.close()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    assert not os.path.ismount(machine.root)
    assert not (LEASES_DIR / machine.address).exists()


def test_close_leaves_no_container_behind_when_its_halt_hangs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A service that never stops holds the halt past the stop timeout: the container's init is killed with
    systemd-nspawn, so none of its processes outlives the pool (they would keep ports on the host network)."""
    monkeypatch.setattr(boot, "STOP_TIMEOUT_S", 5)
    pool = MachinePool(tmp_path / "pool")
    try:
        machine = pool.group("hang", 1, SSH_IMAGE)[0]
        machine.run(
            "systemd-run --unit=hang-halt -p TimeoutStopSec=infinity -p KillMode=none "
            "-p ExecStop='/bin/sleep 600' /bin/sleep infinity",
            root=True,
        )
        assert machine.pid is not None
        init = Path(f"/proc/{machine.pid}/task/{machine.pid}/children").read_text().split()[0]
    finally:
        pool.close()
    assert not Path(f"/proc/{init}").exists() or "zombie" in Path(f"/proc/{init}/status").read_text()
    assert not os.path.ismount(machine.root)


def test_stale_lease_of_another_process_is_dropped_without_killing_it() -> None:
    """A lease nobody holds whose process id now belongs to something else: that process lives on."""
    LEASES_DIR.mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen(["sleep", "60"])
    lease = LEASES_DIR / "127.0.1.254"
    try:
        lease.write_text(f'{{"pid": {sleeper.pid}, "root": "/nonexistent/root", "name": "ghost"}}')
        stop_stale_machines()
        assert not lease.exists()
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
        lease.unlink(missing_ok=True)
