"""A cluster many teams share, as code (issue 25, item 1): teams' own QOS with their limits, an account tree with
coordinators, partitions that admit only some QOS, and slurmdbd kept to the spec, removals included.

The rendering is checked from the dev stack's spec. The slurm_dbd role's accounting tasks run as the role runs
them (Ansible, this host) against a stand-in sacctmgr (tests/standins/sacctmgr.py) that answers in sacctmgr's own
--parsable2 shapes and refuses, as slurmdbd does, to remove an association whose jobs are active. The booted
cluster (test_slurm_cluster.py) shows the same tasks against real slurmdbd 22.05."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuforge.nodes.bake import PlaybookResult, run_playbook
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.spec import SpecError, resolve
from tests.standins.sacctmgr import EMPTY_SLURMDBD

PLAYBOOK = Path(__file__).with_name("accounts_tasks.yml")
STANDIN = Path(__file__).parents[1] / "standins" / "sacctmgr.py"


def _tenancy() -> dict[str, Any]:
    """The dev stack with an organisation over two teams, a team QOS with every limit, coordinators."""
    cluster = copy.deepcopy(load_stack("dev").cluster)
    sched = cluster["scheduler"]
    sched["qos"] = {
        "vision-interactive": {"description": "Vision notebooks", "priority": 50, "max_gpus": 8,
                               "max_gpus_per_user": 2, "max_jobs_per_user": 4, "max_wall": "1-12:00:00"},
        "batch-small": {"description": "Small batch jobs", "max_wall": "480"},
    }
    sched["accounts"] = {
        "vision": {"description": "Vision team", "parent": "labs", "fairshare": 30, "coordinators": ["bob"],
                   "qos": ["vision-interactive", "batch-small"]},
        "research": {"description": "Research engineers", "parent": "labs", "max_gpus": 16},
        "labs": {"description": "The labs organisation", "fairshare": 60, "coordinators": ["alice"]},
    }
    sched["users"] = {
        "alice": {"uid": 2001, "account": "research", "further_accounts": ["vision"]},
        "bob": {"uid": 2002, "account": "vision"},
    }
    sched["partitions"]["debug"]["allow_qos"] = ["vision-interactive", "normal"]
    return cluster


def test_tenancy_is_rendered_parents_first_with_sacctmgrs_limits() -> None:
    config = slurm_config(resolve(_tenancy(), "dev"))
    assert list(config["accounts"]) == ["labs", "vision", "research"]
    assert config["accounts"]["vision"] == {
        "description": "Vision team", "fairshare": 30, "max_gpus": None, "parent": "labs", "coordinators": ["bob"],
        "inherited_coordinators": ["alice"], "qos": ["vision-interactive", "batch-small"]}
    assert config["accounts"]["labs"]["parent"] == "root"
    assert config["qos"] == [
        {"name": "vision-interactive", "description": "Vision notebooks", "priority": 50, "max_gpus": 8,
         "max_gpus_per_user": 2, "max_jobs_per_user": 4, "max_wall": "1-12:00:00"},
        {"name": "batch-small", "description": "Small batch jobs", "priority": 0, "max_gpus": None,
         "max_gpus_per_user": None, "max_jobs_per_user": None, "max_wall": "08:00:00"},
    ]
    conf = render_slurm(config)["slurm.conf"]
    (debug,) = [line for line in conf.splitlines() if line.startswith("PartitionName=debug ")]
    assert " AllowQos=vision-interactive,normal " in debug, debug


def test_bad_tenancy_is_refused_at_once_with_every_field_path() -> None:
    cluster = _tenancy()
    sched = cluster["scheduler"]
    sched["accounts"]["labs"]["parent"] = "vision"  # labs -> vision -> labs
    sched["accounts"]["research"]["parent"] = "physics"
    sched["accounts"]["research"]["coordinators"] = ["carol"]
    sched["accounts"]["research"]["qos"] = ["gold"]
    sched["accounts"]["root"] = {"description": "Everyone"}
    sched["qos"]["normal"] = {"description": "Mine"}
    sched["partitions"]["debug"]["allow_qos"] = ["vision-interactive", "silver"]
    with pytest.raises(SpecError) as err:
        resolve(cluster, "dev")
    problems = {issue.path: issue.message for issue in err.value.issues}
    assert problems == {
        "cluster.scheduler.accounts[root]": "root is Slurm's own account, above every other",
        "cluster.scheduler.qos[normal]": "normal is a QOS Slurm or scheduler.preemption keeps",
        "cluster.scheduler.accounts[research].parent": "no account named 'physics'",
        "cluster.scheduler.accounts[research].coordinators[0]": "no user named 'carol'",
        "cluster.scheduler.accounts[research].qos[0]": "no QOS named 'gold'",
        "cluster.scheduler.accounts[vision].parent": "vision -> labs -> vision",
        "cluster.scheduler.partitions[debug].allow_qos[1]": "no QOS named 'silver'",
    }, problems
    fixes = {issue.path: issue.fix for issue in err.value.issues}
    assert "vision-interactive, batch-small, normal" in fixes["cluster.scheduler.partitions[debug].allow_qos[1]"]


@pytest.mark.parametrize("wall", ["UNLIMITED", "90:30", "0", "2 days"])
def test_a_qos_max_wall_must_be_whole_limited_minutes(wall: str) -> None:
    cluster = _tenancy()
    cluster["scheduler"]["qos"]["batch-small"]["max_wall"] = wall
    with pytest.raises(SpecError) as err:
        resolve(cluster, "dev")
    assert [issue.path for issue in err.value.issues] == ["cluster.scheduler.qos[batch-small].max_wall"]
    assert wall in str(err.value)


class Slurmdbd:
    """The stand-in's state file and call log, and the role's run against them."""

    def __init__(self, root: Path) -> None:
        self.state, self.log, self.bin = root / "slurmdbd.json", root / "calls.jsonl", root / "bin"
        self.bin.mkdir()
        (self.bin / "sacctmgr").symlink_to(STANDIN)
        self.state.write_text(json.dumps(EMPTY_SLURMDBD))
        self.log.touch()

    def run(self, cluster: dict[str, Any]) -> PlaybookResult:
        self.log.write_text("")
        config = slurm_config(resolve(cluster, "dev"))
        host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
        os.environ["SACCTMGR_STATE"], os.environ["SACCTMGR_LOG"] = str(self.state), str(self.log)
        return run_playbook(PLAYBOOK, {"all": {"hosts": {"controller": host}}}, extravars={
            "slurm_config": config, "test_path": f"{self.bin}:{Path(sys.executable).parent}:{os.environ['PATH']}"})

    def data(self) -> dict[str, Any]:
        return dict(json.loads(self.state.read_text()))

    def changes(self) -> list[list[str]]:
        calls = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [[w for w in c if not w.startswith("--")] for c in calls if "list" not in c]

    def assoc(self, account: str, user: str = "") -> dict[str, Any]:
        return next(a for a in self.data()["assocs"] if a["account"] == account and a["user"] == user)


@pytest.fixture
def slurmdbd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Slurmdbd:
    monkeypatch.setenv("SACCTMGR_STATE", "")
    monkeypatch.setenv("SACCTMGR_LOG", "")
    return Slurmdbd(tmp_path)


def _ok(result: PlaybookResult) -> None:
    assert result.ok, [f.message for f in result.failures] or result.stdout[-3000:]


def test_the_role_builds_the_tree_and_qos_then_changes_nothing(slurmdbd: Slurmdbd) -> None:
    cluster = _tenancy()
    _ok(slurmdbd.run(cluster))
    data = slurmdbd.data()
    assert slurmdbd.assoc("labs")["parent"] == "root" and slurmdbd.assoc("vision")["parent"] == "labs"
    assert slurmdbd.assoc("labs")["fairshare"] == 60 and slurmdbd.assoc("research")["grptres"] == "gres/gpu=16"
    assert data["qos"]["vision-interactive"] == {
        "priority": 50, "grptres": "gres/gpu=8", "maxtresperuser": "gres/gpu=2", "maxjobsperuser": "4",
        "maxwall": "2160", "preempt": [], "preemptmode": "cluster", "gracetime_s": 0}
    assert data["qos"]["batch-small"]["maxwall"] == "480"
    assert slurmdbd.assoc("vision")["qos"] == ["batch-small", "normal", "vision-interactive"]
    assert slurmdbd.assoc("vision", "bob")["qos"] == ["batch-small", "normal", "vision-interactive"]
    assert slurmdbd.assoc("research", "alice")["qos"] == ["normal"]
    assert data["coords"] == {"labs": ["alice"], "vision": ["bob"]}
    assert data["defaults"] == {"root": "root", "alice": "research", "bob": "vision"}

    second = slurmdbd.run(cluster)
    _ok(second)
    assert slurmdbd.changes() == [] and second.changed == 0


def test_changed_limits_apply_and_removed_ones_are_cleared(slurmdbd: Slurmdbd) -> None:
    cluster = _tenancy()
    _ok(slurmdbd.run(cluster))
    sched = cluster["scheduler"]
    sched["accounts"]["vision"]["fairshare"] = 5
    sched["accounts"]["research"].pop("max_gpus")
    sched["accounts"]["research"]["parent"] = None  # out from under labs
    sched["accounts"]["vision"]["qos"] = ["vision-interactive"]
    sched["accounts"]["vision"]["coordinators"] = []
    sched["accounts"]["research"]["coordinators"] = ["bob"]
    sched["qos"]["vision-interactive"] = {"description": "Vision notebooks", "priority": 10,
                                          "max_gpus_per_user": 1, "max_wall": "04:00:00"}
    sched["users"]["bob"]["account"] = "research"  # bob moves team; his vision association goes
    _ok(slurmdbd.run(cluster))
    data = slurmdbd.data()
    assert slurmdbd.assoc("vision")["fairshare"] == 5 and slurmdbd.assoc("research")["grptres"] == ""
    assert slurmdbd.assoc("research")["parent"] == "root"
    assert data["qos"]["vision-interactive"] == {
        "priority": 10, "grptres": "", "maxtresperuser": "gres/gpu=1", "maxjobsperuser": "", "maxwall": "240",
        "preempt": [], "preemptmode": "cluster", "gracetime_s": 0}
    assert slurmdbd.assoc("vision")["qos"] == ["normal", "vision-interactive"]
    assert data["coords"] == {"labs": ["alice"], "vision": [], "research": ["bob"]}
    assert data["defaults"]["bob"] == "research"
    assert not [a for a in data["assocs"] if a["user"] == "bob" and a["account"] == "vision"]
    second = slurmdbd.run(cluster)
    assert slurmdbd.changes() == [] and second.changed == 0


def test_a_removed_user_and_account_go_unless_their_jobs_are_active(slurmdbd: Slurmdbd) -> None:
    cluster = _tenancy()
    _ok(slurmdbd.run(cluster))
    sched = cluster["scheduler"]
    del sched["users"]["bob"]
    del sched["accounts"]["vision"]
    sched["users"]["alice"]["further_accounts"] = []
    sched["accounts"]["labs"]["coordinators"] = []
    state = slurmdbd.data()
    state["jobs"] = [{"id": 41, "account": "vision", "user": "bob"}]  # bob's job still runs
    slurmdbd.state.write_text(json.dumps(state))

    held = slurmdbd.run(cluster)
    _ok(held)
    assert "WARNING held back, not removed from slurmdbd: user bob in vision still has active jobs" in held.stdout
    assert "JobId = 41" in held.stdout and "account vision still has active" in held.stdout
    # alice's association with vision has no job: it goes, while bob's and the account stay.
    users = {(a["account"], a["user"]) for a in slurmdbd.data()["assocs"]}
    assert ("vision", "alice") not in users and ("vision", "bob") in users and ("vision", "") in users

    state = slurmdbd.data()
    state["jobs"] = []  # the job ended
    slurmdbd.state.write_text(json.dumps(state))
    _ok(slurmdbd.run(cluster))
    assoc_names = {(a["account"], a["user"]) for a in slurmdbd.data()["assocs"]}
    assert assoc_names == {("root", ""), ("root", "root"), ("labs", ""), ("research", ""), ("research", "alice")}
    assert ["delete", "user", "where", "name=bob", "account=vision", "cluster=forge-dev"] in slurmdbd.changes()
    assert ["delete", "account", "where", "name=vision", "cluster=forge-dev"] in slurmdbd.changes()
