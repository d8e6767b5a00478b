"""Site validators: a valid site resolves with its facts; each broken one names its field paths,
all problems at once (the invalid fixtures live in tests/fixtures/specs/invalid/, run by the corpus)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.spec import SpecError, resolve

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
    assert site.facility_kw == pytest.approx(1.35 * 8 * 10.2)
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


def test_feed_that_fits_only_on_a_plus_b_fails_n_plus_n() -> None:
    spec = lab_spec()
    # 40.8 kW: A+B at 0.8 x (26 + 26) = 41.6 kW would carry it; one side's 20.8 kW cannot.
    spec["site"]["racks"]["r02"]["feeds"] = {"a_kw": 26, "b_kw": 26}
    with pytest.raises(SpecError) as caught:
        resolve(spec)
    issues = {i.path: i for i in caught.value.issues}
    assert set(issues) == {"cluster.site.racks[r02].feeds.a_kw", "cluster.site.racks[r02].feeds.b_kw"}
    assert "no redundancy under N+N" in issues["cluster.site.racks[r02].feeds.a_kw"].message
    assert "51.0 kW" in issues["cluster.site.racks[r02].feeds.a_kw"].fix  # 40.8 / 0.8


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


def test_structural_rules_name_their_fields() -> None:
    spec = lab_spec()
    spec["site"]["fabric"]["partitions"]["llm"] = "0x0010"  # vision's key
    spec["site"]["hosts"]["dgx-a01"]["bmc_address"] = "not-an-ip"
    reported = paths(spec)
    assert "cluster.site.fabric.partitions" in reported
    assert "cluster.site.hosts[dgx-a01].bmc_address" in reported


def test_onprem_refuses_cloud_settings_and_aws_refuses_a_site() -> None:
    spec = lab_spec()
    spec["node_groups"] = {"train": {"instance_type": "p5.48xlarge", "count": 1}}
    assert "cluster.node_groups" in paths(spec)
    aws = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())["config"]["gpuforge:cluster"]
    aws["site"] = lab_spec()["site"]
    assert "cluster.site" in paths(aws)
