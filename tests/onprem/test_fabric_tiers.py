"""The fabric checked tier by tier: NVIDIA's reference designs (the catalog's fabric_reference.yaml) pass, one
switch or one node past them fails with the numbers, and a two-tier fabric past a spine's reach fails."""

from __future__ import annotations

from typing import Any

import pytest

from gpuforge.catalog.fabric_reference import ReferenceDesign, load_fabric_reference
from gpuforge.spec import SpecError, resolve
from tests.onprem.test_site_model import lab_spec

REFERENCE = load_fabric_reference()
FEEDS = {"a": 57.5, "b": 57.5, "c": 57.5}


def superpod(units: int, nodes: int, *, spines: int, cores: int = 0, reserved: int = 1) -> dict[str, Any]:
    """The lab stack as a SuperPOD of *units* SUs (eight racks of four DGX H100 each) holding *nodes* DGX, the
    first SU's leaves holding *reserved* ports each for the UFM appliances."""
    spec = lab_spec()
    site = spec["site"]
    del site["hosts"], site["racks"]
    racks = units * REFERENCE.su_nodes // 4
    site["cidrs"] = ["10.64.0.0/16"]
    site["power"]["budget_kw"] = 1_000_000
    site["address_pools"] = {"mgmt": {"cidr": "10.64.64.0/18"}, "oob": {"cidr": "10.64.128.0/18"}}
    site["rack_ranges"] = {
        f"r[0001-{racks:04d}]": {"feeds": FEEDS, "cooling_kw": 50, "scalable_units": f"su[01-{units:02d}]"}
    }
    site["host_ranges"] = {
        # The first SU one DGX short per reserved port: its last rack holds three.
        f"dgx-[0001-{nodes:04d}]": {
            "racks": f"r[0001-{racks:04d}]",
            "u_positions": [3, 11, 19, 27],
            "model": "dgx-h100",
            "management_pool": "mgmt",
            "bmc_pool": "oob",
            "orchestrator": "slurm",
        }
    }
    site["fabric"].update(
        spines=spines,
        cores=cores,
        leaf_ports=REFERENCE.switch_ports,
        spine_ports=REFERENCE.switch_ports,
        core_ports=REFERENCE.switch_ports,
    )
    if reserved:
        site["fabric"]["reserved_leaf_ports"] = {"su01": reserved}
    return spec


def fabric_problems(spec: dict[str, Any]) -> dict[str, str]:
    try:
        resolve(spec)
    except SpecError as error:
        return {i.path: i.message for i in error.issues if i.path.startswith("cluster.site.fabric")}
    return {}


def shifted(spec: dict[str, Any], first_su_nodes: int) -> dict[str, Any]:
    """Put the first SU's hosts at the start and every later SU full: the reference's node count lays out
    as 31 + 32 + 32 ...; the host range fills racks in order, so start SU 1's last rack one short."""
    site = spec["site"]
    ((pattern, hosts),) = site["host_ranges"].items()
    total = int(pattern.split("-")[-1].rstrip("]"))
    racks = hosts["racks"]
    last = int(racks.split("-")[-1].rstrip("]"))
    site["host_ranges"] = {
        f"dgx-[0001-{first_su_nodes:04d}]": {**hosts, "racks": "r[0001-0008]"},
    }
    if total > first_su_nodes:
        site["host_ranges"][f"dgx-[{first_su_nodes + 1:04d}-{total:04d}]"] = {**hosts, "racks": f"r[0009-{last:04d}]"}
    return spec


def reference_site(design: ReferenceDesign, **change: int) -> dict[str, Any]:
    values = {"spines": design.spines, "cores": design.cores, "nodes": design.nodes, **change}
    first = REFERENCE.su_nodes - design.reserved_leaf_ports + (values["nodes"] - design.nodes)
    spec = superpod(
        design.scalable_units,
        values["nodes"],
        spines=values["spines"],
        cores=values["cores"],
        reserved=design.reserved_leaf_ports,
    )
    return shifted(spec, first)


@pytest.mark.parametrize("design", REFERENCE.designs, ids=lambda d: f"{d.scalable_units}su")
def test_reference_designs_pass_and_fail_one_short(design: ReferenceDesign) -> None:
    assert fabric_problems(reference_site(design)) == {}
    one_node_more = fabric_problems(reference_site(design, nodes=design.nodes + 1))
    assert (
        "scalable unit su01: 32 hosts and 1 held for subnet managers need 33"
        in one_node_more["cluster.site.fabric.leaf_ports"]
    )
    assert "cluster.site.fabric.spines" in fabric_problems(reference_site(design, spines=design.spines - 1))
    if design.cores:
        short = fabric_problems(reference_site(design, cores=design.cores - 1))
        assert short["cluster.site.fabric.cores"] == (
            f"{design.spines} spines x 32 uplinks need {design.cores * 64} core ports; "
            f"{design.cores - 1} cores have {(design.cores - 1) * 64}"
        )


def test_two_tiers_past_a_spines_reach_fail_with_the_numbers() -> None:
    # 32 SUs = 256 leaves on 128 64-port spines: the ports add up (256 x 32 = 128 x 64), the reach does not.
    found = fabric_problems(shifted(superpod(32, 32 * 32 - 1, spines=128), 31))
    assert found["cluster.site.fabric.cores"].startswith(
        "256 leaves (32 scalable units x 8 rails) on two tiers: a 64-port spine reaches at most 64 leaves"
    )
    assert "cluster.site.fabric.spines" not in found


def test_three_tiers_stop_at_a_cores_reach() -> None:
    # 32 SUs with spines 24 down / 40 up: 3 SUs per spine group, 11 groups; an 8-port core reaches 8.
    spec = shifted(superpod(32, 32 * 32 - 1, spines=342, cores=1710), 31)
    spec["site"]["fabric"].update(spine_uplinks=40, core_ports=8)
    assert fabric_problems(spec) == {
        "cluster.site.fabric.core_ports": "11 spine groups: an 8-port core reaches at most 8, so the fabric stops at "
        "24 scalable units of 8 leaves; it has 32"
    }
    # Spines 56 down / 8 up: 7 SUs per group, 5 groups of 32 spines each (the last, 4 SUs, 19), 7:1 at the spines.
    spec = shifted(superpod(32, 32 * 32 - 1, spines=147, cores=19), 31)
    spec["site"]["fabric"].update(spine_uplinks=8)
    assert fabric_problems(spec) == {}
    fabric = resolve(spec).site.spec.fabric  # type: ignore[union-attr]
    assert fabric is not None and fabric.spine_oversubscription == 7.0 and fabric.units_per_pod == 7


def test_reserved_ports_name_a_scalable_unit_and_spine_uplinks_need_cores() -> None:
    spec = superpod(1, 31, spines=4)
    spec["site"]["fabric"]["reserved_leaf_ports"] = {"su9": 1}
    assert fabric_problems(spec)["cluster.site.fabric.reserved_leaf_ports[su9]"] == "no scalable unit 'su9'"
    spec = superpod(1, 31, spines=4)
    spec["site"]["fabric"]["spine_uplinks"] = 16
    with pytest.raises(SpecError, match="spine_uplinks without cores"):
        resolve(spec)
