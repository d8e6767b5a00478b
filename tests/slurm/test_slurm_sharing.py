"""A shared cluster's Slurm settings as rendered (issue 25): no running job preempted by default, preemption by
a scavenger QOS only when asked for, each partition's per-GPU defaults and billing weights from the catalog's
hardware, sockets as the hardware has them, and the credential setting named as the installed release names it.
The booted cluster (test_slurm_cluster.py) shows the same settings in a running slurmctld."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.render.slurm_sharing import NodeShape, partition_sharing
from gpuforge.render.templates import render
from gpuforge.spec import SpecError, resolve


def _stack(name: str) -> dict[str, Any]:
    return copy.deepcopy(load_stack(name).cluster)


def _conf(cluster: dict[str, Any], name: str = "test") -> str:
    return render_slurm(slurm_config(resolve(cluster, name)))["slurm.conf"]


def _lines(conf: str, prefix: str) -> list[str]:
    return [line for line in conf.splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize("stack", ["dev", "prod", "onprem-lab", "hybrid"])
def test_no_stack_preempts_a_running_job_by_partition_tier(stack: str) -> None:
    conf = _conf(_stack(stack), stack)
    assert _lines(conf, "PreemptType=") == ["PreemptType=preempt/none"]
    assert _lines(conf, "PreemptMode=") == ["PreemptMode=OFF"]
    assert "partition_prio" not in conf


def test_preemption_by_qos_is_opt_in_with_a_grace_time() -> None:
    cluster = _stack("prod")
    cluster["scheduler"]["preemption"] = {"kind": "qos", "grace_time_s": 600}
    config = slurm_config(resolve(cluster, "prod"))
    conf = render_slurm(config)["slurm.conf"]
    assert _lines(conf, "PreemptType=") == ["PreemptType=preempt/qos"]
    assert _lines(conf, "PreemptMode=") == ["PreemptMode=REQUEUE"]
    qos = {q["name"]: q for q in config["preemption"]["qos"]}
    assert qos["scavenger"] == {"name": "scavenger", "priority": 0, "preempt": [], "preempt_mode": "requeue",
                                "grace_time_s": 600}
    # normal (every job without --qos) preempts the scavenger only, and ranks above it.
    assert qos["normal"]["preempt"] == ["scavenger"] and qos["normal"]["priority"] > 0


def test_bad_preemption_is_refused_with_its_field_path() -> None:
    cluster = _stack("dev")
    cluster["scheduler"]["preemption"] = {"kind": "partition", "scavenger_qos": "normal", "grace_time_s": 5}
    with pytest.raises(SpecError) as err:
        resolve(cluster, "dev")
    problems = {issue.path: issue.message for issue in err.value.issues}
    assert set(problems) == {
        "cluster.scheduler.preemption.kind",
        "cluster.scheduler.preemption.scavenger_qos",
        "cluster.scheduler.preemption.grace_time_s",
    }, problems
    assert "normal is the QOS every job gets" in problems["cluster.scheduler.preemption.scavenger_qos"]


def test_p5_partitions_give_a_gpu_its_share_of_cpus_and_memory() -> None:
    conf = _conf(_stack("prod"), "prod")
    (train,) = _lines(conf, "PartitionName=train ")
    # p5.48xlarge: 192 CPUs and 8 GPUs (24 per GPU); RealMemory 1992294 MiB / 192 CPUs = 10376 MiB per CPU.
    assert " DefCpuPerGPU=24 DefMemPerCPU=10376 " in train
    # A GPU's share of CPUs (24) or memory (24 x 10376 MiB = 243.2 GiB) bills as one GPU.
    assert 'TRESBillingWeights="CPU=0.04167,Mem=0.004112G,GRES/gpu=1"' in train
    assert _lines(conf, "PriorityFlags=") == ["PriorityFlags=MAX_TRES"]


def test_p5_nodes_register_with_two_sockets_of_48_cores() -> None:
    config = slurm_config(resolve(_stack("prod"), "prod"))
    (train,) = config["dynamic_groups"]
    assert train["conf"].startswith("CPUs=192 Sockets=2 CoresPerSocket=48 ThreadsPerCore=2 ")


def test_a_partition_over_mixed_hardware_takes_the_smallest_share() -> None:
    shares = partition_sharing([NodeShape(cpus=192, real_memory=1992294, gpus=8),
                                NodeShape(cpus=48, real_memory=186777, gpus=4)])
    assert shares["def_cpu_per_gpu"] == 12  # g5.12xlarge's 48 / 4, not p5's 24: a job sized by it fits on both
    assert shares["def_mem_per_cpu"] == 186777 // 48


def test_a_cpu_partition_bills_cpus_and_names_no_gpu_default() -> None:
    shares = partition_sharing([NodeShape(cpus=64, real_memory=262144, gpus=0)])
    assert shares == {"def_cpu_per_gpu": 0, "def_mem_per_cpu": 4096, "billing_weights": "CPU=1,Mem=0.25G"}
    config = slurm_config(resolve(_stack("dev"), "dev"))
    config["partitions"] = [{**config["partitions"][0], **shares}]
    (line,) = _lines(render("slurm/slurm.conf.j2", slurm_config=config), "PartitionName=gpu ")
    assert "DefCpuPerGPU" not in line and ' DefMemPerCPU=4096 TRESBillingWeights="CPU=1,Mem=0.25G" ' in line


def test_the_shared_cluster_settings_are_rendered() -> None:
    conf = _conf(_stack("dev"), "dev")
    # No EnforcePartLimits: ALL would refuse the job that should grow an elastic partition from zero nodes.
    assert not [line for line in conf.splitlines() if line.startswith("EnforcePartLimits")], conf
    for line in ("UnkillableStepTimeout=180", "LaunchParameters=use_interactive_step",
                 "PrivateData=accounts,jobs,reservations,usage,users", "PriorityWeightQOS=2000",
                 "PriorityWeightTRES=GRES/gpu=1000"):
        assert line in conf.splitlines(), line


def test_account_limits_further_accounts_and_partition_access_are_rendered() -> None:
    cluster = _stack("dev")
    sched = cluster["scheduler"]
    sched["accounts"]["vision"] = {"description": "Vision", "fairshare": 5, "max_gpus": 8}
    sched["users"]["alice"]["further_accounts"] = ["vision"]
    sched["partitions"]["debug"]["allow_accounts"] = ["research"]
    config = slurm_config(resolve(cluster, "dev"))
    assert config["accounts"]["vision"] == {"description": "Vision", "fairshare": 5, "max_gpus": 8, "parent": "root",
                                            "coordinators": [], "inherited_coordinators": [], "qos": []}
    assert config["accounts"]["research"]["max_gpus"] is None
    assert config["users"]["alice"]["further_accounts"] == ["vision"]
    (debug,) = _lines(render_slurm(config)["slurm.conf"], "PartitionName=debug ")
    assert " AllowAccounts=research " in debug
    (gpu,) = _lines(render_slurm(config)["slurm.conf"], "PartitionName=gpu ")
    assert "AllowAccounts" not in gpu


def test_unknown_accounts_are_refused_at_once_with_their_field_paths() -> None:
    cluster = _stack("dev")
    sched = cluster["scheduler"]
    sched["users"]["alice"]["further_accounts"] = ["vison"]
    sched["partitions"]["debug"]["allow_accounts"] = ["research", "robotics"]
    with pytest.raises(SpecError) as err:
        resolve(cluster, "dev")
    problems = {issue.path: issue.message for issue in err.value.issues}
    assert problems == {
        "cluster.scheduler.users[alice].further_accounts[0]": "no account named 'vison'",
        "cluster.scheduler.partitions[debug].allow_accounts[1]": "no account named 'robotics'",
    }, problems


def test_a_gpu_limit_below_one_is_refused() -> None:
    cluster = _stack("dev")
    cluster["scheduler"]["accounts"]["vision"] = {"description": "Vision", "max_gpus": 0}
    with pytest.raises(SpecError) as err:
        resolve(cluster, "dev")
    assert [issue.path for issue in err.value.issues] == ["cluster.scheduler.accounts[vision].max_gpus"]
