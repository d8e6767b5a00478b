"""Host ranges, rack ranges and address pools: expanded once, deterministically, into the hosts and racks a
site written host by host has; every problem of a range reported at once, at its field."""

from __future__ import annotations

from typing import Any

import pytest

from gpuforge.spec import SpecError, resolve
from gpuforge.spec.site_ranges import RangeError, expand_hostlist
from tests.onprem.test_site_model import lab_spec

FEEDS = {"a": 57.5, "b": 57.5, "c": 57.5}


def ranged_lab(hosts: str = "dgx-[001-015]", racks: str = "r[01-04]", mgmt: str = "10.64.4.0/22") -> dict[str, Any]:
    """The lab site with its racks and hosts as ranges: four racks of four DGX H100 in two scalable units."""
    spec = lab_spec()
    site = spec["site"]
    del site["hosts"], site["racks"]
    site["address_pools"] = {"mgmt": {"cidr": mgmt}, "bmc": {"cidr": "10.64.0.0/22", "first": "10.64.0.10"}}
    site["rack_ranges"] = {"r[01-04]": {"feeds": FEEDS, "cooling_kw": 50, "scalable_units": "su[1-2]"}}
    site["host_ranges"] = {
        hosts: {
            "racks": racks,
            "u_positions": [3, 11, 19, 27],
            "model": "dgx-h100",
            "management_pool": "mgmt",
            "bmc_pool": "bmc",
            "orchestrator": "slurm",
        },
    }
    site["fabric"]["spines"] = 8  # two SUs: 16 leaves x 32 uplinks
    return spec


def problems(spec: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    return {issue.path: issue.message for issue in caught.value.issues}


def test_hostlist_keeps_padding_and_lists() -> None:
    assert expand_hostlist("dgx-[0001-0003,0010]") == ["dgx-0001", "dgx-0002", "dgx-0003", "dgx-0010"]
    assert expand_hostlist("r[8-11]") == ["r8", "r9", "r10", "r11"]
    assert expand_hostlist("login-01") == ["login-01"]
    assert len(expand_hostlist("dgx-[00001-12500]")) == 12_500


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("dgx-[10-01]", "runs backwards; write 01-10"),
        ("dgx-[1-3]-[1-2]", "one bracket"),
        ("dgx-[a-c]", "'a-c' is not a number"),
        ("dgx-[1-3,2]", "dgx-2 more than once"),
        ("dgx-[1-9999999]", "more than 125,000"),
    ],
)
def test_bad_hostlists_say_what_to_write(pattern: str, says: str) -> None:
    with pytest.raises(RangeError, match=r".*") as caught:
        expand_hostlist(pattern)
    assert says in str(caught.value)


def test_ranges_expand_in_order_into_racks_hosts_and_addresses() -> None:
    site = resolve(ranged_lab()).site
    assert site is not None
    assert list(site.spec.racks) == ["r01", "r02", "r03", "r04"]
    assert [site.spec.racks[r].scalable_unit for r in site.spec.racks] == ["su1", "su1", "su2", "su2"]
    hosts = site.spec.hosts
    assert list(hosts)[:2] == ["dgx-001", "dgx-002"] and len(hosts) == 15
    first, fifth, last = hosts["dgx-001"], hosts["dgx-005"], hosts["dgx-015"]
    assert (first.rack, first.u_position, first.management_ip, first.bmc_address) == (
        "r01",
        3,
        "10.64.4.1",
        "10.64.0.10",
    )
    assert (fifth.rack, fifth.u_position, fifth.management_ip) == ("r02", 3, "10.64.4.5")
    assert (last.rack, last.u_position, last.bmc_address) == ("r04", 19, "10.64.0.24")
    # The resolved hosts are those of a site written host by host: catalog HCAs, SU, power.
    assert site.hosts["dgx-015"].scalable_unit == "su2" and len(site.hosts["dgx-015"].spec.hcas) == 8
    assert resolve(ranged_lab()).site.spec.hosts == hosts  # type: ignore[union-attr]  # deterministic


def test_range_problems_are_reported_together_at_their_fields() -> None:
    spec = ranged_lab(hosts="dgx-[001-020]", racks="r[01-05]", mgmt="10.64.4.0/28")
    spec["site"]["rack_ranges"]["r[01-04]"]["scalable_units"] = "su[1-3]"
    spec["site"]["host_ranges"]["dgx-[001-020]"]["bmc_pool"] = "oob"
    found = problems(spec)
    base = "cluster.site.host_ranges[dgx-[001-020]]"
    assert "4 racks do not split evenly over 3" in found["cluster.site.rack_ranges[r[01-04]].scalable_units"]
    assert "5 rack(s) not in site.racks" in found[f"{base}.racks"]
    assert (
        "has 14 addresses left" in found[f"{base}.management_pool"] and "needs 20" in found[f"{base}.management_pool"]
    )
    assert found[f"{base}.bmc_pool"] == "no address pool 'oob'"


def test_too_few_racks_and_overlapping_ranges() -> None:
    spec = ranged_lab(hosts="dgx-[001-017]")
    spec["site"]["host_ranges"]["dgx-[015-016]"] = dict(spec["site"]["host_ranges"]["dgx-[001-017]"])
    found = problems(spec)
    assert (
        "17 hosts at 4 per rack need 5 racks; r[01-04] names 4"
        in found["cluster.site.host_ranges[dgx-[001-017]].racks"]
    )
    assert "2 host(s) already declared" in found["cluster.site.host_ranges[dgx-[015-016]]"]


def test_a_listed_host_on_a_drawn_address_is_an_overlap() -> None:
    spec = ranged_lab()
    spec["site"]["racks"] = {"r99": {"feeds": FEEDS, "cooling_kw": 50, "scalable_unit": "su2"}}
    spec["site"]["hosts"] = {
        "dgx-x01": {
            "rack": "r99",
            "u_position": 3,
            "model": "dgx-h100",
            "bmc_address": "10.64.0.99",
            "management_ip": "10.64.4.3",
            "orchestrator": "slurm",
        },
    }
    found = problems(spec)
    assert any("10.64.4.3 is already" in message for message in found.values())


def test_generated_names_are_checked_like_written_ones() -> None:
    spec = ranged_lab()
    site = spec["site"]
    # Hostlist patterns may start with a digit; rack and scalable unit names (Name) may not.
    site["rack_ranges"] = {"0[1-4]": {**site["rack_ranges"]["r[01-04]"], "scalable_units": "1[1-2]"}}
    site["host_ranges"]["dgx-[001-015]"]["racks"] = "0[1-4]"
    found = problems(spec)
    assert found["cluster.site.rack_ranges[0[1-4]]"] == "'01' is not a valid rack name"
    assert found["cluster.site.rack_ranges[0[1-4]].scalable_units"] == "'11' is not a valid scalable unit name"
