"""The site's compute-fabric cabling plan as a CSV NetBox imports (issue 28, item 5).

One row per cable from a host's HCA to its rail leaf: a rail-optimized site has a leaf per rail per scalable
unit (site_checks), the host's HCA on rail r goes to the rail-r leaf of its SU, and the hosts of an SU take
the leaves' host ports in name order (port 1 for the first host): the leaf's remaining ports, the
`reserved_leaf_ports` among them, stay free for the subnet managers and uplinks.

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


def leaf_port(index: int) -> str:
    return f"port{index}"


def cabling_rows(site: ResolvedSite) -> list[dict[str, str]]:
    """Every host-to-leaf cable of the compute fabric, hosts in name order within their SU."""
    if site.spec.fabric is None:
        return []
    by_su: dict[str, list[ResolvedHost]] = defaultdict(list)
    for host in sorted(site.hosts.values(), key=lambda h: h.name):
        if host.spec.hcas:
            by_su[host.scalable_unit].append(host)
    rows = []
    for su in sorted(by_su):
        for index, host in enumerate(by_su[su], start=1):
            for hca, rail in sorted(host.spec.hcas.items(), key=lambda item: item[1]):
                leaf = leaf_name(su, rail)
                rows.append(
                    {
                        "side_a_site": site.spec.name,
                        "side_a_device": host.name,
                        "side_a_type": INTERFACE,
                        "side_a_name": hca,
                        "side_b_site": site.spec.name,
                        "side_b_device": leaf,
                        "side_b_type": INTERFACE,
                        "side_b_name": leaf_port(index),
                        "status": PLANNED,
                        "label": f"{host.name}:{hca}-{leaf}:{leaf_port(index)}",
                    }
                )
    return rows


def cabling_csv(site: ResolvedSite) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CABLE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(cabling_rows(site))
    return buffer.getvalue()
