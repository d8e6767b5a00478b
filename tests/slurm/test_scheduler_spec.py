"""Bad scheduler sections are rejected before anything is declared, every problem with its field path."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuforge.plan.stacks import load_stack
from gpuforge.spec import SpecError, resolve


def _dev() -> dict[str, Any]:
    return copy.deepcopy(load_stack("dev").cluster)


def _problems(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        resolve(data, "test")
    return {issue.path: issue.message for issue in err.value.issues}


def test_dev_is_a_slurm_cluster() -> None:
    resolved = resolve(_dev(), "dev")
    assert resolved.scheduler is not None
    assert resolved.scheduler.default_partition == "gpu"
    assert [c.address for c in resolved.scheduler.controllers] == ["10.20.128.10"]


def test_all_problems_at_once_with_field_paths() -> None:
    data = _dev()
    sched = data["scheduler"]
    sched["partitions"]["gpu"]["node_groups"] = ["train", "trian"]  # unknown group
    sched["partitions"]["debug"]["default"] = True  # two defaults
    sched["partitions"]["empty"] = {"node_groups": []}  # no nodes
    sched["partitions"]["late"] = {"node_groups": ["train"], "max_time": "60", "default_time": "2:00:00"}
    problems = _problems(data)
    unknown = problems["cluster.scheduler.partitions[gpu].node_groups[1]"]
    assert "no node group or site host pool named 'trian'" in unknown
    assert problems["cluster.scheduler.partitions"].startswith("2 default partitions")
    assert problems["cluster.scheduler.partitions[empty].node_groups"] == "a partition with no nodes"
    assert "exceeds max_time" in problems["cluster.scheduler.partitions[late].default_time"]


def test_login_group_without_scheduler() -> None:
    data = _dev()
    del data["scheduler"]
    problems = _problems(data)
    assert problems["cluster.node_groups[login].orchestrator"] == "a login group without a scheduler"
    assert problems["cluster.node_groups[train].orchestrator"] == "a Slurm node group without a scheduler"


def test_partition_group_must_run_slurm() -> None:
    data = _dev()
    data["node_groups"]["train"]["orchestrator"] = "none"
    problems = _problems(data)
    assert "do not run Slurm" in problems["cluster.scheduler.partitions[gpu].node_groups[0]"]


def test_bad_values_are_structural_errors() -> None:
    data = _dev()
    data["scheduler"]["partitions"]["gpu"]["max_time"] = "a week"
    data["scheduler"]["controller"]["hosts"] = {"slurm-01": "10.0.0.300"}
    problems = _problems(data)
    assert "is not a Slurm time" in problems["cluster.scheduler.partitions[gpu].max_time"]
    assert "not an IP address" in problems["cluster.scheduler.controller.hosts"]


def test_aws_controller_fields() -> None:
    data = _dev()
    data["scheduler"]["users"]["bob"] = {"uid": 2002, "account": "nobody"}
    data["scheduler"]["controller"] = {"hosts": {"slurm-01": "10.20.0.5"}}
    problems = _problems(data)
    assert "this is an AWS cluster" in problems["cluster.scheduler.controller"]
    assert problems["cluster.scheduler.controller.instance_type"] == "missing"
    assert problems["cluster.scheduler.users[bob].account"] == "no account named 'nobody'"


def _lab() -> dict[str, Any]:
    return copy.deepcopy(load_stack("onprem-lab").cluster)


def test_onprem_lab_is_a_slurm_cluster_on_service_hosts() -> None:
    resolved = resolve(_lab(), "onprem-lab")
    sched = resolved.scheduler
    assert sched is not None and sched.default_partition == "batch"
    assert [(c.name, c.address) for c in sched.controllers] == [("slurm-01", "10.64.1.6")]
    assert sched.login_hosts == {"login-01": "10.64.1.7"} and sched.login_groups == ()
    assert sched.database == "controller" and sched.home == "home" and not sched.state_shared
    assert [h.name for h in sched.groups["train"].hosts] == [f"dgx-{r}0{i}" for r in "ab" for i in range(1, 5)]


def test_site_service_hosts_are_checked_all_at_once() -> None:
    data = _lab()
    data["scheduler"]["controller"]["hosts"] = {"dgx-a01": "10.64.1.11", "slurm-02": "192.168.7.5"}
    data["scheduler"]["login"]["hosts"] = {"slurm-02": "10.64.1.8", "login-01": "172.16.0.7"}
    data["site"]["fabric"]["partitions"]["robotics"] = "0x0040"
    problems = _problems(data)
    assert problems["cluster.scheduler.controller.hosts[dgx-a01]"] == "dgx-a01 is a compute host in site.hosts"
    assert "192.168.7.5 is outside the site's cidrs (10.64.0.0/16)" in problems[
        "cluster.scheduler.controller.hosts[slurm-02]"
    ]
    assert "two controllers need a shared state directory" in problems["cluster.scheduler.controller.state_mount"]
    assert problems["cluster.scheduler.login.hosts[slurm-02]"] == "slurm-02 is also the controller"
    assert "outside the site's cidrs" in problems["cluster.scheduler.login.hosts[login-01]"]
    # InfiniBand partition keys on a Slurm site are per Slurm account.
    assert problems["cluster.site.fabric.partitions[robotics]"] == "robotics is not a Slurm account"


def test_the_users_home_is_no_state_directory() -> None:
    """Both controllers mount the state mount at StateSaveLocation and make its root slurm's: /home is refused."""
    data = _lab()
    data["scheduler"]["controller"]["hosts"]["slurm-02"] = "10.64.1.8"
    data["scheduler"]["controller"]["state_mount"] = "home"
    problems = _problems(data)
    assert problems["cluster.scheduler.controller.state_mount"] == "'home' is the users' /home"
    data["site"]["storage"]["mounts"]["slurm-state"] = {
        "kind": "nfs", "server": "10.64.8.21", "export": "/export/slurm-state", "mount_point": "/srv/slurm-state"}
    data["scheduler"]["controller"]["state_mount"] = "slurm-state"
    assert resolve(data, "onprem-lab").scheduler.state_shared


def test_login_hosts_are_for_sites() -> None:
    data = _dev()
    data["scheduler"]["login"]["hosts"] = {"login-01": "10.20.0.7"}
    problems = _problems(data)
    assert "this is an AWS cluster" in problems["cluster.scheduler.login.hosts"]


def test_bastion_needs_an_ssh_opening_an_aws_network_and_a_known_type() -> None:
    data = _dev()
    data["scheduler"]["login"]["bastion"] = True
    data["network"]["allowed_ingress"] = [{"cidr": "198.51.100.0/24", "ports": [443], "description": "HTTPS"}]
    assert "allowed_ingress rule with port 22" in _problems(data)["cluster.scheduler.login.bastion"]
    data["network"]["allowed_ingress"][0]["ports"] = [22]
    data["scheduler"]["login"]["bastion_instance_type"] = "t9.nano"
    assert "cluster.scheduler.login.bastion_instance_type" in _problems(data)
    lab = _lab()
    lab["scheduler"]["login"]["bastion"] = True
    assert "a bastion is an AWS instance" in _problems(lab)["cluster.scheduler.login.bastion"]
