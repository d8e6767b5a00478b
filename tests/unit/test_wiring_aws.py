"""The AWS wiring on real plans: the example stacks pass every wiring check, and the variants that
exercise the other branches (nat: none, a transit gateway link, secrets in stack config) plan the
resources the checks ask for. Rule-by-rule pass/fail cases are in tests/policies/fixtures."""

from __future__ import annotations

import base64
import json
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import HYBRID_MULTIKUEUE, ONPREM_K8S, planned
from typer.testing import CliRunner

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.cli import app
from gpuforge.plan.engine import plan_stack
from gpuforge.plan.model import SECRET, Plan
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.policy.rules import REGISTRY, RuleContext
from gpuforge.spec import SpecError
from gpuforge.spec.models import UBUNTU_2404_SSM

ROOT = Path(__file__).resolve().parents[2]
WIRING = [
    *sorted(r for r in REGISTRY if r.startswith("wiring-")),
    "security-bucket-tls-only",
    "security-efs-tls-only",
    "security-loggroup-kms",
    "security-lustre-root-squash",
    "security-vpn-tunnel-crypto",
    "security-iam-trust-confused-deputy",
]


def run_rules(plan: Plan, rules: list[str]) -> dict[str, list[str]]:
    """Rule id -> names of the resources it flags on the plan."""
    resources = to_rule_resources(plan.resources)
    found: dict[str, list[str]] = {}
    for rule_id in rules:
        rule = REGISTRY[rule_id]
        hits = rule.run(resources, RuleContext(plan.resolved.spec.environment, rule.defaults()))
        if hits:
            found[rule_id] = [v.urn.rsplit("::", 1)[-1] for v in hits]
    return found


def variant(tmp_path: Path, stack: str, edit: Any, extra_config: dict[str, Any] | None = None) -> Path:
    """A copy of stacks/Pulumi.<stack>.yaml with `edit(cluster)` applied, written to tmp_path."""
    source = ROOT / "stacks" / f"Pulumi.{stack}.yaml"
    if not source.exists():  # a test fixture stack (hybrid-multikueue)
        source = ROOT / "tests" / "fixtures" / "stacks" / f"Pulumi.{stack}.yaml"
    document = yaml.safe_load(source.read_text())
    edit(document["config"]["gpuforge:cluster"])
    document["config"].update(extra_config or {})
    path = tmp_path / f"Pulumi.{stack}-variant.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize("stack", ["prod", "staging", "onprem-lab", "hybrid", HYBRID_MULTIKUEUE, ONPREM_K8S])
def test_example_stacks_pass_every_wiring_check(stack: str) -> None:
    # Every wiring rule runs on the plan as a plain function, whatever level the stack's environment gives it
    # (onprem-lab is a dev environment, where the pack is advisory): any violation fails the test.
    assert run_rules(planned(stack), WIRING) == {}


def _old_user_data(lt: Any) -> str:
    """The user data the AWS path rendered before: cloud-init's mounts module with plain @tcp options."""
    document = yaml.safe_load(base64.b64decode(lt.inputs["userData"]).decode())
    fstab = next(f for f in document["write_files"] if f["path"] == "/etc/fstab")
    source, path, *_ = fstab["content"].split()
    document["write_files"].remove(fstab)
    document["mounts"] = [[source, path, "lustre", "defaults,noatime,flock,_netdev,x-systemd.automount", "0", "0"]]
    return base64.b64encode(("#cloud-config\n" + yaml.safe_dump(document)).encode()).decode()


def test_a_plain_tcp_mount_of_the_efa_file_system_is_caught_on_the_prod_plan() -> None:
    plan = planned("prod")
    resources = to_rule_resources(plan.resources)
    lts = {
        r.name: r
        for r in plan.resources
        if r.type == "aws:ec2/launchTemplate:LaunchTemplate" and r.inputs.get("userData")
    }
    old = {
        name: _old_user_data(lt)
        for name, lt in lts.items()
        if "fstab" in base64.b64decode(lt.inputs["userData"]).decode()
    }
    assert sorted(old) == ["forge-prod-login-lt", "forge-prod-services-lt", "forge-prod-train-lt"]
    edited = [replace(r, inputs={**r.inputs, "userData": old[r.name]}) if r.name in old else r for r in resources]
    rule = REGISTRY["wiring-launchtemplate-lustre-lnet"]
    hits = rule.run(edited, RuleContext(plan.resolved.spec.environment, rule.defaults()))
    assert sorted(v.urn.rsplit("::", 1)[-1] for v in hits) == sorted(old)
    assert all("mounts module" in v.message for v in hits)


def test_the_image_pipeline_bakes_the_lustre_client_and_lnet_unit(tmp_path: Path) -> None:
    def pipeline(cluster: dict[str, Any]) -> None:
        # Baked on Ubuntu 24.04: prod's train group is a Slurm group, whose Slurm must be 22.05 or newer.
        cluster["image_pipeline"] = {
            "extra_vars": {"dcgm_exporter_enabled": False},
            "parent_image_ssm_parameter": UBUNTU_2404_SSM,
        }
        cluster["node_groups"]["train"]["image"] = {"pipeline": True}

    plan = plan_stack(variant(tmp_path, "prod", pipeline))
    (component,) = plan.by_type("aws:imagebuilder/component:Component")
    document = yaml.safe_load(component.inputs["data"])
    command = next(
        c
        for phase in document["phases"]
        for step in phase["steps"]
        if isinstance(step["inputs"], dict)
        for c in step["inputs"].get("commands", [])
        if "bake-image.yml" in c
    )
    extra = json.loads(shlex.split(command)[shlex.split(command).index("-e") + 1])
    # The client and the LNet unit for the EFA-enabled file system, no fstab entry (the user data's), and
    # FSx's default number of EFA devices for a p5.
    assert extra["lustre_client_filesystem"] == {"efa": True}
    assert extra["lustre_client_fstab"] is False
    assert extra["lustre_client_efa_interfaces"] == load_aws_wiring().lustre.efa_client_interfaces["p5.48xlarge"]


def test_an_efa_file_system_on_eks_is_refused_with_the_fix(tmp_path: Path) -> None:
    def efa(cluster: dict[str, Any]) -> None:
        cluster["storage"]["parallel_fs"] |= {"efa": True, "metadata": {"mode": "AUTOMATIC"}}

    with pytest.raises(SpecError) as caught:
        plan_stack(variant(tmp_path, "staging", efa))
    (issue,) = [i for i in caught.value.issues if i.path == "cluster.storage.parallel_fs.efa"]
    assert "EKS node groups" in issue.message and "Optimize Amazon FSx for Lustre performance" in issue.message
    assert "efa: false" in issue.fix


def test_cluster_key_policy_names_the_services_that_use_it() -> None:
    key = next(r for r in planned("prod").by_type("aws:kms/key:Key") if r.name == "forge-prod-kms-key")
    statements = {s["Sid"]: s for s in json.loads(key.inputs["policy"])["Statement"]}
    facts = load_aws_wiring()
    autoscaling = facts.service_linked_role_arn("autoscaling", "123456789012")
    assert statements["AutoScalingServiceLinkedRoleUse"]["Principal"] == {"AWS": autoscaling}
    grant = statements["AutoScalingServiceLinkedRoleGrants"]
    assert grant["Action"] == "kms:CreateGrant"
    assert grant["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}
    # prod's data repositories reach SSE-KMS buckets: FSx's per-file-system roles, this account only.
    fsx = statements["FsxS3AccessServiceLinkedRoles"]["Condition"]
    assert fsx["ArnLike"]["aws:PrincipalArn"].endswith("AWSServiceRoleForFSxS3Access_*")
    assert fsx["StringEquals"] == {"aws:PrincipalAccount": "123456789012"}
    assert statements["CloudWatchLogsLogGroups"]["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}


def test_nat_none_gets_interface_endpoints(tmp_path: Path) -> None:
    def no_nat(cluster: dict[str, Any]) -> None:
        cluster["network"]["nat"] = "none"
        cluster.pop("image_pipeline", None)  # the image build needs NAT (refused otherwise)

    plan = plan_stack(variant(tmp_path, "dev", no_nat))
    endpoints = plan.by_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    interface = {
        e.inputs["serviceName"].split(".", 3)[-1] for e in endpoints if e.inputs["vpcEndpointType"] == "Interface"
    }
    assert interface == set(load_aws_wiring().private_endpoints.services)
    assert all(e.inputs["privateDnsEnabled"] for e in endpoints if e.inputs["vpcEndpointType"] == "Interface")
    assert not plan.by_type("aws:ec2/natGateway:NatGateway")
    assert run_rules(plan, ["wiring-network-private-endpoints"]) == {}


def test_transit_gateway_link_routes_the_site_from_every_private_route_table(tmp_path: Path) -> None:
    def tgw(cluster: dict[str, Any]) -> None:
        cluster["hybrid"]["link"]["kind"] = "transit_gateway"
        # The site's CNI routes pod IPs (no SNAT): the MultiKueue manager calls from a pod address.
        cluster["site"]["kubernetes"]["pod_cidrs"] = ["10.73.0.0/16"]

    plan = plan_stack(variant(tmp_path, "hybrid-multikueue", tgw))
    routes = {
        (r.inputs["routeTableId"], r.inputs["destinationCidrBlock"])
        for r in plan.by_type("aws:ec2/route:Route")
        if r.inputs.get("transitGatewayId")
    }
    tables = [r for r in plan.by_type("aws:ec2/routeTable:RouteTable") if "-private-" in r.name]
    site_cidrs = plan.resolved.site.spec.cidrs if plan.resolved.site else []
    assert len(tables) == 2 and site_cidrs
    assert routes == {(f"{t.name}-id", cidr) for t in tables for cidr in [*site_cidrs, "10.73.0.0/16"]}
    # The worker's API admits the manager's pod range too.
    api = {
        r.inputs["cidrIpv4"]
        for r in plan.by_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.inputs.get("fromPort") == 443 and "api-from" in r.name
    }
    assert "10.73.0.0/16" in api
    assert run_rules(plan, ["wiring-vpc-site-routes", "security-vpn-tunnel-crypto"]) == {}


def test_no_secret_reaches_the_plan(tmp_path: Path) -> None:
    secure = {"secure": "v1:c2VjcmV0LWNpcGhlcnRleHQtb2YtdGhlLWtleQ=="}
    path = variant(
        tmp_path,
        "hybrid",
        lambda cluster: None,
        {"gpuforge:siteS3AccessKey": secure, "gpuforge:siteS3SecretKey": secure},
    )
    out_json, out_md = tmp_path / "plan.json", tmp_path / "plan.md"
    result = CliRunner().invoke(
        app, ["plan", str(path), "--no-tree", "--json", str(out_json), "--markdown", str(out_md)]
    )
    assert result.exit_code in (0, 1), result.output
    location = next(
        json.loads(out_json.read_text())["resources"][i]
        for i, r in enumerate(json.loads(out_json.read_text())["resources"])
        if r["type"] == "aws:datasync/locationObjectStorage:LocationObjectStorage"
    )
    assert location["inputs"]["accessKey"] == location["inputs"]["secretKey"] == SECRET
    for text in (out_json.read_text(), out_md.read_text(), result.output):
        assert "c2VjcmV0LWNpcGhlcnRleHQ" not in text


def test_a_clear_text_secret_in_a_stack_file_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = variant(tmp_path, "hybrid", lambda cluster: None, {"gpuforge:siteS3SecretKey": "hunter2-clear-text"})
    with pytest.raises(SpecError) as caught:
        plan_stack(path)
    text = str(caught.value)
    assert "config.gpuforge:siteS3SecretKey" in text
    assert "pulumi config set --secret gpuforge:siteS3SecretKey" in text
    result = CliRunner().invoke(app, ["plan", str(path), "--no-tree"])
    assert result.exit_code == 2
    assert "hunter2-clear-text" not in result.output


def test_capacity_block_with_a_placement_is_refused(tmp_path: Path) -> None:
    def placed(cluster: dict[str, Any]) -> None:
        cluster["node_groups"]["train"]["placement"] = "cluster"

    with pytest.raises(SpecError) as caught:
        plan_stack(variant(tmp_path, "staging", placed))
    assert "node_groups.train.placement" in str(caught.value).replace("[", ".").replace("]", "")


# The identity the offline engine's getSessionContext returns for the caller (gpuforge/plan/engine.py).
DEPLOYER_ARN = "arn:aws:iam::123456789012:role/mock-deployer"


def _declare_deployer(policy: str, namespaces: list[str] | None = None) -> Any:
    def edit(cluster: dict[str, Any]) -> None:
        entries = cluster["kubernetes"].setdefault("access_entries", {})
        entries["ci"] = {"principal_arn": DEPLOYER_ARN, "policy": policy, "namespaces": namespaces or []}

    return edit


def test_a_declared_entry_for_the_deployer_is_its_only_entry(tmp_path: Path) -> None:
    # EKS keeps one access entry per principal: the declared cluster-admin entry serves the deployer.
    plan = plan_stack(variant(tmp_path, "staging", _declare_deployer("AmazonEKSClusterAdminPolicy")))
    principals = [r.inputs["principalArn"] for r in plan.by_type("aws:eks/accessEntry:AccessEntry")]
    assert principals.count(DEPLOYER_ARN) == 1
    assert len(principals) == len(set(principals))
    assert not [r for r in plan.by_type("aws:eks/accessEntry:AccessEntry") if r.name.endswith("-access-deployer")]
    assert run_rules(plan, ["wiring-eks-platform-order"]) == {}


def test_a_declared_entry_that_would_lock_the_deployer_out_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = variant(tmp_path, "staging", _declare_deployer("AmazonEKSViewPolicy", ["research"]))
    with pytest.raises(SpecError) as caught:
        plan_stack(path)
    (issue,) = caught.value.issues
    assert issue.path == "cluster.kubernetes.access_entries[ci]"
    assert DEPLOYER_ARN in issue.message and "one access entry per principal" in issue.message
    assert "policy AmazonEKSClusterAdminPolicy and no namespaces" in issue.fix
    result = CliRunner().invoke(app, ["plan", str(path), "--no-tree"])
    assert result.exit_code == 2, result.output
    assert "access_entries[ci]" in result.output and "Traceback" not in result.output
