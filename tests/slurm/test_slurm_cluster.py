"""A Slurm cluster with real daemons on booted machines, configured only by gpuforge's roles and the
rendered configuration (tests/slurm/cluster.py says what stands in). A regular user submits from the
login machine; jobs run on the computes, show in accounting, a node whose prolog health check fails
is drained with its reason while the job runs elsewhere, a cloud node joins its partition by itself,
`gpuforge check --drain slurm --execute-drain` drains a node in the running controller, and a user may
ssh to a compute only into a job of their own there (pam_slurm_adopt)."""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import secrets
import shlex
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuforge.catalog import load_catalog
from gpuforge.nodes.bake import PlaybookResult, run_playbook
from gpuforge.nodes.check import run_checks
from gpuforge.nodes.usage_query import collect_usage
from tests.machines import Machine

from .cluster import (
    ACCOUNT,
    CAPPED_ACCOUNT,
    CAPPED_GPUS,
    GPUS,
    HOME_AUTOMOUNT,
    HOME_FSTAB,
    NVIDIA_SMI_CSV,
    REST_PORT,
    STANDIN_DIR,
    TEAM_QOS,
    USER,
    SlurmCluster,
    contract_vars,
    wait_for,
)

pytestmark = pytest.mark.slow

# A requeued job waits for its new begin time (about two minutes) before it runs again.
JOB_TIMEOUT_S = 300


def _node(cluster: SlurmCluster, name: str) -> dict[str, str]:
    """`scontrol show node NAME` as a dict (State, Reason, Gres, Partitions, ...)."""
    text = cluster.controller.run(f"scontrol show node {name}", root=True, check=False).stdout
    fields: dict[str, str] = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
    if "Reason" in fields:  # the reason may hold spaces: take the rest of its line
        line = next(line for line in text.splitlines() if "Reason=" in line)
        fields["Reason"] = line.split("Reason=", 1)[1].strip()
    return fields


def _idle(cluster: SlurmCluster, name: str) -> bool:
    return _node(cluster, name).get("State", "").split("+")[0] == "IDLE"


def _sacct(cluster: SlurmCluster, job: str) -> list[dict[str, str]]:
    fields = "JobID,User,Account,State,NodeList,ExitCode"
    out = cluster.as_user(f"sacct -j {job} --noheader --parsable2 --format={fields}")
    return [dict(zip(fields.split(","), line.split("|"), strict=True)) for line in out.splitlines() if line]


def _submit(cluster: SlurmCluster, args: str, script: str) -> str:
    out = cluster.as_user(f"sbatch --parsable {args} --wrap {json.dumps(script)}")
    return out.strip().split(";")[0]


def _finished(cluster: SlurmCluster, job: str) -> dict[str, str] | None:
    rows = [row for row in _sacct(cluster, job) if row["JobID"] == job]
    return rows[0] if rows and rows[0]["State"] not in ("PENDING", "RUNNING", "REQUEUED", "") else None


def test_roles_converge_then_change_nothing(slurm_cluster: SlurmCluster) -> None:
    second = slurm_cluster.second
    assert second.ok, [f"{f.host} {f.task}: {f.message}" for f in second.failures]
    assert second.changed == 0, second.summary_rows()


def test_daemons_run_where_their_roles_put_them(slurm_cluster: SlurmCluster) -> None:
    active = "systemctl is-active {}"
    ctl = slurm_cluster.controller
    assert ctl.run(active.format("munge mariadb slurmdbd slurmctld"), root=True).stdout.split() == ["active"] * 4
    for compute in (*slurm_cluster.computes, slurm_cluster.cloud):
        assert compute.run(active.format("munge slurmd"), root=True).stdout.split() == ["active"] * 2
        # Configless: the node holds no slurm.conf of its own, slurmd fetched it from the controller.
        assert compute.run("test ! -e /etc/slurm/slurm.conf", check=False).returncode == 0
    # The same MUNGE key everywhere (a credential made on the login machine decodes on the controller).
    cred = slurm_cluster.login.run("munge -n").stdout
    decoded = ctl.run(f"echo {cred.strip()} | unmunge", check=False)
    assert decoded.returncode == 0, decoded.stderr


def test_the_controllers_node_exporter_serves_the_slurm_collectors_series(slurm_cluster: SlurmCluster) -> None:
    """What Prometheus scrapes on a controller (flows.yaml: monitoring -> controller on 9100; issue 23): the Slurm
    collector's textfile series, which every Slurm alert reads, through node_exporter."""
    ctl = slurm_cluster.controller
    assert ctl.run("systemctl is-enabled gpuforge-slurm-metrics.timer", root=True).stdout.strip() == "enabled"
    ctl.run("systemctl start gpuforge-slurm-metrics.service", root=True)
    # The machine's python (Ansible's), as Prometheus would ask: HTTP GET /metrics on the exporter's address.
    metrics = ctl.run("python3 -c \"import urllib.request as u; "
                      f"print(u.urlopen('http://{ctl.address}:9100/metrics').read().decode())\"").stdout
    assert "gpuforge_slurm_up 1" in metrics, metrics[-2000:]


def test_every_slurm_machine_has_the_shared_home_in_fstab_and_its_automount_unit(slurm_cluster: SlurmCluster) -> None:
    """slurm.yml mounts slurm_config.home on the controller, the login machine and every compute (site_mounts):
    the fstab entry and its automount unit, active. Not accessed: this kernel has no NFS client and there is
    no file server (cluster.py, HOME_STAND_IN)."""
    for machine in slurm_cluster.machines:
        fstab = machine.run("cat /etc/fstab").stdout
        assert HOME_FSTAB in fstab, (machine.name, fstab)
        assert machine.run(f"systemctl is-active {HOME_AUTOMOUNT}").stdout.strip() == "active", machine.name
        assert machine.run("dpkg-query -W -f '${Status}' nfs-common").stdout == "install ok installed"
    # One controller: no shared state directory, so slurmctld requires no mount.
    dropin = "/etc/systemd/system/slurmctld.service.d/gpuforge-state.conf"
    assert slurm_cluster.controller.run(f"test ! -e {dropin}", check=False).returncode == 0


def test_secrets_stay_out_of_logs_and_configs_readable_by_users(slurm_cluster: SlurmCluster) -> None:
    for result in (slurm_cluster.first, slurm_cluster.second):
        for value in slurm_cluster.secrets.values():
            assert value not in result.stdout
    ctl = slurm_cluster.controller
    assert ctl.run("stat -c '%U %a' /etc/munge/munge.key", root=True).stdout.split() == ["munge", "400"]
    assert ctl.run("stat -c '%U %a' /etc/slurm/slurmdbd.conf", root=True).stdout.split() == ["slurm", "600"]


def test_the_local_accounting_database_is_dumped_nightly(slurm_cluster: SlurmCluster) -> None:
    """MariaDB on the controller (the site path) has no managed backups: the role's timer is enabled, and
    its service writes a compressed dump of the accounting database that holds slurmdbd's tables."""
    ctl = slurm_cluster.controller
    assert ctl.run("systemctl is-enabled gpuforge-slurmdbd-dump.timer", root=True).stdout.strip() == "enabled"
    ctl.run("systemctl start gpuforge-slurmdbd-dump.service", root=True)
    dumps = ctl.run("ls /var/backups/slurmdbd", root=True).stdout.split()
    assert len(dumps) == 1 and dumps[0].startswith("slurm_acct_db-") and dumps[0].endswith(".sql.gz"), dumps
    tables = ctl.run(f"zcat /var/backups/slurmdbd/{dumps[0]} | grep -c 'CREATE TABLE'", root=True).stdout
    assert int(tables) > 5  # slurmdbd's own tables (acct_table, cluster_table, ..., <cluster>_job_table)
    assert ctl.run("stat -c '%U %a' /var/backups/slurmdbd", root=True).stdout.split() == ["root", "700"]


def test_user_job_runs_on_two_computes_and_is_accounted(slurm_cluster: SlurmCluster) -> None:
    job = _submit(slurm_cluster, f"-N2 -p gpu --gres=gpu:{GPUS}", "srun hostname")
    row = wait_for(f"job {job} to finish", lambda: _finished(slurm_cluster, job), JOB_TIMEOUT_S)
    assert row["State"] == "COMPLETED", _sacct(slurm_cluster, job)
    assert (row["User"], row["Account"]) == (USER, ACCOUNT)
    steps = {r["JobID"]: r for r in _sacct(slurm_cluster, job)}
    step = steps[f"{job}.0"]  # the srun step ran on both computes
    expanded = slurm_cluster.controller.run(f"scontrol show hostnames {step['NodeList']}").stdout.split()
    assert sorted(expanded) == sorted(m.name for m in slurm_cluster.computes)
    assert step["State"] == "COMPLETED"


def test_cloud_node_registers_itself_with_its_gres(slurm_cluster: SlurmCluster) -> None:
    # Named from its instance metadata (IMDSv2, a stand-in here) by slurmd's unit: cloud-<instance id>.
    name = slurm_cluster.cloud_node
    assert name == f"cloud-{slurm_cluster.imds.instance_id}" and name != slurm_cluster.cloud.name
    # slurm.conf names no such node: it came from slurmd -Z --conf "... Gres=... Feature=group_cloud".
    assert name not in slurm_cluster.controller.run("cat /etc/slurm/slurm.conf").stdout
    node = wait_for(f"{name} to register", lambda: _idle(slurm_cluster, name) and _node(slurm_cluster, name))
    assert node["Gres"].startswith(f"gpu:a10g:{GPUS}"), node
    assert "group_cloud" in node["AvailableFeatures"]
    assert node["Partitions"] == "cloud"
    assert slurm_cluster.as_user("sinfo --noheader -p cloud -o %N").split() == [name]


def test_failing_prolog_drains_the_node_and_the_job_runs_elsewhere(slurm_cluster: SlurmCluster) -> None:
    first, second = slurm_cluster.computes
    wait_for("both computes idle", lambda: _idle(slurm_cluster, first.name) and _idle(slurm_cluster, second.name))
    # A GPU falls off the bus on the first compute: nvidia-smi lists one GPU of two.
    csv = first.root / STANDIN_DIR.lstrip("/") / "nvidia-smi.csv"
    csv.write_text("".join(NVIDIA_SMI_CSV.splitlines(keepends=True)[:2]))
    try:
        # Both computes idle: Slurm picks the first in its node table, the broken one.
        job = _submit(slurm_cluster, "-N1 -p gpu", "hostname")
        drained = wait_for(
            f"{first.name} drained by its prolog",
            lambda: "DRAIN" in _node(slurm_cluster, first.name).get("State", "") and _node(slurm_cluster, first.name),
        )
        assert "found 1 GPUs, expected 2" in drained["Reason"], drained
        assert first.name in slurm_cluster.as_user("sinfo -R --noheader -o '%N %E'")
        # Requeued, not held: pending until a begin time slurmctld sets past the job credential's lifetime
        # (120 s), so the old credential cannot start it twice. The test brings that time forward.
        pending = wait_for(f"job {job} requeued", lambda: _pending_reason(slurm_cluster, job))
        assert pending == "BeginTime", pending
        slurm_cluster.scontrol("update", f"jobid={job}", "StartTime=now")
        # The job was requeued (not held) and runs on the healthy compute.
        row = wait_for(f"job {job} to finish elsewhere", lambda: _finished(slurm_cluster, job), JOB_TIMEOUT_S)
        assert row["State"] == "COMPLETED" and row["NodeList"] == second.name, _sacct(slurm_cluster, job)
        assert "Restarts=1" in slurm_cluster.scontrol("show", "job", job) or _requeued(slurm_cluster, job)
    finally:
        csv.write_text(NVIDIA_SMI_CSV)
        slurm_cluster.scontrol("update", f"nodename={first.name}", "state=resume")


def _pending_reason(cluster: SlurmCluster, job: str) -> str | None:
    """The reason *job* is pending (squeue's %r); None while it is not pending or not yet evaluated."""
    reason = cluster.as_user(f"squeue -j {job} --noheader -t PENDING -o %r").strip()
    return reason if reason not in ("", "None") else None


def _requeued(cluster: SlurmCluster, job: str) -> bool:
    """Whether accounting holds an earlier, requeued run of *job* (sacct --duplicates)."""
    out = cluster.as_user(f"sacct -j {job} --noheader --parsable2 --duplicates --format=JobID,State")
    return any(line.split("|") == [job, "REQUEUED"] for line in out.splitlines())


def test_gpuforge_check_drains_a_named_node_in_the_running_controller(slurm_cluster: SlurmCluster) -> None:
    """`gpuforge check --drain slurm --execute-drain`: healthcheck.yml judges the node over SSH, then
    slurm-drain.yml runs scontrol on the controller."""
    target = slurm_cluster.computes[1]
    wait_for(f"{target.name} idle", lambda: _idle(slurm_cluster, target.name))
    inventory = copy.deepcopy(slurm_cluster.inventory)
    compute_hosts = inventory["all"]["children"]["slurm_compute"]["hosts"]
    inventory["all"]["children"]["gpu_nodes"] = {
        "hosts": {target.name: compute_hosts[target.name]},
        "vars": {"gpu_healthcheck_expected_gpus": GPUS, "gpu_healthcheck_textfile_dir": None},
    }
    target.run("mkdir -p /var/lib/gpuforge/healthcheck", root=True)
    csv = target.root / STANDIN_DIR.lstrip("/") / "nvidia-smi.csv"
    csv.write_text("".join(NVIDIA_SMI_CSV.splitlines(keepends=True)[:2]))  # one GPU of two
    try:
        report = run_checks(inventory, checks=("gpu",), limit=target.name, drain="slurm", execute_drain=True)
        assert report.failing == [target.name]
        assert report.drain is not None and report.drain.ok, report.drain and report.drain.failures
        node = _node(slurm_cluster, target.name)
        assert "DRAIN" in node["State"] and "found 1 GPUs, expected 2" in node["Reason"], node
        assert target.name in slurm_cluster.as_user("sinfo -R --noheader -o '%N %E'")
    finally:
        csv.write_text(NVIDIA_SMI_CSV)
        slurm_cluster.scontrol("update", f"nodename={target.name}", "state=resume")


def _ssh_as_user(cluster: SlurmCluster, target: str, command: str) -> tuple[int, str, str]:
    """ssh from the login machine to *target* as the cluster user (with the key the test gave them)."""
    ssh = f"ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null {target} {command}"
    result = cluster.login.run(f"sudo -n -u {USER} -i sh -c {json.dumps(ssh)}", check=False, timeout=60)
    return result.returncode, result.stdout, result.stderr


def _pam_diagnostics(target: Machine) -> str:
    """What pam_slurm_adopt on *target* sees: the configuration a client finds without slurm.conf
    (configless), slurmd's cache, the PAM stack and the module's log."""
    probes = (
        "ls -la /run/slurm/conf /etc/slurm 2>&1",
        "scontrol show config 2>&1 | grep -E 'SlurmdSpoolDir|ClusterName|^Config' | head",
        "grep -n slurm /etc/pam.d/sshd",
        "journalctl --no-pager -n 40 2>&1 | grep -iE 'pam|slurm' | tail -20",
    )
    return "\n".join(f"$ {p}\n{target.run(p, root=True, check=False).stdout}" for p in probes)


def _give_the_user_their_key(cluster: SlurmCluster) -> None:
    """The user's private key on the login machine (a user brings their own); its public half is in
    slurm_config.users, which slurm_users authorized on the computes."""
    private, _ = cluster.user_key
    key = f"/home/{USER}/.ssh/id_ed25519"
    cluster.login.run(
        f"install -d -m 0700 -o {USER} -g {USER} /home/{USER}/.ssh && "
        f"echo {base64.b64encode(private.encode()).decode()} | base64 -d > {key} && "
        f"chown {USER}: {key} && chmod 0600 {key}",
        root=True,
    )


def _admitted_only_into_ones_own_job(
    cluster: SlurmCluster, target: Machine, node: str, partition: str, in_job: Callable[[], None] = lambda: None
) -> None:
    """A user's ssh to *target* (Slurm node *node*) with no job of theirs there is refused by pam_slurm_adopt;
    with a job there it is admitted, into the job's extern step. *in_job* runs while the job does, first."""
    wait_for(f"{node} idle", lambda: _idle(cluster, node))
    # The production task (slurm_users) wrote the spec's key, and only it, for the user on this compute.
    authorized = target.run(f"cat /home/{USER}/.ssh/authorized_keys", root=True).stdout
    assert authorized.splitlines() == [cluster.user_key[1]], authorized
    _give_the_user_their_key(cluster)
    assert "pam_systemd" not in target.run("cat /etc/pam.d/common-session", root=True).stdout

    code, out, err = _ssh_as_user(cluster, target.name, "true")
    assert code != 0, (out, err, _pam_diagnostics(target))
    # pam_slurm_adopt's refusal (to the client, and in sshd's log on the compute): the account stack said no.
    denied = err + target.run("journalctl --no-pager -n 80", root=True).stdout
    assert "pam_slurm_adopt" in denied or "by PAM account configuration" in denied, err

    job = _submit(cluster, f"-N1 -p {partition} -w {node}", "sleep 300")
    try:
        wait_for(f"job {job} running", lambda: job in cluster.as_user("squeue -h -t RUNNING -o %i").split())
        in_job()
        code, out, err = _ssh_as_user(cluster, target.name, "cat /proc/self/cgroup")
        assert code == 0, (err, _pam_diagnostics(target))
        # cgroup v1 here (job_<id>/step_extern under each controller); cgroup v2 nodes show the same path.
        assert f"job_{job}/step_extern" in out, out
    finally:
        cluster.as_user(f"scancel {job}")


def test_ssh_to_a_compute_is_admitted_only_into_ones_own_job(slurm_cluster: SlurmCluster) -> None:
    """pam_slurm_adopt (slurm_compute role): a user's ssh to a compute where they have no job is refused;
    with a job there it is admitted, and the session lands in the job's cgroup (the extern step), so Slurm
    accounts for it and kills it with the job. pam_systemd, which would move it out, is gone. The user's
    key is the spec's (slurm_config.users[].ssh_public_keys), authorized by the slurm_users role."""
    target = slurm_cluster.computes[0]
    _admitted_only_into_ones_own_job(slurm_cluster, target, target.name, "gpu")


PAM_FILE = "/etc/pam.d/gpuforge-slurm-adopt"  # slurm_compute_pam_adopt_file


def test_ssh_to_a_cloud_node_is_admitted_only_into_ones_own_job(slurm_cluster: SlurmCluster) -> None:
    """The same on the cloud node, whose Slurm name (cloud-<instance id>) is not its host name and is in no
    slurm.conf: slurmd's unit writes it into the PAM lines sshd includes (nodename=) when it names slurmd.
    Without it the module could not find the node's job steps and refused the user even in their job."""
    cloud = slurm_cluster.cloud
    name = slurm_cluster.cloud_node
    pam = cloud.run(f"cat {PAM_FILE}", root=True).stdout
    assert f"pam_slurm_adopt.so action_no_jobs=deny action_generic_failure=deny nodename={name}" in pam, pam
    assert "account include gpuforge-slurm-adopt" in cloud.run("cat /etc/pam.d/sshd", root=True).stdout

    def without_the_name() -> None:
        # The lines as a static node has them (no nodename=): the module looks the node up by its host name,
        # finds none, and refuses the user even in their job. Then the file slurmd's unit wrote, back.
        cloud.run(f"cp {PAM_FILE} {PAM_FILE}.boot && sed -i 's/ nodename=[^ ]*$//' {PAM_FILE}", root=True)
        try:
            code, out, err = _ssh_as_user(slurm_cluster, cloud.name, "true")
            assert code != 0, (out, err)
        finally:
            cloud.run(f"mv {PAM_FILE}.boot {PAM_FILE}", root=True)

    _admitted_only_into_ones_own_job(slurm_cluster, cloud, name, "cloud", in_job=without_the_name)


# --- A cluster many teams share (issue 25): settings, preemption, shared GPU nodes ---


def test_slurmctld_runs_the_shared_cluster_settings(slurm_cluster: SlurmCluster) -> None:
    """The settings slurm.conf carries for a shared cluster, as the running slurmctld took them (22.05 here; the
    credential setting by the name slurm.conf(5) documents from 22.05 to 24.11, CredType)."""
    shown = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition("=") for line in slurm_cluster.scontrol("show", "config").splitlines())
    )
    assert shown["PreemptType"] == "preempt/qos" and shown["PreemptMode"] == "REQUEUE", shown
    assert shown["EnforcePartLimits"] == "NO" and shown["UnkillableStepTimeout"].split()[0] == "180", shown
    assert shown["LaunchParameters"] == "use_interactive_step", shown
    assert set(shown["PrivateData"].split(",")) == {"accounts", "jobs", "reservations", "usage", "users"}, shown
    assert "MAX_TRES" in shown["PriorityFlags"] and shown["PriorityWeightQOS"] == "2000", shown
    assert (shown.get("CredType") or shown.get("CryptoType", "")).endswith("/munge"), shown
    conf = slurm_cluster.controller.run("cat /etc/slurm/slurm.conf").stdout
    settings = [line.partition("=")[0] for line in conf.splitlines() if not line.startswith("#")]
    assert "CredType" in settings and "CryptoType" not in settings, conf


def _job(cluster: SlurmCluster, job: str) -> dict[str, str]:
    """`scontrol show job -o JOB` as a dict (JobState, Restarts, TRES, ...)."""
    text = cluster.scontrol("show", "job", "-o", job)
    return dict(token.partition("=")[::2] for token in text.split() if "=" in token)


def _state(cluster: SlurmCluster, job: str) -> str:
    return _job(cluster, job).get("JobState", "")


def _mib(amount: str) -> int:
    """Slurm's memory figure (4000M, 4G, 1.50T) in MiB."""
    scale = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
    return round(float(amount[:-1]) * scale[amount[-1]]) if amount[-1] in scale else int(amount)


def test_two_one_gpu_jobs_share_a_two_gpu_node(slurm_cluster: SlurmCluster) -> None:
    """Jobs that name no CPUs or memory get their GPU's share (DefCpuPerGPU, DefMemPerCPU), not the whole
    node's memory: two 1-GPU jobs run side by side on one 2-GPU compute."""
    node = slurm_cluster.computes[0].name
    wait_for(f"{node} idle", lambda: _idle(slurm_cluster, node))
    jobs = [_submit(slurm_cluster, f"-p gpu -w {node} --gres=gpu:1", "sleep 120") for _ in range(2)]
    try:
        wait_for("both 1-GPU jobs running", lambda: all(_state(slurm_cluster, j) == "RUNNING" for j in jobs), 60)
        partition = {p["name"]: p for p in slurm_cluster.config["partitions"]}["gpu"]
        for job in jobs:
            shown = _job(slurm_cluster, job)
            # 22.05 shows the allocation as TRES=, later releases as AllocTRES=.
            tres = dict(item.split("=", 1) for item in (shown.get("AllocTRES") or shown["TRES"]).split(","))
            assert tres["cpu"] == str(partition["def_cpu_per_gpu"]), tres
            assert _mib(tres["mem"]) == partition["def_mem_per_cpu"] * partition["def_cpu_per_gpu"], tres
    finally:
        slurm_cluster.as_user("scancel " + " ".join(jobs))


def test_a_debug_job_does_not_requeue_a_running_training_job(slurm_cluster: SlurmCluster) -> None:
    """debug sits at a higher PriorityTier over the same nodes: its job waits for the GPUs; the training job
    that holds them keeps running (no partition-tier preemption)."""
    node = slurm_cluster.computes[0].name
    wait_for(f"{node} idle", lambda: _idle(slurm_cluster, node))
    training = _submit(slurm_cluster, f"-p gpu -w {node} --gres=gpu:{GPUS}", "sleep 300")
    debug = None
    try:
        wait_for("the training job running", lambda: _state(slurm_cluster, training) == "RUNNING", 60)
        debug = _submit(slurm_cluster, f"-p debug -w {node} --gres=gpu:1", "hostname")
        reason = wait_for(f"debug job {debug} evaluated", lambda: _pending_reason(slurm_cluster, debug), 60)
        assert reason in ("Resources", "Priority"), reason
        time.sleep(15)  # partition_prio preempted within a scheduling pass (seconds): give it several
        assert _state(slurm_cluster, training) == "RUNNING", _job(slurm_cluster, training)
        assert _job(slurm_cluster, training)["Restarts"] == "0"
        assert _state(slurm_cluster, debug) == "PENDING"
    finally:
        slurm_cluster.as_user(f"scancel {training} {debug or ''}")


def test_a_scavenger_job_is_preempted_after_its_grace_signal(slurm_cluster: SlurmCluster) -> None:
    """preempt/qos: a scavenger job on idle GPUs gets SIGTERM when a normal job needs them, has its
    GraceTime to write a checkpoint, and is requeued; the normal job then runs."""
    compute = slurm_cluster.computes[1]
    wait_for(f"{compute.name} idle", lambda: _idle(slurm_cluster, compute.name))
    marker = f"/home/{USER}/scavenger-grace"
    compute.run(f"rm -f {marker}", root=True)
    # The checkpoint on SIGTERM, then on until SIGKILL at the end of the grace time: a job that ended by itself
    # would complete, not be requeued.
    step = f"trap 'echo checkpointed > {marker}' TERM; while true; do sleep 1; done"
    scavenger = _submit(slurm_cluster, f"-p gpu -w {compute.name} --gres=gpu:{GPUS} --qos=scavenger",
                        f"srun sh -c {json.dumps(step)}")
    normal = None
    try:
        wait_for("the scavenger job running", lambda: _state(slurm_cluster, scavenger) == "RUNNING", 60)
        normal = _submit(slurm_cluster, f"-p gpu -w {compute.name} --gres=gpu:{GPUS}", "hostname")
        wait_for("the grace signal's checkpoint", lambda: compute.run(f"cat {marker}", check=False).stdout, 60)
        row = wait_for(f"job {normal} to finish", lambda: _finished(slurm_cluster, normal), JOB_TIMEOUT_S)
        assert row["State"] == "COMPLETED", _sacct(slurm_cluster, normal)
        assert _job(slurm_cluster, scavenger)["Restarts"] == "1" or _requeued(slurm_cluster, scavenger)
    finally:
        slurm_cluster.as_user(f"scancel {scavenger} {normal or ''}")


def test_an_account_over_its_gpu_limit_waits_with_the_limit_as_its_reason(slurm_cluster: SlurmCluster) -> None:
    """max_gpus is the account's GrpTRES=gres/gpu=N in slurmdbd: with its GPU in use, the next job charged to it
    waits (AssocGrpGRES) although GPUs are free."""
    running = _submit(slurm_cluster, f"-A {CAPPED_ACCOUNT} -p gpu --gres=gpu:{CAPPED_GPUS}", "sleep 120")
    waiting = None
    try:
        wait_for("the capped account's first job running", lambda: _state(slurm_cluster, running) == "RUNNING", 60)
        waiting = _submit(slurm_cluster, f"-A {CAPPED_ACCOUNT} -p gpu --gres=gpu:1", "hostname")
        reason = wait_for(f"job {waiting} evaluated", lambda: _pending_reason(slurm_cluster, waiting), 60)
        assert reason == "AssocGrpGRES", reason
        limits = slurm_cluster.controller.run(
            f"sacctmgr -nP list associations account={CAPPED_ACCOUNT} format=account,user,grptres", root=True).stdout
        assert f"{CAPPED_ACCOUNT}||gres/gpu={CAPPED_GPUS}" in limits.splitlines(), limits
    finally:
        slurm_cluster.as_user(f"scancel {running} {waiting or ''}")


def test_a_job_outside_a_partitions_accounts_never_runs(slurm_cluster: SlurmCluster) -> None:
    """debug allows the research account only (AllowAccounts). With EnforcePartLimits at Slurm's default (NO, see
    slurm.conf.j2) sbatch takes a job charged to the user's other account, and the scheduler holds it with a reason
    that names the partition's accounts: a job charged to research, submitted after it, runs while it still waits."""
    held = _submit(slurm_cluster, f"-A {CAPPED_ACCOUNT} -p debug", "hostname")
    taken = None
    try:
        reason = wait_for(f"job {held} evaluated", lambda: _pending_reason(slurm_cluster, held), 60)
        assert f"account not permitted to use this partition (debug allows {ACCOUNT} not {CAPPED_ACCOUNT})" in reason
        taken = _submit(slurm_cluster, f"-A {ACCOUNT} -p debug", "hostname")
        row = wait_for(f"job {taken} to finish", lambda: _finished(slurm_cluster, taken), JOB_TIMEOUT_S)
        assert row["State"] == "COMPLETED", _sacct(slurm_cluster, taken)
        assert _pending_reason(slurm_cluster, held) == reason, _job(slurm_cluster, held)
    finally:
        slurm_cluster.as_user(f"scancel {held} {taken or ''}")


def test_gpuforge_usage_reports_the_gpu_hours_a_job_used(slurm_cluster: SlurmCluster) -> None:
    """`gpuforge usage`'s path: slurm-usage.yml runs sacct on the controller over SSH and the records add up to
    the GPUs x seconds of a 2-GPU job, whole in a window around it and cut in a window that ends mid-run; the
    bench records no energy (no acct_gather_energy plugin), and the report says so rather than print zero."""
    # No other job runs in the window (a job an earlier test left pending where it can never run adds nothing).
    running = "squeue --noheader -t RUNNING,COMPLETING,CONFIGURING -o %i"
    wait_for("no job running", lambda: not slurm_cluster.as_user(running).strip(), 120)
    before = datetime.now(UTC) - timedelta(seconds=2)
    node = slurm_cluster.computes[0].name
    job = _submit(slurm_cluster, f"-p gpu -w {node} --gres=gpu:{GPUS}", "sleep 20")
    row = wait_for(f"job {job} to finish", lambda: _finished(slurm_cluster, job), JOB_TIMEOUT_S)
    assert row["State"] == "COMPLETED", _sacct(slurm_cluster, job)
    after = datetime.now(UTC) + timedelta(seconds=2)
    shown = slurm_cluster.as_user(f"SLURM_TIME_FORMAT=%s sacct -j {job} -X -n -P -o Start,ElapsedRaw").split("|")
    started, elapsed = int(shown[0]), int(shown[1])
    assert 20 <= elapsed <= 30, shown
    catalog = load_catalog()
    pue, source = catalog.pue_default, catalog.data.host_power.pue_source

    whole = collect_usage(slurm_cluster.inventory, before, after, pue=pue, pue_source=source)
    assert whole.total.jobs == 1 and whole.total.gpu_seconds == GPUS * elapsed, whole.to_json()
    assert whole.rows[(ACCOUNT, USER, "gpu")].gpu_hours == GPUS * elapsed / 3600
    assert not whole.energy.recorded and whole.energy.plugin is not None, whole.energy
    assert whole.energy_note is not None and "AcctGatherEnergyType is" in whole.energy_note
    assert "energy" not in whole.to_json()["total"]

    cut = collect_usage(slurm_cluster.inventory, before, datetime.fromtimestamp(started + 10, UTC),
                        pue=pue, pue_source=source)
    assert cut.total.gpu_seconds == GPUS * 10, cut.to_json()


def test_a_job_over_its_qos_per_user_limit_waits_with_that_reason(slurm_cluster: SlurmCluster) -> None:
    """The team QOS holds each user to one GPU (MaxTRESPerUser=gres/gpu=1): with the user's GPU of that QOS in
    use, their next job of it waits (QOSMaxGRESPerUser) although GPUs are free."""
    qos = f"-A {ACCOUNT} --qos={TEAM_QOS['name']} -p gpu --gres=gpu:1"
    running = _submit(slurm_cluster, qos, "sleep 120")
    waiting = None
    try:
        wait_for("the team QOS's first job running", lambda: _state(slurm_cluster, running) == "RUNNING", 60)
        waiting = _submit(slurm_cluster, qos, "hostname")
        # Until the scheduler has tried it against its QOS, the job may show a passing reason (Priority).
        reasons: list[str | None] = []

        def held_by_its_qos() -> bool:
            reasons.append(_pending_reason(slurm_cluster, waiting or ""))
            return reasons[-1] == "QOSMaxGRESPerUser"

        try:
            wait_for(f"job {waiting} held by its QOS's per-user GPU limit", held_by_its_qos, 90)
        except BaseException:
            print(f"reasons job {waiting} showed: {sorted(set(map(str, reasons)))}")
            raise
    finally:
        slurm_cluster.as_user(f"scancel {running} {waiting or ''}")


def _keep_reservations(cluster: SlurmCluster, config: dict[str, Any]) -> PlaybookResult:
    """One run of the slurm_controller role's reservations tasks on the controller, with *config*."""
    inventory = copy.deepcopy(cluster.inventory)
    inventory["all"]["vars"]["slurm_config"] = contract_vars(config)
    return run_playbook(Path(__file__).with_name("reservations_tasks.yml"), inventory, limit=cluster.controller.name)


def test_a_maintenance_window_keeps_jobs_off_its_nodes_while_a_booking_runs_its_accounts_job(
    slurm_cluster: SlurmCluster,
) -> None:
    """The role makes a maintenance reservation over the cloud group and a one-node booking for the research
    account in gpu, from real `scontrol show reservation`: a new cloud job waits (ReqNodeNotAvail), the booking's
    job runs in it, and a second look finds nothing to change. A run with the cluster's own spec deletes both."""
    cloud = slurm_cluster.cloud_node
    wait_for(f"{cloud} idle", lambda: _idle(slurm_cluster, cloud), 60)
    now = datetime.now(UTC).replace(microsecond=0)
    window = {"start": f"{now - timedelta(minutes=1):%Y-%m-%dT%H:%M:%S}Z",
              "end": f"{now + timedelta(minutes=30):%Y-%m-%dT%H:%M:%S}Z", "accounts": [], "node_count": 0,
              "partition": ""}
    config = copy.deepcopy(slurm_cluster.config)
    config["reservations"] = [
        {**window, "name": "gpuforge-maint", "kind": "maintenance", "flags": ["MAINT", "IGNORE_JOBS"],
         "users": ["root"], "node_features": ["group_cloud"]},
        {**window, "name": "gpuforge-booking", "kind": "booking", "flags": ["IGNORE_JOBS"], "users": [],
         "accounts": [ACCOUNT], "node_features": [], "node_count": 1, "partition": "gpu"},
    ]
    jobs: list[str] = []
    try:
        made = _keep_reservations(slurm_cluster, config)
        assert made.ok, [f"{f.host} {f.task}: {f.message}" for f in made.failures]
        shown = slurm_cluster.scontrol("show", "reservation")
        print(f"scontrol show reservation (slurmctld 22.05):\n{shown}")
        assert "ReservationName=gpuforge-maint " in shown and "ReservationName=gpuforge-booking " in shown, shown
        again = slurm_cluster.controller.run(
            "python3 /usr/local/lib/gpuforge/reservations.py /etc/gpuforge/reservations.json --check", root=True)
        assert json.loads(again.stdout)["commands"] == [], again.stdout
        jobs.append(_submit(slurm_cluster, "-p cloud --gres=gpu:1", "hostname"))
        reasons: list[str | None] = []

        def held_by_the_window() -> bool:
            reasons.append(_pending_reason(slurm_cluster, jobs[0]))
            return (reasons[-1] or "").startswith(("ReqNodeNotAvail", "Reservation"))

        try:
            wait_for(f"job {jobs[0]} held by the maintenance window", held_by_the_window, 60)
        except BaseException:
            print(f"reasons job {jobs[0]} showed: {sorted(set(map(str, reasons)))}")
            raise
        jobs.append(_submit(slurm_cluster, f"-A {ACCOUNT} -p gpu --reservation=gpuforge-booking", "hostname"))
        row = wait_for(f"booked job {jobs[1]} to finish", lambda: _finished(slurm_cluster, jobs[1]), 60)
        assert row["State"] == "COMPLETED", _sacct(slurm_cluster, jobs[1])
        assert _pending_reason(slurm_cluster, jobs[0]), _job(slurm_cluster, jobs[0])
    finally:
        if jobs:
            slurm_cluster.as_user("scancel " + " ".join(jobs))
        removed = _keep_reservations(slurm_cluster, slurm_cluster.config)
    assert removed.ok, [f"{f.host} {f.task}: {f.message}" for f in removed.failures]
    assert "gpuforge-" not in slurm_cluster.scontrol("show", "reservation")


def _reconcile(cluster: SlurmCluster, config: dict[str, Any]) -> PlaybookResult:
    """One more run of the slurm_dbd role's accounting tasks on the controller, with *config*."""
    inventory = copy.deepcopy(cluster.inventory)
    inventory["all"]["vars"]["slurm_config"] = contract_vars(config)
    return run_playbook(Path(__file__).with_name("accounts_tasks.yml"), inventory, limit=cluster.controller.name,
                        extravars={"test_path": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"})


def _sacctmgr(cluster: SlurmCluster, args: str) -> list[str]:
    return cluster.controller.run(f"sacctmgr --noheader --parsable2 {args}", root=True).stdout.splitlines()


def test_changed_tenancy_applies_on_the_next_run_and_active_jobs_hold_a_removal_back(
    slurm_cluster: SlurmCluster,
) -> None:
    """A changed fair share and QOS limit apply, and a user slurmdbd has but the spec does not is removed, after
    one more run of the accounting tasks; the user's association whose job still runs is held back, and the run
    says so. A last run with the cluster's own spec puts everything back."""
    slurm_cluster.controller.run(f"sacctmgr --immediate add user carol account={ACCOUNT}", root=True)
    job = _submit(slurm_cluster, f"-A {CAPPED_ACCOUNT} -p gpu --gres=gpu:1", "sleep 300")
    changed = copy.deepcopy(slurm_cluster.config)
    changed["accounts"][ACCOUNT]["fairshare"] = 7
    changed["qos"][0].update(max_gpus_per_user=2, max_wall="02:00:00")
    changed["users"][USER]["further_accounts"] = []  # alice leaves the capped account: her job there still runs
    try:
        wait_for("the capped account's job running", lambda: _state(slurm_cluster, job) == "RUNNING", 60)
        result = _reconcile(slurm_cluster, changed)
        assert result.ok, [f"{f.host} {f.task}: {f.message}" for f in result.failures]
        rows = _sacctmgr(slurm_cluster, "list associations format=account,user,fairshare")
        assert f"{ACCOUNT}||7" in rows and not [r for r in rows if r.endswith("|carol|1")], rows
        assert f"{CAPPED_ACCOUNT}|{USER}|1" in rows, rows  # held back
        assert f"user {USER} in {CAPPED_ACCOUNT} still has active" in result.stdout, result.stdout[-3000:]
        qos = _sacctmgr(slurm_cluster, f"list qos name={TEAM_QOS['name']} format=name,maxtresperuser,maxwall")
        assert qos == [f"{TEAM_QOS['name']}|gres/gpu=2|02:00:00"], qos
    finally:
        slurm_cluster.as_user(f"scancel {job}")
        restored = _reconcile(slurm_cluster, slurm_cluster.config)
    assert restored.ok, [f"{f.host} {f.task}: {f.message}" for f in restored.failures]
    assert f"{ACCOUNT}||1" in _sacctmgr(slurm_cluster, "list associations format=account,user,fairshare")


# slurmrestd's job API as Debian 12's 22.05 serves it (openapi/v0.0.38; 23.11 and 24.11: docs/slurm.md).
REST_JOBS = "/slurm/v0.0.38"


def _rest_submit(cluster: SlurmCluster, name: str, token: str | None) -> tuple[int, dict[str, Any]]:
    """POST a batch job to slurmrestd from the login machine, as a pipeline does (docs/slurm.md): token None
    gets the user a fresh one with `scontrol token`; "" sends none. Its HTTP status and JSON answer."""
    body = json.dumps({"job": {"name": name, "partition": "gpu", "current_working_directory": "/tmp",
                               "environment": {"PATH": "/usr/bin:/bin"}},
                       "script": "#!/bin/sh\nhostname\n"})
    get_token = "$(scontrol token lifespan=300 | sed -n 's/^SLURM_JWT=//p')"
    headers = f"-H 'X-SLURM-USER-NAME: {USER}' " + (
        "" if token == "" else f"-H \"X-SLURM-USER-TOKEN: {get_token if token is None else token}\" ")
    url = f"http://{cluster.controller.address}:{REST_PORT}{REST_JOBS}/job/submit"
    out = cluster.as_user(f"curl -sS -w '\\n%{{http_code}}' {headers}-H 'Content-Type: application/json' "
                          f"--data {shlex.quote(body)} {url}")
    text, _, status = out.rstrip().rpartition("\n")
    try:
        answer = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        answer = {"unparsed": text}
    return int(status), answer


def _forged_token() -> str:
    """An HS256 token for the user that looks like `scontrol token`'s (exp, iat, sun) but is signed with a key
    that is not the cluster's."""
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    now = int(time.time())
    signed = part(b'{"alg":"HS256","typ":"JWT"}') + "." + part(json.dumps(
        {"exp": now + 300, "iat": now, "sun": USER}).encode())
    signature = hmac.new(secrets.token_bytes(64), signed.encode(), hashlib.sha256).digest()
    return f"{signed}.{part(signature)}"


def test_a_job_submitted_through_slurmrestd_with_the_users_token_runs(slurm_cluster: SlurmCluster) -> None:
    """scheduler.rest_api: the user takes a token with `scontrol token` and POSTs a job to slurmrestd (running as
    its own unprivileged user); the job runs as the user, in their account."""
    ctl = slurm_cluster.controller
    assert ctl.run("stat -c '%U %a' /etc/slurm/jwt_hs256.key", root=True).stdout.split() == ["slurm", "600"]
    assert ctl.run("ps -o user:20= -C slurmrestd", root=True).stdout.split() == ["slurmrestd"]
    status, answer = _rest_submit(slurm_cluster, "rest-submitted", None)
    assert status == 200 and answer.get("job_id"), (status, answer)
    job = str(answer["job_id"])
    row = wait_for(f"job {job} to finish", lambda: _finished(slurm_cluster, job), JOB_TIMEOUT_S)
    assert (row["State"], row["User"], row["Account"]) == ("COMPLETED", USER, ACCOUNT), _sacct(slurm_cluster, job)


def test_slurmrestd_refuses_a_job_without_a_token_or_with_a_forged_one(slurm_cluster: SlurmCluster) -> None:
    """No token: slurmrestd answers 401. A token signed with another key: slurmctld refuses it. Neither job
    exists afterwards."""
    status, answer = _rest_submit(slurm_cluster, "rest-no-token", "")
    assert status == 401, (status, answer)
    status, answer = _rest_submit(slurm_cluster, "rest-forged", _forged_token())
    assert not answer.get("job_id") and (status >= 400 or answer.get("errors")), (status, answer)
    for name in ("rest-no-token", "rest-forged"):
        assert slurm_cluster.as_user(f"sacct -X -n -a --name={name} --starttime=now-1hour -o JobID").strip() == ""
