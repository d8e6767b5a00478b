"""The site's compute-fabric cabling plan as a CSV NetBox imports (issue 28, item 5).

One row per cable from a host's HCA to its rail leaf: a rail-optimized site has a leaf per rail per scalable
unit (site_checks), the host's HCA on rail r goes to the rail-r leaf of its SU, and the hosts of an SU take
the leaves' host ports in name order (port 1 for the first host): the leaf's remaining host ports, the
`reserved_leaf_ports` among them, stay free for the subnet managers. On two tiers, then one row per leaf uplink:
a leaf's uplinks are its last `uplinks` ports, uplink k going to spine k mod spines (`spine<n>`), each spine's
ports filled in leaf order, so every leaf reaches every spine evenly. Three tiers (spine groups and cores) are not
cabled here yet.

The columns are NetBox's cable bulk import fields (netbox-community/netbox netbox/dcim/forms/bulk_import.py,
`CableImportForm.Meta.fields`, at tag v4.6.8): terminations by site, device, type (`dcim.interface`) and name,
`status` planned, and a `label` per cable. Device and interface names are gpuforge's (the host's name and HCA;
the leaf `<su>-rail<r>` and port `port<n>`): the devices and interfaces must exist in NetBox under these names
before the cables import.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict

from gpuforge.spec.resolved_site import ResolvedHost, ResolvedSite

CABLE_COLUMNS = (
    "side_a_site",
    "side_a_device",
    "side_a_type",
    "side_a_name",
    "side_b_site",
    "side_b_device",
    "side_b_type",
    "side_b_name",
    "status",
    "label",
)
INTERFACE = "dcim.interface"  # NetBox's content type of a device interface termination
PLANNED = "planned"  # NetBox LinkStatusChoices: a cable drawn but not yet installed


def leaf_name(scalable_unit: str, rail: int) -> str:
    return f"{scalable_unit}-rail{rail}"


def switch_port(index: int) -> str:
    return f"port{index}"


def spine_name(index: int, spines: int) -> str:
    return f"spine{index:0{len(str(spines))}d}"


def _cable(site: str, a: tuple[str, str], b: tuple[str, str]) -> dict[str, str]:
    return {
        "side_a_site": site,
        "side_a_device": a[0],
        "side_a_type": INTERFACE,
        "side_a_name": a[1],
        "side_b_site": site,
        "side_b_device": b[0],
        "side_b_type": INTERFACE,
        "side_b_name": b[1],
        "status": PLANNED,
        "label": f"{a[0]}:{a[1]}-{b[0]}:{b[1]}",
    }


def cabling_rows(site: ResolvedSite) -> list[dict[str, str]]:
    """Every host-to-leaf cable of the compute fabric, hosts in name order within their SU; then, on two tiers,
    every leaf-to-spine cable."""
    fabric = site.spec.fabric
    if fabric is None:
        return []
    by_su: dict[str, list[ResolvedHost]] = defaultdict(list)
    for host in sorted(site.hosts.values(), key=lambda h: h.name):
        if host.spec.hcas:
            by_su[host.scalable_unit].append(host)
    rows = []
    for su in sorted(by_su):
        for index, host in enumerate(by_su[su], start=1):
            for hca, rail in sorted(host.spec.hcas.items(), key=lambda item: item[1]):
                rows.append(_cable(site.spec.name, (host.name, hca), (leaf_name(su, rail), switch_port(index))))
    if fabric.spines and not fabric.cores:
        next_port = dict.fromkeys(range(1, fabric.spines + 1), 1)
        for su in sorted(by_su):
            for rail in range(fabric.rails):
                for k in range(fabric.uplinks):
                    spine = k % fabric.spines + 1
                    rows.append(
                        _cable(
                            site.spec.name,
                            (leaf_name(su, rail), switch_port(fabric.downlinks + k + 1)),
                            (spine_name(spine, fabric.spines), switch_port(next_port[spine])),
                        )
                    )
                    next_port[spine] += 1
    return rows


def cabling_csv(site: ResolvedSite) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CABLE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(cabling_rows(site))
    return buffer.getvalue()
