"""slurm.conf settings a stack passes through (scheduler.extra_settings, partitions.<name>.extra_options):
refused, every problem at once, when gpuforge renders the key, when slurm.conf(5) does not document it or
its value's form, or when the stack's Slurm is older than the release that documents it; rendered otherwise."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from gpuforge.assets import PLAYBOOK_TEMPLATES_DIR
from gpuforge.catalog.slurm_settings import slurm_settings
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.spec import SpecError, resolve

SETTINGS = "cluster.scheduler.extra_settings"


def _stack(name: str) -> dict[str, Any]:
    return copy.deepcopy(load_stack(name).cluster)


def _problems(data: dict[str, Any], stack: str = "test") -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        resolve(data, stack)
    return {issue.path: f"{issue.message}; fix: {issue.fix}" for issue in err.value.issues}


def _slurm_conf(data: dict[str, Any], stack: str) -> str:
    return render_slurm(slurm_config(resolve(data, stack)))["slurm.conf"]


def test_every_problem_at_once_with_its_field_path() -> None:
    data = _stack("dev")
    data["scheduler"]["extra_settings"] = {
        "ClusterName": "other",  # rendered from a field
        "SlurmUser": "root",  # fixed by gpuforge
        "ResumeTimeot": 1800,  # misspelt
        "KillWait": 99999,  # past slurm.conf(5)'s bound
        "JobCompType": "jobcomp/fileTxt",  # not a documented value
        "JobCompLoc": "/var/log/slurm/jobs.log\nSlurmUser=root",  # would start a line of its own
        "SchedulerParameters": "bf_continue, bf_window=4320",  # a space
        "SuspendExcStates": "DOWN,SLEEPY",
        "TreeWidth": 32,  # dev's cloud nodes register dynamically: gpuforge renders it
    }
    data["scheduler"]["partitions"]["debug"]["extra_options"] = {
        "MaxTime": "60",
        "State": "DOWN",
        "Hidden": "yes",
        "PreemptMode": "SUSPEND,GANGS",
    }
    problems = _problems(data)
    assert sorted(problems) == sorted([
        *(f"{SETTINGS}[{key}]" for key in data["scheduler"]["extra_settings"]),
        *(f"cluster.scheduler.partitions[debug].extra_options[{key}]" for key in ("MaxTime", "State", "Hidden",
                                                                                  "PreemptMode")),
    ])
    assert "rendered by gpuforge from cluster.name" in problems[f"{SETTINGS}[ClusterName]"]
    assert "set by gpuforge itself" in problems[f"{SETTINGS}[SlurmUser]"]
    assert "nearest known keys: ResumeTimeout" in problems[f"{SETTINGS}[ResumeTimeot]"]
    assert "99999 is not a number of seconds 0..65533" in problems[f"{SETTINGS}[KillWait]"]
    assert "fix: use jobcomp/filetxt" in problems[f"{SETTINGS}[JobCompType]"]
    assert "not one word" in problems[f"{SETTINGS}[JobCompLoc]"]
    assert "no spaces" in problems[f"{SETTINGS}[SchedulerParameters]"]
    assert "'SLEEPY' is not one or more of" in problems[f"{SETTINGS}[SuspendExcStates]"]
    assert "TreeWidth=65533" in problems[f"{SETTINGS}[TreeWidth]"]
    partition = "cluster.scheduler.partitions[debug].extra_options"
    assert "from cluster.scheduler.partitions[debug].max_time" in problems[f"{partition}[MaxTime]"]
    assert "scontrol update" in problems[f"{partition}[State]"]
    assert "fix: use YES" in problems[f"{partition}[Hidden]"]
    assert "'GANGS' is not" in problems[f"{partition}[PreemptMode]"]


def test_a_key_newer_than_the_stacks_slurm_is_refused_with_the_reason() -> None:
    """A site may run Slurm as old as 22.05 (catalog slurm.minimum); dev's controller and nodes run Ubuntu
    24.04's 23.11, which documents what 23.02 added."""
    newer = {"MaxBatchRequeue": 3, "JobCompType": "jobcomp/kafka", "JobCompLoc": "kafka.conf"}
    site = _stack("onprem-lab")
    site["scheduler"]["extra_settings"] = newer
    problems = _problems(site)
    assert sorted(problems) == [f"{SETTINGS}[JobCompType]", f"{SETTINGS}[MaxBatchRequeue]"]
    assert "documented from Slurm 23.02" in problems[f"{SETTINGS}[MaxBatchRequeue]"]
    assert "may be 22.05: the site's hosts run the site's own Slurm" in problems[f"{SETTINGS}[MaxBatchRequeue]"]
    assert "JobCompType=jobcomp/kafka is documented from Slurm 23.02" in problems[f"{SETTINGS}[JobCompType]"]
    dev = _stack("dev")
    dev["scheduler"]["extra_settings"] = newer
    assert "MaxBatchRequeue=3\n" in _slurm_conf(dev, "dev")


def test_a_location_needs_its_type() -> None:
    data = _stack("dev")
    data["scheduler"]["extra_settings"] = {"JobCompLoc": "/var/log/slurm/jobs.log"}
    assert "without JobCompType" in _problems(data)[f"{SETTINGS}[JobCompLoc]"]


def test_settings_render_after_gpuforges_own() -> None:
    data = _stack("onprem-lab")
    data["scheduler"]["extra_settings"] = {
        "ResumeTimeout": 1800,
        "TreeWidth": 32,  # a site's static nodes are in DNS: the template leaves TreeWidth to the stack
        "SchedulerParameters": "bf_continue,nohold_on_prolog_fail,bf_window=4320",
        "SuspendTime": "INFINITE",
    }
    partition = next(iter(data["scheduler"]["partitions"]))
    data["scheduler"]["partitions"][partition]["extra_options"] = {"Hidden": "YES", "PreemptMode": "REQUEUE,GANG"}
    conf = _slurm_conf(data, "onprem-lab")
    # gpuforge's option first, once; the stack's after it.
    assert "\nSchedulerParameters=nohold_on_prolog_fail,bf_continue,bf_window=4320\n" in conf
    assert "\nResumeTimeout=1800\nTreeWidth=32\nSuspendTime=INFINITE\n" in conf
    assert conf.count("TreeWidth=") == 1
    line = next(line for line in conf.splitlines() if line.startswith(f"PartitionName={partition} "))
    assert line.endswith(" State=UP Hidden=YES PreemptMode=REQUEUE,GANG")
    # The settings come before the node and partition lines (slurm.conf's global section).
    assert conf.index("ResumeTimeout=") < conf.index("PartitionName=")


def test_the_owned_keys_are_what_the_template_renders() -> None:
    """Every key slurm.conf.j2 writes is listed as gpuforge's (with what sets it) or merged with the stack's
    (SchedulerParameters), and every key listed is written: a key added to the template cannot be passed
    through twice."""
    template = (PLAYBOOK_TEMPLATES_DIR / "slurm" / "slurm.conf.j2").read_text()
    settings = slurm_settings()
    rendered = set(re.findall(r"^([A-Z][A-Za-z]+)=", template, re.MULTILINE))
    merged = {key for key, facts in settings.settings.items() if facts.merged_after}
    dynamic = {key for key, facts in settings.settings.items() if facts.owned_with_dynamic_nodes}
    assert rendered == set(settings.owned) | merged | dynamic
    partition_line = next(line for line in template.splitlines() if line.startswith("PartitionName={{ partition"))
    options = set(re.findall(r"[ }]([A-Z][A-Za-z]+)=", partition_line)) | {"PartitionName"}
    assert options == set(settings.partition_owned)
    assert not set(settings.owned) & set(settings.settings)
    assert not set(settings.partition_owned) & set(settings.partition_options)


def test_every_catalog_example_passes_on_a_stack_whose_slurm_has_it() -> None:
    """dev runs 23.11 (every key the catalog lists); its cloud nodes make TreeWidth gpuforge's."""
    settings = slurm_settings()
    data = _stack("dev")
    data["scheduler"]["extra_settings"] = {
        key: facts.example for key, facts in settings.settings.items() if not facts.owned_with_dynamic_nodes
    }
    data["scheduler"]["partitions"]["debug"]["extra_options"] = {
        key: facts.example for key, facts in settings.partition_options.items()
    }
    conf = _slurm_conf(data, "dev")
    line = next(line for line in conf.splitlines() if line.startswith("PartitionName=debug "))
    assert line.endswith(" ".join(f"{k}={f.example}" for k, f in settings.partition_options.items()))


def test_a_group_on_a_fixed_ami_holds_the_stack_to_the_oldest_slurm() -> None:
    """An ami_id does not say which distribution (so which Slurm) the group boots: as old as slurm.minimum."""
    data = _stack("dev")
    data["node_groups"]["train"]["image"] = {"ami_id": "ami-0123456789abcdef0"}
    data["scheduler"]["extra_settings"] = {"MaxBatchRequeue": 3}
    problem = _problems(data)[f"{SETTINGS}[MaxBatchRequeue]"]
    assert "node group train's image does not name its distribution" in problem
    assert "fix: remove MaxBatchRequeue; or give node group train an image by an SSM parameter" in problem
