"""The Slurm control plane in the AWS plan: controllers at the addresses slurm.conf names, accounting on
RDS, /home on EFS, protected in prod; the munge key and database password generated as secrets that
no plan output, Markdown, console text or stack output ever shows."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from gpuforge.nodes.inventory import build_inventory
from gpuforge.plan.engine import MOCK_SECRET_PREFIX, plan_stack
from gpuforge.plan.model import Plan
from gpuforge.review.report import console_plan, markdown_plan
from tests.crypto_material import ssh_public_key
from tests.support import planned

SLURM = "gpuforge:aws:SlurmControlPlane"
REPO = Path(__file__).resolve().parents[2]


def _one(plan: Plan, type_: str) -> dict:
    (resource,) = [r for r in plan.resources if r.type == type_ and SLURM in r.urn]
    return resource.inputs | {"protect": resource.protect}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_secret_value_in_any_plan_output(stack: str) -> None:
    plan = planned(stack)
    console = Console(record=True, width=200)
    console.print(console_plan(plan))
    texts = {
        "plan JSON": json.dumps(plan.to_json()),
        "Markdown": markdown_plan(plan),
        "console": console.export_text(),
        "inventory": json.dumps(build_inventory(stack, outputs=plan.outputs, source="plan")),
    }
    # The generated values exist (the mock gives them a known prefix) and are wired into the secrets...
    assert any(r.type.startswith("random:") for r in plan.resources)
    versions = [r for r in plan.resources if r.type == "aws:secretsmanager/secretVersion:SecretVersion"]
    assert {r.inputs["secretString"] for r in versions} == {"[secret]"}
    # ...and appear nowhere a person or a log could read them, user data included (base64 there).
    encoded = base64.b64encode(MOCK_SECRET_PREFIX.encode()).decode()[:16]
    for where, text in texts.items():
        assert MOCK_SECRET_PREFIX not in text, where
        assert encoded not in text, where
    for r in plan.resources:
        user_data = r.inputs.get("userData")
        if isinstance(user_data, str) and user_data != "<computed>":
            assert MOCK_SECRET_PREFIX not in base64.b64decode(user_data).decode(errors="replace"), r.name


def test_prod_controllers_database_home_and_protection() -> None:
    plan = planned("prod")
    instances = [r for r in plan.resources if r.type == "aws:ec2/instance:Instance" and SLURM in r.urn]
    # The rendered slurm.conf names these addresses (management tier, host .10 of each AZ's subnet).
    controllers = plan.outputs["slurm"]["controllers"]
    assert sorted(r.inputs["privateIp"] for r in instances) == sorted(controllers.values())
    assert all(r.protect and r.inputs["metadataOptions"]["httpTokens"] == "required" for r in instances)
    db = _one(plan, "aws:rds/instance:Instance")
    assert db["engine"] == "mariadb" and db["storageEncrypted"] and db["multiAz"] and db["deletionProtection"]
    assert db["protect"] and db["password"] == "[secret]" and not db["publiclyAccessible"]
    # /home and, with the backup controller, the controllers' state (tests/slurm/test_slurm_home.py).
    efs = [r for r in plan.resources if r.type.startswith("aws:efs/") and SLURM in r.urn]
    file_systems = [r for r in efs if r.type == "aws:efs/fileSystem:FileSystem"]
    assert len(file_systems) == 2 and all(r.inputs["encrypted"] and r.protect for r in file_systems)
    backups = [r for r in efs if r.type == "aws:efs/backupPolicy:BackupPolicy"]
    assert len(backups) == 2 and all(r.inputs["backupPolicy"]["status"] == "ENABLED" for r in backups)
    names = {r.inputs["name"] for r in plan.resources
             if r.type == "aws:secretsmanager/secret:Secret" and SLURM in r.urn}
    assert names == {"gpuforge/forge-prod/slurm/munge-key", "gpuforge/forge-prod/slurm/db-password"}


def test_nodes_read_the_munge_key_only() -> None:
    plan = planned("prod")
    policies = {r.name: json.loads(r.inputs["policy"]) for r in plan.resources
                if r.type == "aws:iam/rolePolicy:RolePolicy" and SLURM in r.urn}
    controller = policies.pop("forge-prod-slurm-ctl-secrets")
    assert len(controller["Statement"][0]["Resource"]) == 2
    # gpuforge-lifecycle changes only this cluster's Auto Scaling groups (docs/lifecycle.md).
    lifecycle = policies.pop("forge-prod-slurm-ctl-lifecycle")["Statement"]
    changes = next(s for s in lifecycle if "autoscaling:TerminateInstanceInAutoScalingGroup" in s["Action"])
    assert changes["Condition"] == {"StringEquals": {"aws:ResourceTag/gpuforge:cluster": "forge-prod"}}
    # The controller's topology script reads instances and their EC2 network topology, nothing else.
    (topology,) = policies.pop("forge-prod-slurm-ctl-topology")["Statement"]
    assert topology["Action"] == ["ec2:DescribeInstances", "ec2:DescribeInstanceTopology"]
    assert policies, "node roles get a policy for the munge key"
    for name, policy in policies.items():
        (secret,) = policy["Statement"][0]["Resource"]
        assert "munge-key" in secret, name


def test_dev_plan_has_no_protection_but_the_same_shape() -> None:
    plan = planned("dev")
    db = _one(plan, "aws:rds/instance:Instance")
    assert not db["multiAz"] and not db["deletionProtection"] and db["skipFinalSnapshot"]
    assert plan.outputs["slurm"]["controllers"] == {"forge-dev-ctl-0": "10.20.128.10"}


OFFICE = {"cidr": "203.0.113.0/24", "ports": [22], "description": "office VPN"}
PARTNER_HTTPS = {"cidr": "198.51.100.0/24", "ports": [443], "description": "partner HTTPS"}


def _with_bastion(tmp_path: Path, *rules: dict, environment: str = "dev") -> Plan:
    """dev with scheduler.login.bastion and the given network.allowed_ingress, planned offline."""
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())
    cluster = document["config"]["gpuforge:cluster"]
    cluster["environment"] = environment
    cluster["network"]["allowed_ingress"] = list(rules)
    cluster["scheduler"]["login"]["bastion"] = True
    cluster["scheduler"]["users"]["alice"]["ssh_public_keys"] = [ssh_public_key("alice")]
    path = tmp_path / "Pulumi.dev-bastion.yaml"
    path.write_text(yaml.safe_dump(document))
    return plan_stack(path)


def test_bastion_is_open_to_allowed_ingress_on_22_and_reaches_login_nodes_only(tmp_path: Path) -> None:
    plan = _with_bastion(tmp_path, OFFICE, PARTNER_HTTPS)
    in_bastion = [r for r in plan.resources if "gpuforge:aws:Bastion" in r.urn]
    (instance,) = [r for r in in_bastion if r.type == "aws:ec2/instance:Instance"]
    i = instance.inputs
    assert i["subnetId"] == "forge-dev-net-ingress-us-east-1a-id" and i["associatePublicIpAddress"] is True
    assert i["metadataOptions"]["httpTokens"] == "required" and i["rootBlockDevice"]["encrypted"] is True
    assert i["rootBlockDevice"]["kmsKeyId"].endswith("forge-dev-kms-key") and i["instanceType"] == "t3.micro"
    assert "iamInstanceProfile" not in i  # no credentials on the bastion
    assert i["vpcSecurityGroupIds"] == ["forge-dev-bastion-sg-id"]
    rules = {r.name: r.inputs for r in in_bastion if r.type.startswith("aws:vpc/securityGroup")}
    into_bastion = [
        r.inputs for r in plan.resources
        if r.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
        and r.inputs["securityGroupId"] == "forge-dev-bastion-sg-id"
    ]
    # In: port 22 from the office range only (not the HTTPS-only range, never 0.0.0.0/0); out: SSH to the
    # login group only.
    assert [(r.get("cidrIpv4"), r.get("referencedSecurityGroupId"), r["fromPort"], r["toPort"]) for r in into_bastion
            ] == [("203.0.113.0/24", None, 22, 22)]
    assert rules["forge-dev-bastion-out-ssh-login"]["referencedSecurityGroupId"] == "forge-dev-bastion-login-sg-id"
    egress = [r for r in plan.resources if r.type == "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
              and r.inputs["securityGroupId"] == "forge-dev-bastion-sg-id"]
    assert [r.name for r in egress] == ["forge-dev-bastion-out-ssh-login"]
    assert rules["forge-dev-bastion-login-in-ssh"]["referencedSecurityGroupId"] == "forge-dev-bastion-sg-id"
    # The login group (and no other) carries the group the bastion may reach.
    carriers = {
        r.name for r in plan.resources if r.type == "aws:ec2/launchTemplate:LaunchTemplate"
        for nic in r.inputs.get("networkInterfaces") or [] if "forge-dev-bastion-login-sg-id" in nic["securityGroups"]
    }
    assert carriers == {"forge-dev-login-lt"}
    # Users jump through accounts without a shell; the user data carries public keys only.
    user_data = base64.b64decode(i["userDataBase64"]).decode()
    config = yaml.safe_load(user_data)
    (alice,) = [u for u in config["users"] if isinstance(u, dict)]
    assert alice["name"] == "alice" and alice["shell"] == "/usr/sbin/nologin"
    assert MOCK_SECRET_PREFIX not in user_data
    assert plan.policy is not None
    assert not [f for f in plan.policy.findings if "bastion" in f.message]


def test_a_bastion_open_to_the_world_fails_the_policy(tmp_path: Path) -> None:
    world = {"cidr": "0.0.0.0/0", "ports": [22], "description": "anyone"}
    plan = _with_bastion(tmp_path, world, environment="staging")  # where the rule is mandatory
    assert plan.policy is not None
    hits = [f for f in plan.policy.findings if f.rule == "security-securitygroup-open-ingress"]
    # The bastion's own rule (and the ingress tier's opening of the same rule) are refused.
    names = {f.urn.rsplit("::", 1)[-1] for f in hits}
    assert names == {"forge-dev-bastion-in-ssh-0", "forge-dev-net-ingress-in-allowed0-22"}
    assert all(f.level == "mandatory" for f in hits)
