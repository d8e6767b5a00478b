"""Site validators: a valid site resolves with its facts; each broken one names its field paths,
all problems at once (the invalid fixtures live in tests/fixtures/specs/invalid/, run by the corpus)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.spec import SpecError, resolve

ROOT = Path(__file__).resolve().parents[2]
INVALID = ROOT / "tests" / "fixtures" / "specs" / "invalid"


def lab_spec() -> dict[str, Any]:
    return copy.deepcopy(
        yaml.safe_load((ROOT / "stacks" / "Pulumi.onprem-lab.yaml").read_text())["config"]["gpuforge:cluster"]
    )


def paths(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    return [issue.path for issue in caught.value.issues]


def test_lab_site_resolves_with_hosts_racks_and_power() -> None:
    resolved = resolve(lab_spec())
    site = resolved.site
    assert site is not None and resolved.node_groups == {}
    assert len(site.hosts) == 8 and {h.scalable_unit for h in site.hosts.values()} == {"su1"}
    assert site.rack_load_kw("r01") == pytest.approx(4 * 10.2)
    assert site.hosts_kw == pytest.approx(8 * 10.2)
    assert site.fabric_switches == (8, 4) and site.switch_kw == pytest.approx(12 * 1.7)
    assert site.facility_kw == pytest.approx(1.35 * (8 * 10.2 + 12 * 1.7 + 10.5))
    assert resolved.pue == 1.35  # onprem: the site's measured PUE, not the catalog's average
    # No hcas in the stack: the catalog's DGX H100 compute ports in GPU (rail) order.
    dgx_h100 = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    assert site.hosts["dgx-a01"].spec.hcas_by_rail() == dgx_h100


def test_onprem_fixtures_cover_every_site_rule() -> None:
    names = {p.name for p in INVALID.glob("onprem-*.yaml")} | {p.name for p in INVALID.glob("hybrid-*.yaml")}
    assert {
        "onprem-host-in-unknown-rack.yaml",
        "onprem-overlapping-u-positions.yaml",
        "onprem-hcas-not-matching-rails.yaml",
        "onprem-rack-feed-not-n-plus-n.yaml",
        "onprem-leaf-ports-short.yaml",
        "hybrid-site-overlaps-vpc.yaml",
    } <= names


def test_many_site_problems_are_reported_together() -> None:
    spec = yaml.safe_load((INVALID / "onprem-many-problems-at-once.yaml").read_text())
    reported = paths(spec)
    assert len([p for p in reported if p.startswith("cluster.site.")]) >= 6


def test_dgx_h100_on_two_feeds_is_not_n_plus_n() -> None:
    """Six PSUs in 4+2 split 3+3 over A/B: losing a feed leaves 3 < 4, however large the feeds."""
    spec = lab_spec()
    spec["site"]["racks"]["r02"]["feeds"] = {"a": 100, "b": 100}
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    issues = [i for i in caught.value.issues]
    assert {i.path for i in issues} == {"cluster.site.racks[r02].feeds"}
    assert len(issues) == 2  # losing a, losing b
    assert "losing feed a: dgx-b01 keeps 3 of the 4 PSUs it needs" in issues[0].message
    assert "three feeds of two PSUs" in issues[0].fix


def test_three_feeds_too_small_for_half_the_rack() -> None:
    spec = lab_spec()
    # Enough PSUs survive, but 0.8 x 23 = 18.4 kW per feed cannot carry 40.8 / 2 = 20.4 kW.
    spec["site"]["racks"]["r02"]["feeds"] = {"a": 23, "b": 23, "c": 23}
    issues = {i.path: i for i in _issues(spec)}
    assert set(issues) == {f"cluster.site.racks[r02].feeds.{f}" for f in "abc"}
    assert "25.5 kW" in issues["cluster.site.racks[r02].feeds.a"].fix  # 20.4 / 0.8


def test_rail_islands_need_declaring_and_a_subnet_manager_each() -> None:
    spec = lab_spec()
    spec["site"]["fabric"]["spines"] = 0
    (no_spines,) = [i for i in _issues(spec) if i.path == "cluster.site.fabric.spines"]
    # Each message says where the rule comes from.
    assert "DGX SuperPOD Reference Architecture" in no_spines.message
    spec["site"]["fabric"]["rail_islands"] = True
    spec["site"]["fabric"]["island_subnet_managers"] = {str(r): ["ufm-01"] for r in range(6)} | {"9": ["ufm-09"]}
    issues = {i.path: i for i in _issues(spec)}
    assert "rail(s) 6, 7 have no subnet manager" in issues["cluster.site.fabric.island_subnet_managers"].message
    assert "one subnet manager is required on each InfiniBand subnet" in issues[
        "cluster.site.fabric.island_subnet_managers"
    ].message
    assert "ufm-09 not in subnet_managers" in issues["cluster.site.fabric.island_subnet_managers[9]"].message
    spec["site"]["fabric"]["island_subnet_managers"] = {str(r): ["ufm-01", "ufm-02"] for r in range(8)}
    resolve(spec)


def test_site_it_load_needs_switch_and_subnet_manager_power() -> None:
    spec = lab_spec()
    del spec["site"]["fabric"]["switch_power_kw"]
    del spec["site"]["equipment"]["ufm"]
    assert {"cluster.site.fabric.switch_power_kw", "cluster.site.equipment"} <= set(paths(spec))


def _issues(spec: dict[str, Any]) -> list[Any]:
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    return list(caught.value.issues)


def test_cooling_spines_partitions_and_addresses() -> None:
    spec = lab_spec()
    spec["site"]["racks"]["r01"]["cooling_kw"] = 30
    spec["site"]["racks"]["r02"]["scalable_unit"] = "su2"  # two SUs: 16 leaves x 32 uplinks need 512 spine ports
    spec["site"]["fabric"]["spines"] = 2
    spec["site"]["fabric"]["partitions"]["robotics"] = "0x0040"
    spec["site"]["hosts"]["dgx-a02"]["management_ip"] = "192.168.1.5"
    spec["site"]["hosts"]["dgx-a03"]["bmc_address"] = "10.64.0.11"  # dgx-a01's BMC
    assert set(paths(spec)) == {
        "cluster.site.racks[r01].cooling_kw",
        "cluster.site.fabric.spines",
        "cluster.site.fabric.partitions[robotics]",
        "cluster.site.hosts[dgx-a02].management_ip",
        "cluster.site.hosts[dgx-a03].bmc_address",
    }


def test_sharp_is_refused_until_gpuforge_installs_its_plugin_and_aggregation_manager() -> None:
    spec = lab_spec()
    spec["site"]["fabric"]["sharp"] = True
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    (issue,) = [i for i in caught.value.issues if i.path == "cluster.site.fabric"]
    assert "nccl-rdma-sharp-plugins" in issue.message and "sharp_am" in issue.message
    assert "set sharp: false" in issue.message


def test_structural_rules_name_their_fields() -> None:
    spec = lab_spec()
    spec["site"]["fabric"]["partitions"]["llm"] = "0x0010"  # vision's key
    spec["site"]["hosts"]["dgx-a01"]["bmc_address"] = "not-an-ip"
    reported = paths(spec)
    assert "cluster.site.fabric.partitions[llm]" in reported
    assert "cluster.site.hosts[dgx-a01].bmc_address" in reported


def test_onprem_refuses_cloud_settings_and_aws_refuses_a_site() -> None:
    spec = lab_spec()
    spec["node_groups"] = {"train": {"instance_type": "p5.48xlarge", "count": 1}}
    assert "cluster.node_groups" in paths(spec)
    aws = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())["config"]["gpuforge:cluster"]
    aws["site"] = lab_spec()["site"]
    assert "cluster.site" in paths(aws)


def test_lnet_interfaces_must_be_storage_ports_of_the_hosts_model() -> None:
    """ib0 is no interface of a stock DGX H100 (its storage ports are ibp170s0f0 and ibp41s0f0, User Guide
    Table 5): refused with the ports and the fix; interfaces on a tcp Lustre, malformed NIDs and mixed networks
    too, all at once."""
    spec = lab_spec()
    spec["site"]["storage"]["mounts"]["scratch"]["lnet_interfaces"] = ["ib0"]
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    base = "cluster.site.storage.mounts"
    (scratch,) = caught.value.issues
    assert scratch.path == f"{base}[scratch].lnet_interfaces[0]"
    assert "ib0 is not a storage port of dgx-h100" in scratch.message
    assert "ibp170s0f0 (Slot1 P1, mlx5_7)" in scratch.message and "Table 5" in scratch.message
    assert "remove lnet_interfaces" in scratch.fix

    spec = lab_spec()
    mounts = spec["site"]["storage"]["mounts"]
    mounts["tcp"] = {"kind": "lustre", "mgs_nids": ["10.64.8.12@tcp"], "fsname": "t1", "mount_point": "/t",
                     "lnet_interfaces": ["ib0"]}  # fmt: skip
    mounts["mixed"] = {"kind": "lustre", "mgs_nids": ["10.64.8.13@o2ib", "10.64.8.14@o2ib1"], "fsname": "m1",
                       "mount_point": "/m", "lnet_interfaces": ["ib0"]}  # fmt: skip
    mounts["bad"] = {"kind": "lustre", "mgs_nids": ["10.64.8.15"], "fsname": "b1", "mount_point": "/b",
                     "lnet_interfaces": ["ib 0"]}  # fmt: skip
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    paths = {i.path for i in caught.value.issues}
    assert paths == {f"{base}[tcp].lnet_interfaces", f"{base}[mixed].mgs_nids", f"{base}[bad].mgs_nids",
                     f"{base}[bad].lnet_interfaces"}  # fmt: skip


def test_storage_addresses_are_the_ipoib_addressing_and_the_lnet_nids() -> None:
    """With a storage network, every host has one address per storage port of its model, inside the network and
    its own; the MGS NIDs are on it. The plan's hosts carry the IPoIB addresses and the NIDs derived from them."""
    spec = lab_spec()
    site = spec["site"]
    site["storage"]["network"] = {"cidr": "10.64.16.0/22"}
    site["storage"]["mounts"]["scratch"]["mgs_nids"] = ["10.64.16.10@o2ib"]
    names = sorted(site["hosts"])
    for i, name in enumerate(names):
        site["hosts"][name]["storage_ips"] = [f"10.64.16.{20 + i}", f"10.64.17.{20 + i}"]
    resolved = resolve(spec)
    from gpuforge.infra.onprem.placement import pool_outputs

    assert resolved.site is not None
    host = pool_outputs(resolved.site)["train"]["hosts"][names[0]]
    assert host["storageAddresses"] == {"ibp170s0f0": "10.64.16.20/22", "ibp41s0f0": "10.64.17.20/22"}
    assert host["lnetNids"] == {"o2ib": ["10.64.16.20@o2ib", "10.64.17.20@o2ib"]}

    site["hosts"][names[0]]["storage_ips"] = ["10.64.16.21"]  # one port short, and dgx's second host's address
    site["hosts"][names[1]]["storage_ips"] = ["10.64.16.21", "10.72.0.9"]
    del site["hosts"][names[2]]["storage_ips"]
    site["storage"]["mounts"]["scratch"]["mgs_nids"] = ["10.64.8.10@o2ib"]
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    paths = {i.path for i in caught.value.issues}
    hosts = "cluster.site.hosts"
    assert paths == {f"{hosts}[{names[0]}].storage_ips", f"{hosts}[{names[1]}].storage_ips[0]",
                     f"{hosts}[{names[1]}].storage_ips[1]", f"{hosts}[{names[2]}].storage_ips",
                     "cluster.site.storage.mounts[scratch].mgs_nids[0]"}  # fmt: skip
    short = next(i for i in caught.value.issues if i.path == f"{hosts}[{names[2]}].storage_ips")
    assert "0 address(es) for the 2 storage ports of a dgx-h100" in short.message and "LNet NID" in short.message
