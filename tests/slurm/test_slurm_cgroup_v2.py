"""Slurm's confinement on cgroup v2, as production's kernels run it, in a virtual machine with its own kernel
(tests/machines/vm.py: this host's hierarchy is v1): Debian 13's kernel and Slurm 24.11, the Slurm roles
unmodified configuring the controller and a compute on the one machine. A job sees only the GPU device it
was given (cgroup.conf ConstrainDevices, gres.conf's stand-in /dev/nvidia0-1), and a user's ssh session to
the node lands in their job's cgroup (pam_slurm_adopt), both read from /proc/self/cgroup and by opening
the devices. One boot for the whole file.

Ubuntu stays unproven here too: its archive is no registry this project may use."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuforge.nodes.bake import PlaybookResult, run_playbook
from tests.machines import Machine, MachinePool, Machines
from tests.machines.vm import GUEST_ADDRESS, QEMU, VM_PACKAGES, VM_SETUP, booted_vm, vm_disk

from .cluster import (
    USER,
    booted_rendering,
    contract_vars,
    generated_secrets,
    generated_ssh_key,
    node_facts,
    probe_sections,
    run_as_user,
    stand_in_gpus,
    wait_for,
)
from .failover import inventory, one_compute
from .trixie import TRIXIE_SLURM_IMAGE

pytestmark = [pytest.mark.slow, pytest.mark.vm]  # outside make test: `make test-vm` (pyproject.toml says why)

VM_IMAGE = TRIXIE_SLURM_IMAGE.derive("debian13-vm", packages=VM_PACKAGES, setup=VM_SETUP)
NAME = "forgevm"
JOB_TIMEOUT_S = 300


@dataclass
class VmCluster:
    machine: Machine
    config: dict[str, Any]
    first: PlaybookResult
    user_key: Path  # the cluster user's private key, for ssh as them


@pytest.fixture(scope="module")
def vm_cluster(machine_pool: MachinePool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VmCluster]:
    if shutil.which(QEMU) is None:
        pytest.fail(f"{QEMU} is missing: apt-get install qemu-system-x86 qemu-utils")
    disk = vm_disk(VM_IMAGE)
    workdir = tmp_path_factory.mktemp("vm")
    known_hosts = workdir / "known_hosts"
    start = time.monotonic()
    with booted_vm(disk, NAME, workdir, machine_pool.client_key, known_hosts) as machine:
        print(f"\nVM booted (TCG) in {time.monotonic() - start:.1f}s")
        yield _configure(machine, workdir)


def _configure(machine: Machine, workdir: Path) -> VmCluster:
    stand_in_gpus(machine)
    cpus, memory = node_facts(machine)
    private, public = generated_ssh_key()
    config = booted_rendering(NAME, "forge-vm", public)
    config["controllers"] = [{"name": NAME, "address": GUEST_ADDRESS}]
    one_compute(config, machine, cpus, memory)
    config["nodes"][0]["addresses"] = GUEST_ADDRESS  # the guest's own address, not the forwarded port's
    config = contract_vars(config)
    machines = Machines(image=VM_IMAGE, machines=[machine])
    start = time.monotonic()
    first = run_playbook("slurm.yml", inventory(machines, config, generated_secrets(), controllers=(0,), computes=(0,)))
    print(f"\nslurm.yml in the VM: converge {time.monotonic() - start:.1f}s")
    if not first.ok:
        failures = "\n".join(f"{f.host} {f.task}: {f.message}" for f in first.failures)
        pytest.fail(f"slurm.yml failed in the VM:\n{failures}")
    user_key = workdir / "user_key"
    user_key.write_text(private)
    user_key.chmod(0o600)
    return VmCluster(machine, config, first, user_key)


def test_the_vm_runs_cgroup_v2(vm_cluster: VmCluster) -> None:
    machine = vm_cluster.machine
    assert machine.run("stat -fc %T /sys/fs/cgroup").stdout.strip() == "cgroup2fs"
    assert machine.run("cat /proc/self/cgroup").stdout.startswith("0::/")


def _job(cluster: VmCluster, args: str, script: str) -> str:
    """Run *script* as a batch job with *args*; its output once completed."""
    out = run_as_user(cluster.machine, f"sbatch --parsable --mem=64M {args} --wrap {json.dumps(script)}")
    job = out.strip().split(";")[0]

    def completed() -> str:
        state = run_as_user(cluster.machine, f"sacct -X -n -P -j {job} --format=State").strip()
        return state if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL") else ""

    assert wait_for(f"job {job} to end", completed, JOB_TIMEOUT_S) == "COMPLETED"
    return run_as_user(cluster.machine, f"cat slurm-{job}.out")


# Opens each stand-in GPU for reading: "denied" when the device cgroup refuses it (EPERM, "Operation not
# permitted"), else "allowed": the stand-in device files have no driver behind them, so an open the cgroup lets
# through fails with ENXIO ("No such device or address") here, where a real GPU host's succeeds. No shell
# variables: the batch script passes through the submitting shell's double quotes (sbatch --wrap).
PROBE = "; ".join(
    f"if (exec 3<{d}) 2>&1 | grep -q 'not permitted'; then echo {d} denied; else echo {d} allowed; fi"
    for d in ("/dev/nvidia0", "/dev/nvidia1")
)


def test_a_job_opens_only_the_gpu_it_was_given(vm_cluster: VmCluster) -> None:
    out = _job(vm_cluster, "--gres=gpu:1", f"cat /proc/self/cgroup; {PROBE}")
    cgroup = out.splitlines()[0]
    assert cgroup.startswith("0::/") and "/job_" in cgroup, out
    assert "/dev/nvidia0 allowed" in out and "/dev/nvidia1 denied" in out, out


def test_an_ssh_session_is_adopted_into_the_users_job(vm_cluster: VmCluster) -> None:
    machine = vm_cluster.machine
    out = run_as_user(machine, "sbatch --parsable --mem=64M --gres=gpu:1 --wrap 'sleep 300'")
    job = out.strip().split(";")[0]
    # RUNNING is the controller's word; pam_slurm_adopt looks for the job's steps on the node, which start once
    # the prolog (the health check) is done: wait for the batch step.
    wait_for(f"job {job}'s batch step on the node",
             lambda: f"{job}.batch" in run_as_user(machine, f"squeue -h -s -j {job} -o %i"), 180)
    try:
        ssh = [
            "ssh", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={machine.known_hosts}",
            "-o", "StrictHostKeyChecking=yes", "-i", str(vm_cluster.user_key), "-p", str(machine.ssh_port),
            f"{USER}@{machine.address}", f"cat /proc/self/cgroup; {PROBE}",
        ]  # fmt: skip
        result = subprocess.run(ssh, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert result.returncode == 0, result.stderr + _adoption_evidence(machine, job)
        cgroup = result.stdout.splitlines()[0]
        assert f"/job_{job}/" in cgroup, result.stdout
        # Adopted into the job's extern step, it has the job's devices: the one GPU, not the other.
        assert "/dev/nvidia1 denied" in result.stdout, result.stdout
    finally:
        run_as_user(machine, f"scancel {job}")


def _adoption_evidence(machine: Machine, job: str) -> str:
    """What pam_slurm_adopt saw, for a refusal: its own log lines, the steps slurmctld knows and the step sockets
    on the node (named <node>_<job>.<step>). By hand on an idle host the module adopted the session every time
    (7 of 7, "Process N adopted into job 2"); two full runs of this file on a loaded host were refused ("you have
    no active jobs on this node"), so a refusal must say which of the three was missing."""
    probes = ("journalctl --no-pager -n 20 -t pam_slurm_adopt", f"squeue -h -s -j {job}", "ls -la /var/spool/slurmd")
    return "\n" + "\n".join(probe_sections((machine, probe) for probe in probes))
