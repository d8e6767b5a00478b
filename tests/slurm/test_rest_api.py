"""scheduler.rest_api (slurmrestd with Slurm's JSON Web Tokens): the spec refuses what would open it to everyone,
slurm.conf and slurmdbd.conf take tokens only with it on, the signing key is a secret only the controllers read,
the AWS plan admits the allowed ranges on slurmrestd's port and nothing else, and the flow rules fail a plan that
lacks the opening or widens it. Booted: tests/slurm/test_slurm_cluster.py (a job submitted with the user's token
runs; none or a forged one is refused)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jinja2
import pytest
import yaml

from gpuforge.assets import PLAYBOOKS_DIR
from gpuforge.catalog.flows import load_flows
from gpuforge.plan.engine import MOCK_SECRET_PREFIX, plan_stack
from gpuforge.plan.model import Plan
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.plan.stacks import load_stack
from gpuforge.policy.rules import REGISTRY, RuleContext
from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.spec import SpecError, resolve
from tests.support import REPO

PIPELINES, NOTEBOOKS = "10.30.0.0/16", "192.0.2.7/32"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
RULE = "wiring-flows-security-groups"


def _with_api(stack: str, **api: Any) -> dict[str, Any]:
    data = copy.deepcopy(load_stack(stack).cluster)
    data["scheduler"]["rest_api"] = api
    return data


def _problems(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        resolve(data, "test")
    return {issue.path: f"{issue.message} | {issue.fix}" for issue in err.value.issues}


def test_the_port_is_the_catalogs_documented_default() -> None:
    model = load_flows()
    flow = model.external("rest_api")
    assert model.ports[flow.ports].ports == (6820, 6820)
    assert "6820" in model.ports[flow.ports].source and flow.target_role == "controller"


def test_open_to_everyone_or_to_no_one_is_refused_with_the_reason() -> None:
    problems = _problems(_with_api("dev", enabled=True, allowed_cidrs=["0.0.0.0/0", "10.30.0.1/16", PIPELINES]))
    assert "is every address" in problems["cluster.scheduler.rest_api.allowed_cidrs[0]"]
    assert "a token leaked once would work from anywhere" in problems["cluster.scheduler.rest_api.allowed_cidrs[0]"]
    assert "host bits set" in problems["cluster.scheduler.rest_api.allowed_cidrs[1]"]
    assert len(problems) == 2, problems
    problems = _problems(_with_api("dev", enabled=True))
    (path,) = problems
    assert path == "cluster.scheduler.rest_api" and "no allowed_cidrs" in problems[path], problems


@pytest.mark.parametrize("stack", ["dev", "prod", "onprem-lab"])
def test_off_by_default_nothing_takes_tokens(stack: str) -> None:
    config = slurm_config(resolve(load_stack(stack).cluster, stack))
    assert "rest_api" not in config and "jwt_key" not in config["secrets"]
    assert "AuthAlt" not in render_slurm(config)["slurm.conf"]


def _slurmdbd_conf(config: dict[str, Any]) -> str:
    template = (PLAYBOOKS_DIR / "roles/slurm_dbd/templates/slurmdbd.conf.j2").read_text()
    database = config["accounting"]["database"]
    return jinja2.Environment(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined).from_string(
        template).render(slurm_config=config, slurm_dbd_log_dir="/var/log/slurm", slurm_dbd_database=database,
                         __slurm_dbd_password="not-a-secret", slurm_dbd_purge_after_months=0)


@pytest.mark.parametrize(("stack", "store", "key_id"), [
    ("dev", "aws_secretsmanager", "gpuforge/forge-dev/slurm/jwt-key"),
    ("onprem-lab", "ansible_vault", "vault_slurm_jwt_key"),
])
def test_turned_on_slurmctld_and_slurmdbd_take_tokens_signed_with_the_controllers_key(
    stack: str, store: str, key_id: str
) -> None:
    config = slurm_config(resolve(_with_api(stack, enabled=True, allowed_cidrs=[PIPELINES]), stack))
    api = config["rest_api"]
    assert (api["port"], api["jwt_key"], api["user"], api["allowed_cidrs"]) == (
        6820, "/etc/slurm/jwt_hs256.key", "slurmrestd", [PIPELINES])
    assert api["controller_addresses"] == [c["address"] for c in config["controllers"]]
    assert config["secrets"]["jwt_key"] == {"store": store, "id": key_id}
    wanted = ["AuthType=auth/munge", "AuthAltTypes=auth/jwt", "AuthAltParameters=jwt_key=/etc/slurm/jwt_hs256.key"]
    for text in (render_slurm(config)["slurm.conf"], _slurmdbd_conf(config)):
        assert [line for line in text.splitlines() if line.startswith("Auth")] == wanted


def test_the_controller_role_runs_slurmrestd_unprivileged_on_the_port_for_the_ranges() -> None:
    config = slurm_config(resolve(_with_api("prod", enabled=True, allowed_cidrs=[PIPELINES, NOTEBOOKS]), "prod"))
    template = (PLAYBOOKS_DIR / "roles/slurm_controller/templates/slurmrestd.conf.j2").read_text()
    unit = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(template).render(slurm_config=config)
    lines = [line for line in unit.splitlines() if line and not line.startswith("#")]
    controllers = " ".join(c["address"] for c in config["controllers"])
    assert lines == [
        "[Service]", "User=slurmrestd", "Group=slurmrestd", "Environment=SLURM_JWT=daemon",
        # Debian 12's unit listens on a local socket only, Debian 13's on the socket and 0.0.0.0:6820: replaced.
        "ExecStart=", "ExecStart=/usr/sbin/slurmrestd -a rest_auth/jwt 0.0.0.0:6820",
        "IPAddressDeny=any", f"IPAddressAllow=localhost {PIPELINES} {NOTEBOOKS} {controllers}",
        "NoNewPrivileges=true", "ProtectSystem=full", "ProtectHome=true", "PrivateTmp=true",
    ]
    key_tasks = yaml.safe_load((PLAYBOOKS_DIR / "roles/slurm_controller/tasks/jwt_key.yml").read_text())
    write = next(t for t in key_tasks if "ansible.builtin.copy" in t)
    assert write["no_log"] is True and write["ansible.builtin.copy"]["mode"] == "0600"
    assert write["ansible.builtin.copy"]["owner"] == "{{ slurm_config.slurm_user }}"


# --- the AWS plan ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api_plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())
    document["config"]["gpuforge:cluster"]["scheduler"]["rest_api"] = {
        "enabled": True, "allowed_cidrs": [PIPELINES, NOTEBOOKS]}
    path = tmp_path_factory.mktemp("rest") / "Pulumi.dev-rest.yaml"
    path.write_text(yaml.safe_dump(document))
    return plan_stack(str(path))


def test_the_plan_admits_the_ranges_on_6820_to_the_controllers_only(api_plan: Plan) -> None:
    opened = [r.inputs for r in api_plan.resources if r.type == INGRESS and r.inputs.get("cidrIpv4")
              and r.inputs["securityGroupId"] == "forge-dev-slurm-ctl-sg-id"]
    assert sorted((r["cidrIpv4"], r["fromPort"], r["toPort"], r["ipProtocol"]) for r in opened) == [
        ("10.30.0.0/16", 6820, 6820, "tcp"), ("192.0.2.7/32", 6820, 6820, "tcp")]
    assert api_plan.outputs["slurm"] is not None


def test_only_the_controllers_read_the_jwt_key_and_its_value_is_nowhere(api_plan: Plan) -> None:
    secrets = {r.inputs["name"] for r in api_plan.resources if r.type == "aws:secretsmanager/secret:Secret"}
    assert "gpuforge/forge-dev/slurm/jwt-key" in secrets
    policies = {r.name: json.loads(r.inputs["policy"]) for r in api_plan.resources
                if r.type == "aws:iam/rolePolicy:RolePolicy" and "Resource" in r.inputs["policy"]}
    readers = [name for name, doc in policies.items() for st in doc["Statement"]
               if "jwt-key" in json.dumps(st.get("Resource"))]
    assert readers == ["forge-dev-slurm-ctl-secrets"], readers
    versions = [r for r in api_plan.resources if r.type == "aws:secretsmanager/secretVersion:SecretVersion"]
    assert len(versions) == 3 and {r.inputs["secretString"] for r in versions} == {"[secret]"}
    assert MOCK_SECRET_PREFIX not in json.dumps(api_plan.to_json())


def _flow_findings(resources: list[Any]) -> list[str]:
    return [v.message for v in REGISTRY[RULE].run(resources, RuleContext("prod"))]


def test_the_flow_rules_pass_the_plan_and_fail_it_without_a_ranges_rule(api_plan: Plan) -> None:
    resources = to_rule_resources(api_plan.resources)
    assert _flow_findings(resources) == []
    dropped = [r for r in resources if not (r.type == INGRESS and r.inputs.get("cidrIpv4") == NOTEBOOKS)]
    found = _flow_findings(dropped)
    assert len(found) == 1 and "no ingress rule admits tcp 6820 from 192.0.2.7/32" in found[0], found
    assert "scheduler.rest_api.allowed_cidrs" in found[0] and "add a SecurityGroupIngressRule" in found[0]


def test_the_flow_rules_fail_a_range_the_spec_does_not_allow_or_a_wider_port(api_plan: Plan) -> None:
    resources = to_rule_resources(api_plan.resources)
    rule = next(r for r in resources if r.type == INGRESS and r.inputs.get("cidrIpv4") == PIPELINES)
    world = type(rule)(urn=rule.urn + "-world", type=rule.type, name="world",
                       inputs={**rule.inputs, "cidrIpv4": "0.0.0.0/0"}, dependencies=rule.dependencies)
    wide = type(rule)(urn=rule.urn + "-wide", type=rule.type, name="wide",
                      inputs={**rule.inputs, "toPort": 6830}, dependencies=rule.dependencies)
    found = _flow_findings([*resources, world, wide])
    assert len(found) == 2 and all("from cidr" in f for f in found), found


def test_without_the_api_a_range_on_6820_is_still_refused() -> None:
    api_off = plan_stack("dev")
    resources = to_rule_resources(api_off.resources)
    rule = next(r for r in resources if r.type == INGRESS and r.inputs.get("referencedSecurityGroupId")
                and r.name.startswith("forge-dev-slurm-controller-in-"))
    stray = type(rule)(urn=rule.urn + "-rest", type=rule.type, name="stray-rest",
                       inputs={k: v for k, v in {**rule.inputs, "cidrIpv4": PIPELINES, "fromPort": 6820,
                                                 "toPort": 6820}.items() if k != "referencedSecurityGroupId"},
                       dependencies={k: v for k, v in rule.dependencies.items() if k != "referencedSecurityGroupId"})
    assert [m for m in _flow_findings([*resources, stray]) if "stray-rest" in m]
