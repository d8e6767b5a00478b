"""A hybrid cluster's site scaler gets its AWS credentials through IAM Roles Anywhere: the stack's scaler
ARNs reach the controller's inventory, the slurm_scaler role installs aws_signing_helper (verified by its
sha256) and writes the AWS config profile whose credential_process names the controller's certificate and
key, and the lifecycle unit's environment selects that profile.

The proof: the role's tasks played on this host (local connection, paths under the test's directory), then
gpuforge-lifecycle's own boto3 clients (gpuforge.nodes.lifecycle.clients), in a process with only the unit's
environment, read and scale a cloud Auto Scaling group on moto_server (127.0.0.1) with the credentials the
signing helper printed.

What stands in, and why: aws_signing_helper is a script that prints the credential-process JSON (the real
one signs a CreateSession call to rolesanywhere.amazonaws.com with the key: out of reach here), served over
HTTP on 127.0.0.1 with its own sha256 in place of the catalog's (as the enroot stand-ins are); it records
its arguments and checks the certificate and key are readable, as the real one must read them. moto
accepts any credentials: which ones signed the calls is read from the clients' own signer.
"""

from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped,unused-ignore]
import pytest
import yaml

from gpuforge.nodes.bake import PlaybookResult, run_playbook
from gpuforge.nodes.inventory import ENGINE_ONLY, build_inventory, engine_only_values, load_outputs
from gpuforge.nodes.slurm_inventory import scaler_arns
from tests.standins.moto_server import boto3_args, moto_server
from tests.standins.signing_helper import ACCESS_KEY, ARNS, ServedHelper, calls, served_signing_helper

PLAYBOOK = Path(__file__).with_name("scaler_roles_anywhere.yml")
STACK = "hybrid"
CONTROLLER = "slurm-01"
CLOUD_GROUP = "cloud"
DEPLOYED = {"trustAnchorArn": ARNS["trust_anchor_arn"], "profileArn": ARNS["profile_arn"], "roleArn": ARNS["role_arn"]}
# The key file's content: nowhere else.
SECRET_MARKER = "PRIVATE-KEY-MATERIAL-NEVER-PRINTED"

# gpuforge-lifecycle's start, as its unit runs it, in a process with only the unit's environment: its own
# clients and group reading, then a scale-up of the cloud group; prints what signed the calls.
SCALER = """
import json, sys
from gpuforge.nodes.lifecycle import LifecycleConfig, clients, read_groups
config = LifecycleConfig.from_dict(json.load(open(sys.argv[1])))
autoscaling, ec2 = clients(config)
groups = read_groups(config, autoscaling, ec2)
group = groups[sys.argv[2]]
autoscaling.set_desired_capacity(AutoScalingGroupName=group.name, DesiredCapacity=1)
keys = {c._request_signer._credentials.get_frozen_credentials().access_key for c in (autoscaling, ec2)}
print(json.dumps({"groups": sorted(groups), "access_keys": sorted(keys)}))
"""


@pytest.fixture(scope="module")
def plan_outputs() -> dict[str, Any]:
    outputs, origin = load_outputs(STACK, "plan")
    assert origin == "plan"
    return outputs


def deployed(plan_outputs: dict[str, Any]) -> dict[str, Any]:
    """The hybrid stack's outputs as `pulumi up` leaves them: the scaler's ARNs known."""
    outputs = copy.deepcopy(plan_outputs)
    outputs["hybrid"]["burst"]["scaler"] = dict(DEPLOYED)
    return outputs


def test_the_deployed_stack_gives_the_controller_the_scaler_arns(plan_outputs: dict[str, Any]) -> None:
    inventory = build_inventory(STACK, outputs=deployed(plan_outputs))
    credentials = inventory["all"]["vars"]["slurm_config"]["lifecycle"]["aws_credentials"]
    assert credentials["kind"] == "roles_anywhere"
    assert {k: credentials[k] for k in ARNS} == ARNS
    helper = credentials["signing_helper"]
    assert helper["version"] == "1.8.2" and len(helper["sha256"]["x86_64"]) == 64
    assert helper["url"]["x86_64"].startswith("https://rolesanywhere.amazonaws.com/releases/1.8.2/X86_64/Linux/")
    assert CONTROLLER in inventory["all"]["children"]["slurm_controller"]["hosts"]


def test_an_offline_plan_marks_the_scaler_arns_as_unknown(plan_outputs: dict[str, Any]) -> None:
    assert scaler_arns(plan_outputs) == dict.fromkeys(ARNS, ENGINE_ONLY)
    inventory = build_inventory(STACK, outputs=plan_outputs)
    unknown = engine_only_values(inventory)
    for key in ARNS:
        assert f"all.vars.slurm_config.lifecycle.aws_credentials.{key}" in unknown, unknown


def test_an_aws_controller_needs_no_roles_anywhere() -> None:
    outputs, _ = load_outputs("dev", "plan")
    lifecycle = build_inventory("dev", outputs=outputs)["all"]["vars"]["slurm_config"]["lifecycle"]
    assert "aws_credentials" not in lifecycle


class Site:
    """This host as the site controller: the PKI's certificate and key, the served stand-in helper."""

    def __init__(self, root: Path, served: ServedHelper) -> None:
        self.root = root
        self.served = served
        self.certificate = root / "pki/scaler.crt"
        self.key = root / "pki/scaler.key"
        self.calls = root / "helper-calls.jsonl"
        self.unit = root / "gpuforge-lifecycle.service"
        self.aws_config = root / "aws/config"
        self.helper = root / "bin/aws_signing_helper"

    def issue(self) -> None:
        """What the site's PKI does: the certificate and its key at the configured paths (key 0644 here,
        so the role's tightening shows)."""
        self.certificate.parent.mkdir(parents=True, exist_ok=True)
        self.certificate.write_text("-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n")
        self.key.write_text(f"-----BEGIN PRIVATE KEY-----\n{SECRET_MARKER}\n-----END PRIVATE KEY-----\n")
        self.key.chmod(0o644)

    def inventory(self, outputs: dict[str, Any], endpoint: str, **override: Any) -> dict[str, Any]:
        inventory = build_inventory(STACK, outputs=outputs)
        all_vars = inventory["all"]["vars"]
        lifecycle = all_vars["slurm_config"]["lifecycle"]
        lifecycle["endpoint_url"] = endpoint  # moto_server
        # The tests' stand-in and its digest in place of the catalog's release (as for enroot's assets).
        lifecycle["aws_credentials"]["signing_helper"] = self.served.signing_helper()
        host = {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "slurm_scaler_certificate": str(self.certificate),
            "slurm_scaler_private_key": str(self.key),
            "slurm_scaler_signing_helper_path": str(self.helper),
            "slurm_scaler_aws_config_file": str(self.aws_config),
            "test_unit_file": str(self.unit),
            **override,
        }
        return {"all": {"vars": all_vars, "hosts": {CONTROLLER: host}}}

    def unit_environment(self) -> dict[str, str]:
        env = {}
        for line in self.unit.read_text().splitlines():
            if line.startswith("Environment="):
                name, _, value = line.removeprefix("Environment=").strip('"').partition("=")
                env[name] = value
        return env


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    root = tmp_path / "controller"
    (root / "bin").mkdir(parents=True)  # /usr/local/bin on a controller
    with served_signing_helper(tmp_path / "served", sys.executable, str(root / "helper-calls.jsonl")) as served:
        yield Site(root, served)


@pytest.fixture(scope="module")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with moto_server(tmp_path_factory.mktemp("moto")) as endpoint:
        yield endpoint


def _failures(result: PlaybookResult) -> list[str]:
    return [f"{f.host} {f.task}: {f.message}" for f in result.failures]


def _cloud_group(endpoint: str, cluster: str) -> str:
    """The cloud node group's Auto Scaling group as the stack creates it: tagged, empty."""
    clients = boto3_args(endpoint)
    ec2, autoscaling = boto3.client("ec2", **clients), boto3.client("autoscaling", **clients)
    template = ec2.create_launch_template(
        LaunchTemplateName=f"{cluster}-{CLOUD_GROUP}",
        LaunchTemplateData={"ImageId": "ami-0a1b2c3d4e5f60001", "InstanceType": "p5.48xlarge"},
    )["LaunchTemplate"]["LaunchTemplateId"]
    name = f"{cluster}-{CLOUD_GROUP}"
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name, LaunchTemplate={"LaunchTemplateId": template, "Version": "1"},
        MinSize=0, MaxSize=3, DesiredCapacity=0, AvailabilityZones=["us-east-1a"],
        Tags=[{"Key": "gpuforge:cluster", "Value": cluster, "PropagateAtLaunch": True},
              {"Key": "gpuforge:node-group", "Value": CLOUD_GROUP, "PropagateAtLaunch": True}],
    )
    return name


def test_the_scaler_calls_auto_scaling_with_roles_anywhere_credentials(
    site: Site, moto_endpoint: str, plan_outputs: dict[str, Any]
) -> None:
    site.issue()
    inventory = site.inventory(deployed(plan_outputs), moto_endpoint)
    lifecycle = inventory["all"]["vars"]["slurm_config"]["lifecycle"]
    assert CLOUD_GROUP in lifecycle["groups"], lifecycle["groups"]
    first = run_playbook(PLAYBOOK, inventory)
    assert first.ok, _failures(first)

    # The helper, verified and executable; the key tightened to its owner; the profile names paths only.
    assert site.helper.stat().st_mode & 0o777 == 0o755
    assert stat.S_IMODE(site.key.stat().st_mode) == 0o600 and site.key.stat().st_uid == 0
    config = site.aws_config.read_text()
    assert "[profile gpuforge-scaler]\n" in config and "region = us-east-1\n" in config
    assert (
        f"credential_process = {site.helper} credential-process --certificate {site.certificate} "
        f"--private-key {site.key} --trust-anchor-arn {ARNS['trust_anchor_arn']} "
        f"--profile-arn {ARNS['profile_arn']} --role-arn {ARNS['role_arn']}\n"
    ) in config, config
    environment = site.unit_environment()
    assert environment == {"AWS_CONFIG_FILE": str(site.aws_config), "AWS_PROFILE": "gpuforge-scaler"}
    # The key's content is nowhere but in its file: not in the inventory, the playbook's output or the profile.
    for text in (yaml.safe_dump(inventory), first.stdout, config, site.unit.read_text()):
        assert SECRET_MARKER not in text

    # gpuforge-lifecycle with nothing but the unit's environment: no access key in it, no instance profile.
    group = _cloud_group(moto_endpoint, lifecycle["cluster"])
    (site.root / "lifecycle.json").write_text(json.dumps(lifecycle))
    env = {"PATH": os.environ["PATH"], "HOME": str(site.root), "PYTHONPATH": str(Path.cwd()),
           "AWS_EC2_METADATA_DISABLED": "true", **environment}
    run = subprocess.run([sys.executable, "-c", SCALER, str(site.root / "lifecycle.json"), CLOUD_GROUP],
                         env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen == {"groups": [CLOUD_GROUP], "access_keys": [ACCESS_KEY]}, seen
    (scaled,) = boto3.client("autoscaling", **boto3_args(moto_endpoint)).describe_auto_scaling_groups(
        AutoScalingGroupNames=[group])["AutoScalingGroups"]
    assert scaled["DesiredCapacity"] == 1
    # boto3 ran the profile's credential_process: the helper with the controller's certificate, key and ARNs.
    made = calls(site.calls)
    assert made and made[0] == [
        "credential-process", "--certificate", str(site.certificate), "--private-key", str(site.key),
        "--trust-anchor-arn", ARNS["trust_anchor_arn"], "--profile-arn", ARNS["profile_arn"],
        "--role-arn", ARNS["role_arn"],
    ], made

    second = run_playbook(PLAYBOOK, inventory)
    assert second.ok, _failures(second)
    assert second.hosts[CONTROLLER].changed == 0, second.stdout[-3000:]


def test_refused_without_the_deployed_stacks_arns(site: Site, moto_endpoint: str, plan_outputs: dict[str, Any]) -> None:
    site.issue()
    result = run_playbook(PLAYBOOK, site.inventory(plan_outputs, moto_endpoint))
    assert not result.ok
    (failure,) = result.failures
    assert "has no trust_anchor_arn, profile_arn, role_arn" in failure.message, failure.message
    assert "hybrid.burst.scaler" in failure.message and "--source stack" in failure.message
    assert not site.helper.exists() and not site.aws_config.exists()


def test_refused_without_a_digest_for_the_helper(site: Site, moto_endpoint: str, plan_outputs: dict[str, Any]) -> None:
    site.issue()
    inventory = site.inventory(deployed(plan_outputs), moto_endpoint)
    inventory["all"]["vars"]["slurm_config"]["lifecycle"]["aws_credentials"]["signing_helper"]["sha256"] = {}
    result = run_playbook(PLAYBOOK, inventory)
    assert not result.ok
    (failure,) = result.failures
    assert "No aws_signing_helper 1.8.2 with a sha256 for x86_64" in failure.message, failure.message
    assert "slurm.signing_helper" in failure.message
    assert not site.helper.exists()


def test_refused_before_the_site_pki_issued_the_certificate(
    site: Site, moto_endpoint: str, plan_outputs: dict[str, Any]
) -> None:
    result = run_playbook(PLAYBOOK, site.inventory(deployed(plan_outputs), moto_endpoint))
    assert not result.ok
    (failure,) = result.failures
    assert f"Missing on {CONTROLLER}: {site.certificate}, {site.key}" in failure.message, failure.message
    assert "slurm_scaler_private_key" in failure.message
    assert not site.helper.exists()


def test_an_aws_controllers_unit_keeps_its_instance_profile(tmp_path: Path) -> None:
    """Without Roles Anywhere (an AWS controller): the role's arguments check passes with no signing helper,
    and the unit's environment is slurm_scaler_environment alone, so boto3 takes the instance profile."""
    outputs, _ = load_outputs("dev", "plan")
    slurm_config = build_inventory("dev", outputs=outputs)["all"]["vars"]["slurm_config"]
    unit = tmp_path / "gpuforge-lifecycle.service"
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    result = run_playbook(
        Path(__file__).with_name("scaler_unit.yml"),
        {"all": {"hosts": {"controller": host}}},
        extravars={"slurm_config": slurm_config, "slurm_scaler_environment": {"HTTPS_PROXY": "http://proxy:3128"},
                   "test_unit_file": str(unit)},
    )
    assert result.ok, _failures(result)
    environment = [line for line in unit.read_text().splitlines() if line.startswith("Environment=")]
    assert environment == ['Environment="HTTPS_PROXY=http://proxy:3128"'], environment
