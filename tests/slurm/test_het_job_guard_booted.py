"""The hybrid stack's heterogeneous-job guard on real Slurm (22.05, Debian's cli_filter/lua plugin on liblua5.1):
the shared booted cluster carries the guard exactly as stacks/Pulumi.hybrid.yaml's plan renders it
(cluster.py's hybrid_het_job_guard), its `site` partition (the static computes) and `cloud` partition (the node
that registers itself) standing for the hybrid's two sides. The roles install cli_filter.lua: the controller
serves it configless, the login role renders it beside slurm.conf. A regular user's sbatch and srun of a
heterogeneous job across both partitions are refused with the guard's message and leave no job; one whose
components stay on the site side runs. tests/slurm/test_het_job_guard.py covers every case of the rule with a
Lua harness; this proves the plugin loads the rendered file and applies it."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.spec import resolve

from .cluster import CLOUD_GROUP, SITE_PARTITION, USER, SlurmCluster, wait_for

pytestmark = pytest.mark.slow

JOB_TIMEOUT_S = 300
SPANNING_JOB = "gf-het-span"
GUARD_MESSAGE = "would span the site-to-cloud VPN"


def _as_user(cluster: SlurmCluster, command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """*command* as the cluster user on the login machine, its exit status kept (a refusal is the point)."""
    return cluster.login.run(f"sudo -n -u {USER} -i sh -c {shlex.quote(command)}", check=False, timeout=timeout)


def _jobs_named(cluster: SlurmCluster, name: str) -> list[str]:
    out = cluster.controller.run(f"sacct -a -X -n -P --name {name} -o JobID", root=True).stdout
    return out.split()


def test_the_hybrid_plans_cli_filter_is_what_the_clients_load(slurm_cluster: SlurmCluster) -> None:
    hybrid = render_slurm(slurm_config(resolve(load_stack("hybrid").cluster, "hybrid")))["cli_filter.lua"]
    assert slurm_cluster.controller.run("cat /etc/slurm/cli_filter.lua").stdout == hybrid
    assert slurm_cluster.login.run("cat /etc/slurm/cli_filter.lua").stdout == hybrid
    # A compute's slurmd fetched it from slurmctld with slurm.conf (configless), for srun inside jobs.
    compute = slurm_cluster.computes[0].run("cat /run/slurm/conf/cli_filter.lua", root=True).stdout
    assert compute == hybrid
    config = slurm_cluster.controller.run("scontrol show config", root=True).stdout
    assert any(line.split() == ["CliFilterPlugins", "=", "lua"] for line in config.splitlines()), config


def _batch_script(cluster: SlurmCluster) -> str:
    """A batch script in the user's home: a heterogeneous sbatch takes one script for all its components."""
    script = f"/home/{USER}/het-job.sh"
    assert _as_user(cluster, f"printf '#!/bin/sh\\nsrun hostname\\n' > {script}").returncode == 0
    return script


def test_a_heterogeneous_job_across_site_and_cloud_is_refused_by_sbatch_and_srun(
    slurm_cluster: SlurmCluster,
) -> None:
    script = _batch_script(slurm_cluster)
    sbatch = _as_user(
        slurm_cluster, f"sbatch -J {SPANNING_JOB} -p {SITE_PARTITION} -N1 : -J {SPANNING_JOB} -p {CLOUD_GROUP} -N1 "
        f"{script}")
    srun = _as_user(slurm_cluster, f"srun -J {SPANNING_JOB} -p {CLOUD_GROUP} -N1 hostname : "
                                   f"-J {SPANNING_JOB} -p {SITE_PARTITION} -N1 hostname")
    for result in (sbatch, srun):
        assert result.returncode != 0, result
        assert ("heterogeneous job component 1 is in partition" in result.stderr
                and GUARD_MESSAGE in result.stderr and "separate jobs" in result.stderr), result
        assert result.stdout == "", result  # no job id, no step output
    assert _jobs_named(slurm_cluster, SPANNING_JOB) == []


def test_a_heterogeneous_job_inside_the_site_runs(slurm_cluster: SlurmCluster) -> None:
    name = "gf-het-site"
    script = _batch_script(slurm_cluster)
    sbatch = _as_user(slurm_cluster, f"sbatch --parsable -J {name} -p {SITE_PARTITION} -N1 : -p {SITE_PARTITION} "
                                     f"-N1 {script}")
    assert sbatch.returncode == 0 and GUARD_MESSAGE not in sbatch.stderr, sbatch
    job = sbatch.stdout.strip().split(";")[0]

    def finished() -> list[str] | None:
        rows = slurm_cluster.controller.run(f"sacct -X -n -P -j {job} -o JobID,State", root=True).stdout.split()
        states = [row.split("|")[1] for row in rows]
        return rows if len(rows) == 2 and not {"PENDING", "RUNNING", ""} & set(states) else None

    rows = wait_for(f"heterogeneous job {job} to finish", finished, JOB_TIMEOUT_S)
    assert sorted(rows) == [f"{job}+0|COMPLETED", f"{job}+1|COMPLETED"], rows
    # srun's own heterogeneous step, both components on the site side: one output line per component.
    srun = _as_user(slurm_cluster, f"srun -p {SITE_PARTITION} -N1 hostname : -p {SITE_PARTITION} -N1 hostname",
                    timeout=JOB_TIMEOUT_S)
    assert srun.returncode == 0, srun
    assert len(srun.stdout.split()) == 2 and set(srun.stdout.split()) <= {m.name for m in slurm_cluster.computes}
