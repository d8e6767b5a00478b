"""A small Slurm cluster on Debian 13 (trixie): its slurm-wlm 24.11 and systemd 257, on booted machines of a
network of their own, configured only by gpuforge's roles (gpuforge/assets/playbooks/slurm.yml) and the
rendered slurm_config: trixie1 the controller (munge, slurmctld, slurmdbd, MariaDB), trixie2 a compute.

Everything stands in as for Debian 12's clusters (tests/slurm/cluster.py, failover.py), from the same
package list and image setup on a trixie root file system (tests/playbooks/rootfs.py): the stand-in GPUs,
the cgroups made writable, the MUNGE key and database password as vault variables, one compute shaped as
the failover cluster's (failover.one_compute). No job containers: the stand-in pyxis is compiled against
the host's (Debian 12's) libslurm, which a 24.11 srun would refuse to load.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from gpuforge.nodes.bake import PlaybookResult, run_playbook
from tests.machines import Machine, Machines
from tests.machines.images import TRIXIE_SSH_IMAGE

from .cluster import (
    SLURM_IMAGE,
    booted_rendering,
    contract_vars,
    generated_secrets,
    generated_ssh_key,
    log_tails,
    node_facts,
    prepare_machine,
    probe_sections,
    run_as_user,
)
from .failover import DAEMON_LOGS, inventory, one_compute

TRIXIE_SLURM_IMAGE = TRIXIE_SSH_IMAGE.derive("debian13-slurm", packages=SLURM_IMAGE.packages, setup=SLURM_IMAGE.setup)
CONTROLLER, COMPUTE = 0, 1
CLUSTER = "forge-trixie"


@dataclass
class TrixieCluster:
    machines: Machines
    config: dict[str, Any]  # slurm_config as the roles got it
    first: PlaybookResult
    second: PlaybookResult

    @property
    def controller(self) -> Machine:
        return self.machines[CONTROLLER]

    @property
    def compute(self) -> Machine:
        return self.machines[COMPUTE]

    def as_user(self, command: str, timeout: float = 60) -> str:
        """Run *command* as the cluster user on the controller (the submit host here); its stdout."""
        return run_as_user(self.controller, command, timeout)

    def diagnostics(self, lines: int = 60) -> str:
        """The daemons' logs and what the controller says now (for a failed test; never raises)."""
        sections = []
        for machine in self.machines:
            sections += log_tails(machine, DAEMON_LOGS, lines)
        commands = ("sinfo -N -l", "squeue -a -l", "systemctl --failed --no-pager")
        return "\n".join(sections + probe_sections((self.controller, command) for command in commands))


def build_trixie(machines: Machines) -> TrixieCluster:
    for index, machine in enumerate(machines):
        prepare_machine(machine, gpus=index == COMPUTE)
    cpus, memory = node_facts(machines[COMPUTE])
    config = booted_rendering(machines[CONTROLLER].name, CLUSTER, generated_ssh_key()[1])
    config["controllers"] = [{"name": machines[CONTROLLER].name, "address": machines[CONTROLLER].address}]
    one_compute(config, machines[COMPUTE], cpus, memory)
    config = contract_vars(config)
    inv = inventory(machines, config, generated_secrets(), controllers=(CONTROLLER,), computes=(COMPUTE,))
    start = time.monotonic()
    first = run_playbook("slurm.yml", inv)
    mid = time.monotonic()
    second = run_playbook("slurm.yml", inv) if first.ok else first
    print(f"\nslurm.yml on Debian 13: converge {mid - start:.1f}s, idempotence run {time.monotonic() - mid:.1f}s")
    return TrixieCluster(machines, config, first, second)
