"""The hybrid Slurm burst's wiring rules on the real hybrid plan (stacks/Pulumi.hybrid.yaml, evaluated offline):
the plan passes, and each resource-level change a person could make (a rule edited by hand, a hand-added rule or
grant, a trust loosened) fails with a message naming the resource, the value, what was expected and the fix.
Checkov-style pass/fail fixtures are in tests/policies/fixtures/wiring/wiring-slurm-burst-*.yaml."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from support import planned
from test_policy_engine import run_engine

from gpuforge.catalog.models import load_catalog
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.policy.rules import REGISTRY, UNKNOWN, Resource, RuleContext, Violation
from gpuforge.policy.rules.wiring_slurm import burst_ports
from gpuforge.policy.settings import PolicySettings, Settings

PORTS = "wiring-slurm-burst-ports"
CREDENTIALS = "wiring-slurm-burst-credentials"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


@pytest.fixture(scope="module")
def hybrid() -> list[Resource]:
    return to_rule_resources(planned("hybrid").resources)


def named(resources: list[Resource], name: str) -> Resource:
    return next(r for r in resources if r.name == name)


def edited(resources: list[Resource], name: str, **inputs: Any) -> list[Resource]:
    """The plan with one resource's inputs changed (None removes an input)."""
    out = []
    for r in resources:
        if r.name == name:
            merged = {k: v for k, v in {**r.inputs, **inputs}.items() if v is not None}
            r = replace(r, inputs=merged)
        out.append(r)
    return out


def without(resources: list[Resource], name: str) -> list[Resource]:
    return [r for r in resources if r.name != name]


def added(resources: list[Resource], type_: str, name: str, inputs: dict[str, Any], **deps: str) -> list[Resource]:
    """The plan with a hand-added resource (deps: property -> name of the resource it points at)."""
    urn = f"urn:pulumi:hybrid::gpuforge::{type_}::{name}"
    links = {prop: (named(resources, target).urn,) for prop, target in deps.items()}
    return [*resources, Resource(urn, type_, name, inputs, dependencies=links)]


def check(rule_id: str, resources: list[Resource]) -> list[Violation]:
    rule = REGISTRY[rule_id]
    return rule.run(resources, RuleContext("staging", rule.defaults()))


def only(rule_id: str, resources: list[Resource], name: str) -> str:
    """The one violation, on `name`; its message."""
    found = check(rule_id, resources)
    assert [v.urn.rsplit("::", 1)[-1] for v in found] == [name], found
    assert found[0].message.startswith(f"{name}:")
    return found[0].message


def test_the_hybrid_plan_passes_and_both_rules_see_its_burst(hybrid: list[Resource]) -> None:
    assert check(PORTS, hybrid) == [] and check(CREDENTIALS, hybrid) == []
    # Not vacuous: without the burst's own ingress rules, its munge grant or its scaler trust they fail.
    stripped = [r for r in hybrid if not (r.type == INGRESS and "-burst-" in r.name)]
    assert {v.urn.rsplit("::", 1)[-1] for v in check(PORTS, stripped)} == {"forge-hybrid-burst"}
    assert only(CREDENTIALS, without(hybrid, "forge-hybrid-burst-cloud-munge"), "forge-hybrid-cloud-role")


def test_the_ports_come_from_the_catalog(hybrid: list[Resource]) -> None:
    catalog = load_catalog().slurm.ports
    burst = named(hybrid, "forge-hybrid-burst")
    assert burst_ports(burst) == catalog
    assert burst_ports(replace(burst, inputs={})) == catalog
    rules = [r for r in hybrid if r.type == INGRESS and "-burst-" in r.name]
    assert {(r.get("fromPort"), r.get("toPort")) for r in rules} == {(catalog.slurmd, catalog.slurmd), catalog.srun}


def test_slurmd_open_to_the_internet_fails(hybrid: list[Resource]) -> None:
    plan = added(
        hybrid, INGRESS, "debug-slurmd",
        {"securityGroupId": "x", "ipProtocol": "tcp", "fromPort": 6818, "toPort": 6818, "cidrIpv4": "0.0.0.0/0"},
        securityGroupId="forge-hybrid-net-compute-sg",
    )
    message = only(PORTS, plan, "debug-slurmd")
    assert "tcp 6818 (slurmd) on forge-hybrid-net-compute-sg from 0.0.0.0/0 (anyone)" in message
    assert "expected only the site's Slurm hosts 10.72.1.7/32 (login-01), 10.72.1.6/32 (slurm-01)" in message
    assert "narrow the source to those /32s or delete the rule" in message


def test_srun_range_widened_to_the_whole_site_fails(hybrid: list[Resource]) -> None:
    plan = edited(hybrid, "forge-hybrid-burst-srun-from-10-72-1-7-32", cidrIpv4="10.72.0.0/16")
    message = only(PORTS, plan, "forge-hybrid-burst-srun-from-10-72-1-7-32")
    assert "tcp 60001-63000 (srun) on forge-hybrid-net-compute-sg from 10.72.0.0/16" in message
    assert "(wider than the /32 of login-01, slurm-01)" in message


def test_every_port_from_another_security_group_fails(hybrid: list[Resource]) -> None:
    plan = added(
        hybrid, INGRESS, "all-from-management",
        {"securityGroupId": "x", "ipProtocol": "-1", "referencedSecurityGroupId": "y"},
        securityGroupId="forge-hybrid-net-compute-sg", referencedSecurityGroupId="forge-hybrid-net-management-sg",
    )
    message = only(PORTS, plan, "all-from-management")
    assert "admits all ports (slurmd and srun)" in message and "not one of the site's Slurm hosts" in message


def test_an_inline_rule_on_the_node_security_group_is_seen(hybrid: list[Resource]) -> None:
    inline = [{"protocol": "tcp", "fromPort": 60000, "toPort": 65000, "cidrBlocks": ["10.72.0.0/16"]}]
    message = only(PORTS, edited(hybrid, "forge-hybrid-net-compute-sg", ingress=inline), "forge-hybrid-net-compute-sg")
    assert "tcp 60000-65000 (srun) on forge-hybrid-net-compute-sg from 10.72.0.0/16" in message


def test_srun_range_not_the_catalogs_fails_on_the_rule_and_the_burst(hybrid: list[Resource]) -> None:
    plan = edited(hybrid, "forge-hybrid-burst-srun-from-10-72-1-6-32", toPort=62000)
    found = {v.urn.rsplit("::", 1)[-1]: v.message for v in check(PORTS, plan)}
    assert set(found) == {"forge-hybrid-burst-srun-from-10-72-1-6-32", "forge-hybrid-burst"}
    rule = found["forge-hybrid-burst-srun-from-10-72-1-6-32"]
    assert "admits tcp 60001-62000 on forge-hybrid-net-compute-sg from 10.72.1.6/32 (slurm-01)" in rule
    assert "expected exactly tcp 6818 (SlurmdPort) and tcp 60001-63000 (SrunPortRange)" in rule
    assert "set fromPort/toPort" in rule
    assert "do not admit tcp 60001-63000 (srun) from 10.72.1.6/32 (slurm-01)" in found["forge-hybrid-burst"]


def test_a_stack_that_overrides_the_srun_range_is_held_to_it(hybrid: list[Resource]) -> None:
    burst = named(hybrid, "forge-hybrid-burst")
    ports = {**burst.inputs["ports"], "srun": "50001-52000"}  # catalog: {slurm: {ports: {srun: [50001, 52000]}}}
    found = check(PORTS, edited(hybrid, "forge-hybrid-burst", ports=ports))
    assert {v.urn.rsplit("::", 1)[-1] for v in found} == {"forge-hybrid-burst"}
    assert (
        "do not admit tcp 50001-52000 (srun) from 10.72.1.7/32 (login-01); tcp 50001-52000 (srun) from "
        "10.72.1.6/32 (slurm-01); expected tcp 6818 (SlurmdPort) and tcp 50001-52000 (SrunPortRange)"
    ) in found[0].message


def test_no_egress_to_slurmctld_fails(hybrid: list[Resource]) -> None:
    plan = edited(hybrid, "forge-hybrid-net-compute-out-all", cidrIpv4="10.50.0.0/16")
    message = only(PORTS, plan, "forge-hybrid-burst")
    assert "allow no egress tcp 6817 (slurmctld) to 10.72.1.6 (slurm-01); tcp 60001-63000 (srun) to 10.72.1.7" \
        in message
    assert "add SecurityGroupEgressRules" in message


def test_munge_secret_without_the_cluster_key_fails(hybrid: list[Resource]) -> None:
    secret = named(hybrid, "forge-hybrid-burst-munge-secret")
    plan = [replace(r, inputs={k: v for k, v in r.inputs.items() if k != "kmsKeyId"}, dependencies={})
            if r.urn == secret.urn else r for r in hybrid]
    message = only(CREDENTIALS, plan, "forge-hybrid-burst-munge-secret")
    assert "encrypted with the AWS managed aws/secretsmanager key (no kmsKeyId)" in message
    assert "expected the cluster key (forge-hybrid-kms-key)" in message and "set kmsKeyId" in message


def test_another_role_reading_the_munge_key_fails(hybrid: list[Resource]) -> None:
    doc = {"Statement": [{"Effect": "Allow", "Action": "secretsmanager:*", "Resource": "*"}]}
    plan = added(hybrid, ROLE_POLICY, "scaler-secrets", {"role": "x", "policy": json.dumps(doc)},
                 role="forge-hybrid-burst-scaler-role")
    message = only(CREDENTIALS, plan, "scaler-secrets")
    assert "grants secretsmanager:GetSecretValue on * (the munge key) to role forge-hybrid-burst-scaler-role" in message
    assert "expected only the cloud Slurm node roles (forge-hybrid-cloud-role); remove the grant" in message


def test_a_wildcard_read_on_the_cloud_node_role_fails(hybrid: list[Resource]) -> None:
    doc = {"Statement": [{"Effect": "Allow", "Action": ["secretsmanager:GetSecretValue"],
                          "Resource": "arn:aws:secretsmanager:*:*:secret:gpuforge/*"}]}
    plan = added(hybrid, ROLE_POLICY, "node-secrets", {"role": "x", "policy": json.dumps(doc)},
                 role="forge-hybrid-cloud-role")
    message = only(CREDENTIALS, plan, "node-secrets")
    assert "on arn:aws:secretsmanager:*:*:secret:gpuforge/* to cloud node role forge-hybrid-cloud-role" in message
    assert "expected the munge secret forge-hybrid-burst-munge-secret only; name its ARN" in message


def test_a_resource_policy_opening_the_munge_key_fails(hybrid: list[Resource]) -> None:
    doc = {"Statement": [{"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
                          "Action": "secretsmanager:GetSecretValue", "Resource": "*"}]}
    plan = added(hybrid, "aws:secretsmanager/secretPolicy:SecretPolicy", "munge-open",
                 {"secretArn": "x", "policy": json.dumps(doc)}, secretArn="forge-hybrid-burst-munge-secret")
    message = only(CREDENTIALS, plan, "munge-open")
    assert "grants secretsmanager:GetSecretValue to arn:aws:iam::123456789012:root" in message


def _trust(resources: list[Resource], edit: Any) -> list[Resource]:
    role = named(resources, "forge-hybrid-burst-scaler-role")
    doc = json.loads(role.inputs["assumeRolePolicy"])
    edit(doc["Statement"][0]["Condition"])
    return edited(resources, role.name, assumeRolePolicy=json.dumps(doc))


def test_scaler_trust_for_a_login_host_certificate_fails(hybrid: list[Resource]) -> None:
    cns = {"aws:PrincipalTag/x509Subject/CN": ["slurm-01", "login-01"]}
    plan = _trust(hybrid, lambda c: c["StringEquals"].update(cns))
    message = only(CREDENTIALS, plan, "forge-hybrid-burst-scaler-role")
    assert "admits certificates with aws:PrincipalTag/x509Subject/CN login-01" in message
    assert "expected StringEquals the controller hosts (slurm-01) only" in message and "narrow the condition" in message


def test_scaler_trust_for_any_anchor_fails(hybrid: list[Resource]) -> None:
    message = only(CREDENTIALS, _trust(hybrid, lambda c: c.pop("ArnEquals")), "forge-hybrid-burst-scaler-role")
    assert "without an aws:SourceArn condition" in message
    assert "expected aws:SourceArn = the burst's trust anchor (forge-hybrid-burst-scaler-anchor)" in message


def test_values_unknown_during_preview_are_not_judged(hybrid: list[Resource]) -> None:
    # In a real preview the munge grant's document and the scaler's trust wait for ARNs; `up` judges them.
    plan = edited(hybrid, "forge-hybrid-burst-cloud-munge", policy=UNKNOWN)
    plan = edited(plan, "forge-hybrid-burst-scaler-role", assumeRolePolicy=UNKNOWN)
    plan = edited(plan, "forge-hybrid-burst-munge-secret", kmsKeyId=UNKNOWN)
    assert check(CREDENTIALS, plan) == [] and check(PORTS, plan) == []


def test_the_engine_reports_the_same_on_the_plan(hybrid: list[Resource]) -> None:
    settings = Settings("staging", PolicySettings())
    assert run_engine(PORTS, hybrid, settings) == set()
    plan = edited(hybrid, "forge-hybrid-burst-srun-from-10-72-1-7-32", cidrIpv4="10.72.0.0/16")
    assert run_engine(PORTS, plan, settings) == {named(plan, "forge-hybrid-burst-srun-from-10-72-1-7-32").urn}
