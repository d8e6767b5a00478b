"""A hybrid Slurm burst's site Prometheus discovers the cloud nodes with ec2_sd on credentials of its own, through
IAM Roles Anywhere (issue 31): the stack declares a discovery role trusted for the Prometheus hosts' certificates
only and allowed only what ec2_sd reads, and a profile for it; the rendered ec2_sd jobs name the AWS profile the
prometheus role writes; the wiring rule refuses a widened trust or grant.

The end-to-end proof: the role's tasks played on this host, then Debian's Prometheus 2.42 run with the rendered
prometheus.yml and the environment file the role's template writes, in a process with no AWS variables of its
own. It runs the stand-in aws_signing_helper through the profile's credential_process and lists the cloud node
that moto_server (127.0.0.1) holds, tagged as the stack tags it. The one change to the rendered configuration
is each ec2_sd config's `endpoint`, pointed at moto_server (Prometheus 2.42 reads no endpoint variable).

What stands in, and why: aws_signing_helper (tests/standins/signing_helper.py: the real one signs a CreateSession
call to rolesanywhere.amazonaws.com), EC2's API (moto_server). No AWS is reachable here.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped,unused-ignore]
import pulumi
import pulumi_aws as aws
import pytest
import yaml

from gpuforge.infra.hybrid.roles_anywhere import EC2_SD_READ, PrometheusDiscovery, PrometheusDiscoveryArgs
from gpuforge.nodes.bake import run_playbook
from gpuforge.plan.engine import plan_stack
from gpuforge.plan.model import Plan
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.plan.stacks import load_stack
from gpuforge.plan.validation import check_stack
from gpuforge.policy.rules import REGISTRY, Resource, RuleContext, wiring_slurm
from gpuforge.render.ec2_discovery import DISCOVERY_FILE, DISCOVERY_PROFILE
from gpuforge.render.monitoring import Paths, render_monitoring, role_vars
from tests.standins.moto_server import boto3_args, moto_server
from tests.standins.pulumi_mocks import ArnMocks
from tests.standins.signing_helper import served_signing_helper

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = Path(__file__).with_name("prometheus_aws_discovery.yml")
BURST = "gpuforge:hybrid:SlurmBurst"
DISCOVERY = "gpuforge:hybrid:PrometheusDiscovery"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
PROFILE = "aws:rolesanywhere/profile:Profile"
CREDENTIALS = "wiring-slurm-burst-credentials"
MON_HOST, MON_ADDRESS = "mon-01", "10.72.1.5"  # conftest.py hybrid_monitored's site Prometheus
DEPLOYED = {
    "trustAnchorArn": "arn:aws:rolesanywhere:us-east-1:111122223333:trust-anchor/5f0e6a1c-8b2d-4c3e-9f10-2a3b4c5d",
    "profileArn": "arn:aws:rolesanywhere:us-east-1:111122223333:profile/0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f",
    "roleArn": "arn:aws:iam::111122223333:role/forge-hybrid-burst-prometheus-discovery-role-1a2b3c4",
}


@pytest.fixture(scope="module")
def plan(hybrid_monitored: Plan) -> Plan:
    return hybrid_monitored


def _render_under(plan: Plan, root: Path) -> None:
    """What `gpuforge render monitoring` writes for a Prometheus whose configuration directory is *root*: the
    files under it, at the paths the configuration names."""
    for name, text in render_monitoring(plan.resolved, paths=Paths(root=str(root))).files.items():
        if name.startswith(str(root)):
            Path(name).parent.mkdir(parents=True, exist_ok=True)
            Path(name).write_text(text)


def _discovery(plan: Plan) -> tuple[Any, Any, Any, Any]:
    (burst,) = plan.by_type(BURST)
    (component,) = plan.by_type(DISCOVERY)
    assert component.parent == burst.urn
    (role,) = [r for r in plan.by_type(ROLE) if r.parent == component.urn]
    (policy,) = [r for r in plan.by_type(ROLE_POLICY) if r.parent == component.urn]
    (profile,) = [r for r in plan.by_type(PROFILE) if r.parent == component.urn]
    return burst, role, policy, profile


def test_the_site_prometheus_gets_a_discovery_role_for_its_own_certificate_only(plan: Plan) -> None:
    burst, role, policy, profile = _discovery(plan)
    (anchor,) = plan.by_type("aws:rolesanywhere/trustAnchor:TrustAnchor")
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "rolesanywhere.amazonaws.com"}
    assert statement["Condition"]["StringEquals"] == {"aws:PrincipalTag/x509Subject/CN": [MON_HOST]}
    assert set(statement["Condition"]["ArnEquals"]) == {"aws:SourceArn"}
    assert anchor.urn in role.dependencies["assumeRolePolicy"]  # the burst's one trust anchor, the site CA
    (grant,) = json.loads(policy.inputs["policy"])["Statement"]
    assert grant == {"Effect": "Allow", "Action": ["ec2:DescribeAvailabilityZones", "ec2:DescribeInstances"],
                     "Resource": "*"}
    assert role.urn in profile.dependencies["roleArns"]
    assert profile.inputs["name"] == "forge-hybrid-prometheus-discovery"
    assert burst.inputs["prometheusHosts"] == {MON_HOST: MON_ADDRESS}
    assert set(plan.outputs["hybrid"]["burst"]["discovery"]) == {"roleArn", "profileArn", "trustAnchorArn"}
    # The policy pack keeps its own copy of the actions (it imports no infra): the same list.
    assert tuple(EC2_SD_READ) == wiring_slurm.EC2_SD_READ


def test_no_site_prometheus_no_discovery_role() -> None:
    hybrid = plan_stack(ROOT / "stacks" / "Pulumi.hybrid.yaml")
    assert not hybrid.by_type(DISCOVERY)
    assert "discovery" not in hybrid.outputs["hybrid"]["burst"]


def test_the_rendered_ec2_sd_jobs_name_the_profile_and_pass_promtool(plan: Plan, tmp_path: Path) -> None:
    root = tmp_path / "etc-prometheus"
    _render_under(plan, root)
    config = yaml.safe_load((root / "prometheus.yml").read_text())
    sd = {job["job_name"]: job["ec2_sd_configs"] for job in config["scrape_configs"] if "ec2_sd_configs" in job}
    assert set(sd) == {"node", "dcgm"}
    assert all(c["profile"] == DISCOVERY_PROFILE and c["region"] == "us-east-1" for cs in sd.values() for c in cs)
    checked = subprocess.run(["promtool", "check", "config", str(root / "prometheus.yml")],
                             capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # Beside it, what the prometheus role reads: the profile, the region and the catalog's helper.
    settings = json.loads((root / DISCOVERY_FILE).read_text())
    assert settings["profile"] == DISCOVERY_PROFILE and settings["region"] == "us-east-1"
    helper = settings["signing_helper"]
    assert helper["version"] == "1.8.2" and len(helper["sha256"]["x86_64"]) == 64
    # The ARNs once deployed (without the stack's outputs there are none: the role refuses, see below).
    assert not any(k.startswith("prometheus_discovery_") for k in role_vars(plan.resolved, tmp_path))
    after = role_vars(plan.resolved, tmp_path, outputs=_deployed(plan.outputs))
    assert after["prometheus_discovery_role_arn"] == DEPLOYED["roleArn"]


def test_a_prometheus_on_aws_names_no_profile() -> None:
    """On AWS the SDK takes the monitoring node's instance profile."""
    prod = check_stack(load_stack("prod")).resolved
    config = yaml.safe_load(next(t for n, t in render_monitoring(prod).files.items() if n.endswith("prometheus.yml")))
    assert any("ec2_sd_configs" in job for job in config["scrape_configs"])
    assert all("profile" not in c for job in config["scrape_configs"] for c in job.get("ec2_sd_configs", []))
    assert not any(n.endswith(DISCOVERY_FILE) for n in render_monitoring(prod).files)
    assert not any(k.startswith("prometheus_discovery_") for k in role_vars(prod, "/tmp/files"))


# --- the wiring rule ------------------------------------------------------------------------------------------


def _check(resources: list[Resource]) -> list[str]:
    rule = REGISTRY[CREDENTIALS]
    return [v.message for v in rule.run(resources, RuleContext("staging", rule.defaults()))]


def _edited(resources: list[Resource], urn: str, **inputs: Any) -> list[Resource]:
    return [replace(r, inputs={**r.inputs, **inputs}) if r.urn == urn else r for r in resources]


def test_the_wiring_rule_holds_the_discovery_role_to_its_hosts_and_reads(plan: Plan) -> None:
    resources = to_rule_resources(plan.resources)
    assert _check(resources) == []
    _, role, policy, _ = _discovery(plan)
    trust = json.loads(role.inputs["assumeRolePolicy"])
    widened = copy.deepcopy(trust)
    widened["Statement"][0]["Condition"]["StringEquals"]["aws:PrincipalTag/x509Subject/CN"] = [MON_HOST, "login-01"]
    (message,) = _check(_edited(resources, role.urn, assumeRolePolicy=json.dumps(widened)))
    assert message.startswith(f"{role.name}: Roles Anywhere trust admits certificates with")
    assert "login-01" in message and f"the site Prometheus hosts ({MON_HOST})" in message
    grant = json.loads(policy.inputs["policy"])
    grant["Statement"][0]["Action"].append("autoscaling:SetDesiredCapacity")
    (message,) = _check(_edited(resources, policy.urn, policy=json.dumps(grant)))
    assert message == (
        f"{policy.name}: the site Prometheus's discovery role is granted autoscaling:SetDesiredCapacity; expected "
        "only ec2:DescribeAvailabilityZones, ec2:DescribeInstances (Prometheus' configuration docs, "
        "<ec2_sd_config>); remove them"
    )


# --- the component on its own, under Pulumi's mocks -------------------------------------------------------------


@pytest.fixture
def discovery() -> PrometheusDiscovery:
    pulumi.runtime.set_mocks(ArnMocks(), preview=False)
    return PrometheusDiscovery(
        "disc",
        PrometheusDiscoveryArgs(cluster="c1", trust_anchor_arn=DEPLOYED["trustAnchorArn"],
                                hosts=["mon-02", "mon-01"], session_minutes=60),
    )


@pulumi.runtime.test
def test_the_component_trusts_the_anchor_for_the_prometheus_hosts(discovery: PrometheusDiscovery) -> Any:
    children: set[Any] = getattr(discovery, "_childResources", set())
    (role,) = [c for c in children if isinstance(c, aws.iam.Role)]
    (policy,) = [c for c in children if isinstance(c, aws.iam.RolePolicy)]
    (profile,) = [c for c in children if isinstance(c, aws.rolesanywhere.Profile)]

    def check(values: list[Any]) -> None:
        trust, grant, role_arn, role_arns, duration = values
        (statement,) = json.loads(trust)["Statement"]
        assert statement["Condition"] == {
            "ArnEquals": {"aws:SourceArn": DEPLOYED["trustAnchorArn"]},
            "StringEquals": {"aws:PrincipalTag/x509Subject/CN": ["mon-01", "mon-02"]},
        }
        assert json.loads(grant)["Statement"][0]["Action"] == EC2_SD_READ
        assert role_arns == [role_arn] and duration == 3600

    return pulumi.Output.all(role.assume_role_policy, policy.policy, role.arn, profile.role_arns,
                             profile.duration_seconds).apply(check)


# --- Prometheus itself, with the role's profile --------------------------------------------------------------


def _deployed(outputs: dict[str, Any]) -> dict[str, Any]:
    deployed = copy.deepcopy(outputs)
    deployed["hybrid"]["burst"]["discovery"] = dict(DEPLOYED)
    return deployed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def moto(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "moto").mkdir()
    with moto_server(tmp_path / "moto") as endpoint:
        yield endpoint


def _targets(port: int) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/targets?state=active", timeout=5) as response:
        return list(json.load(response)["data"]["activeTargets"])


def test_prometheus_discovers_the_cloud_nodes_with_the_roles_anywhere_profile(
    plan: Plan, moto: str, tmp_path: Path
) -> None:
    # The cloud node as the stack's Auto Scaling group launches it: tagged with the cluster and its group.
    ec2 = boto3.client("ec2", **boto3_args(moto))
    (instance,) = ec2.run_instances(
        ImageId="ami-0a1b2c3d4e5f60001", InstanceType="p5.48xlarge", MinCount=1, MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [
            {"Key": "gpuforge:cluster", "Value": plan.resolved.spec.name},
            {"Key": "gpuforge:node-group", "Value": "cloud"}]}],
    )["Instances"]

    host = tmp_path / "mon-01"
    pki, key, log = host / "pki", host / "pki/prometheus.key", host / "helper-calls.jsonl"
    pki.mkdir(parents=True)
    (pki / "prometheus.crt").write_text("-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nstand-in\n-----END PRIVATE KEY-----\n")
    key.chmod(0o644)
    (host / "bin").mkdir()
    root = host / "etc-prometheus"
    _render_under(plan, root)
    with served_signing_helper(tmp_path / "served", sys.executable, str(log)) as served:
        # The rendered files are where the configuration names them: prometheus_files_dir "" + the root.
        offline = role_vars(plan.resolved, "", Paths(root=str(root)))  # no deployed outputs yet
        deployed = role_vars(plan.resolved, "", Paths(root=str(root)), outputs=_deployed(plan.outputs))
        rendered = json.loads((root / DISCOVERY_FILE).read_text())
        stand_in = {**rendered, "signing_helper": served.signing_helper()}  # the stand-in and its digest
        inventory = {"all": {"hosts": {MON_HOST: {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "prometheus_certificate": str(pki / "prometheus.crt"),
            "prometheus_private_key": str(key),
            "prometheus_credential_user": "root",
            "prometheus_signing_helper_path": str(host / "bin/aws_signing_helper"),
            "prometheus_aws_config_file": str(host / "aws/config"),
            "prometheus_service_started": False,
            "prometheus_storage_path": str(host / "tsdb"),
            "test_defaults_file": str(host / "default-prometheus"),
        }}}}
        # Before `pulumi up`: the role reads the rendered settings and refuses, naming the output to deploy.
        refused = run_playbook(PLAYBOOK, inventory, extravars=offline)
        (failure,) = refused.failures
        assert "discovers the cloud nodes with the AWS profile gpuforge-discovery" in failure.message
        assert "hybrid.burst.discovery" in failure.message and "prometheus_discovery_role_arn" in failure.message
        result = run_playbook(PLAYBOOK, inventory, extravars={**deployed, "prometheus_aws_discovery": stand_in})
        assert result.ok, [f"{f.task}: {f.message}" for f in result.failures]
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    profile = (host / "aws/config").read_text()
    assert f"[profile {DISCOVERY_PROFILE}]" in profile and "stand-in" not in profile  # paths, never the key
    environment = dict(
        line.split("=", 1) for line in (host / "default-prometheus").read_text().splitlines()
        if line.startswith("AWS_")
    )
    assert environment == {"AWS_CONFIG_FILE": str(host / "aws/config"), "AWS_SDK_LOAD_CONFIG": "1"}

    config = yaml.safe_load((root / "prometheus.yml").read_text())
    for job in config["scrape_configs"]:
        for sd in job.get("ec2_sd_configs", []):
            sd["endpoint"] = moto  # the one change: EC2's API is moto_server
    (root / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = _free_port()
    env = {"PATH": os.environ["PATH"], "HOME": str(host), **environment}  # no AWS keys of its own
    with subprocess.Popen(
        ["prometheus", f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={host / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    ) as prometheus:
        try:
            found: list[dict[str, Any]] = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not found:
                time.sleep(1)
                try:
                    found = [t for t in _targets(port) if t["labels"].get("job") == "node"
                             and t["labels"].get("node_group") == "cloud"]
                except OSError:
                    continue
        finally:
            prometheus.terminate()
            _, errors = prometheus.communicate(timeout=30)
    assert found, errors[-3000:]
    (target,) = found
    assert target["labels"]["instance"] == instance["PrivateDnsName"]
    assert target["scrapeUrl"].startswith(f"http://{instance['PrivateIpAddress']}:9100/")
    # Prometheus ran the profile's credential_process: the helper with the deployed discovery ARNs.
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert runs, "Prometheus never ran the signing helper"
    options = dict(zip(runs[0][1::2], runs[0][2::2], strict=True))
    assert runs[0][0] == "credential-process"
    assert options["--role-arn"] == DEPLOYED["roleArn"] and options["--profile-arn"] == DEPLOYED["profileArn"]
    assert options["--private-key"] == str(key)
