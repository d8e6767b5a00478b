"""`gpuforge status` and `gpuforge ssh` on booted machines: the shared pair of plain Debian machines
(``two_machines``, tests/machines) stand in for dev's deployed login node and controller, and for two hosts of
a site.

AWS: a moto server holds two EC2 instances with the tags dev's launch template and controller carry and
the machines' addresses as their private IPs (a subnet of 127.0.0.0/16, where the machines live). gpuforge
runs as a process of its own against that endpoint, as an operator runs it. What stands in for Session
Manager is tests/standins/session_manager.py, as `aws` on PATH: it resolves the target instance to its
private address through EC2 and opens SSH there (no SSM agent runs on the machines). Run Command has no
stand-in: status runs with --no-slurm (moto's Run Command "succeeds" with no output, which status reports as
unchecked, and the parsing of an answer is tested with botocore's Stubber: tests/cli/test_day_two.py).
Picking a node by address or Slurm node name is tested there too, against moto.

On premises: the onprem-lab stack with the login host's and a DGX's management addresses made the
machines', reached with the system's ssh and the options `gpuforge ssh -o` passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from gpuforge.catalog.tokens import SLURM_ROLE_TAG
from gpuforge.nodes.inventory import CLUSTER_TAG, NODE_GROUP_TAG
from tests.machines.boot import Machine, Machines
from tests.standins import session_manager
from tests.standins.moto_server import CREDENTIALS, boto3_args, moto_server
from tests.support import REPO

pytestmark = pytest.mark.slow

REGION = "us-east-1"
CLUSTER = "forge-dev"  # dev's cluster name: the tags its instances carry
GPUFORGE = [sys.executable, "-m", "gpuforge"]
# What the shell on the far end prints: which machine the session reached.
WHO = "echo reached $(hostname)\n"


@dataclass
class Deployed:
    env: dict[str, str]
    login: Machine
    controller: Machine
    instances: dict[str, str]  # instance id -> the machine name it stands for


def _launch(ec2: Any, subnet: str, machine: Machine, tags: dict[str, str]) -> str:
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    answer = ec2.run_instances(
        ImageId=image, MinCount=1, MaxCount=1, InstanceType="m7i.xlarge", SubnetId=subnet,
        PrivateIpAddress=machine.address,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
    )  # fmt: skip
    return str(answer["Instances"][0]["InstanceId"])


@pytest.fixture(scope="module")
def deployed(two_machines: Machines, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    login, controller = two_machines[0], two_machines[1]
    workdir = tmp_path_factory.mktemp("day-two")
    with moto_server(workdir) as endpoint:
        ec2 = boto3.client("ec2", **boto3_args(endpoint, REGION))
        vpc = ec2.create_vpc(CidrBlock="127.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="127.0.0.0/16")["Subnet"]["SubnetId"]
        instances = {
            _launch(ec2, subnet, login, {CLUSTER_TAG: CLUSTER, NODE_GROUP_TAG: "login"}): login.name,
            # The tags gpuforge/infra/aws/slurm.py gives a controller instance.
            _launch(ec2, subnet, controller, {CLUSTER_TAG: CLUSTER, "Name": f"{CLUSTER}-ctl-0",
                                              SLURM_ROLE_TAG: "controller"}): controller.name,
        }  # fmt: skip
        bin_dir = workdir / "bin"
        session_manager.install(bin_dir)
        env = {
            **os.environ,
            **CREDENTIALS,
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_DEFAULT_REGION": REGION,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "GPUFORGE_STANDIN_SSH": " ".join(login.ssh_options()),  # the pool's key and known hosts
            "GPUFORGE_STANDIN_SSH_USER": login.user,
        }
        yield Deployed(env, login, controller, instances)


def _gpuforge(deployed: Deployed, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GPUFORGE, *args], cwd=REPO, env=deployed.env, input=stdin, capture_output=True, text=True, timeout=180
    )


def _reached(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr[-2000:]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("reached ")]
    return line.removeprefix("reached ")


def test_status_reports_the_booted_machines_as_the_stacks_nodes(deployed: Deployed) -> None:
    result = _gpuforge(deployed, "status", "dev", "--json", "--no-slurm")
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]  # dev runs as planned: 1 login node
    report = json.loads(result.stdout)
    nodes = {n["instance_id"]: n for n in report["nodes"]}
    assert set(nodes) == set(deployed.instances)
    addresses = {deployed.instances[iid]: n["private_ip"] for iid, n in nodes.items()}
    assert addresses == {m.name: m.address for m in (deployed.login, deployed.controller)}
    groups = {g["name"]: g for g in report["groups"]}
    assert groups["login"]["by_state"] == {"running": 1} and groups["login"]["findings"] == []
    assert groups["train"]["by_state"] == {} and groups["train"]["planned"] == "0-2"
    (controller,) = report["controllers"]
    assert (controller["name"], controller["private_ip"]) == (f"{CLUSTER}-ctl-0", deployed.controller.address)


def test_ssh_reaches_the_login_node_by_default_and_the_node_named(deployed: Deployed) -> None:
    login, controller = deployed.login, deployed.controller
    assert _reached(_gpuforge(deployed, "ssh", "dev", stdin=WHO)) == login.name
    assert _reached(_gpuforge(deployed, "ssh", "dev", "controller", stdin=WHO)) == controller.name


def _site_stack(tmp_path: Path, login: Machine, dgx: Machine) -> Path:
    """onprem-lab with login-01 and dgx-a02 at the machines' addresses (on a range the site declares)."""
    text = (REPO / "stacks" / "Pulumi.onprem-lab.yaml").read_text()
    for old, new in (
        ("cidrs: [10.64.0.0/16]", "cidrs: [10.64.0.0/16, 127.0.1.0/24]"),
        ("login-01: 10.64.1.7", f"login-01: {login.address}"),
        ("management_ip: 10.64.1.12", f"management_ip: {dgx.address}"),
    ):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    stack = tmp_path / "Pulumi.onprem-lab.yaml"
    stack.write_text(text)
    return stack


def test_ssh_on_premises_reaches_the_host_at_its_management_address(deployed: Deployed, tmp_path: Path) -> None:
    login, dgx = deployed.login, deployed.controller
    stack = str(_site_stack(tmp_path, login, dgx))
    options = [f"IdentityFile={login.key_path}", f"UserKnownHostsFile={login.known_hosts}",
               "StrictHostKeyChecking=yes", "BatchMode=yes"]  # fmt: skip
    ssh = ["ssh", stack, "--user", login.user, *(word for o in options for word in ("-o", o))]
    assert _reached(_gpuforge(deployed, *ssh, stdin=WHO)) == login.name  # the login host by default
    assert _reached(_gpuforge(deployed, *ssh[:2], "dgx-a02", *ssh[2:], stdin=WHO)) == dgx.name
    listed = _gpuforge(deployed, "status", stack)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert ["dgx-a02", dgx.address] in [line.split() for line in listed.stdout.splitlines()], listed.stdout
