"""cluster.tracking (an MLflow tracking server): the spec refuses what would not run or would open it to everyone,
the role's variables and files name secrets by where they live and never hold them, the AWS plan keeps the secrets
out of the plan and the services node's role to the bucket's prefix. Booted: none yet (docs/tracking.md)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jinja2
import pulumi
import pytest
import yaml
from ansible.plugins.filter.core import FilterModule as CoreFilters  # type: ignore[import-untyped]
from typer.testing import CliRunner

from gpuforge.assets import PLAYBOOKS_DIR
from gpuforge.catalog.flows import load_flows
from gpuforge.catalog.tracking import load_tracking
from gpuforge.cli import app
from gpuforge.infra.aws.slurm import SlurmControlPlane
from gpuforge.infra.aws.tracking import TrackingServer, TrackingServerArgs, artifacts_policy
from gpuforge.nodes.inventory import build_inventory
from gpuforge.plan.engine import MOCK_SECRET_PREFIX, plan_stack
from gpuforge.plan.model import Plan
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.plan.stacks import load_stack
from gpuforge.policy.rules import REGISTRY, RuleContext
from gpuforge.render.tracking import NODE_ADDRESS, tracking_vars
from gpuforge.spec import SpecError, resolve
from gpuforge.spec.tracking import tracking_secret_names
from tests.support import REPO

FLOW_RULE = "wiring-flows-security-groups"
ROLE = PLAYBOOKS_DIR / "roles" / "mlflow_server"
JOBS = "10.20.0.0/16"
TRACKING: dict[str, Any] = {"server": {"kind": "node_group", "node_group": "services"},
            "artifacts": {"bucket": "artifacts", "prefix": "mlflow"}, "allowed_cidrs": [JOBS]}
# The primary controller of stacks/Pulumi.onprem-lab.yaml, where slurmdbd's MariaDB runs.
SITE_TRACKING: dict[str, Any] = {"server": {"kind": "site_host", "host": "slurm-01", "address": "10.64.1.6"},
                 "artifacts": {"bucket": "lab-artifacts", "prefix": "mlflow/runs"}, "allowed_cidrs": ["10.64.0.0/16"]}


def _dev_with_tracking(tracking: dict[str, Any] | None = None) -> dict[str, Any]:
    data = copy.deepcopy(load_stack("dev").cluster)
    data["node_groups"]["services"] = {"instance_type": "m7i.xlarge", "count": 1, "role": "services"}
    data["storage"]["object_stores"]["artifacts"] = {"purpose": "artifacts"}
    data["tracking"] = copy.deepcopy(TRACKING if tracking is None else tracking)
    return data


def _onprem_with_tracking(tracking: dict[str, Any] | None = None) -> dict[str, Any]:
    data = copy.deepcopy(load_stack("onprem-lab").cluster)
    data["site"]["storage"]["object_store"]["buckets"]["lab-artifacts"] = "artifacts"
    data["tracking"] = copy.deepcopy(SITE_TRACKING if tracking is None else tracking)
    return data


def _problems(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        resolve(data, "test")
    return {issue.path: f"{issue.message} | {issue.fix}" for issue in err.value.issues}


# --- the spec --------------------------------------------------------------------------------------------------


def test_open_to_everyone_or_to_no_one_is_refused() -> None:
    problems = _problems(_dev_with_tracking({**TRACKING, "allowed_cidrs": ["0.0.0.0/0", "10.20.0.1/16"]}))
    assert "is every address" in problems["cluster.tracking.allowed_cidrs[0]"]
    assert "host bits set" in problems["cluster.tracking.allowed_cidrs[1]"]
    assert len(problems) == 2, problems
    problems = _problems(_dev_with_tracking({**TRACKING, "allowed_cidrs": []}))
    assert list(problems) == ["cluster.tracking.allowed_cidrs"], problems


def test_every_misplacement_is_named_at_once() -> None:
    data = _dev_with_tracking({**TRACKING, "server": {"kind": "node_group", "node_group": "train"},
                               "artifacts": {"bucket": "models"}})
    problems = _problems(data)
    assert "train is a training group" in problems["cluster.tracking.server.node_group"]
    assert "models is not in storage.object_stores (stores: data, artifacts)" in problems[
        "cluster.tracking.artifacts.bucket"]
    assert len(problems) == 2, problems
    data = _dev_with_tracking({**TRACKING, "server": {"kind": "node_group", "node_group": "svc"}})
    del data["scheduler"]
    del data["node_groups"]["login"]
    problems = _problems(data)
    assert "svc is not a node group" in problems["cluster.tracking.server.node_group"]
    assert "no scheduler section" in problems["cluster.tracking"]
    # Its node gets the security group of role tracking: not a login node's, nor Prometheus's.
    problems = _problems(_dev_with_tracking({**TRACKING, "server": {"kind": "node_group", "node_group": "login"}}))
    assert "login is a login group" in problems["cluster.tracking.server.node_group"]
    data = _dev_with_tracking()
    data["monitoring"] = copy.deepcopy(load_stack("prod").cluster["monitoring"])  # Prometheus on its services group
    assert "services also runs Prometheus" in _problems(data)["cluster.tracking.server.node_group"]
    data = copy.deepcopy(load_stack("hybrid").cluster)
    data["tracking"] = copy.deepcopy(TRACKING)
    assert "cannot reach it" in _problems(data)["cluster.tracking.server.kind"]


def test_a_site_host_serves_an_onprem_site_whose_store_it_can_reach() -> None:
    problems = _problems(_dev_with_tracking(SITE_TRACKING))
    assert "a site host serves an onprem placement's tracking; this one is aws" in problems[
        "cluster.tracking.server.kind"]
    problems = _problems(_onprem_with_tracking({**SITE_TRACKING, "artifacts": {"bucket": "nope"},
                                                "server": {**SITE_TRACKING["server"], "address": "192.0.2.9"}}))
    assert "192.0.2.9 lies in none of site.cidrs" in problems["cluster.tracking.server.address"]
    assert "nope is not a bucket of site.storage.object_store" in problems["cluster.tracking.artifacts.bucket"]
    problems = _problems(_onprem_with_tracking({**SITE_TRACKING, "server": {
        "kind": "site_host", "host": "svc-01", "address": "10.64.1.7"}}))
    assert ("host svc-01 (10.64.1.7) is not the database host: the cluster's MariaDB runs on the primary controller "
            "slurm-01 (10.64.1.6) and listens on 127.0.0.1 only") in problems["cluster.tracking.server"]
    assert "host: slurm-01, address: 10.64.1.6" in problems["cluster.tracking.server"]
    data = _onprem_with_tracking()
    data["site"]["storage"]["object_store"]["cidrs"] = []
    assert "its IP filter must know the store's addresses" in _problems(data)[
        "cluster.site.storage.object_store.cidrs"]


@pytest.mark.parametrize("stack", ["dev", "prod", "onprem-lab", "hybrid"])
def test_off_by_default(stack: str) -> None:
    assert tracking_vars(resolve(load_stack(stack).cluster, stack)) == {}


def test_the_catalog_pins_every_package_with_its_source() -> None:
    pin = load_tracking().mlflow
    assert all("==" in line for line in pin.requirements)
    # mlflow-skinny has no server (docs/tracking.md): the full distribution, with the auth extra, is what runs.
    assert pin.requirements[0] == f"mlflow[auth]=={pin.version}"
    assert "pypi.org/project/mlflow/" in pin.source and pin.port == 5000


# --- what the role gets ------------------------------------------------------------------------------------------


def _argument_options() -> dict[str, Any]:
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())
    return specs["argument_specs"]["main"]["options"]


def test_aws_variables_name_secrets_manager_and_leave_deploy_time_facts_empty() -> None:
    variables = tracking_vars(resolve(_dev_with_tracking(), "dev"))
    assert set(variables) <= set(_argument_options())
    assert variables["mlflow_server_secrets"] == {
        "db_password": {"store": "aws_secretsmanager", "id": "gpuforge/forge-dev/mlflow/db-password"},
        "admin_password": {"store": "aws_secretsmanager", "id": "gpuforge/forge-dev/mlflow/admin-password"},
        "flask_secret_key": {"store": "aws_secretsmanager", "id": "gpuforge/forge-dev/mlflow/flask-secret-key"},
    }
    database = variables["mlflow_server_database"]
    assert database["kind"] == "managed" and database["host"] == "" and database["port"] == 3306
    assert variables["mlflow_server_database_master_ref"]["id"] == "gpuforge/forge-dev/slurm/db-password"
    assert variables["mlflow_server_listen_address"] == NODE_ADDRESS
    # S3's addresses are not fixed: the security group admits, not the unit's filter.
    assert variables["mlflow_server_ip_filter"] is False
    assert variables["mlflow_server_artifacts_destination"] == ""  # the stack's output tracking.artifactsDestination


def test_site_variables_name_vault_variables_and_hold_the_server_to_known_addresses() -> None:
    variables = tracking_vars(resolve(_onprem_with_tracking(), "onprem-lab"))
    assert set(variables) <= set(_argument_options())
    assert {k: v["store"] for k, v in variables["mlflow_server_secrets"].items()} == {
        "db_password": "ansible_vault", "admin_password": "ansible_vault", "flask_secret_key": "ansible_vault"}
    assert variables["mlflow_server_database"]["kind"] == "controller"
    # MariaDB listens on 127.0.0.1 only: the server, on the controller, reaches it there and nowhere else.
    assert variables["mlflow_server_database"]["host"] == "127.0.0.1"
    assert variables["mlflow_server_database"]["client_host"] == "127.0.0.1"
    assert variables["mlflow_server_artifacts_destination"] == "s3://lab-artifacts/mlflow/runs"
    assert variables["mlflow_server_s3_endpoint_url"].startswith("https://")
    assert variables["mlflow_server_egress_cidrs"] == ["10.64.8.30/32"]
    assert variables["mlflow_server_ip_filter"] is True


def test_render_tracking_prints_the_variables_and_names_a_stack_without_the_section(tmp_path: Path) -> None:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.onprem-lab.yaml").read_text())
    document["config"]["gpuforge:cluster"] = json.loads(json.dumps(_onprem_with_tracking()))
    path = tmp_path / "Pulumi.lab-tracking.yaml"
    path.write_text(yaml.safe_dump(document))
    result = CliRunner().invoke(app, ["render", "tracking", str(path)])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout) == tracking_vars(resolve(_onprem_with_tracking(), "onprem-lab"))
    result = CliRunner().invoke(app, ["render", "tracking", "dev"])
    assert result.exit_code == 2 and "declares no tracking section" in result.output


def _render(template: str, variables: dict[str, Any], **facts: Any) -> str:
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters.update(CoreFilters().filters())  # bool, regex_replace, quote: as Ansible renders the role
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    defaults.pop("mlflow_server_aws_region")
    values = {**defaults, "mlflow_server_aws_region": "", **variables, **facts}
    return env.from_string((ROLE / "templates" / template).read_text()).render(values)


DB_SECRET, ADMIN_SECRET, CSRF_KEY = "db+pass/word", "admin-secret-value", "csrf-key-value"


def test_the_unit_proxies_artifacts_behind_basic_auth_over_tls_and_holds_no_password() -> None:
    variables = tracking_vars(resolve(_onprem_with_tracking(), "onprem-lab"))
    secrets = {"__mlflow_server_db_password": DB_SECRET, "__mlflow_server_admin_password": ADMIN_SECRET,
               "__mlflow_server_flask_secret_key": CSRF_KEY}
    unit = _render("mlflow-server.service.j2", variables, **secrets)
    assert "--app-name basic-auth" in unit and "--serve-artifacts" in unit
    assert "--artifacts-destination s3://lab-artifacts/mlflow/runs" in unit
    tls = "--ssl-keyfile /etc/mlflow/tls.key --ssl-certfile /etc/mlflow/tls.crt"
    assert f'--uvicorn-opts "{tls} --timeout-worker-healthcheck 30"' in unit
    assert "--host 10.64.1.6" in unit and "--allowed-hosts 10.64.1.6:5000" in unit
    assert "IPAddressDeny=any" in unit
    allow = next(line for line in unit.splitlines() if line.startswith("IPAddressAllow="))
    # localhost carries the database (MariaDB on 127.0.0.1); the store's gateway is the only other address it calls.
    assert allow.split("=", 1)[1].split() == ["localhost", "10.64.0.0/16", "10.64.8.30/32"]
    assert not {DB_SECRET, ADMIN_SECRET, CSRF_KEY} & set(unit.split())
    env = _render("mlflow-server.env.j2", variables, **secrets)
    assert "MLFLOW_BACKEND_STORE_URI=mysql+pymysql://mlflow:db%2Bpass%2Fword@" in env
    assert "MLFLOW_S3_ENDPOINT_URL=https://" in env and f"MLFLOW_FLASK_SERVER_SECRET_KEY={CSRF_KEY}" in env
    ini = _render("basic_auth.ini.j2", variables, **secrets)
    assert "default_permission = NO_PERMISSIONS" in ini and f"admin_password = {ADMIN_SECRET}" in ini
    assert "/mlflow_auth\n" in ini


def test_files_holding_passwords_are_private_and_their_tasks_unlogged() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    tasks += yaml.safe_load((ROLE / "tasks" / "database.yml").read_text())
    by_dest = {t["ansible.builtin.template"]["dest"]: t for t in tasks if "ansible.builtin.template" in t}
    for dest, mode in (("{{ mlflow_server_config_dir }}/basic_auth.ini", "0640"),
                       ("{{ mlflow_server_config_dir }}/mlflow-server.env", "0600"),
                       ("/etc/mysql/gpuforge-mlflow-admin.cnf", "0600")):
        assert by_dest[dest]["ansible.builtin.template"]["mode"] == mode and by_dest[dest]["no_log"] is True
    create = next(t for t in tasks if t["name"] == "Create the tracking databases and their user")
    assert create["no_log"] is True and "__mlflow_server_db_password" in create["ansible.builtin.command"]["stdin"]
    assert "__mlflow_server_db_password" not in json.dumps(create["ansible.builtin.command"]["argv"])


# --- the AWS plan ------------------------------------------------------------------------------------------------


def test_the_policy_reaches_the_prefix_and_nothing_else_of_the_bucket() -> None:
    doc = artifacts_policy("arn:aws:s3:::b", "mlflow", "arn:aws:kms:k", ["arn:s2", "arn:s1"])
    by_sid = {s["Sid"]: s for s in doc["Statement"]}
    assert by_sid["ArtifactsUnderPrefix"]["Resource"] == "arn:aws:s3:::b/mlflow/*"
    assert by_sid["ListPrefix"]["Condition"] == {"StringLike": {"s3:prefix": ["mlflow", "mlflow/*"]}}
    assert by_sid["OwnSecrets"]["Resource"] == ["arn:s1", "arn:s2"]
    assert not any(s["Resource"] in ("*", "arn:aws:s3:::b/*") for s in doc["Statement"])


class Mocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.created: dict[str, dict[str, Any]] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.created[args.name] = args.inputs
        outputs = {**args.inputs, "arn": f"arn:mock:{args.name}"}
        if args.typ == "random:index/randomPassword:RandomPassword":
            outputs["result"] = f"{MOCK_SECRET_PREFIX}-{args.name}"
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


@pytest.fixture
def mocks() -> Mocks:
    m = Mocks()
    pulumi.runtime.set_mocks(m, project="gpuforge", stack="unit", preview=False)
    return m


@pulumi.runtime.test
def test_the_component_scopes_the_services_role_to_the_prefix(mocks: Mocks) -> Any:
    server = TrackingServer("unit-tracking", TrackingServerArgs(
        cluster="unit", server_role="unit-services-role", node_group="services",
        bucket_arn="arn:aws:s3:::unit-artifacts-bucket-1234567", bucket_name="unit-artifacts-bucket-1234567",
        prefix="mlflow", kms_key_arn="arn:aws:kms:us-east-1:1:key/k", protected=False))

    def check(values: list[Any]) -> None:
        destination, arns, policy_json = values
        assert destination == "s3://unit-artifacts-bucket-1234567/mlflow"
        policy = json.loads(policy_json)
        resources = [s["Resource"] for s in policy["Statement"]]
        assert "arn:aws:s3:::unit-artifacts-bucket-1234567/mlflow/*" in resources
        assert sorted(arns.values()) == sorted(resources[-1])
        names = {v["name"] for v in mocks.created.values() if "recoveryWindowInDays" in v}
        assert names == {"gpuforge/unit/mlflow/db-password", "gpuforge/unit/mlflow/admin-password",
                         "gpuforge/unit/mlflow/flask-secret-key"}

    return pulumi.Output.all(server.artifacts_destination, server.secret_arns, server.policy.policy).apply(check)


@pytest.fixture(scope="module")
def tracking_plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())
    document["config"]["gpuforge:cluster"] = json.loads(json.dumps(_dev_with_tracking()))  # plain dicts for YAML
    path: Path = tmp_path_factory.mktemp("tracking") / "Pulumi.dev-tracking.yaml"
    path.write_text(yaml.safe_dump(document))
    return plan_stack(str(path))


def test_the_plan_keeps_the_secrets_out_and_the_bucket_wide_grant_from_the_services_role(tracking_plan: Plan) -> None:
    secrets = {r.inputs["name"] for r in tracking_plan.resources if r.type == "aws:secretsmanager/secret:Secret"}
    assert set(tracking_secret_names("forge-dev").values()) <= secrets
    versions = [r for r in tracking_plan.resources if r.type == "aws:secretsmanager/secretVersion:SecretVersion"]
    assert {r.inputs["secretString"] for r in versions} == {"[secret]"}
    assert MOCK_SECRET_PREFIX not in json.dumps(tracking_plan.to_json())
    policies = {r.name: r.inputs["policy"] for r in tracking_plan.resources
                if r.type == "aws:iam/rolePolicy:RolePolicy"}
    scoped = json.loads(policies["forge-dev-tracking-artifacts"])
    bucket_arn = scoped["Statement"][0]["Resource"].removesuffix("/mlflow/*")
    # The services group's own policies name the artifacts bucket nowhere; the training group's still do.
    services = [doc for name, doc in policies.items() if name.startswith("forge-dev-services-")]
    train = [doc for name, doc in policies.items() if name.startswith("forge-dev-train-")]
    assert services and not any(bucket_arn in doc for doc in services)
    assert any(bucket_arn in doc for doc in train)
    assert tracking_plan.outputs["tracking"]["artifactsDestination"].startswith("s3://")


def test_the_inventory_puts_the_services_group_in_mlflow_server_with_the_deployed_facts(
    tracking_plan: Plan, tmp_path: Path
) -> None:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())
    document["config"]["gpuforge:cluster"] = json.loads(json.dumps(_dev_with_tracking()))
    path = tmp_path / "Pulumi.dev-tracking.yaml"
    path.write_text(yaml.safe_dump(document))
    outputs = {**tracking_plan.outputs, "slurm": {"databaseEndpoint": "forge-dev-db.abc.us-east-1.rds.amazonaws.com"},
               "tracking": {"artifactsDestination": "s3://forge-dev-artifacts-bucket-1a2b3c4/mlflow"}}
    group = build_inventory(str(path), outputs=outputs)["all"]["children"]["mlflow_server"]
    assert group["children"] == {"ng_services": {}}
    variables = group["vars"]
    assert variables["mlflow_server_database"]["host"] == "forge-dev-db.abc.us-east-1.rds.amazonaws.com"
    assert variables["mlflow_server_artifacts_destination"] == "s3://forge-dev-artifacts-bucket-1a2b3c4/mlflow"
    assert "mlflow_server" not in build_inventory("dev", outputs=outputs)["all"]["children"]


INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
TRACKING_SG, DB_SG = "forge-dev-net-tracking-sg-id", "forge-dev-slurm-db-sg-id"


def test_the_flow_model_opens_the_catalogs_port_to_the_allowed_ranges() -> None:
    model = load_flows()
    flow = model.external("tracking")
    assert model.ports[flow.ports].ports == (load_tracking().mlflow.port,) * 2 == (5000, 5000)
    assert flow.allowed_from == "tracking.allowed_cidrs" and model.roles[flow.target_role].exclusive


@pulumi.runtime.test
def test_the_control_plane_declares_the_ranges_and_the_database_flow_and_nothing_wider(mocks: Mocks) -> Any:
    groups = ("controller", "database", "tracking", "management", "compute", "monitoring", "storage")
    sg = {g: pulumi.Output.from_input(f"{g}-sg") for g in groups}
    ports = resolve(_dev_with_tracking(), "dev").catalog.slurm.ports
    made = [*SlurmControlPlane._rules("unit", sg, ports, {"controller", "database", "tracking", "monitoring"},
                                      set(), pulumi.ResourceOptions()),
            *SlurmControlPlane._client_rules("unit", sg, {"tracking": [JOBS]}, pulumi.ResourceOptions())]

    def check(_: Any) -> None:
        rules = {n: (i.get("referencedSecurityGroupId") or i.get("cidrIpv4"), i["fromPort"], i["toPort"])
                 for n, i in mocks.created.items() if "ipProtocol" in i}
        on = {g: sorted(v for n, v in rules.items() if n.startswith(f"unit-{g}-in-")) for g in groups}
        assert on["tracking"] == [(JOBS, 5000, 5000), ("monitoring-sg", 9100, 9100)]
        assert on["database"] == [("controller-sg", 3306, 3306), ("tracking-sg", 3306, 3306)]
        assert not any(v[0] == "0.0.0.0/0" for v in rules.values())

    return pulumi.Output.all(*(rule.id for rule in made)).apply(check)


def test_the_plan_opens_the_server_to_the_ranges_only_and_the_flow_rules_pass_it(tracking_plan: Plan) -> None:
    opened = sorted((r.inputs.get("cidrIpv4") or r.inputs.get("referencedSecurityGroupId"), r.inputs.get("fromPort"),
                     r.inputs.get("toPort")) for r in tracking_plan.resources
                    if r.type == INGRESS and r.inputs["securityGroupId"] == TRACKING_SG)
    assert opened == [(JOBS, 5000, 5000), ("forge-dev-net-ingress-sg-id", 22, 22)], opened
    to_db = sorted(r.inputs.get("referencedSecurityGroupId") for r in tracking_plan.resources
                   if r.type == INGRESS and r.inputs["securityGroupId"] == DB_SG)
    assert to_db == [TRACKING_SG, "forge-dev-slurm-ctl-sg-id"], to_db
    resources = to_rule_resources(tracking_plan.resources)
    assert [v.message for v in REGISTRY[FLOW_RULE].run(resources, RuleContext("prod"))] == []
    # Without the ranges' rule the server is unreachable: named. A wider range or port: refused.
    dropped = [r for r in resources if not (r.type == INGRESS and r.inputs.get("cidrIpv4") == JOBS)]
    found = [v.message for v in REGISTRY[FLOW_RULE].run(dropped, RuleContext("prod"))]
    assert len(found) == 1 and "no ingress rule admits tcp 5000 from 10.20.0.0/16" in found[0], found
    rule = next(r for r in resources if r.type == INGRESS and r.inputs.get("cidrIpv4") == JOBS)
    world = type(rule)(urn=rule.urn + "-world", type=rule.type, name="world",
                       inputs={**rule.inputs, "cidrIpv4": "0.0.0.0/0"}, dependencies=rule.dependencies)
    wide = type(rule)(urn=rule.urn + "-wide", type=rule.type, name="wide",
                      inputs={**rule.inputs, "toPort": 5010}, dependencies=rule.dependencies)
    found = [v.message for v in REGISTRY[FLOW_RULE].run([*resources, world, wide], RuleContext("prod"))]
    assert len(found) == 2 and all("from cidr" in f for f in found), found
