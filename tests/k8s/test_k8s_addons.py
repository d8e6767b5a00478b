"""Health and versions of the Kubernetes side (issue 30, item 6): the EKS node monitoring agent that gives node
auto repair its GPU signal, and every add-on and Helm chart the plans declare pinned at the catalog's version."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.catalog.charts import load_charts
from gpuforge.infra.k8s.scheduling import taint_from, untolerated
from gpuforge.plan.model import Plan, PlanResource
from gpuforge.plan.policy_check import to_rule_resources
from gpuforge.policy.rules import REGISTRY, RuleContext
from tests.support import planned

ADDON = "aws:eks/addon:Addon"
RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
STACKS = Path(__file__).resolve().parents[1] / "fixtures" / "stacks"
ONPREM_K8S = str(STACKS / "Pulumi.onprem-k8s.yaml")
HYBRID_MULTIKUEUE = str(STACKS / "Pulumi.hybrid-multikueue.yaml")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "k8s" / "eks-addons"
AGENT_SCHEMA = FIXTURES / "eks-node-monitoring-agent-v1.7.0-configuration.schema.json"
AGENT_VALUES = FIXTURES / "eks-node-monitoring-agent-v1.7.0-values.yaml"


def addons(plan: Plan) -> dict[str, PlanResource]:
    return {str(r.inputs["addonName"]): r for r in plan.by_type(ADDON)}


def test_node_monitoring_agent_runs_on_gpu_nodes_and_repair_acts_on_it(staging: Plan) -> None:
    agent = addons(staging)["eks-node-monitoring-agent"]
    assert agent.inputs["addonVersion"] == load_aws_wiring().eks.addons["eks-node-monitoring-agent"].version
    config = json.loads(agent.inputs["configurationValues"])
    # What EKS checks the configuration against (the add-on's schema, additionalProperties false throughout).
    jsonschema.validate(config, json.loads(AGENT_SCHEMA.read_text()))
    chart_defaults = yaml.safe_load(AGENT_VALUES.read_text())
    assert chart_defaults["dcgmAgent"]["tolerations"] == []  # why the configuration must name them
    gpu_groups = [g for g in staging.by_type(NODE_GROUP) if g.inputs.get("taints")]
    assert gpu_groups, "staging has tainted GPU node groups"
    for group in gpu_groups:
        taints = [taint_from(t) for t in group.inputs["taints"]]
        # nv-hostengine (dcgm-server) and the agent itself land on every GPU node.
        assert untolerated(config["dcgmAgent"]["tolerations"], taints) == [], group.name
        assert untolerated(chart_defaults["nodeAgent"]["tolerations"], taints) == [], group.name
        # Auto repair is what reads AcceleratedHardwareReady.
        assert group.inputs["nodeRepairConfig"] == {"enabled": True}, group.name
    # It needs nodes to run on, and the platform's provider waits for it.
    assert {g.urn for g in staging.by_type(NODE_GROUP)} <= set(agent.depends_on)
    provider = next(r for r in staging.resources if r.type == "pulumi:providers:kubernetes")
    assert agent.urn in provider.depends_on


def test_agent_configuration_outside_its_schema_is_refused() -> None:
    # The schema check above can fail: a key the add-on does not know, as EKS's CreateAddon would refuse it.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"dcgmAgent": {"toleration": []}}, json.loads(AGENT_SCHEMA.read_text()))


def test_every_eks_addon_is_pinned_at_the_catalog_version(staging: Plan) -> None:
    plan = staging
    facts = load_aws_wiring().eks.addons
    declared = {name: r.inputs.get("addonVersion") for name, r in addons(plan).items()}
    assert declared == {name: fact.version for name, fact in facts.items()}
    kubernetes = plan.resolved.spec.kubernetes
    assert kubernetes is not None
    assert declared["kube-proxy"].startswith(f"v{kubernetes.version}.")


@pytest.mark.parametrize("stack", ["staging", ONPREM_K8S, HYBRID_MULTIKUEUE])
def test_every_helm_release_is_pinned_at_the_catalog_version(stack: str) -> None:
    plan = planned(stack)
    charts = load_charts().charts
    releases = plan.by_type(RELEASE)
    assert releases
    pins = {r.inputs["name"]: (r.inputs["chart"], r.inputs.get("version")) for r in releases}
    for name, (chart, version) in pins.items():
        key = name.replace("-", "_")
        assert key in charts, f"{stack}: release {name} has no entry in charts.yaml"
        assert (chart, version) == (charts[key].chart, charts[key].version), name


def test_the_rule_fails_a_plan_with_an_unpinned_addon(staging: Plan) -> None:
    rule = REGISTRY["wiring-eks-addons"]
    ctx = RuleContext("staging", rule.defaults())

    def resources(drop_version_of: str | None) -> list[PlanResource]:
        out = []
        for r in staging.resources:
            if r.type == ADDON and r.inputs.get("addonName") == drop_version_of:
                r = dataclasses.replace(r, inputs={k: v for k, v in r.inputs.items() if k != "addonVersion"})
            out.append(r)
        return out

    assert rule.run(to_rule_resources(resources(None)), ctx) == []
    found = rule.run(to_rule_resources(resources("eks-node-monitoring-agent")), ctx)
    assert [v.message for v in found] and "eks-node-monitoring-agent unpinned" in found[0].message
