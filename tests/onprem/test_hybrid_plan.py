"""The hybrid plan: site + AWS burst group over a VPN (or a transit gateway, with Direct Connect),
the burst lender queue in the teams' Kueue cohort, object sync with its direction, the summary."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from onprem_k8s import validate_all

from gpuforge.plan.engine import plan_stack
from gpuforge.plan.model import Plan
from gpuforge.review.report import markdown_plan

ROOT = Path(__file__).resolve().parents[2]


def hybrid_spec() -> dict[str, Any]:
    return copy.deepcopy(
        yaml.safe_load((ROOT / "stacks" / "Pulumi.hybrid.yaml").read_text())["config"]["gpuforge:cluster"]
    )


def plan_spec(tmp_path: Path, spec: dict[str, Any]) -> Plan:
    stack = tmp_path / "Pulumi.hybrid-variant.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpuforge:cluster": spec}}))
    return plan_stack(stack)


def test_placement_summary_and_link(hybrid: Plan) -> None:
    assert hybrid.placement == "hybrid" and hybrid.outputs["cluster"]["placement"] == "hybrid"
    s = hybrid.summary
    assert (s.nodes, s.spare_nodes, s.gpus) == (4 + 2, 1, 32 + 16)
    cloud_kw = 1.55 * 3 * hybrid.resolved.node_groups["burst"].node_power_kw  # 2 active + 1 spare, catalog PUE
    # The site: four DGX H100, eight rail leaves at 1.7 kW, UFM, management switch and storage (4.4 kW).
    assert s.power_kw == pytest.approx(cloud_kw + 1.4 * (4 * 10.2 + 8 * 1.7 + 4.4), abs=0.01)
    assert s.power_budget_kw == 60 + 85
    link = hybrid.outputs["hybrid"]["link"]
    assert link["kind"] == "vpn" and "198.51.100.10" in link["description"] and "BGP" in link["description"]
    text = markdown_plan(hybrid)
    assert "site-to-cloud link" in text and "(hybrid)" in text


def test_vpn_on_a_virtual_private_gateway(hybrid: Plan) -> None:
    cgw = hybrid.by_type("aws:ec2/customerGateway:CustomerGateway")
    assert len(cgw) == 1 and cgw[0].inputs["bgpAsn"] == "65010" and cgw[0].inputs["type"] == "ipsec.1"
    vpn = hybrid.by_type("aws:ec2/vpnConnection:VpnConnection")[0]
    assert vpn.inputs["staticRoutesOnly"] is False and "vpnGatewayId" in vpn.inputs
    propagations = hybrid.by_type("aws:ec2/vpnGatewayRoutePropagation:VpnGatewayRoutePropagation")
    assert len(propagations) == 2  # one private route table per AZ
    kubelet = hybrid.by_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    site_rules = [r for r in kubelet if r.inputs.get("cidrIpv4") == "10.72.0.0/16"]
    assert [(r.inputs["fromPort"], r.inputs["ipProtocol"]) for r in site_rules] == [(10250, "tcp")]
    assert not hybrid.by_type("aws:eks/cluster:Cluster")  # burst nodes join the site, not EKS


def test_burst_group_lends_through_the_cohort(hybrid: Plan) -> None:
    group = hybrid.by_type("gpuforge:aws:GpuNodeGroup")[0]
    assert group.inputs["orchestrator"] == "kubernetes"
    queues = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]
        for r in hybrid.by_type("kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue")
    }
    burst, team = queues["burst-us-east-1"], queues["research"]
    assert burst["cohort"] == team["cohort"] == "gpuforge"
    assert "namespaceSelector" not in burst  # admits nothing itself: a pure lender
    flavor = burst["resourceGroups"][0]["flavors"][0]
    assert flavor["name"] == "gpu-h100" == team["resourceGroups"][0]["flavors"][0]["name"]
    assert {"name": "nvidia.com/gpu", "nominalQuota": 16} in flavor["resources"]
    capacity = hybrid.by_type("gpuforge:hybrid:BurstCapacity")[0]
    assert capacity.inputs["nodeGroups"]["burst"] == {
        "gpuforge.dev/node-group": "burst",
        "gpuforge.dev/gpu-model": "H100",
        "gpuforge.dev/location": "aws",
    }
    validate_all(hybrid)


def test_object_sync_states_its_direction(hybrid: Plan) -> None:
    task = hybrid.by_type("aws:datasync/task:Task")[0]
    site = hybrid.by_type("aws:datasync/locationObjectStorage:LocationObjectStorage")[0]
    s3 = hybrid.by_type("aws:datasync/s3Location:S3Location")[0]
    assert site.inputs["serverHostname"] == "s3.lab-west.example.internal" and site.inputs["serverProtocol"] == "HTTPS"
    assert task.dependencies["sourceLocationArn"] == [site.urn]
    assert task.dependencies["destinationLocationArn"] == [s3.urn]
    assert "ingress into AWS" in hybrid.outputs["hybrid"]["objectSync"]["description"]


def test_transit_gateway_with_direct_connect_and_static_routes(tmp_path: Path) -> None:
    spec = hybrid_spec()
    spec["hybrid"]["link"].update(
        kind="transit_gateway",
        static_routes_only=True,
        direct_connect_gateway_id="5f3c2a1e-0b7d-4c6e-9a8f-1d2e3f4a5b6c",
    )
    spec["hybrid"]["object_sync"]["direction"] = "cloud_to_site"
    plan = plan_spec(tmp_path, spec)
    assert len(plan.by_type("aws:ec2transitgateway/transitGateway:TransitGateway")) == 1
    assert len(plan.by_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment")) == 1
    assert "transitGatewayId" in plan.by_type("aws:ec2/vpnConnection:VpnConnection")[0].inputs
    routes = plan.by_type("aws:ec2transitgateway/route:Route")
    assert [r.inputs["destinationCidrBlock"] for r in routes] == ["10.72.0.0/16"]
    dx = plan.by_type("aws:directconnect/gatewayAssociation:GatewayAssociation")[0]
    assert dx.inputs["allowedPrefixes"] == ["10.50.0.0/16"]
    assert "AWS data egress" in plan.outputs["hybrid"]["objectSync"]["description"]
    assert not plan.by_type("aws:ec2/vpnGateway:VpnGateway")


def test_hybrid_checks_burst_model_and_sync_ends(tmp_path: Path) -> None:
    from components.spec import SpecError, resolve

    spec = hybrid_spec()
    spec["node_groups"]["burst"]["instance_type"] = "p5en.48xlarge"  # H200: no H200 flavor on the site
    spec["hybrid"]["object_sync"]["cloud_store"] = "nope"
    spec["node_groups"]["burst"]["orchestrator"] = "kubernetes"
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    reported = {i.path for i in caught.value.issues}
    assert {"cluster.node_groups[burst].instance_type", "cluster.hybrid.object_sync.cloud_store"} <= reported
