from __future__ import annotations

import ipaddress

from gpuforge.spec.models import Network
from gpuforge.spec.subnets import plan_subnets


def network(**kwargs: object) -> Network:
    return Network.model_validate({"cidr": "10.0.0.0/16", "availability_zones": ["us-east-1a", "us-east-1b"], **kwargs})


def test_default_plan_fits_without_overlap() -> None:
    subnets, issues = plan_subnets(network())
    assert issues == []
    assert len(subnets) == 8
    blocks = list(subnets.values())
    assert all(b.subnet_of(ipaddress.IPv4Network("10.0.0.0/16")) for b in blocks)
    assert not any(a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1 :])
    assert subnets[("compute", "us-east-1a")].prefixlen == 18


def test_reordering_azs_changes_nothing() -> None:
    forward, _ = plan_subnets(network())
    backward, _ = plan_subnets(network(availability_zones=["us-east-1b", "us-east-1a"]))
    assert forward == backward


def test_explicit_cidrs_are_kept_and_planned_around() -> None:
    subnets, issues = plan_subnets(
        network(tiers={"compute": {"cidrs": {"us-east-1a": "10.0.0.0/18", "us-east-1b": "10.0.64.0/18"}}})
    )
    assert issues == []
    assert str(subnets[("compute", "us-east-1a")]) == "10.0.0.0/18"
    others = [b for (tier, _), b in subnets.items() if tier != "compute"]
    assert not any(b.overlaps(ipaddress.IPv4Network("10.0.0.0/17")) for b in others)
