"""Node roles whose work only a running machine shows, on one booted Debian 12 machine over SSH:

- kubelet_config: the machine runs a stand-in kubelet.service (a long-running process that reads its
  drop-in directory at start, as the kubelet does; no Kubernetes here), so the role's "Restart kubelet"
  handler restarts a real unit: a new process, which read the new drop-in; a second run restarts nothing.
- secret_store on AWS: the MUNGE key in Secrets Manager and a second secret in an SSM SecureString
  parameter, served by moto_server on 127.0.0.1, read on the node by the production task (boto3, installed
  by the role) with the node's own credentials: its instance role's, from a stand-in IMDSv2
  (tests/standins/imds.py) named in root's ~/.aws/config as an instance's metadata service would be found.
  munged runs with the key; neither value appears in Ansible's output, even at -vvv (no_log).
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from gpuforge.nodes.bake import PlaybookResult, run_playbook
from tests.machines import SSH_IMAGE, Machine, MachinePool
from tests.standins.imds import CREDENTIALS_PATH, StandInImds, stand_in_imds
from tests.standins.moto_server import boto3_args, moto_server

from .test_kubelet_config import _lab_host

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
REGION = "us-east-1"
ROLE = "gpuforge-node"
MUNGE_SECRET = "gpuforge/lab/munge-key"
SSM_PARAMETER = "/gpuforge/lab/db-password"
# The stand-in kubelet: what it read from its --config-dir when it started, then it runs until stopped.
KUBELET = """#!/bin/sh
mkdir -p /run/kubelet-standin
cat "$2"/*.conf > /run/kubelet-standin/config 2>/dev/null || : > /run/kubelet-standin/config
exec sleep infinity
"""
KUBELET_UNIT = """[Unit]
Description=kubelet (gpuforge test stand-in)
[Service]
ExecStart=/usr/local/bin/kubelet --config-dir /etc/kubernetes/kubelet.conf.d
[Install]
WantedBy=multi-user.target
"""


@pytest.fixture(scope="module")
def machine(machine_pool: MachinePool) -> Machine:
    return machine_pool.group("svc", 1, SSH_IMAGE)[0]


def _write(machine: Machine, path: str, content: str, mode: str) -> None:
    encoded = base64.b64encode(content.encode()).decode()
    command = f"mkdir -p {Path(path).parent} && echo {encoded} | base64 -d > {path} && chmod {mode} {path}"
    machine.run(command, root=True)


def _kubelet_pid(machine: Machine) -> int:
    return int(machine.run("systemctl show --property MainPID --value kubelet.service").stdout.strip())


def test_the_kubelet_handler_restarts_the_running_kubelet(machine: Machine) -> None:
    _write(machine, "/usr/local/bin/kubelet", KUBELET, "0755")
    _write(machine, "/etc/systemd/system/kubelet.service", KUBELET_UNIT, "0644")
    machine.run("systemctl daemon-reload && systemctl enable --now kubelet.service", root=True)
    before = _kubelet_pid(machine)
    assert before > 0
    _, host_vars = _lab_host()
    inventory = {"all": {"hosts": {machine.name: machine.ansible_vars() | host_vars}}}

    first = run_playbook(HERE / "kubelet_config.yml", inventory)
    assert first.ok, [f"{f.task}: {f.message}" for f in first.failures]
    after = _kubelet_pid(machine)
    assert after not in (0, before)  # a new kubelet process...
    # ...which read the drop-in the role wrote.
    assert machine.run("cat /run/kubelet-standin/config", root=True).stdout == host_vars["kubelet_config_dropin"]

    second = run_playbook(HERE / "kubelet_config.yml", inventory)
    assert second.ok and second.hosts[machine.name].changed == 0
    assert _kubelet_pid(machine) == after


@pytest.fixture(scope="module")
def aws_secrets(machine: Machine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """moto's Secrets Manager and SSM with the two secrets, and the stand-in IMDS giving the node its role."""
    munge_key = base64.b64encode(secrets.token_bytes(1024)).decode()
    password = secrets.token_urlsafe(24)
    with moto_server(tmp_path_factory.mktemp("moto")) as endpoint, stand_in_imds("i-0123456789abcdef0") as imds:
        imds.role = ROLE
        args = boto3_args(endpoint, REGION)
        boto3.client("secretsmanager", **args).create_secret(Name=MUNGE_SECRET, SecretString=munge_key)
        boto3.client("ssm", **args).put_parameter(Name=SSM_PARAMETER, Value=password, Type="SecureString")
        # Where botocore finds an instance's metadata service (its default is 169.254.169.254).
        _write(machine, "/root/.aws/config", f"[default]\nec2_metadata_service_endpoint = {imds.endpoint}\n", "0600")
        yield {"endpoint": endpoint, "imds": imds, "munge_key": munge_key, "password": password}


@pytest.fixture(scope="module")
def secret_run(machine: Machine, aws_secrets: dict[str, Any]) -> PlaybookResult:
    host = machine.ansible_vars() | {
        "munge_key_ref": {"store": "aws_secretsmanager", "id": MUNGE_SECRET},
        "secret_store_test_ref": {"store": "aws_ssm", "id": SSM_PARAMETER},
        "gpuforge_region": REGION,
        "secret_store_aws_endpoint_url": aws_secrets["endpoint"],
    }
    return run_playbook(HERE / "secret_store.yml", {"all": {"hosts": {machine.name: host}}}, verbosity=3)


def test_the_node_reads_both_aws_stores_with_its_instance_role(
    machine: Machine, aws_secrets: dict[str, Any], secret_run: PlaybookResult
) -> None:
    assert secret_run.ok, [f"{f.task}: {f.message}" for f in secret_run.failures]
    assert machine.run("cat /etc/munge/munge.key", root=True).stdout == aws_secrets["munge_key"]
    assert machine.run("cat /root/secret-store-test", root=True).stdout == aws_secrets["password"]
    # munged runs with the key: a credential it encodes decodes.
    machine.run("munge -n | unmunge", root=True)
    # The credentials were the instance role's, asked of the metadata service with an IMDSv2 token.
    imds: StandInImds = aws_secrets["imds"]
    assert ("GET", CREDENTIALS_PATH + ROLE, True) in imds.requests
    assert machine.run("dpkg-query -W -f '${Status}' python3-boto3").stdout == "install ok installed"


def test_no_secret_reaches_ansibles_output(aws_secrets: dict[str, Any], secret_run: PlaybookResult) -> None:
    assert "no_log: true" in secret_run.stdout  # the censored results are there, at -vvv
    for value in (aws_secrets["munge_key"], aws_secrets["password"]):
        assert value not in secret_run.stdout
        assert value[:16] not in secret_run.stdout
