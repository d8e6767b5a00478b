"""Cost a user can budget with: every billed resource of the plan is priced or named as left out, elastic
groups are a min..max range, `diff` gives the delta when both totals leave out the same things, and
`diff --fail-on-compute-loss` stops a pull request that terminates nodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuforge.cli import app

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
