"""The dev stack as its plan declares it, booted (tests/slurm/bench.py says what stands in): its machines at
their planned addresses in their planned subnets, named as EC2 and their user data name them, behind their
security groups; and the journeys of a user on it: ssh to the login node, a two-node batch job, an
interactive srun and an salloc that had to queue, both in sacct, ssh from the login node into a node of
one's job (and only then). Removing the security-group rule an interactive srun needs
(slurmctld to the login node's srun ports) makes that journey hang, as it would on AWS."""

from __future__ import annotations

import base64
import json
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.bench.plan_network import without_rules
from tests.machines import MachinePool
from tests.support import planned

from .bench import STACK, Bench, build_bench
from .cluster import USER, wait_for

pytestmark = pytest.mark.slow

MEM = "--mem=64M"
SRUN_FROM_CONTROLLERS = "forge-dev-slurm-management-in-srun-controllers"


@pytest.fixture(scope="module")
def slurm_bench(machine_pool: MachinePool) -> Iterator[Bench]:
    with ExitStack() as resources:
        bench = build_bench(machine_pool, planned(STACK), resources)
        if not bench.first.ok:
            failures = "\n".join(f"{f.host} {f.task}: {f.message}" for f in bench.first.failures)
            pytest.fail(f"slurm.yml failed on the bench:\n{failures}\n{bench.diagnostics()}")
        yield bench


def _sacct(bench: Bench, job: str) -> dict[str, str]:
    out = bench.as_user(f"sacct -X -n -P -j {job} --format=JobID,State,NodeList")
    rows = {line.split("|")[0]: line.split("|") for line in out.splitlines() if "|" in line}
    _, state, nodes = rows.get(job, ["", "", ""])
    return {"State": state, "NodeList": nodes}


def _idle_train_nodes(bench: Bench) -> list[str]:
    out = bench.controller.run("sinfo -N -h -o '%N %t'", root=True, check=False).stdout
    # A node is listed once per partition it is in (gpu and debug).
    return sorted({name for name, state in (line.split() for line in out.splitlines() if line.strip())
                   if state == "idle" and name in bench.train_nodes})


def _wait_for_idle_train_nodes(bench: Bench) -> None:
    wait_for("both train nodes idle", lambda: _idle_train_nodes(bench) == sorted(bench.train_nodes), timeout_s=180)


def _assert_granted_on_both_train_nodes(bench: Bench, result: subprocess.CompletedProcess[str]) -> None:
    """A queued srun or salloc (its result) that waited, was granted and ran `hostname` on both train nodes."""
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "queued and waiting for resources" in result.stderr, result.stderr
    assert sorted(result.stdout.split()) == sorted(m.name for m in bench.train)


def _blocker(bench: Bench) -> str:
    """A job that holds both train nodes for a while, so the next one queues."""
    out = bench.as_user(f"sbatch --parsable -N2 --exclusive {MEM} --wrap 'sleep 20'")
    return out.strip().split(";")[0]


def test_the_roles_converge_on_the_bench_and_change_nothing_the_second_time(slurm_bench: Bench) -> None:
    second = slurm_bench.second
    assert second.ok, [f"{f.host} {f.task}: {f.message}" for f in second.failures]
    assert second.changed == 0, second.summary_rows()


def test_every_machine_sits_at_its_planned_address_with_the_name_ec2_and_its_user_data_give_it(
    slurm_bench: Bench,
) -> None:
    for planned_machine in slurm_bench.network.machines:
        machine = slurm_bench.by_key[planned_machine.key]
        addresses = machine.run("ip -4 -o addr show dev eth0", root=True).stdout
        assert f"inet {planned_machine.address}/{planned_machine.subnet.prefix_length}" in addresses
        route = machine.run("ip route show default", root=True).stdout
        assert f"via {planned_machine.subnet.router}" in route
        # The controller is named as slurm.conf names it by its user data; the others keep EC2's IP name.
        expected = planned_machine.key if planned_machine.node_group == "slurm_controllers" \
            else planned_machine.ec2_hostname
        assert machine.run("hostname", root=True).stdout.strip() == expected, planned_machine.key
        assert machine.name == planned_machine.ec2_hostname


def test_the_security_groups_admit_only_what_the_plan_opens(slurm_bench: Bench) -> None:
    train = slurm_bench.train[0]
    ctl = slurm_bench.network.machines[0].address

    def reaches(port: int) -> bool:
        probe = f"timeout 5 bash -c '</dev/tcp/{ctl}/{port}'"
        return train.run(probe, root=True, check=False).returncode == 0

    assert reaches(6817)  # compute to controller: slurmctld
    assert not reaches(6819)  # slurmdbd is open to controllers and login nodes only
    assert not reaches(22)  # no SSH to the controller from anywhere the plan declares


def test_the_train_instances_register_themselves_under_their_instance_ids(slurm_bench: Bench) -> None:
    _wait_for_idle_train_nodes(slurm_bench)


def test_a_user_sshes_to_the_login_node_with_their_own_key(slurm_bench: Bench) -> None:
    private, _ = slurm_bench.user_key
    login = slurm_bench.login
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "id_ed25519"
        key.write_text(private)
        key.chmod(0o600)
        options = login.ssh_options()
        options[options.index("-i") + 1] = str(key)  # the user's key, not the harness's
        result = subprocess.run(["ssh", *options, f"{USER}@{login.address}", "id -un; hostname"],
                                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [USER, login.name]


def test_a_two_node_batch_job_runs_on_both_train_nodes(slurm_bench: Bench) -> None:
    _wait_for_idle_train_nodes(slurm_bench)
    job = slurm_bench.as_user(f"sbatch --parsable -N2 {MEM} --wrap 'srun hostname'").strip().split(";")[0]
    wait_for(f"job {job} completed", lambda: _sacct(slurm_bench, job)["State"] == "COMPLETED", timeout_s=120)
    nodes = slurm_bench.as_user(f"scontrol show hostnames $(sacct -X -n -P -j {job} --format=NodeList)").split()
    assert sorted(nodes) == sorted(slurm_bench.train_nodes)
    slurm_bench.jobs["batch"] = job


def _queued(bench: Bench, client: str, timeout_s: int) -> tuple[str, subprocess.CompletedProcess[str]]:
    """Run *client* (srun or salloc, with its arguments) on the login node as the user, for two nodes and
    behind a job that holds both: (the blocker's id, the client's result)."""
    blocker = _blocker(bench)
    wait_for(f"job {blocker} running", lambda: _sacct(bench, blocker)["State"] == "RUNNING", timeout_s=60)
    command = f"timeout {timeout_s} {client}"
    result = bench.login.run(f"sudo -n -u {USER} -i sh -c {json.dumps(command)}", check=False,
                             timeout=timeout_s + 30)
    return blocker, result


def test_an_interactive_srun_that_had_to_queue_runs_once_granted(slurm_bench: Bench) -> None:
    _wait_for_idle_train_nodes(slurm_bench)
    blocker, result = _queued(slurm_bench, f"srun -N2 {MEM} hostname", 120)
    _assert_granted_on_both_train_nodes(slurm_bench, result)
    # Accounting has the batch job of the journey before and this one.
    batch = slurm_bench.jobs.get("batch")
    out = slurm_bench.as_user("sacct -X -n -P --format=JobID,JobName,State")
    rows = {line.split("|")[0]: line.split("|") for line in out.splitlines() if "|" in line}
    assert rows[blocker][2] == "COMPLETED", rows
    assert any(name == "hostname" and state == "COMPLETED" for _, name, state in rows.values()), rows
    if batch:
        assert rows[batch][2] == "COMPLETED", rows


def test_an_salloc_that_had_to_queue_gets_its_allocation(slurm_bench: Bench) -> None:
    _wait_for_idle_train_nodes(slurm_bench)
    _, result = _queued(slurm_bench, f"salloc -N2 {MEM} srun hostname", 120)
    _assert_granted_on_both_train_nodes(slurm_bench, result)


# Each rank: its rank, the world's size, its node, and an allreduce of the ranks (over Open MPI's own transport).
MPI_PROGRAM = ("from mpi4py import MPI; c = MPI.COMM_WORLD; "
               "print(c.Get_rank(), c.Get_size(), MPI.Get_processor_name(), c.allreduce(c.Get_rank()), flush=True)")


def test_an_mpi_program_runs_across_both_train_nodes_through_pmix(slurm_bench: Bench) -> None:
    _wait_for_idle_train_nodes(slurm_bench)
    config = slurm_bench.as_user("scontrol show config")
    assert any(line.split() == ["MpiDefault", "=", "pmix"] for line in config.splitlines()), config
    # Debian's Open MPI (python3-mpi4py), wired up by slurmstepd's PMIx server: no mpirun, no ssh.
    srun = "srun -N2 --ntasks-per-node=1 --mpi=pmix --mem=256M"
    out = slurm_bench.as_user(f"{srun} python3 -c {shlex.quote(MPI_PROGRAM)}", timeout=120)
    ranks = sorted(line.split() for line in out.splitlines() if line.strip())
    assert [rank for rank, *_ in ranks] == ["0", "1"], out
    assert all(size == "2" and total == "1" for _, size, _, total in ranks), out
    assert sorted(node for _, _, node, _ in ranks) == sorted(m.name for m in slurm_bench.train), out
    for machine in slurm_bench.train:  # slurmd and slurmstepd opened the plugin's PMIx library
        log = machine.run("cat /var/log/slurm/slurmd.log", root=True).stdout
        assert "can not load PMIx library" not in log, log[-2000:]


def test_a_user_sshes_from_the_login_node_only_into_a_node_of_their_job(slurm_bench: Bench) -> None:
    _wait_for_idle_train_nodes(slurm_bench)
    private, _ = slurm_bench.user_key
    key = f"/home/{USER}/.ssh/id_ed25519"
    slurm_bench.login.run(  # the user's own key, on the login node
        f"install -d -m 0700 -o {USER} -g {USER} /home/{USER}/.ssh && "
        f"echo {base64.b64encode(private.encode()).decode()} | base64 -d > {key} && chown {USER}: {key} && "
        f"chmod 0600 {key}", root=True)
    target, node = slurm_bench.train[0], slurm_bench.train_nodes[0]

    def ssh() -> subprocess.CompletedProcess[str]:
        command = f"ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null {target.name} " \
                  "cat /proc/self/cgroup"
        return slurm_bench.login.run(f"sudo -n -u {USER} -i sh -c {json.dumps(command)}", check=False, timeout=60)

    refused = ssh()  # reached through the security group (SSH from management), then refused by pam_slurm_adopt
    assert refused.returncode != 0 and "Connection timed out" not in refused.stderr, refused.stderr
    job = slurm_bench.as_user(f"sbatch --parsable -N1 -w {node} {MEM} --wrap 'sleep 300'").strip().split(";")[0]
    try:
        wait_for(f"job {job} running", lambda: job in slurm_bench.as_user("squeue -h -t RUNNING -o %i").split())
        admitted = ssh()
        assert admitted.returncode == 0, admitted.stderr
        assert f"job_{job}/step_extern" in admitted.stdout, admitted.stdout
    finally:
        slurm_bench.as_user(f"scancel {job}")


def test_without_the_srun_rule_from_the_controllers_a_queued_srun_hangs(slurm_bench: Bench) -> None:
    _wait_for_idle_train_nodes(slurm_bench)
    slurm_bench.enforce(without_rules(slurm_bench.plan, SRUN_FROM_CONTROLLERS))
    try:
        # The blocker ends after 20 s; the srun's allocation is granted then, but slurmctld cannot tell it.
        _, result = _queued(slurm_bench, f"srun -N2 {MEM} hostname", 75)
    finally:
        slurm_bench.enforce(slurm_bench.plan)
        slurm_bench.controller.run(f"scancel -u {USER}", root=True, check=False)
    assert result.returncode != 0, (result.stdout, result.stderr)
    assert "queued and waiting for resources" in result.stderr, result.stderr
    assert result.stdout.strip() == "", result.stdout
