"""Slurm's backup controller takes over and gives control back, on booted machines configured only by
gpuforge's roles (tests/slurm/failover.py says what stands in): both controllers run slurmctld on the one
shared state directory the roles mount; with the primary's slurmctld stopped, the backup takes control
with the jobs submitted before (same ids, in squeue and in accounting) and runs new ones; started again,
the primary takes control back with the jobs the backup ran, and serves alone."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.machines import Machine, MachinePool

from .cluster import SLURM_IMAGE, USER, wait_for
from .failover import EXPORTS, SLURMCTLD_TIMEOUT_S, STATE_EXPORT, FailoverCluster, build_failover

pytestmark = pytest.mark.slow

MEM = "--mem=64M"  # room on the one compute for every job of this file at once


@pytest.fixture(scope="module")
def slurm_failover(machine_pool: MachinePool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FailoverCluster]:
    exports = tmp_path_factory.mktemp("exports")
    export = exports / STATE_EXPORT["server"] / STATE_EXPORT["export"].lstrip("/")
    export.mkdir(parents=True)
    machines = machine_pool.group("slurmha", 3, SLURM_IMAGE, own_network=True, binds={exports: EXPORTS})
    cluster = build_failover(machines, export)
    if not cluster.first.ok:
        failures = "\n".join(f"{f.host} {f.task}: {f.message}" for f in cluster.first.failures)
        pytest.fail(f"slurm.yml failed:\n{failures}\n{cluster.diagnostics()}")
    yield cluster


def _submit(cluster: FailoverCluster, client: Machine, args: str, script: str) -> str:
    out = cluster.as_user(client, f"sbatch --parsable {MEM} {args} --wrap {json.dumps(script)}")
    return out.strip().split(";")[0]


def _queue(cluster: FailoverCluster, client: Machine) -> dict[str, str]:
    """Job id -> state, as squeue shows every job from *client*."""
    queue = _queue_if_served(cluster, client)
    assert queue is not None, f"squeue on {client.name}: no controller in control answered"
    return queue


def _queue_if_served(cluster: FailoverCluster, client: Machine) -> dict[str, str] | None:
    """squeue from *client*, or None while no controller in control answers (a backup in standby refuses)."""
    result = client.run(f"sudo -n -u {USER} -i squeue -a --noheader --format='%i %T'", check=False, timeout=90)
    if result.returncode != 0:
        return None
    return dict(line.split() for line in result.stdout.splitlines() if line.strip())


def _accounted(cluster: FailoverCluster, client: Machine, job: str) -> str:
    """The job's state in accounting (sacct), '' when slurmdbd has no record of it."""
    out = cluster.as_user(client, f"sacct -X -n -P -j {job} --format=JobID,State")
    rows = dict(line.split("|")[:2] for line in out.splitlines() if "|" in line)
    return rows.get(job, "")


def test_both_controllers_run_on_the_one_shared_state_directory(slurm_failover: FailoverCluster) -> None:
    cluster = slurm_failover
    source = f"{STATE_EXPORT['server']}:{STATE_EXPORT['export']}"
    for ctl in (cluster.primary, cluster.backup):
        assert ctl.run("systemctl is-active slurmctld", root=True).stdout.strip() == "active", ctl.name
        dropin = ctl.run("systemctl show -p RequiresMountsFor slurmctld", root=True).stdout
        assert "/var/spool/slurmctld" in dropin, (ctl.name, dropin)
        assert source in ctl.run("grep /var/spool/slurmctld /etc/fstab", root=True).stdout
    # The primary's state is in the export (its heartbeat there is what the backup watches) and the backup
    # sees the same files, the share's root being slurm's on both.
    exported = sorted(p.name for p in cluster.export.iterdir())
    assert {"clustername", "heartbeat"} <= set(exported), exported
    seen = cluster.backup.run("ls /var/spool/slurmctld; cat /var/spool/slurmctld/clustername", root=True).stdout
    assert {"clustername", "heartbeat"} <= set(seen.split()), seen
    assert seen.endswith((cluster.export / "clustername").read_text()), seen
    for ctl in (cluster.primary, cluster.backup):
        assert ctl.run("stat -c '%U %a' /var/spool/slurmctld/.", root=True).stdout.split() == ["slurm", "750"]
    # slurmdbd only where the database is: the primary (a backup slurmdbd needs a database both reach).
    assert cluster.primary.run("systemctl is-active slurmdbd", root=True).stdout.strip() == "active"
    assert cluster.backup.run("systemctl is-active slurmdbd", root=True, check=False).stdout.strip() != "active"
    assert cluster.ping(cluster.backup) == {"primary": "UP", "backup": "UP"}


def test_the_backup_takes_over_with_the_jobs_and_runs_new_ones(slurm_failover: FailoverCluster) -> None:
    cluster = slurm_failover
    running = _submit(cluster, cluster.backup, "", "sleep 600")
    held = _submit(cluster, cluster.backup, "--hold", "true")
    wait_for(f"job {running} running", lambda: _queue(cluster, cluster.backup).get(running) == "RUNNING", 120)
    before = _queue(cluster, cluster.backup)
    assert before == {running: "RUNNING", held: "PENDING"}, before
    # slurmctld tells slurmdbd a job started asynchronously (its agent queue): wait for the record, so what
    # the backup is held to is accounting the primary had written, not a race with the stop below.
    wait_for(f"job {running} accounted", lambda: _accounted(cluster, cluster.backup, running) == "RUNNING", 60)
    cluster.jobs.update(running=running, held=held)

    cluster.primary.run("systemctl stop slurmctld", root=True)
    assert cluster.ping(cluster.backup) == {"primary": "DOWN", "backup": "UP"}
    # The backup takes control once the primary has not answered for SlurmctldTimeout; until then it refuses.
    after = wait_for("the backup in control", lambda: _queue_if_served(cluster, cluster.backup),
                     SLURMCTLD_TIMEOUT_S * 6)  # fmt: skip
    assert after == before, (before, after)
    assert _accounted(cluster, cluster.backup, running) == "RUNNING"

    # The backup schedules: a job submitted now runs on the compute and is accounted; one held before
    # is released, and the running one cancelled.
    new = cluster.as_user(cluster.backup, f"srun {MEM} -N1 hostname", timeout=120).strip()
    assert new == cluster.compute.name, new
    done = _submit(cluster, cluster.backup, "", "echo ran under the backup")
    wait_for(f"job {done} completed", lambda: _accounted(cluster, cluster.backup, done) == "COMPLETED", 120)
    cluster.as_user(cluster.backup, f"scancel {running}")
    wait_for(f"job {running} cancelled", lambda: running not in _queue(cluster, cluster.backup), 120)
    assert _queue(cluster, cluster.backup) == {held: "PENDING"}
    cluster.jobs["done"] = done


def test_the_primary_takes_control_back_and_serves_alone(slurm_failover: FailoverCluster) -> None:
    cluster = slurm_failover
    jobs = cluster.jobs
    assert jobs, "needs test_the_backup_takes_over_with_the_jobs_and_runs_new_ones first"
    cluster.primary.run("systemctl start slurmctld", root=True)
    wait_for("both controllers up", lambda: cluster.ping(cluster.primary) == {"primary": "UP", "backup": "UP"}, 120)
    # The backup went back to standby rather than die: it still runs.
    assert cluster.backup.run("systemctl is-active slurmctld", root=True).stdout.strip() == "active"

    # With the backup stopped, the primary alone knows what the backup did and schedules.
    cluster.backup.run("systemctl stop slurmctld", root=True)
    assert cluster.ping(cluster.primary) == {"primary": "UP", "backup": "DOWN"}
    assert _queue(cluster, cluster.primary) == {jobs["held"]: "PENDING"}
    assert _accounted(cluster, cluster.primary, jobs["done"]) == "COMPLETED"
    assert _accounted(cluster, cluster.primary, jobs["running"]).startswith("CANCELLED")
    cluster.as_user(cluster.primary, f"scontrol release {jobs['held']}")
    wait_for(f"held job {jobs['held']} completed",
             lambda: _accounted(cluster, cluster.primary, jobs["held"]) == "COMPLETED", 120)  # fmt: skip
    after = _submit(cluster, cluster.primary, "", "true")
    assert int(after) > int(jobs["done"]), (after, jobs)  # job ids go on from the backup's, not back
    wait_for(f"job {after} completed", lambda: _accounted(cluster, cluster.primary, after) == "COMPLETED", 120)
    cluster.backup.run("systemctl start slurmctld", root=True)
    wait_for("both controllers up", lambda: cluster.ping(cluster.primary) == {"primary": "UP", "backup": "UP"}, 120)
