"""topology.conf from EC2 instance topology: DescribeInstanceTopology's response as AWS documents it
(tests/fixtures/aws/describe-instance-topology.json, verbatim from aws-cli's example; moto does not
implement the call), served through botocore's Stubber, which validates requests and responses
against EC2's service model. The tree is checked the way slurmctld's topology/tree reads it."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gpuforge.render.ec2_topology import ROOT, Instance, build_tree, topology_conf

REPO = Path(__file__).resolve().parents[2]
FIXTURE = json.loads((REPO / "tests/fixtures/aws/describe-instance-topology.json").read_text())
SCRIPT = REPO / "gpuforge/assets/playbooks/roles/slurm_controller/files/gpuforge-slurm-topology"
# The Slurm nodes (name -> NodeAddr) and the instances behind them: the four of the documented
# response, and a g5 node EC2 gives no topology for, in the cluster's placement group.
NODES = {f"ip-10-0-0-{i}": f"10.0.0.{i}" for i in range(1, 6)}
INSTANCE_IDS = [
    "i-1111111111example",
    "i-2222222222example",
    "i-3333333333example",
    "i-444444444example",
    "i-5555555555example",
]
ZONES = ["us-west-2a", "us-west-2a", "us-west-2d", "us-west-2a", "us-west-2a"]
GROUPS = ["my-ml-cpg", None, None, None, "forge-dev-train-pg"]


def _describe_instances() -> dict[str, Any]:
    instances = []
    for i, (instance_id, zone, group) in enumerate(zip(INSTANCE_IDS, ZONES, GROUPS, strict=True), start=1):
        placement: dict[str, str] = {"AvailabilityZone": zone}
        if group:
            placement["GroupName"] = group
        instances.append({"InstanceId": instance_id, "PrivateIpAddress": f"10.0.0.{i}", "Placement": placement})
    return {"Reservations": [{"ReservationId": "r-0example", "Instances": instances}]}


def _ec2(topology_error: str | None = None) -> tuple[Any, Stubber]:
    ec2 = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="test", aws_secret_access_key="test")
    stub = Stubber(ec2)
    filters = [
        {"Name": "private-ip-address", "Values": sorted(NODES.values())},
        {"Name": "instance-state-name", "Values": ["pending", "running"]},
    ]
    stub.add_response("describe_instances", _describe_instances(), {"Filters": filters})
    if topology_error:
        stub.add_client_error("describe_instance_topology", topology_error, "not allowed", 403)
    else:
        stub.add_response("describe_instance_topology", FIXTURE, {"InstanceIds": INSTANCE_IDS})
        # The documented response carries a NextToken: the next page is asked for, and is empty.
        stub.add_response(
            "describe_instance_topology",
            {"Instances": []},
            {"InstanceIds": INSTANCE_IDS, "NextToken": "SomeEncryptedToken"},
        )
    stub.activate()
    return ec2, stub


def _parse(text: str) -> dict[str, dict[str, list[str]]]:
    """SwitchName lines as slurmctld's topology/tree reads them: each switch has Nodes or Switches."""
    switches: dict[str, dict[str, list[str]]] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(item.split("=", 1) for item in line.split())
        assert ("Nodes" in fields) != ("Switches" in fields), line  # "has both" / "has neither" are errors
        switches[fields["SwitchName"]] = {
            "nodes": fields.get("Nodes", "").split(",") if "Nodes" in fields else [],
            "switches": fields.get("Switches", "").split(",") if "Switches" in fields else [],
        }
    return switches


def _leaves_under(switches: dict[str, dict[str, list[str]]], name: str) -> list[str]:
    sw = switches[name]
    return sorted(sw["nodes"] + [n for child in sw["switches"] for n in _leaves_under(switches, child)])


def test_documented_response_becomes_slurms_tree() -> None:
    ec2, stub = _ec2()
    text, warnings = topology_conf(ec2, NODES, "forge-dev")
    stub.assert_no_pending_responses()
    switches = _parse(text)
    # Every node on exactly one leaf, everything under one root (slurmctld: "switches lack access" otherwise).
    leaves = [n for sw in switches.values() for n in sw["nodes"]]
    assert sorted(leaves) == sorted(NODES)
    assert _leaves_under(switches, ROOT) == sorted(NODES)
    # i-111 and i-222 share their bottom network node: one leaf; i-444 shares only the top one.
    by_node = {n: name for name, sw in switches.items() for n in sw["nodes"]}
    assert by_node["ip-10-0-0-1"] == by_node["ip-10-0-0-2"]
    assert len({by_node[n] for n in ("ip-10-0-0-1", "ip-10-0-0-3", "ip-10-0-0-4")}) == 3
    top_of_1 = next(name for name in switches[ROOT]["switches"] if "ip-10-0-0-1" in _leaves_under(switches, name))
    assert _leaves_under(switches, top_of_1) == ["ip-10-0-0-1", "ip-10-0-0-2", "ip-10-0-0-4"]
    # The g5 node has no EC2 topology: its placement group is its leaf, said in a warning.
    assert by_node["ip-10-0-0-5"] == "pg-forge-dev-train-pg"
    assert warnings == ["no EC2 topology for ip-10-0-0-5: placed by placement group or zone"]
    assert "# EC2 network node nn-3333333333example" in text


def test_api_failure_falls_back_to_placement_groups_and_zones() -> None:
    ec2, stub = _ec2(topology_error="UnauthorizedOperation")
    text, warnings = topology_conf(ec2, NODES, "forge-dev")
    stub.assert_no_pending_responses()
    switches = _parse(text)
    assert switches["pg-my-ml-cpg"]["nodes"] == ["ip-10-0-0-1"]
    assert switches["pg-forge-dev-train-pg"]["nodes"] == ["ip-10-0-0-5"]
    assert switches["az-us-west-2a"]["nodes"] == ["ip-10-0-0-2", "ip-10-0-0-4"]
    assert switches["az-us-west-2d"]["nodes"] == ["ip-10-0-0-3"]
    assert _leaves_under(switches, ROOT) == sorted(NODES)
    assert any("DescribeInstanceTopology failed" in w and "UnauthorizedOperation" in w for w in warnings)


def test_no_nodes_writes_only_the_header() -> None:
    assert _parse(topology_conf(None, {}, "forge-dev")[0]) == {}
    # One placement group: a single leaf and no root above it.
    single = build_tree({"n1": Instance("n1", "i-1", "pg", "us-east-1a")}, {})
    assert [(s.name, s.nodes, s.switches) for s in single] == [("pg-pg", ["n1"], [])]


def _script(libexec: Path) -> ModuleType:
    """The script as the role installs it: beside its copy of ec2_topology.py."""
    libexec.mkdir()
    shutil.copy(SCRIPT, libexec / SCRIPT.name)
    shutil.copy(REPO / "gpuforge/render/ec2_topology.py", libexec / "ec2_topology.py")
    loader = importlib.machinery.SourceFileLoader("gpuforge_slurm_topology", str(libexec / SCRIPT.name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_controller_script_writes_the_file_and_reconfigures_only_on_change(tmp_path: Path) -> None:
    config = tmp_path / "slurm-topology.json"
    target = tmp_path / "topology.conf"
    config.write_text(json.dumps({"cluster": "forge-dev", "region": "us-west-2", "path": str(target)}))
    calls: list[list[str]] = []

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        out = "".join(f"{n} {a}\n{n} {a}\n" for n, a in NODES.items()) if argv[0] == "sinfo" else ""
        return subprocess.CompletedProcess(argv, 0, out, "")

    script = _script(tmp_path / "libexec")
    ec2, _ = _ec2()
    assert script.main(["--config", str(config)], ec2=ec2, run=run) == 0
    assert target.read_text() == topology_conf(_ec2()[0], NODES, "forge-dev")[0]
    assert calls[-1] == ["scontrol", "reconfigure"]
    calls.clear()
    ec2, _ = _ec2()
    assert script.main(["--config", str(config)], ec2=ec2, run=run) == 0
    assert ["scontrol", "reconfigure"] not in calls  # unchanged: slurmctld is left alone


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_aws_clusters_use_the_tree_the_controller_writes(stack: str) -> None:
    from gpuforge.plan.stacks import load_stack
    from gpuforge.render.slurm import render_slurm, slurm_config
    from gpuforge.spec import resolve

    config = slurm_config(resolve(load_stack(stack).cluster, stack))
    assert config["topology"]["kind"] == "ec2" and config["topology"]["region"]
    files = render_slurm(config)
    assert "TopologyPlugin=topology/tree" in files["slurm.conf"]
    assert _parse(files["topology.conf"]) == {}  # the header only: the controller's timer fills it


def _reachable(switches: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The node sets slurmctld may allocate one job over: the leaves under each top switch (one no other
    switch names), since jobs only span nodes connected by the same switch fabric (topology.conf(5))."""
    children = {c for sw in switches.values() for c in sw["switches"]}
    return [_leaves_under(switches, top) for top in sorted(set(switches) - children)]


def test_a_hybrid_sites_switches_stay_apart_from_the_clouds(tmp_path: Path) -> None:
    """The hybrid stack's rendered site switches, passed to the controller's script as the role writes its
    config, come first and unchanged; the cloud nodes get their own tree; no switch joins the two."""
    from gpuforge.plan.stacks import load_stack
    from gpuforge.render.slurm import slurm_config
    from gpuforge.spec import resolve

    topology = slurm_config(resolve(load_stack("hybrid").cluster, "hybrid"))["topology"]
    assert topology["kind"] == "hybrid" and topology["static_nodes"] == ["dgx-01", "dgx-02", "dgx-03", "dgx-04"]
    config = tmp_path / "slurm-topology.json"
    target = tmp_path / "topology.conf"
    config.write_text(json.dumps({"cluster": "forge-hybrid", "region": "us-west-2", "path": str(target),
                                  "static_switches": topology["switches"], "static_nodes": topology["static_nodes"]}))
    site = {f"dgx-0{i}": f"10.72.1.1{i}" for i in range(1, 5)}

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        out = "".join(f"{n} {a}\n" for n, a in {**site, **NODES}.items()) if argv[0] == "sinfo" else ""
        return subprocess.CompletedProcess(argv, 0, out, "")

    ec2, stub = _ec2()  # asked about the cloud nodes' addresses only (the Stubber checks the filter)
    assert _script(tmp_path / "libexec").main(["--config", str(config)], ec2=ec2, run=run) == 0
    stub.assert_no_pending_responses()
    switches = _parse(target.read_text())
    assert switches["su1-leaves"]["nodes"] == ["dgx-[01-04]"]
    groups = _reachable(switches)
    assert ["dgx-[01-04]"] in groups and sorted(NODES) in groups and len(groups) == 2


def test_a_switch_joining_site_and_cloud_is_caught() -> None:
    """The failing case of the check above: a root over the site's leaves and the cloud's tree."""
    text = (
        "SwitchName=su1-leaves Nodes=dgx-[01-04]\nSwitchName=s1-0 Nodes=ip-10-0-0-1\n"
        "SwitchName=everything Switches=su1-leaves,s1-0\n"
    )
    assert _reachable(_parse(text)) == [["dgx-[01-04]", "ip-10-0-0-1"]]
    # A cloud switch named like a site switch would merge the trees: the script keeps the site's alone.
    from gpuforge.render.ec2_topology import Switch

    ec2, _ = _ec2(topology_error="UnauthorizedOperation")
    text, warnings = topology_conf(ec2, NODES, "c", [Switch("az-us-west-2a", ["dgx-01"])], ["dgx-01"])
    assert _reachable(_parse(text)) == [["dgx-01"]] and any("clash" in w for w in warnings)
