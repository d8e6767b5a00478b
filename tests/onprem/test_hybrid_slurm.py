"""The Slurm hybrid (stacks/Pulumi.hybrid.yaml): the site's controller with a site and a cloud partition,
cloud nodes joining it over the VPN. The plan declares no cloud control plane, opens Slurm's ports on
the cloud compute tier to the site's Slurm hosts only, keeps the generated munge key secret, and gives
the site's scaler short-lived Roles Anywhere credentials; bad burst specs are refused with field paths."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.nodes.inventory import build_inventory
from gpuforge.plan.engine import MOCK_SECRET_PREFIX, plan_stack
from gpuforge.plan.model import Plan
from gpuforge.render.monitoring import render_monitoring
from gpuforge.review.report import console_plan, markdown_plan
from gpuforge.spec import SpecError, resolve

ROOT = Path(__file__).resolve().parents[2]
BURST = "gpuforge:hybrid:SlurmBurst"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def hybrid_spec() -> dict[str, Any]:
    return copy.deepcopy(
        yaml.safe_load((ROOT / "stacks" / "Pulumi.hybrid.yaml").read_text())["config"]["gpuforge:cluster"]
    )


def _component(plan: Plan) -> Any:
    (burst,) = plan.by_type(BURST)
    return burst


def test_the_controller_stays_on_the_site(hybrid_slurm: Plan) -> None:
    """No cloud control plane: no controller instance, RDS, EFS or AWS SlurmControlPlane (the AWS build used
    to assert on a site controller without an AZ); the site's control plane is recorded as on premises."""
    assert not hybrid_slurm.by_type("gpuforge:aws:SlurmControlPlane")
    assert not hybrid_slurm.by_type("aws:rds/instance:Instance")
    assert not hybrid_slurm.by_type("aws:efs/fileSystem:FileSystem")
    assert not hybrid_slurm.by_type("aws:ec2/instance:Instance")
    assert not hybrid_slurm.by_type("aws:eks/cluster:Cluster")
    assert hybrid_slurm.outputs["slurm"]["controllerHosts"] == {"slurm-01": "10.72.1.6"}
    assert hybrid_slurm.outputs["slurm"]["partitions"] == {"site": ["train"], "cloud": ["cloud"]}
    (group,) = hybrid_slurm.by_type("gpuforge:aws:GpuNodeGroup")
    assert group.inputs["orchestrator"] == "slurm"
    burst = hybrid_slurm.outputs["hybrid"]["burst"]
    assert burst["mechanism"] == "slurm" and burst["cloudPartitions"] == ["cloud"]
    assert _component(hybrid_slurm).inputs["partitions"] == {
        "site": {"location": "site", "nodeGroups": ["train"]},
        "cloud": {"location": "cloud", "nodeGroups": ["cloud"]},
    }


def test_slurm_ports_open_only_to_the_sites_slurm_hosts(hybrid_slurm: Plan) -> None:
    burst = _component(hybrid_slurm)
    groups = hybrid_slurm.by_type("aws:ec2/securityGroup:SecurityGroup")
    (compute_sg,) = [r for r in groups if r.name.endswith("-compute-sg")]
    rules = [r for r in hybrid_slurm.by_type(INGRESS) if r.parent == burst.urn]
    opened = sorted((r.inputs["cidrIpv4"], r.inputs["fromPort"], r.inputs["toPort"]) for r in rules)
    # slurmd from slurmctld and srun, and SrunPortRange for the job steps' calls, from slurm-01 and login-01.
    assert opened == [
        ("10.72.1.6/32", 6818, 6818), ("10.72.1.6/32", 60001, 63000),
        ("10.72.1.7/32", 6818, 6818), ("10.72.1.7/32", 60001, 63000),
    ]
    assert all(r.dependencies["securityGroupId"] == [compute_sg.urn] for r in rules)
    # Nothing else is open to the site: no rule from the whole site range, no MultiKueue API port.
    assert not [r for r in hybrid_slurm.by_type(INGRESS) if r.inputs.get("cidrIpv4") == "10.72.0.0/16"]
    # The other direction is the site firewall's: from the VPC's compute subnets to slurmctld, srun, NFS.
    firewall = {(rule["to"], rule["port"]) for rule in hybrid_slurm.outputs["hybrid"]["burst"]["siteFirewall"]}
    assert firewall == {("10.72.1.6/32", "6817"), ("10.72.1.7/32", "60001-63000"), ("10.72.8.20/32", "2049")}
    compute = sorted(str(n) for (tier, _), n in hybrid_slurm.resolved.subnets.items() if tier == "compute")
    assert len(compute) == 2  # one compute subnet per AZ
    assert all(rule["from"] == compute for rule in hybrid_slurm.outputs["hybrid"]["burst"]["siteFirewall"])


def test_the_munge_key_is_generated_secret_and_read_by_the_cloud_role_only(hybrid_slurm: Plan) -> None:
    burst = _component(hybrid_slurm)
    (secret,) = [r for r in hybrid_slurm.by_type("aws:secretsmanager/secret:Secret") if r.parent == burst.urn]
    assert secret.inputs["name"] == "gpuforge/forge-hybrid/slurm/munge-key" and secret.dependencies["kmsKeyId"]
    versions = hybrid_slurm.by_type("aws:secretsmanager/secretVersion:SecretVersion")
    (version,) = [r for r in versions if r.parent == burst.urn]
    assert version.inputs["secretString"] == "[secret]"
    (readers,) = [r for r in hybrid_slurm.by_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("-cloud-munge")]
    (node_role,) = [r for r in hybrid_slurm.by_type("aws:iam/role:Role") if r.urn in readers.dependencies["role"]]
    assert "forge-hybrid-cloud" in node_role.name
    # The rendered configuration points the cloud nodes at the same secret (its name, never its value).
    inventory = build_inventory("hybrid", outputs=hybrid_slurm.outputs, source="plan")
    ref = inventory["all"]["children"]["slurm_compute"]["children"]["ng_cloud"]["vars"]["munge_key_ref"]
    assert ref == {"store": "aws_secretsmanager", "id": secret.inputs["name"]}
    assert inventory["all"]["vars"]["slurm_config"]["secrets"]["munge_key"]["store"] == "ansible_vault"


def test_no_secret_value_in_any_plan_output(hybrid_slurm: Plan) -> None:
    """The pattern of tests/slurm/test_slurm_aws.py: the mock gives generated secrets a known prefix."""
    console = Console(record=True, width=200)
    console.print(console_plan(hybrid_slurm))
    texts = {
        "plan JSON": json.dumps(hybrid_slurm.to_json()),
        "Markdown": markdown_plan(hybrid_slurm),
        "console": console.export_text(),
        "inventory": json.dumps(build_inventory("hybrid", outputs=hybrid_slurm.outputs, source="plan")),
        "stack file": (ROOT / "stacks" / "Pulumi.hybrid.yaml").read_text(),
    }
    assert any(r.type == "random:index/randomBytes:RandomBytes" for r in hybrid_slurm.resources)
    encoded = base64.b64encode(MOCK_SECRET_PREFIX.encode()).decode()[:16]
    for where, text in texts.items():
        assert MOCK_SECRET_PREFIX not in text, where
        assert encoded not in text, where
    for r in hybrid_slurm.resources:
        user_data = r.inputs.get("userData")
        if isinstance(user_data, str) and user_data != "<computed>":
            assert MOCK_SECRET_PREFIX not in base64.b64decode(user_data).decode(errors="replace"), r.name


def test_the_sites_scaler_assumes_a_role_through_roles_anywhere(hybrid_slurm: Plan) -> None:
    burst = _component(hybrid_slurm)
    (anchor,) = hybrid_slurm.by_type("aws:rolesanywhere/trustAnchor:TrustAnchor")
    ca = hybrid_spec()["hybrid"]["burst"]["scaler_ca_certificate"]
    assert anchor.inputs["source"] == {"sourceType": "CERTIFICATE_BUNDLE", "sourceData": {"x509CertificateData": ca}}
    (role,) = [r for r in hybrid_slurm.by_type("aws:iam/role:Role") if r.parent == burst.urn]
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "rolesanywhere.amazonaws.com"}
    assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:SetSourceIdentity", "sts:TagSession"]
    assert trust["Condition"]["StringEquals"] == {"aws:PrincipalTag/x509Subject/CN": ["slurm-01"]}
    assert "aws:SourceArn" in trust["Condition"]["ArnEquals"]
    (profile,) = hybrid_slurm.by_type("aws:rolesanywhere/profile:Profile")
    assert profile.inputs["durationSeconds"] == 3600 and profile.dependencies["roleArns"] == [role.urn]
    policies = {p.name: json.loads(p.inputs["policy"]) for p in hybrid_slurm.by_type("aws:iam/rolePolicy:RolePolicy")
                if p.dependencies.get("role") == [role.urn]}
    scaling = policies["forge-hybrid-burst-scaler-lifecycle"]["Statement"][1]
    assert scaling["Condition"] == {"StringEquals": {"aws:ResourceTag/gpuforge:cluster": "forge-hybrid"}}
    # No IAM user and no access key anywhere: nothing long-lived to copy to the site.
    assert not hybrid_slurm.by_type("aws:iam/user:User") and not hybrid_slurm.by_type("aws:iam/accessKey:AccessKey")
    assert hybrid_slurm.policy is not None  # the trust names its anchor (aws:SourceArn): the rule passes
    assert "security-iam-trust-confused-deputy" not in hybrid_slurm.policy.rule_ids()


def test_bad_slurm_bursts_are_refused_all_at_once(tmp_path: Path) -> None:
    spec = hybrid_spec()
    spec["scheduler"]["partitions"]["site"]["node_groups"] = ["train", "cloud"]  # spans the VPN
    spec["scheduler"]["login"]["node_groups"] = ["cloud"]
    spec["node_groups"]["extra"] = {**spec["node_groups"]["cloud"], "orchestrator": "eks"}
    spec["site"]["storage"]["mounts"]["home"]["server"] = "192.0.2.20"  # not routed by the link
    spec["kubernetes"] = {"endpoint": "private"}
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    reported = {i.path for i in caught.value.issues}
    assert {
        "cluster.scheduler.partitions[site].node_groups",
        "cluster.scheduler.login.node_groups[0]",
        "cluster.node_groups[extra].orchestrator",
        "cluster.site.storage.mounts[home].server",
        "cluster.kubernetes",
    } <= reported
    assert all(i.fix for i in caught.value.issues)

    multikueue = hybrid_spec()
    multikueue["hybrid"]["burst"] = {"mechanism": "multikueue", "team_gpus": {"research": {"H100": 16}}}
    with pytest.raises(SpecError) as caught:
        resolve(multikueue)
    assert "cluster.hybrid.burst.mechanism" in {i.path for i in caught.value.issues}

    no_scheduler = hybrid_spec()
    del no_scheduler["scheduler"]
    for host in no_scheduler["site"]["hosts"].values():
        host.pop("orchestrator")
    no_scheduler["node_groups"]["cloud"]["orchestrator"] = "none"
    key = "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----"
    no_scheduler["hybrid"]["burst"]["scaler_ca_certificate"] = key
    no_scheduler["hybrid"]["burst"]["mechanism"] = "slurmish"
    stack = tmp_path / "Pulumi.broken.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpuforge:cluster": no_scheduler}}))
    result = CliRunner().invoke(app, ["plan", str(stack)])
    assert result.exit_code == 2, result.output
    assert "cluster.hybrid.burst.mechanism" in result.output and "Traceback" not in result.output
    no_scheduler["hybrid"]["burst"]["mechanism"] = "slurm"
    with pytest.raises(SpecError) as caught:
        resolve(no_scheduler)
    reported = {i.path for i in caught.value.issues}
    assert {"cluster.hybrid.burst.scaler_ca_certificate"} <= reported
    no_scheduler["hybrid"]["burst"]["scaler_ca_certificate"] = hybrid_spec()["hybrid"]["burst"]["scaler_ca_certificate"]
    with pytest.raises(SpecError) as caught:
        resolve(no_scheduler)
    reported = {i.path for i in caught.value.issues}
    assert {"cluster.hybrid.burst.mechanism", "cluster.node_groups[cloud].orchestrator"} <= reported


def test_a_directory_is_refused_in_a_slurm_burst() -> None:
    """Cloud nodes join from an image with local users and no SSSD: the directory's users would not resolve
    there. The onprem-lab's directory, put in the hybrid spec, is refused with the way out."""
    spec = hybrid_spec()
    lab = yaml.safe_load((ROOT / "stacks" / "Pulumi.onprem-lab.yaml").read_text())["config"]["gpuforge:cluster"]
    spec["scheduler"]["directory"] = lab["scheduler"]["directory"]
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    (issue,) = [i for i in caught.value.issues if i.path == "cluster.scheduler.directory"]
    assert "would not resolve" in issue.message and "scheduler.users" in issue.fix


def test_home_must_be_nfs_over_the_link() -> None:
    spec = hybrid_spec()
    spec["site"]["storage"]["mounts"]["home"] = {"kind": "lustre", "mgs_nids": ["10.72.8.40@o2ib"], "fsname": "home1",
                                                 "lnet_interfaces": ["ib0"], "mount_point": "/home"}
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    assert "cluster.site.storage.mounts[home].kind" in {i.path for i in caught.value.issues}


def test_a_site_prometheus_scrapes_the_cloud_nodes_from_its_own_address(tmp_path: Path) -> None:
    """With monitoring on a site host, the compute security group lets that host (only) reach node_exporter and
    dcgm-exporter on the cloud nodes, the ports the rendered ec2_sd jobs scrape (catalog flows.yaml)."""
    stack = yaml.safe_load((ROOT / "stacks" / "Pulumi.hybrid.yaml").read_text())
    lab = yaml.safe_load((ROOT / "stacks" / "Pulumi.onprem-lab.yaml").read_text())
    monitoring = lab["config"]["gpuforge:cluster"]["monitoring"]
    monitoring["server"] = {"kind": "site_host", "host": "mon-01", "address": "10.72.1.5"}
    stack["config"]["gpuforge:cluster"]["monitoring"] = monitoring
    stack["config"].update({k: v for k, v in lab["config"].items() if k.endswith("alertSmtpPassword")})
    path = tmp_path / "Pulumi.hybrid-monitored.yaml"
    path.write_text(yaml.safe_dump(stack, sort_keys=False))
    plan = plan_stack(path)
    burst = _component(plan)
    rules = [r for r in plan.by_type(INGRESS) if r.parent == burst.urn and r.inputs["cidrIpv4"] == "10.72.1.5/32"]
    assert sorted((r.inputs["fromPort"], r.inputs["toPort"]) for r in rules) == [(9100, 9100), (9400, 9400)]
    (compute_sg,) = [r for r in plan.by_type("aws:ec2/securityGroup:SecurityGroup") if r.name.endswith("-compute-sg")]
    assert all(r.dependencies["securityGroupId"] == [compute_sg.urn] for r in rules)
    scrape = render_monitoring(plan.resolved).files
    config = yaml.safe_load(next(text for name, text in scrape.items() if name.endswith("prometheus.yml")))
    jobs = [job for job in config["scrape_configs"] if "ec2_sd_configs" in job]
    assert {job["job_name"]: job["ec2_sd_configs"][0]["port"] for job in jobs} == {"node": 9100, "dcgm": 9400}
