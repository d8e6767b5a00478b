"""Two Slurm controllers on one shared state directory, on booted machines of a network of their own,
configured only by gpuforge's roles (gpuforge/assets/playbooks/slurm.yml) and the rendered slurm_config: slurmha1 the
primary (slurmctld, slurmdbd, MariaDB), slurmha2 the backup (slurmctld in standby), slurmha3 a compute.

What stands in, beyond tests/slurm/cluster.py's machines, packages and GPUs:
- The network: the three machines have a network of their own (tests/machines, own_network), since Slurm
  22.05's slurmctld binds SlurmctldPort on every address, as the primary and as a standby backup: two
  controllers on the host's network could not both run, nor run beside the session's other Slurm cluster.
- The shared state directory: slurm_config.state_shared is what the site's rendering gives a
  two-controller site (an NFS export, scheduler.controller.state_mount, at StateSaveLocation). This kernel
  has no NFS client and there is no file server, so the export is one host directory bound into the
  machines and the machines' mount.nfs is the stand-in mount helper (tests/standins/mount-helper.sh),
  which binds that directory where fstab says: the production mount task (site_mounts, through
  slurm_controller) writes the entry and starts its unit, and both controllers see the same files.
- SlurmctldTimeout is 20 s (the rendering's 120 s for two controllers) so the backup takes over sooner.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuforge.nodes.bake import PlaybookResult, run_playbook
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import slurm_config
from gpuforge.spec import resolve
from tests.machines import Machine, Machines
from tests.standins.packages import mount_helper

from .cluster import (
    GPUS,
    booted_rendering,
    contract_vars,
    generated_secrets,
    generated_ssh_key,
    log_tails,
    machine_sharing,
    node_facts,
    prepare_machine,
    probe_sections,
    run_as_user,
    static_node,
)

PRIMARY, BACKUP, COMPUTE = 0, 1, 2
CLUSTER = "forge-ha"
# The site's export for the controllers' state, as a site declares it in site.storage.mounts.
STATE_EXPORT = {"kind": "nfs", "server": "10.64.8.21", "export": "/export/slurm-state"}
# Where the machines see the host directories that stand in for the site's exports (mount-helper.sh).
EXPORTS = "/var/lib/gpuforge-standin/exports"
SLURMCTLD_TIMEOUT_S = 20
DAEMON_LOGS = ("/var/log/slurm/slurmctld.log", "/var/log/slurm/slurmdbd.log", "/var/log/slurm/slurmd.log")


@dataclass
class FailoverCluster:
    machines: Machines
    config: dict[str, Any]
    first: PlaybookResult
    export: Path  # the host directory both controllers mount as StateSaveLocation
    jobs: dict[str, str] = field(default_factory=dict)  # what one test submitted, for the next

    @property
    def primary(self) -> Machine:
        return self.machines[PRIMARY]

    @property
    def backup(self) -> Machine:
        return self.machines[BACKUP]

    @property
    def compute(self) -> Machine:
        return self.machines[COMPUTE]

    def as_user(self, machine: Machine, command: str, timeout: float = 60) -> str:
        """Run *command* as the cluster user on *machine* (a controller, as a client); its stdout."""
        return run_as_user(machine, command, timeout)

    def ping(self, machine: Machine) -> dict[str, str]:
        """`scontrol ping` from *machine*: {"primary": "UP"|"DOWN", "backup": ...}."""
        out = machine.run("scontrol ping", root=True, check=False, timeout=60).stdout
        states = {}
        for line in out.splitlines():  # Slurmctld(primary) at slurmha1 is UP
            if line.startswith("Slurmctld(") and " is " in line:
                states[line.split("(", 1)[1].split(")", 1)[0]] = line.rsplit(" is ", 1)[1].strip()
        return states

    def diagnostics(self, lines: int = 60) -> str:
        """The daemons' logs and what each controller says now (for a failed test; never raises)."""
        sections = []
        for machine in self.machines:
            sections += log_tails(machine, DAEMON_LOGS, lines)
        commands = ("scontrol ping", "squeue -a -l", "systemctl status slurmctld --no-pager -n 20")
        probes = [(machine, command) for machine in (self.primary, self.backup) for command in commands]
        return "\n".join(sections + probe_sections(probes))


def site_rendering() -> dict[str, Any]:
    """slurm_config of a site with two controllers sharing an NFS export for their state (the onprem-lab
    stack with a second controller host and scheduler.controller.state_mount)."""
    lab = load_stack("onprem-lab").cluster
    lab["site"]["storage"]["mounts"]["slurm-state"] = {**STATE_EXPORT, "mount_point": "/srv/slurm-state"}
    lab["scheduler"]["controller"]["hosts"]["slurm-02"] = "10.64.1.8"
    lab["scheduler"]["controller"]["state_mount"] = "slurm-state"
    return slurm_config(resolve(lab, "onprem-lab"))


def failover_config(machines: Machines, cpus: int, real_memory: int, user_public_key: str) -> dict[str, Any]:
    """The dev stack's rendering (as tests/slurm/cluster.py uses it) shaped to these machines, with what the
    site's rendering gives two controllers: both in SlurmctldHost, the shared state mount, accounting on
    the primary only (MariaDB there) and the two-controller timeouts."""
    site = site_rendering()
    assert len(site["controllers"]) == 2 and site["state_shared"]["kind"] == "nfs"
    primary, backup, compute = machines[PRIMARY], machines[BACKUP], machines[COMPUTE]
    config = booted_rendering(primary.name, CLUSTER, user_public_key)
    config["controllers"] = [{"name": m.name, "address": m.address} for m in (primary, backup)]
    config["state_shared"] = site["state_shared"]
    config["accounting"]["backup_host"] = site["accounting"]["backup_host"]
    config["timeouts"] = {**site["timeouts"], "slurmctld": SLURMCTLD_TIMEOUT_S}
    one_compute(config, compute, cpus, real_memory)
    return config


def one_compute(config: dict[str, Any], compute: Machine, cpus: int, real_memory: int) -> None:
    """Shape *config* (booted_rendering's) to one static compute of group gpu in one shared partition, no
    login nodes and no job containers: the small clusters of a network of their own (this one, and
    Debian 13's in tests/slurm/trixie.py)."""
    config["nodes"] = [static_node(compute, cpus, real_memory)]
    config["dynamic_groups"] = []
    config["nodesets"] = [{"name": "ns_gpu", "feature": "", "nodes": compute.name}]
    config["groups"] = {"gpu": {"nodeset": "ns_gpu", "dynamic": False, "conf": "", "local_nvme": False, "gpus": GPUS}}
    config["max_node_count"] = 1
    base = {p["name"]: p for p in config["partitions"]}["gpu"]
    # Shared nodes: a job held running across the failover leaves room for the ones submitted after it.
    config["partitions"] = [{**base, **machine_sharing(cpus, real_memory), "name": "gpu", "nodesets": ["ns_gpu"],
                             "default": True, "exclusive": False}]
    config["login_groups"] = []
    config["login_hosts"] = []
    # No container sources on this network (they are served on the host's loopback): no enroot or pyxis.
    config["containers"]["runtime"] = "none"


def inventory(
    machines: Machines,
    config: dict[str, Any],
    secret_values: dict[str, str],
    controllers: tuple[int, ...] = (PRIMARY, BACKUP),
    computes: tuple[int, ...] = (COMPUTE,),
) -> dict[str, Any]:
    """The controllers (machine indexes) and the computes (group gpu) of a small cluster, on vault secrets."""

    def hosts(indexes: tuple[int, ...], **extra: Any) -> dict[str, Any]:
        return {machines[i].name: {**machines[i].ansible_vars(), **extra} for i in indexes}

    return {
        "all": {
            "vars": {
                "slurm_config": contract_vars(config),
                "vault_slurm_munge_key": secret_values["munge_key"],
                "vault_slurm_db_password": secret_values["db_password"],
                # No shared /home behind HOME_STAND_IN: each machine makes the users' homes.
                "slurm_users_create_home": True,
            },
            "children": {
                "slurm_controller": {"hosts": hosts(controllers)},
                "slurm_compute": {"hosts": hosts(computes, gpuforge_node_group="gpu")},
            },
        }
    }


def install_nfs_stand_in(machine: Machine) -> None:
    """The machine's NFS mount helper becomes the stand-in (the module's docstring says why)."""
    helper = machine.root / "usr/sbin/mount.nfs"
    helper.unlink(missing_ok=True)
    helper.write_text(mount_helper("nfs", "nfs-common"))
    helper.chmod(0o755)


def build_failover(machines: Machines, export: Path) -> FailoverCluster:
    for index, machine in enumerate(machines):
        install_nfs_stand_in(machine)
        prepare_machine(machine, gpus=index == COMPUTE)
    cpus, memory = node_facts(machines[COMPUTE])
    config = failover_config(machines, cpus, memory, generated_ssh_key()[1])
    start = time.monotonic()
    first = run_playbook("slurm.yml", inventory(machines, config, generated_secrets()))
    print(f"\nslurm.yml (two controllers): converge {time.monotonic() - start:.1f}s")
    return FailoverCluster(machines, config, first, export)
