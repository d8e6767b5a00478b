"""Slurm's topology.conf (topology/tree) on AWS, from the EC2 instance topology of the launched nodes.

EC2 describes where each instance sits in its network as a top-down list of network nodes
(DescribeInstanceTopology: 3 or 4 layers, the last one the node the instance connects to), for the
instance types that support it (P4d/P5/Trn1 and similar; docs/slurm.md). Instances with the same
bottom network node are closest; the tree of network nodes is the tree Slurm's topology/tree wants.
An instance EC2 gives no topology for (an unsupported type, or one launched moments ago: the API is
eventually consistent) falls back to its cluster placement group, one leaf per group (its instances
share a low-latency segment), and without one to its Availability Zone. A root switch joins the top
switches, so a job may still span them when it must.

On a hybrid cluster the site's switches are static (rendered from the site fabric, passed in): its nodes
are left out of the EC2 lookup, its switches are written first, unchanged, and no switch ever joins them
to the cloud's, so Slurm never allocates one job on both sides of the link (topology.conf(5): jobs only
span nodes connected by the same switch fabric).

Run on the controller by `gpuforge-slurm-topology` (the slurm_controller role), this module uses only
the standard library and the boto3 EC2 client it is given, so the role copies it beside the script.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# DescribeInstanceTopology takes at most 100 instance IDs per request (EC2 API reference).
TOPOLOGY_IDS_PER_CALL = 100
# DescribeInstances filter values per request: kept well under the API's limit of 200.
ADDRESSES_PER_CALL = 100
ROOT = "root"


@dataclass(frozen=True)
class Instance:
    """A Slurm node's EC2 instance: what DescribeInstances says about it."""

    node: str  # the Slurm node name
    instance_id: str
    placement_group: str | None
    availability_zone: str


@dataclass
class Switch:
    name: str
    nodes: list[str] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)
    comment: str = ""


def instances_of(ec2: Any, nodes: Mapping[str, str]) -> dict[str, Instance]:
    """The running instances behind Slurm nodes, by node name; *nodes* maps node name to NodeAddr
    (its private IP address, as a cloud node registers itself)."""
    by_address = {address: name for name, address in nodes.items()}
    found: dict[str, Instance] = {}
    addresses = sorted(by_address)
    for start in range(0, len(addresses), ADDRESSES_PER_CALL):
        chunk = addresses[start : start + ADDRESSES_PER_CALL]
        filters = [
            {"Name": "private-ip-address", "Values": chunk},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
        token: str | None = None
        while True:
            page = ec2.describe_instances(Filters=filters, **({"NextToken": token} if token else {}))
            for reservation in page.get("Reservations", []):
                for inst in reservation.get("Instances", []):
                    name = by_address.get(inst.get("PrivateIpAddress", ""))
                    if name is None:
                        continue
                    placement = inst.get("Placement", {})
                    found[name] = Instance(
                        node=name,
                        instance_id=inst["InstanceId"],
                        placement_group=placement.get("GroupName") or None,
                        availability_zone=placement.get("AvailabilityZone", "unknown"),
                    )
            token = page.get("NextToken")
            if not token:
                break
    return found


def network_nodes(ec2: Any, instance_ids: Iterable[str]) -> dict[str, list[str]]:
    """Each instance's network nodes, top layer first (DescribeInstanceTopology); an instance EC2 has
    no topology for is absent."""
    ids = sorted(set(instance_ids))
    out: dict[str, list[str]] = {}
    for start in range(0, len(ids), TOPOLOGY_IDS_PER_CALL):
        chunk = ids[start : start + TOPOLOGY_IDS_PER_CALL]
        token: str | None = None
        while True:
            page = ec2.describe_instance_topology(InstanceIds=chunk, **({"NextToken": token} if token else {}))
            for inst in page.get("Instances", []):
                if inst.get("NetworkNodes"):
                    out[inst["InstanceId"]] = list(inst["NetworkNodes"])
            token = page.get("NextToken")
            if not token:
                break
    return out


def build_tree(instances: Mapping[str, Instance], topology: Mapping[str, list[str]]) -> list[Switch]:
    """Slurm switches: one per EC2 network node (leaves hold the nodes), a leaf per placement group or
    Availability Zone for instances without topology, and a root over the top switches when there is
    more than one. Switch names are short and stable (s<layer>-<n>) with the network node ID in a
    comment: Slurm parses names as host lists, and an ID's trailing digits are not a range."""
    children: dict[str, set[str]] = {}
    leaves: dict[str, list[str]] = {}
    layer_of: dict[str, int] = {}
    tops: list[str] = []
    for node in sorted(instances):
        chain = topology.get(instances[node].instance_id)
        if chain:
            for depth, network_node in enumerate(chain):
                layer_of.setdefault(network_node, depth + 1)
                if depth == 0 and network_node not in tops:
                    tops.append(network_node)
                if depth + 1 < len(chain):
                    children.setdefault(network_node, set()).add(chain[depth + 1])
            leaves.setdefault(chain[-1], []).append(node)
        else:
            inst = instances[node]
            fallback = f"pg-{inst.placement_group}" if inst.placement_group else f"az-{inst.availability_zone}"
            if fallback not in tops:
                tops.append(fallback)
            leaves.setdefault(fallback, []).append(node)
    names: dict[str, str] = {}
    counters: dict[int, int] = {}
    for network_node in sorted(layer_of, key=lambda n: (layer_of[n], n)):
        layer = layer_of[network_node]
        names[network_node] = f"s{layer}-{counters.get(layer, 0)}"
        counters[layer] = counters.get(layer, 0) + 1
    switches: list[Switch] = []
    for key in sorted(set(children) | set(leaves), key=lambda k: (-layer_of.get(k, 0), names.get(k, k))):
        name = names.get(key, key)
        comment = f"EC2 network node {key}" if key in layer_of else "no EC2 topology: " + key.replace("-", " ", 1)
        switches.append(
            Switch(
                name=name,
                nodes=sorted(leaves.get(key, [])),
                switches=sorted(names[c] for c in children.get(key, ())),
                comment=comment,
            )
        )
    if len(tops) > 1:
        switches.insert(0, Switch(name=ROOT, switches=sorted(names.get(t, t) for t in tops), comment="joins the top"))
    return switches


def render_topology(switches: list[Switch], cluster: str, static: Sequence[Switch] = ()) -> str:
    """topology.conf text; with no switch, only the header (slurmctld then runs without a tree)."""
    lines = [
        f"# topology.conf for {cluster}: written by gpuforge-slurm-topology on the controller from EC2",
        "# instance topology (DescribeInstanceTopology), placement group or zone where EC2 has none.",
    ]
    if static:
        lines.append("# The site's switches first, as rendered; the cloud's never join them (no job spans the link).")
    for switch in [*static, *switches]:
        children = f"Switches={','.join(switch.switches)}" if switch.switches else f"Nodes={','.join(switch.nodes)}"
        lines.append(f"SwitchName={switch.name} {children}  # {switch.comment}")
    return "\n".join(lines) + "\n"


def static_switches(rendered: Iterable[Mapping[str, str]]) -> list[Switch]:
    """The rendered site switches (slurm_config.topology.switches: name, switches, nodes, comment)."""
    return [
        Switch(
            name=sw["name"],
            nodes=[sw["nodes"]] if sw.get("nodes") else [],
            switches=[c for c in sw.get("switches", "").split(",") if c],
            comment=sw.get("comment", "") or "site fabric",
        )
        for sw in rendered
    ]


def topology_conf(
    ec2: Any,
    nodes: Mapping[str, str],
    cluster: str,
    static: Sequence[Switch] = (),
    static_nodes: Iterable[str] = (),
) -> tuple[str, list[str]]:
    """(topology.conf, warnings) for the Slurm nodes *nodes* (name -> address). EC2 errors degrade
    to the placement group fallback with a warning, never to no file. *static* switches (a hybrid
    site's) are kept as they are, and their *static_nodes* are not looked up in EC2."""
    warnings: list[str] = []
    site = set(static_nodes)
    nodes = {name: address for name, address in nodes.items() if name not in site}
    taken = {switch.name for switch in static}
    instances = instances_of(ec2, nodes)
    missing = sorted(set(nodes) - set(instances))
    if missing:
        warnings.append(f"no running EC2 instance has the address of node(s) {', '.join(missing)}: left out")
    try:
        topology = network_nodes(ec2, (i.instance_id for i in instances.values())) if instances else {}
    except Exception as error:  # any API failure: the fallback still gives a usable tree
        warnings.append(f"DescribeInstanceTopology failed ({error}): placement groups and zones only")
        topology = {}
    without = sorted(n for n, i in instances.items() if i.instance_id not in topology)
    if without and topology:
        warnings.append(f"no EC2 topology for {', '.join(without)}: placed by placement group or zone")
    cloud = build_tree(instances, topology)
    clashes = sorted(taken & {switch.name for switch in cloud})
    if clashes:  # a site switch named like an EC2 one would merge the two trees: keep the site's tree only
        warnings.append(f"site switch name(s) {', '.join(clashes)} clash with the cloud's: cloud nodes left out")
        cloud = []
    return render_topology(cloud, cluster, static), warnings
