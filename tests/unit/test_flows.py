"""The flow model (gpuforge/catalog/data/flows.yaml) against the shipped stacks' plans, and the defects of
issue 23 each kept caught: every shipped stack passes wiring-flows-*, the same plan with one rule or permission
removed fails with the fix, controllers are named as slurm.conf names them and launch from a pinned template
version, Prometheus finds the controllers, and the accounting database is declared only where RDS can hold it."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
import yaml

from gpuforge.assets import PLAYBOOKS_DIR
from gpuforge.catalog.flows import load_flows
from gpuforge.catalog.models import load_catalog
from gpuforge.plan.model import Plan
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.plan.stacks import load_stack
from gpuforge.policy.rules import REGISTRY, RuleContext, Violation
from gpuforge.render.monitoring import file_sd_targets, prometheus_config
from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.spec import SpecError, resolve
from gpuforge.spec.scheduler_checks import CONTROLLER_NODE_GROUP
from tests.support import REPO as SOURCE_ROOT
from tests.support import planned

STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (SOURCE_ROOT / "stacks").glob("*.yaml"))
FLOW_RULES = ("wiring-flows-security-groups", "wiring-flows-iam")
INSTANCE = "aws:ec2/instance:Instance"
LT = "aws:ec2/launchTemplate:LaunchTemplate"


def flow_violations(plan: Plan, drop: set[str] | None = None) -> list[Violation]:
    resources = [r for r in to_rule_resources(plan.resources) if r.name not in (drop or set())]
    return [v for rule in FLOW_RULES for v in REGISTRY[rule].run(resources, RuleContext("prod"))]


@pytest.mark.parametrize("stack", STACKS)
def test_every_shipped_stack_passes_the_flow_rules(stack: str) -> None:
    assert flow_violations(planned(stack)) == []


@pytest.mark.parametrize(
    ("stack", "removed", "member", "says"),
    [
        # Defect 2: slurmctld back to srun on login nodes.
        ("prod", "forge-prod-slurm-management-in-srun-controllers", "forge-prod-login",
         "tcp 60001-63000 from controller"),
        ("dev", "forge-dev-slurm-controller-in-slurmctld-compute", "forge-dev-slurm-forge-dev-ctl-0",
         "tcp 6817 from compute"),
        ("dev", "forge-dev-slurm-database-in-mariadb-controllers", "forge-dev-slurm-db", "tcp 3306 from controller"),
        ("dev", "forge-dev-slurm-storage-in-nfs-controllers", "forge-dev-slurm-home-us-east-1a",
         "tcp 2049 from controller"),
        # Defect 3: Prometheus reaches the exporters, on the controllers too.
        ("prod", "forge-prod-slurm-compute-in-dcgm-exporter-monitoring", "forge-prod-train",
         "tcp 9400 from monitoring"),
        ("prod", "forge-prod-slurm-controller-in-node-exporter-monitoring", "forge-prod-slurm-forge-prod-ctl-1",
         "tcp 9100 from monitoring"),
        ("prod", "forge-prod-slurm-controller-out-all", "forge-prod-slurm-forge-prod-ctl-0", "no egress rule"),
        # Defect 3: ec2_sd needs ec2:DescribeInstances on Prometheus' node group.
        ("prod", "forge-prod-services-service-discovery", "forge-prod-services", "ec2:DescribeInstances"),
        ("dev", "forge-dev-slurm-ctl-lifecycle", "forge-dev-slurm-forge-dev-ctl-0", "autoscaling:SetDesiredCapacity"),
        ("dev", "forge-dev-slurm-train-munge", "forge-dev-train", "secretsmanager:GetSecretValue"),
    ],
)
def test_a_stack_missing_a_rule_or_permission_fails_with_the_fix(
    stack: str, removed: str, member: str, says: str
) -> None:
    plan = planned(stack)
    assert any(r.name == removed for r in plan.resources), f"{removed} is not in the {stack} plan"
    found = flow_violations(plan, {removed})
    assert found, f"removing {removed} went unnoticed"
    on_member = [v for v in found if v.urn.endswith(f"::{member}")]
    assert on_member and any(says in v.message for v in on_member), [v.message for v in found]
    assert all(re.search(r"add a Security|grant them", v.message) for v in on_member)


def test_a_rule_no_flow_needs_fails(prod_plan: Plan) -> None:
    """The rules as shipped before the model: the management tier opened 6817-6819 to itself."""
    resources = to_rule_resources(prod_plan.resources)
    rule = next(r for r in resources if r.name == "forge-prod-slurm-controller-in-slurmctld-login")
    wide = type(rule)(urn=rule.urn + "-wide", type=rule.type, name="too-wide",
                      inputs={**rule.inputs, "toPort": 6819}, dependencies=rule.dependencies)
    found = REGISTRY["wiring-flows-security-groups"].run([*resources, wide], RuleContext("prod"))
    assert [v.urn for v in found] == [wide.urn]
    assert "which no flow of the model needs" in found[0].message


def test_docs_list_every_flow_and_call() -> None:
    text = (SOURCE_ROOT / "docs" / "wiring.md").read_text()
    model = load_flows()
    for flow in model.flows:
        assert re.search(rf"\| {flow.source_role} \| {flow.target_role} \| [^|]*\({flow.ports}\)", text), flow.label
    for external in model.external_flows:
        low, high = model.ports[external.ports].ports
        port = f"tcp {low}" if low == high else f"tcp {low}-{high}"
        assert f"| {external.name} | {external.target_role} | {port} ({external.ports}) | `{external.allowed_from}` |" \
            in text, external.name
    for role, calls in model.aws_calls.items():
        for call in calls:
            assert f"| {role} | {', '.join(call.actions)} | {call.caller} |" in text


def test_the_control_plane_rules_are_the_flows() -> None:
    """Every ingress rule the control plane declares is one flow's, on the flow's ports (nothing hand-written)."""
    plan, model, ports = planned("prod"), load_flows(), load_catalog().slurm.ports
    declared = {r.name: r for r in plan.resources if r.name.startswith("forge-prod-slurm-") and "-in-" in r.name}
    wanted = {
        f"forge-prod-slurm-{model.roles[f.target_role].security_group}-in-{f.rule}": model.port_range(f, ports)
        for f in model.flows if f.declared_by == "control_plane"
    }
    assert set(declared) == set(wanted)
    for name, (low, high) in wanted.items():
        assert (declared[name].inputs["fromPort"], declared[name].inputs["toPort"]) == (low, high), name


# --- defect 1: a controller's host name is the one slurm.conf gives it -----------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_controllers_are_named_as_slurm_conf_names_them(stack: str) -> None:
    plan = planned(stack)
    resolved = resolve(load_stack(stack).cluster, stack)
    conf = render_slurm(slurm_config(resolved))["slurm.conf"]
    named = set(re.findall(r"^SlurmctldHost=([\w-]+)\(", conf, re.M))
    accounting = set(re.findall(r"^AccountingStorage(?:Backup)?Host=([\w-]+)$", conf, re.M))
    assert named and accounting <= named
    hostnames = set()
    for instance in plan.by_type(INSTANCE):
        if instance.inputs.get("tags", {}).get("gpuforge:slurm-role") != "controller":
            continue
        template = next(lt for lt in plan.by_type(LT) if lt.name == f"{instance.name}-lt")
        user_data = yaml.safe_load(base64.b64decode(template.inputs["userData"]))
        assert user_data["hostname"] == instance.inputs["tags"]["Name"]
        assert user_data["preserve_hostname"] is False
        hostnames.add(user_data["hostname"])
    assert hostnames == named
    # Every Slurm host resolves the controllers by those names (sacct reaches AccountingStorageHost; slurmctld
    # its backup slurmdbd): VPC DNS knows only ip-a-b-c-d, so each one's user data lists them in /etc/hosts.
    pairs = {f"{address} {name}" for name, address in re.findall(r"^SlurmctldHost=([\w-]+)\(([\d.]+)\)", conf, re.M)}
    slurm_groups = {g.inputs["nodeGroup"] for g in plan.by_type("gpuforge:aws:GpuNodeGroup")
                    if g.inputs.get("orchestrator") == "slurm"}
    templates = [lt for lt in plan.by_type(LT)
                 if "-slurm-" in lt.name or lt.name.removeprefix(f"{resolved.spec.name}-").removesuffix("-lt")
                 in slurm_groups]
    assert len(templates) >= 3
    for template in templates:
        document = yaml.safe_load(base64.b64decode(template.inputs["userData"]))
        (hosts,) = [f for f in document["write_files"] if f["path"] == "/etc/hosts"]
        assert set(hosts["content"].splitlines()) == pairs, template.name


# --- defect 5: controllers launch from a pinned template version ----------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_controllers_launch_from_a_pinned_template_version(stack: str) -> None:
    instances = [i for i in planned(stack).by_type(INSTANCE) if "launchTemplate" in i.inputs]
    assert instances
    for instance in instances:
        assert instance.inputs["launchTemplate"]["version"] not in ("$Latest", "$Default"), instance.name


# --- defect 3: Prometheus finds the controllers (AWS: ec2_sd; a site: file_sd) --------------------------------


def test_ec2_sd_selects_the_tagged_controllers() -> None:
    resolved = resolve(load_stack("prod").cluster, "prod")
    node_job = next(j for j in prometheus_config(resolved)["scrape_configs"] if j["job_name"] == "node")
    filters = node_job["ec2_sd_configs"][0]["filters"]
    groups = next(f["values"] for f in filters if f["name"] == "tag:gpuforge:node-group")
    assert CONTROLLER_NODE_GROUP in groups
    tags = [i.inputs["tags"] for i in planned("prod").by_type(INSTANCE) if i.inputs["tags"].get("gpuforge:slurm-role")]
    assert len(tags) == 2 and all(t["gpuforge:node-group"] == CONTROLLER_NODE_GROUP for t in tags)


def test_a_sites_controller_is_a_file_sd_target() -> None:
    resolved = resolve(load_stack("onprem-lab").cluster, "onprem-lab")
    targets = {g["labels"]["instance"]: g["targets"] for g in file_sd_targets(resolved)["node"]}
    assert targets["slurm-01"] == ["10.64.1.6:9100"]
    # A site's login hosts run no node_exporter (playbooks/slurm.yml): a target there would only be down.
    assert "login-01" not in targets


# --- defects 7 and 8: accounting on AWS is RDS, on a subnet group of two AZs ----------------------------------


def _prod_with(change: dict[str, object]) -> dict[str, object]:
    cluster = json.loads(json.dumps(load_stack("prod").cluster))
    for path, value in change.items():
        node = cluster
        *parents, leaf = path.split(".")
        for key in parents:
            node = node[key]
        node[leaf] = value
    return cluster


@pytest.mark.parametrize(
    ("change", "path", "fix"),
    [
        ({"scheduler.accounting.database": "controller"}, "cluster.scheduler.accounting.database",
         "set database: managed"),
        ({"network.availability_zones": ["us-east-1a"], "scheduler.controller.backup": False},
         "cluster.network.availability_zones", "list a second AZ"),
    ],
)
def test_accounting_that_rds_cannot_hold_is_refused(change: dict[str, object], path: str, fix: str) -> None:
    with pytest.raises(SpecError) as raised:
        resolve(_prod_with(change), "prod")
    issues = [i for i in raised.value.issues if i.path == path]
    assert issues and fix in issues[0].fix


# --- defect 9: two controllers, two slurmdbd ------------------------------------------------------------------


def test_accounting_survives_the_primary_controller() -> None:
    config = slurm_config(resolve(load_stack("prod").cluster, "prod"))
    names = [c["name"] for c in config["controllers"]]
    assert (config["accounting"]["host"], config["accounting"]["backup_host"]) == (names[0], names[1])
    conf = render_slurm(config)["slurm.conf"]
    assert f"AccountingStorageBackupHost={names[1]}" in conf
    dbd = (PLAYBOOKS_DIR / "roles/slurm_dbd/templates/slurmdbd.conf.j2").read_text()
    assert "DbdBackupHost={{ slurm_config.accounting.backup_host }}" in dbd


def test_a_slurm_stack_without_lustre_opens_no_lnet_ports(tmp_path: Path) -> None:
    """No flow needs LNet's ports without a Lustre file system: the network opens none, and the plan passes."""
    from gpuforge.plan.engine import plan_stack

    document = yaml.safe_load((SOURCE_ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    del document["config"]["gpuforge:cluster"]["storage"]["parallel_fs"]
    path = tmp_path / "Pulumi.dev-no-lustre.yaml"
    path.write_text(yaml.safe_dump(document))
    plan = plan_stack(str(path))
    assert not [r for r in plan.resources if "-in-lustre" in r.name]
    assert flow_violations(plan) == []


# --- issue 24 item 6 (AWS): the monitoring nodes' security group of their own --------------------------------

INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def _group_urn(plan: Plan, name: str) -> str:
    (group,) = [r for r in plan.resources if r.name == name and r.type == "aws:ec2/securityGroup:SecurityGroup"]
    return group.urn


def test_monitoring_nodes_carry_their_own_group_and_nothing_of_the_login_nodes(prod_plan: Plan) -> None:
    """Prometheus' node group sits in the management tier's subnets but carries only the monitoring group, which
    only the monitoring role's flows open (its own node_exporter from itself) plus SSH from the bastions' tier:
    no login node reaches Prometheus, Alertmanager or Grafana, and what login nodes are opened to (srun's ports)
    does not reach the monitoring nodes."""
    monitoring = _group_urn(prod_plan, "forge-prod-net-monitoring-sg")
    management = _group_urn(prod_plan, "forge-prod-net-management-sg")
    ingress = _group_urn(prod_plan, "forge-prod-net-ingress-sg")
    (services,) = [r for r in prod_plan.resources if r.name == "forge-prod-services-lt"]
    assert services.dependencies["networkInterfaces"] == [monitoring]
    (login,) = [r for r in prod_plan.resources if r.name == "forge-prod-login-lt"]
    assert monitoring not in login.dependencies["networkInterfaces"]
    into_monitoring = {
        r.name: (r.dependencies.get("referencedSecurityGroupId"), r.inputs["fromPort"], r.inputs["toPort"])
        for r in prod_plan.resources
        if r.type == INGRESS_RULE and r.dependencies.get("securityGroupId") == [monitoring]
    }
    assert into_monitoring == {
        "forge-prod-slurm-monitoring-in-node-exporter-monitoring": ([monitoring], 9100, 9100),
        "forge-prod-net-monitoring-in-ssh-from-ingress": ([ingress], 22, 22),
    }
    # The management group no longer admits anything from the monitoring nodes but their scrape of login nodes.
    from_monitoring_into_management = [
        r.name
        for r in prod_plan.resources
        if r.type == INGRESS_RULE
        and r.dependencies.get("securityGroupId") == [management]
        and r.dependencies.get("referencedSecurityGroupId") == [monitoring]
    ]
    assert from_monitoring_into_management == ["forge-prod-slurm-management-in-node-exporter-monitoring"]


def test_monitoring_nodes_back_in_the_login_nodes_group_fail_the_flow_rule(prod_plan: Plan) -> None:
    """The plan as shipped before: the services group's template on the management group. The monitoring
    role's group is exclusive, so wiring-flows-security-groups names the defect."""
    management = _group_urn(prod_plan, "forge-prod-net-management-sg")
    resources = []
    for r in to_rule_resources(prod_plan.resources):
        if r.name == "forge-prod-services-lt":
            interfaces = [
                {**i, "securityGroups": ["forge-prod-net-management-sg-id"]} for i in r.inputs["networkInterfaces"]
            ]
            r = type(r)(
                urn=r.urn,
                type=r.type,
                name=r.name,
                inputs={**r.inputs, "networkInterfaces": interfaces},
                parent=r.parent,
                dependencies={**r.dependencies, "networkInterfaces": (management,)},
                depends_on=r.depends_on,
                provider=r.provider,
            )
        resources.append(r)
    found = REGISTRY["wiring-flows-security-groups"].run(resources, RuleContext("prod"))
    assert found, "monitoring nodes in the login nodes' group went unnoticed"
    on_services = [v.message for v in found if v.urn.endswith("::forge-prod-services")]
    assert any("also carried by login" in m for m in on_services), [v.message for v in found]
    # and srun's ports, opened to login nodes, would reach Prometheus' nodes
    assert any("srun-compute" in v.urn and "no flow goes from compute to monitoring" in v.message for v in found)
