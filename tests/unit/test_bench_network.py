"""The bench's network from the dev stack's plan (tests/bench/plan_network.py): machines at their planned
addresses and subnets with EC2's names, and nftables rulesets that enforce exactly the plan's security-group
rules, which nft itself accepts (checked in a throwaway network namespace where nft and ip exist)."""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import uuid

import pytest

from tests.bench.plan_network import (
    HarnessAccess,
    PlanNetworkError,
    nft_ruleset,
    plan_network,
    without_rules,
)
from tests.bench.user_data import UserDataError, parse
from tests.support import planned

HARNESS = HarnessAccess("198.18.255.1")
SRUN_FROM_CONTROLLERS = "forge-dev-slurm-management-in-srun-controllers"


def test_machines_sit_at_their_planned_addresses_in_their_planned_subnets() -> None:
    plan = planned("dev")
    network = plan_network(plan, {"train": 2})
    (controller,) = plan.by_type("aws:ec2/instance:Instance")
    ctl = network.machine("forge-dev-ctl-0")
    assert ctl.address == controller.inputs["privateIp"] == plan.outputs["slurm"]["controllers"]["forge-dev-ctl-0"]
    assert ctl.subnet.name + "-id" == controller.inputs["subnetId"]
    assert ctl.ec2_hostname == "ip-" + ctl.address.replace(".", "-")
    assert ctl.security_groups == ("forge-dev-slurm-ctl-sg",)
    assert [m.key for m in network.node_groups["train"]] == ["train-1", "train-2"]
    assert [m.key for m in network.node_groups["login"]] == ["login-1"]  # its desired capacity
    for machine in network.machines:
        subnet = ipaddress.ip_network(machine.subnet.cidr)
        assert ipaddress.ip_address(machine.address) in subnet, machine
        assert subnet.subnet_of(ipaddress.ip_network(network.vpc_cidr))  # type: ignore[arg-type]
        assert machine.address != machine.subnet.router  # AWS keeps the first host for the VPC router
    assert len({m.address for m in network.machines}) == len(network.machines)
    assert network.machine("train-1").subnet.tier == "compute"
    assert network.machine("login-1").security_groups == ("forge-dev-net-management-sg",)


def test_each_rule_is_one_accept_on_each_member_and_nothing_else_is_admitted() -> None:
    network = plan_network(planned("dev"), {"train": 2})
    login = nft_ruleset(network, network.machine("login-1"), HARNESS)
    input_chain, output_chain = login.split("chain output")
    assert "policy drop" in input_chain and "policy drop" in output_chain
    # slurmctld answers a queued srun on the login node, from the controller only.
    assert (f'ip saddr {{ 10.20.128.10 }} tcp dport 60001-63000 accept comment "{SRUN_FROM_CONTROLLERS}"'
            in input_chain)
    # SSH to the login node only from the ingress tier's bastions, of which dev runs none, and the harness.
    assert "# forge-dev-net-management-in-ssh-from-ingress: no member of forge-dev-net-ingress-sg" in input_chain
    accepts = [line for line in input_chain.splitlines() if line.strip().endswith('"') and "accept" in line]
    assert {line.split('comment "')[1].rstrip('"') for line in accepts} == {
        "bench harness (Session Manager in production)",
        "forge-dev-slurm-management-in-srun-compute",
        SRUN_FROM_CONTROLLERS,
    }
    controller = nft_ruleset(network, network.machine("forge-dev-ctl-0"), HARNESS)
    assert "tcp dport 22 accept" in controller and controller.count("tcp dport 22") == 1  # the harness only
    assert "ip saddr { 10.20.0.100, 10.20.0.101 } tcp dport 6817 accept" in controller
    train = nft_ruleset(network, network.machine("train-1"), HARNESS)
    # compute-in-compute-self and efa-in-self: every protocol between the group's members.
    assert 'ip saddr { 10.20.0.100, 10.20.0.101 } accept comment "forge-dev-net-compute-in-compute-self"' in train


def test_removing_a_rule_from_the_plan_removes_its_accept() -> None:
    plan = planned("dev")
    network = plan_network(without_rules(plan, SRUN_FROM_CONTROLLERS), {"train": 2})
    login = nft_ruleset(network, network.machine("login-1"), HARNESS)
    assert SRUN_FROM_CONTROLLERS not in login
    assert "{ 10.20.128.10 }" not in login.split("chain output")[0]  # nothing else admits the controller
    with pytest.raises(PlanNetworkError, match="no such security-group rule"):
        without_rules(plan, "forge-dev-no-such-rule")


@pytest.mark.skipif(shutil.which("nft") is None or shutil.which("ip") is None, reason="needs nft and ip (root)")
def test_nft_accepts_every_machines_ruleset() -> None:
    network = plan_network(planned("dev"), {"train": 2})
    namespace = f"gf-nftcheck-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", namespace], check=True, capture_output=True)
    try:
        for machine in network.machines:
            ruleset = nft_ruleset(network, machine, HARNESS)
            # Loaded, not only checked (`nft -c`): what the namespace holds is then listed back.
            load = subprocess.run(["ip", "netns", "exec", namespace, "nft", "-f", "-"], input=ruleset, text=True,
                                  capture_output=True, timeout=30)
            assert load.returncode == 0, f"{machine.key}: {load.stderr}\n{ruleset}"
            listed = subprocess.run(["ip", "netns", "exec", namespace, "nft", "list", "ruleset"], text=True,
                                    capture_output=True, check=True, timeout=30).stdout
            assert listed.count("accept comment") == ruleset.count("accept comment"), machine.key
            subprocess.run(["ip", "netns", "exec", namespace, "nft", "flush", "ruleset"], check=True, timeout=30)
    finally:
        subprocess.run(["ip", "netns", "delete", namespace], check=True, capture_output=True)


def test_user_data_the_bench_applies_is_the_plans_and_unknown_keys_are_refused() -> None:
    network = plan_network(planned("dev"), {"train": 1})
    controller = parse(network.machine("forge-dev-ctl-0").user_data)
    assert controller["preserve_hostname"] is False and controller["hostname"] == "forge-dev-ctl-0"
    hosts = [f["content"] for f in controller["write_files"] if f["path"] == "/etc/hosts"]
    assert hosts == ["10.20.128.10 forge-dev-ctl-0\n"]
    assert "runcmd" in parse(network.machine("train-1").user_data)  # known, skipped with its reason
    with pytest.raises(UserDataError, match=r"\['bootcmd'\]"):
        parse("#cloud-config\nbootcmd: [reboot]\n")
    with pytest.raises(UserDataError, match="not a #cloud-config"):
        parse("#!/bin/sh\nreboot\n")
