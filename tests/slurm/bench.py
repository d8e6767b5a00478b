"""The dev stack's Slurm cluster booted as its plan declares it (tests/bench): forge-dev-ctl-0 at
10.20.128.10 in the management subnet, the login group's instance there too, two instances of the elastic
train group in the compute subnet; each machine in a network namespace of its own, named as EC2 names it
(ip-10-20-...), then as its launch template's user data names it (the controller: forge-dev-ctl-0), and
behind nftables generated from the plan's security groups, deny by default. The roles (slurm.yml) configure
them from the dev stack's own rendering; the train instances register themselves (slurmd -Z) as
train-<instance id>, from a stand-in instance metadata service each.

What stands in, and why (each is what is left of issue 23's bench):
- tests/slurm/cluster.py's stand-ins for what AWS serves (``booted_rendering``): the secrets as Ansible vault
  variables (no Secrets Manager: moto with IAM per instance role is not on the bench yet), accounting in MariaDB
  on the controller (no RDS stand-in at the planned endpoint), /home at a stand-in mount point (no EFS stand-in),
  no scaler (no Auto Scaling or EC2 API), no EC2 topology, stand-in GPUs.
- The hardware: the train group's CPUs, cores and memory are the machine's (it is no g5.12xlarge, and slurmctld
  drains a node that reports less than its RealMemory), with two stand-in GPUs instead of four.
- No containers for jobs: their sources are served on the host's loopback, which the VPC does not reach.
"""

from __future__ import annotations

import re
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from gpuforge.nodes.bake import PlaybookResult, run_playbook
from gpuforge.nodes.instance_name import node_name
from gpuforge.plan.model import Plan
from tests.bench.plan_network import HarnessAccess, PlannedMachine, PlanNetwork, nft_ruleset, plan_network
from tests.bench.user_data import apply_user_data
from tests.machines import Machine, MachinePool, Machines
from tests.machines.vpc import HARNESS_ADDRESS, VpcHost, load_ruleset
from tests.standins.imds import StandInImds, stand_in_imds

from .cluster import (
    SLURM_IMAGE,
    booted_rendering,
    contract_vars,
    generated_secrets,
    generated_ssh_key,
    log_tails,
    node_facts,
    prepare_machine,
    run_as_user,
)

STACK = "dev"
TRAIN = "train"
TRAIN_INSTANCES = 2  # the group's max: a two-node job
HARNESS = HarnessAccess(HARNESS_ADDRESS)
DAEMON_LOGS = ("/var/log/slurm/slurmctld.log", "/var/log/slurm/slurmdbd.log", "/var/log/slurm/slurmd.log")
STAND_IN_GPUS = 2


@dataclass
class Bench:
    plan: Plan
    network: PlanNetwork
    machines: Machines
    by_key: dict[str, Machine]  # plan key (forge-dev-ctl-0, login-1, train-1...) -> machine
    config: dict[str, Any]
    first: PlaybookResult
    second: PlaybookResult
    user_key: tuple[str, str]
    imds: dict[str, StandInImds]  # train machine key -> its instance metadata
    skipped_user_data: dict[str, list[str]] = field(default_factory=dict)
    jobs: dict[str, str] = field(default_factory=dict)  # what one journey submitted, for the next

    @property
    def controller(self) -> Machine:
        return self.by_key[self.network.machines[0].key]

    @property
    def login(self) -> Machine:
        return self.by_key[self.network.node_groups["login"][0].key]

    @property
    def train(self) -> list[Machine]:
        return [self.by_key[m.key] for m in self.network.node_groups[TRAIN]]

    @property
    def train_nodes(self) -> list[str]:
        """The train machines' Slurm names: <group>-<instance id>."""
        return [node_name(TRAIN, self.imds[m.key].instance_id) for m in self.network.node_groups[TRAIN]]

    def as_user(self, command: str, timeout: float = 60) -> str:
        return run_as_user(self.login, command, timeout)

    def enforce(self, plan: Plan) -> None:
        """Load the security groups of *plan* (the bench's own, or one with a rule removed) on every machine."""
        network = plan_network(plan, {TRAIN: TRAIN_INSTANCES})
        for planned in network.machines:
            machine = self.by_key[planned.key]
            assert machine.netns is not None
            load_ruleset(machine.netns, nft_ruleset(network, planned, HARNESS))

    def diagnostics(self, lines: int = 60) -> str:
        sections = []
        for machine in self.machines:
            sections += log_tails(machine, DAEMON_LOGS, lines)
        for command in ("sinfo -N -l", "squeue -a -l", "sacct -a -X -P"):
            try:
                result = self.controller.run(command, root=True, check=False, timeout=30)
                out = (result.stdout + result.stderr).rstrip()
            except Exception as exc:
                out = f"({type(exc).__name__}: {exc})"
            sections.append(f"--- {self.controller.name}$ {command}\n{out}")
        return "\n".join(sections)


def vpc_hosts(network: PlanNetwork) -> list[VpcHost]:
    return [
        VpcHost(m.ec2_hostname, m.address, m.subnet.cidr, m.subnet.router, nft_ruleset(network, m, HARNESS))
        for m in network.machines
    ]


def bench_config(network: PlanNetwork, train: Machine, user_public_key: str) -> dict[str, Any]:
    """The dev stack's rendering with the stand-ins the module's docstring names, and nothing of its shape
    changed: its controllers, dynamic train group, partitions and login group are the plan's."""
    (controller,) = [m for m in network.machines if m.node_group == "slurm_controllers"]
    config = booted_rendering(controller.key, "forge-dev", user_public_key)
    cpus, memory = node_facts(train)
    hardware = {"CPUs": cpus, "CoresPerSocket": cpus, "ThreadsPerCore": 1, "RealMemory": memory,
                "Gres": f"gpu:a10g:{STAND_IN_GPUS}"}
    conf = _with(config["groups"][TRAIN]["conf"], hardware)
    config["groups"][TRAIN].update(conf=conf, gpus=STAND_IN_GPUS, local_nvme=False)
    for group in config["dynamic_groups"]:
        if group["name"] == TRAIN:
            group["conf"] = conf
    enroot = config["containers"]["enroot"]
    enroot["settings"][TRAIN] = enroot["settings"]["login"]  # no local NVMe on the bench
    config["containers"]["runtime"] = "none"
    return config


def _with(conf: str, values: dict[str, Any]) -> str:
    """A NodeName-style line (Key=Value ...) with *values* replaced."""
    for key, value in values.items():
        conf, found = re.subn(rf"\b{key}=\S+", f"{key}={value}", conf)
        assert found == 1, (key, conf)
    return conf


def inventory(bench_machines: dict[str, Machine], network: PlanNetwork, config: dict[str, Any],
              secret_values: dict[str, str], imds: dict[str, StandInImds]) -> dict[str, Any]:
    def host(planned: PlannedMachine, **extra: Any) -> dict[str, Any]:
        # A controller by its Slurm name, as gpuforge's inventory names it (the roles compare inventory_hostname
        # with AccountingStorageHost); every other machine by the name EC2 gave it.
        machine = bench_machines[planned.key]
        name = planned.key if planned.node_group == "slurm_controllers" else machine.name
        return {name: {**machine.ansible_vars(), **extra}}

    controllers = [m for m in network.machines if m.node_group == "slurm_controllers"]
    computes: dict[str, Any] = {}
    for planned in network.node_groups[TRAIN]:
        computes |= host(planned, gpuforge_node_group=TRAIN, slurm_compute_imds_endpoint=imds[planned.key].endpoint)
    return {
        "all": {
            "vars": {
                "slurm_config": config,
                "vault_slurm_munge_key": secret_values["munge_key"],
                "vault_slurm_db_password": secret_values["db_password"],
                "slurm_dbd_mariadb_bind_address": "127.0.0.1",
                "slurm_users_create_home": True,
            },
            "children": {
                "slurm_controller": {"hosts": {k: v for m in controllers for k, v in host(m).items()}},
                "slurm_login": {"hosts": {k: v for m in network.node_groups["login"]
                                          for k, v in host(m, gpuforge_node_group="login").items()}},
                "slurm_compute": {"hosts": computes},
            },
        }
    }


def build_bench(pool: MachinePool, plan: Plan, resources: ExitStack) -> Bench:
    network = plan_network(plan, {TRAIN: TRAIN_INSTANCES})
    start = time.monotonic()
    machines = pool.vpc_group("bench", SLURM_IMAGE, network.vpc_cidr, vpc_hosts(network))
    print(f"\nbench machines booted in {time.monotonic() - start:.1f}s")
    by_key = {planned.key: machine for planned, machine in zip(network.machines, machines, strict=True)}
    skipped = {key: apply_user_data(by_key[key], planned.user_data)
               for key, planned in ((m.key, m) for m in network.machines)}
    train_keys = [m.key for m in network.node_groups[TRAIN]]
    for key, machine in by_key.items():
        prepare_machine(machine, gpus=key in train_keys)
    imds = {key: resources.enter_context(stand_in_imds(f"i-0be0c000000000{n:03d}", HARNESS_ADDRESS))
            for n, key in enumerate(train_keys, start=1)}
    user_key = generated_ssh_key()
    config = contract_vars(bench_config(network, by_key[train_keys[0]], user_key[1]))
    inv = inventory(by_key, network, config, generated_secrets(), imds)
    start = time.monotonic()
    first = run_playbook("slurm.yml", inv)
    mid = time.monotonic()
    second = run_playbook("slurm.yml", inv) if first.ok else first
    print(f"\nbench slurm.yml: converge {mid - start:.1f}s, idempotence run {time.monotonic() - mid:.1f}s")
    return Bench(plan, network, machines, by_key, config, first, second, user_key, imds, skipped)
