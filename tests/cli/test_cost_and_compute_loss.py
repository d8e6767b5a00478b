"""Cost a user can budget with: every billed resource of the plan is priced or named as left out, elastic
groups are a min..max range, `diff` gives the delta when both totals leave out the same things, and
`diff --fail-on-compute-loss` stops a pull request that terminates nodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuforge.catalog import load_catalog
from gpuforge.catalog.tokens import NODE_GROUP
from gpuforge.cli import app
from gpuforge.plan.cost import estimate_cost

ROOT = Path(__file__).resolve().parents[2]
DIFF_STACKS = ROOT / "tests" / "fixtures" / "stacks" / "diff"
runner = CliRunner()


def plan(stack: str | Path, out: Path) -> dict:
    result = runner.invoke(app, ["plan", str(stack), "--no-tree", "--json", str(out)], env={"COLUMNS": "250"})
    assert result.exit_code in (0, 1), result.output  # prod-scale-up is blocked by a policy: still planned
    document: dict = json.loads(out.read_text())
    return document


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("plans")
    stacks = {
        "dev": "dev",
        "prod": "prod",
        "staging": "staging",
        "prod-scale-up": DIFF_STACKS / "prod-scale-up" / "Pulumi.prod.yaml",
        "dev-group-rename": DIFF_STACKS / "dev-group-rename" / "Pulumi.dev.yaml",
        "dev-group-renamed-from": DIFF_STACKS / "dev-group-renamed-from" / "Pulumi.dev.yaml",
    }
    for name, stack in stacks.items():
        plan(stack, where / f"{name}.json")
    return {name: where / f"{name}.json" for name in stacks}


def test_prod_prices_its_controllers_and_names_what_it_leaves_out(plans: dict[str, Path]) -> None:
    cost = json.loads(plans["prod"].read_text())["cost"]
    lines = {line["name"]: line for line in cost["lines"]}
    controller = lines["forge-prod-slurm-forge-prod-ctl-0"]
    assert (controller["kind"], controller["detail"]) == ("instance", "1 x m7i.2xlarge")
    assert controller["monthly_usd"] == round(0.4032 * 730, 2)
    assert cost["unpriced"] == ["forge-prod-slurm-db"]  # RDS: no sourced row, said rather than dropped
    assert lines["forge-prod-slurm-db"]["detail"] == "db.m7g.large Multi-AZ, 50 GiB"
    assert {"forge-prod-slurm-home", "forge-prod-slurm-state"} <= set(cost["size_unknown"])
    assert "2 x NAT gateway: per hour and per GB processed" in cost["not_priced_resources"]
    assert lines["services"]["monthly_usd"] is not None


def test_a_capacity_block_group_is_priced_at_the_block_rate_for_the_whole_block(plans: dict[str, Path]) -> None:
    """staging's train group: a block of 9 p5.48xlarge from 2026-12-01T11:30Z to 2026-12-15T11:30Z (336 h), at the
    catalog's Capacity Block rate ($39.33/h, prices.reservations), every instance of the block for its window:
    9 x 39.33 x 336 = 118,933.92, not on-demand (9 x 55.04 x 730)."""
    cost = json.loads(plans["staging"].read_text())["cost"]
    gpu = next(line for line in cost["lines"] if line["name"] == "train")
    assert gpu["monthly_usd"] == 118_933.92
    assert gpu["detail"] == "9 x p5.48xlarge (Capacity Block 2026-12-01T11:30:00Z to 2026-12-15T11:30:00Z, 336 h)"
    assert "Capacity Block rate 39.33 USD/h (2024-12)" in gpu["basis"]
    assert "discount_fraction not applied" in gpu["basis"]
    assert not any("priced at on-demand" in caveat for caveat in cost["caveats"])


def test_a_capacity_block_without_a_block_rate_falls_back_to_on_demand_and_says_so() -> None:
    prices = load_catalog().prices
    assert prices is not None
    group = {
        "type": NODE_GROUP,
        "name": "gpu",
        "inputs": {
            "nodeGroup": "gpu",
            "instanceType": "p5.48xlarge",
            "count": 2,
            "spares": 0,
            "capacity": "capacity_block",
            "capacityWindow": {"start": "2026-12-01T11:30:00Z", "end": "2026-12-02T11:30:00Z"},
            "capacityBlockInstances": 2,
        },
    }
    with_rate = estimate_cost([group], prices)
    assert with_rate.lines[0].monthly_usd == round(2 * 39.33 * 24, 2)  # a one-day block of two
    # p5e.48xlarge has a Capacity Block rate (us-east-2, unverified) and no on-demand row: the block is priced.
    p5e = estimate_cost([{**group, "inputs": {**group["inputs"], "instanceType": "p5e.48xlarge"}}], prices)
    assert prices.instance("p5e.48xlarge") is None
    assert (p5e.lines[0].monthly_usd, p5e.lines[0].verified) == (round(2 * 43.26 * 24, 2), False)
    without = estimate_cost([group], prices.model_copy(update={"reservations": {}}))
    assert without.lines[0].monthly_usd == round(2 * 55.04 * 730, 2)
    assert any("priced at on-demand" in caveat and "gpu" in caveat for caveat in without.caveats)


def test_an_elastic_group_is_a_range_not_active_at_its_max(plans: dict[str, Path]) -> None:
    cost = json.loads(plans["dev"].read_text())["cost"]
    train = next(line for line in cost["lines"] if line["name"] == "train")
    assert train["detail"].startswith("0-2 x g5.12xlarge (elastic: 0 always, up to 2")
    assert (train["monthly_min_usd"], train["monthly_usd"]) == (0.0, round(2 * 5.672 * 730, 2))
    assert cost["total_min_monthly_usd"] == round(cost["total_monthly_usd"] - train["monthly_usd"], 2)
    result = runner.invoke(app, ["plan", "dev", "--no-tree"], env={"COLUMNS": "250"})
    assert "1 active + 0 spare + elastic 0-2 (following the queue)" in result.output
    assert f"${cost['total_min_monthly_usd']:,.0f}..${cost['total_monthly_usd']:,.0f} (elastic groups min..max)" in (
        result.output
    )


def test_diff_gives_the_cost_delta_when_both_totals_leave_out_the_same(plans: dict[str, Path], tmp_path: Path) -> None:
    markdown = tmp_path / "diff.md"
    result = runner.invoke(
        app, ["diff", str(plans["prod"]), str(plans["prod-scale-up"]), "--json", "-", "--markdown", str(markdown)]
    )
    assert result.exit_code == 0, result.output
    cost = json.loads(result.stdout)["impact"]["totals"]["monthly_cost_usd"]
    assert cost["delta"] == round(cost["head"] - cost["base"], 2) and cost["delta"] > 0
    text = markdown.read_text()
    assert "cost: both totals leave out forge-prod-slurm-db (not priced)" in text
    assert "| forge-prod-slurm-db | db.m7g.large Multi-AZ, 50 GiB | not priced | not priced | |" in text


def test_fail_on_compute_loss(plans: dict[str, Path]) -> None:
    rename = runner.invoke(app, ["diff", str(plans["dev"]), str(plans["dev-group-rename"]), "--fail-on-compute-loss"])
    assert rename.exit_code == 1
    assert "compute loss: 2 nodes (8 GPUs) terminated" in rename.output
    # renamed_from keeps the group's resources (aliases): its nodes roll, none is terminated outright
    kept = runner.invoke(
        app, ["diff", str(plans["dev"]), str(plans["dev-group-renamed-from"]), "--fail-on-compute-loss"]
    )
    assert kept.exit_code == 0, kept.output
    assert "2 nodes roll" in kept.output
    without = runner.invoke(app, ["diff", str(plans["dev"]), str(plans["dev-group-rename"])])
    assert without.exit_code == 0
