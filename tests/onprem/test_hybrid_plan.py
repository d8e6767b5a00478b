"""The MultiKueue hybrid plan (tests/fixtures/stacks/Pulumi.hybrid-multikueue.yaml): a Kubernetes site + an
EKS burst worker over a VPN (or a transit gateway, with Direct Connect), MultiKueue dispatch, object sync
with its direction, the summary. The Slurm burst (stacks/Pulumi.hybrid.yaml): test_hybrid_slurm.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from onprem_k8s import validate_all

from gpuforge.plan.engine import plan_stack
from gpuforge.plan.model import Plan
from gpuforge.review.report import markdown_plan
from tests.support import HYBRID_MULTIKUEUE

ROOT = Path(__file__).resolve().parents[2]


def hybrid_spec() -> dict[str, Any]:
    return copy.deepcopy(
        yaml.safe_load(Path(HYBRID_MULTIKUEUE).read_text())["config"]["gpuforge:cluster"]
    )


def plan_spec(tmp_path: Path, spec: dict[str, Any]) -> Plan:
    stack = tmp_path / "Pulumi.hybrid-variant.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpuforge:cluster": spec}}))
    return plan_stack(stack)


def test_placement_summary_and_link(hybrid: Plan) -> None:
    assert hybrid.placement == "hybrid" and hybrid.outputs["cluster"]["placement"] == "hybrid"
    s = hybrid.summary
    assert (s.nodes, s.spare_nodes, s.gpus) == (4 + 2, 1, 32 + 16)
    cloud_kw = 1.14 * 3 * hybrid.resolved.node_groups["burst"].node_power_kw  # 2 active + 1 spare, AWS PUE
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
    # No kubelet or pod traffic crosses: the site's Kueue reaches only the worker's API, tcp/443.
    rules = hybrid.by_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    site_rules = [r for r in rules if r.inputs.get("cidrIpv4") == "10.72.0.0/16"]
    assert [(r.inputs["fromPort"], r.inputs["toPort"], r.inputs["ipProtocol"]) for r in site_rules] == [
        (443, 443, "tcp")
    ]
    (eks,) = hybrid.by_type("aws:eks/cluster:Cluster")
    assert site_rules[0].dependencies["securityGroupId"] == [eks.urn]  # the EKS cluster security group
    # Private endpoint only: EKS advertises its private addresses through the public DNS name.
    assert eks.inputs["vpcConfig"]["endpointPublicAccess"] is False


def test_each_tunnel_has_a_state_alarm(hybrid: Plan) -> None:
    """TunnelState below 1 (down, or BGP not established) or missing for two 5-minute periods: one alarm per
    tunnel, on that tunnel's outside address (catalog aws_wiring vpn_tunnel)."""
    alarms = sorted(hybrid.by_type("aws:cloudwatch/metricAlarm:MetricAlarm"), key=lambda r: r.name)
    tunnels = [a for a in alarms if a.inputs.get("metricName") == "TunnelState"]
    assert [a.name.rsplit("-", 2)[-2] for a in tunnels] == ["tunnel1", "tunnel2"]
    (vpn,) = hybrid.by_type("aws:ec2/vpnConnection:VpnConnection")
    for alarm in tunnels:
        inputs = alarm.inputs
        assert (inputs["namespace"], inputs["statistic"], inputs["threshold"]) == ("AWS/VPN", "Maximum", 1)
        assert inputs["comparisonOperator"] == "LessThanThreshold" and inputs["treatMissingData"] == "breaching"
        assert (inputs["period"], inputs["evaluationPeriods"], inputs["datapointsToAlarm"]) == (300, 2, 2)
        assert vpn.urn in alarm.dependencies["dimensions"]  # the tunnel's address, from the connection


def _by_kind(plan: Plan, kind: str) -> dict[str, Any]:
    return {
        r.inputs["metadata"]["name"] + "@" + r.inputs["metadata"].get("namespace", ""): r
        for r in plan.by_type(f"kubernetes:kueue.x-k8s.io/v1beta1:{kind}")
    }


def test_burst_dispatches_whole_jobs_through_multikueue(hybrid: Plan) -> None:
    group = hybrid.by_type("gpuforge:aws:GpuNodeGroup")[0]
    assert group.inputs["orchestrator"] == "eks"
    check = _by_kind(hybrid, "AdmissionCheck")["multikueue-us-east-1@"].inputs["spec"]
    assert check == {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "burst-us-east-1"},
    }
    assert _by_kind(hybrid, "MultiKueueConfig")["burst-us-east-1@"].inputs["spec"] == {"clusters": ["burst-us-east-1"]}
    cluster = _by_kind(hybrid, "MultiKueueCluster")["burst-us-east-1@"].inputs["spec"]
    assert cluster == {"kubeConfig": {"locationType": "Secret", "location": "multikueue-us-east-1-kubeconfig"}}
    queues = _by_kind(hybrid, "ClusterQueue")
    site_cq, dispatch = queues["research@"], queues["research-burst@"]
    # A flavor per location and no shared cohort: a job runs on one side of the VPN.
    spec = dispatch.inputs["spec"]
    assert spec["admissionChecks"] == ["multikueue-us-east-1"] and "cohort" not in spec
    assert spec["resourceGroups"][0]["flavors"][0]["name"] == "gpu-h100-aws"
    assert site_cq.inputs["spec"]["resourceGroups"][0]["flavors"][0]["name"] == "gpu-h100"
    # EFA jobs are admissible: the dispatching queue covers what the worker's queue covers.
    assert "vpc.amazonaws.com/efa" in spec["resourceGroups"][0]["coveredResources"]
    assert {"name": "nvidia.com/gpu", "nominalQuota": 16} in spec["resourceGroups"][0]["flavors"][0]["resources"]
    # Both clusters have the `burst` LocalQueue in the team's namespace (MultiKueue mirrors the job there).
    local = [
        r.provider
        for r in hybrid.by_type("kubernetes:kueue.x-k8s.io/v1beta1:LocalQueue")
        if r.inputs["metadata"] == {"name": "burst", "namespace": "research"}
    ]
    assert len(local) == 2 and len(set(local)) == 2  # one on the site's provider, one on the worker's
    validate_all(hybrid)


def test_the_manager_identity_on_the_worker_is_kueues_own_role(hybrid: Plan) -> None:
    """The ClusterRole is the one Kueue's create-multikueue-kubeconfig.sh (v0.14.4, verbatim) applies."""
    script = (ROOT / "tests" / "fixtures" / "k8s" / "create-multikueue-kubeconfig-v0.14.4.sh").read_text()
    body = script.split("kubectl apply -f - <<EOF", 1)[1].split("\nEOF", 1)[0]
    upstream = next(d for d in yaml.safe_load_all(body) if d and d["kind"] == "ClusterRole")
    (role,) = hybrid.by_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    assert role.inputs["rules"] == upstream["rules"]
    (secret,) = [r for r in hybrid.by_type("kubernetes:core/v1:Secret") if "kubeconfig" in r.inputs["metadata"]["name"]]
    assert secret.inputs["metadata"]["namespace"] == "kueue-system"
    assert "token" not in json.dumps(secret.inputs)  # the kubeconfig is a Pulumi secret: not in the plan


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
    spec["site"]["kubernetes"]["pod_cidrs"] = ["10.73.0.0/16"]  # routed pod addresses (no SNAT at the site)
    plan = plan_spec(tmp_path, spec)
    assert len(plan.by_type("aws:ec2transitgateway/transitGateway:TransitGateway")) == 1
    assert len(plan.by_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment")) == 1
    assert "transitGatewayId" in plan.by_type("aws:ec2/vpnConnection:VpnConnection")[0].inputs
    routes = plan.by_type("aws:ec2transitgateway/route:Route")
    assert [r.inputs["destinationCidrBlock"] for r in routes] == ["10.72.0.0/16", "10.73.0.0/16"]
    dx = plan.by_type("aws:directconnect/gatewayAssociation:GatewayAssociation")[0]
    assert dx.inputs["allowedPrefixes"] == ["10.50.0.0/16"]
    assert "AWS data egress" in plan.outputs["hybrid"]["objectSync"]["description"]
    assert not plan.by_type("aws:ec2/vpnGateway:VpnGateway")


def test_hybrid_checks_the_join_and_sync_ends(tmp_path: Path) -> None:
    from gpuforge.spec import SpecError, resolve

    spec = hybrid_spec()
    spec["hybrid"]["object_sync"]["cloud_store"] = "nope"
    spec["kubernetes"]["endpoint"] = "public"
    spec["kubernetes"]["public_access_cidrs"] = ["198.51.100.0/24"]
    spec["hybrid"]["burst"]["team_gpus"] = {"research": {"H100": 12}, "nobody": {"B200": 8}}
    spec["site"]["kubernetes"]["pod_cidrs"] = ["10.50.128.0/17"]  # inside the VPC: routes cannot tell them apart
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    reported = {i.path for i in caught.value.issues}
    assert {
        "cluster.hybrid.object_sync.cloud_store",
        "cluster.kubernetes.endpoint",
        "cluster.hybrid.burst.team_gpus[nobody]",
        "cluster.hybrid.burst.team_gpus[nobody][B200]",
        "cluster.site.kubernetes.pod_cidrs[0]",
    } <= reported
    joined = hybrid_spec()
    joined["node_groups"]["burst"]["orchestrator"] = "kubernetes"  # join the site across the VPN: refused
    with pytest.raises(SpecError) as caught:
        resolve(joined)
    assert "cluster.node_groups[burst].orchestrator" in {i.path for i in caught.value.issues}
