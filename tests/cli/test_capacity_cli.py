"""`gpuforge capacity` as a user meets it: the terminal answer, --json and --markdown, a stack's PUE, budget,
catalog overrides and training node type, exit 1 when the run does not fit the budget, 2 for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from gpuforge.cli import app

runner = CliRunner()
PROD = Path(__file__).resolve().parents[2] / "stacks" / "Pulumi.prod.yaml"
RUN = ["--params", "70B", "--tokens", "2T"]


def _stack(tmp_path: Path, budget_kw: float) -> Path:
    """prod with a budget, PUE and p5 price of the test's own, so the figures below do not follow prod's edits."""
    doc = yaml.safe_load(PROD.read_text())
    cluster = doc["config"]["gpuforge:cluster"]
    cluster["power"] = {**cluster.get("power", {}), "budget_kw": budget_kw, "pue": 1.25}
    cluster["catalog"] = {"prices": {"instances": {"p5.48xlarge": {"hourly_usd": 50.0}}}}
    path = tmp_path / "Pulumi.capacity.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_terminal_answer_names_figures_sources_and_assumptions() -> None:
    result = runner.invoke(app, ["capacity", *RUN, "--node-type", "p5.48xlarge", "--days", "30", "--mfu", "0.4"])
    assert result.exit_code == 0, result.output
    assert "8.4e+23 FLOP in bf16" in result.output
    assert "p5.48xlarge" in result.output and "103" in result.output  # nodes: worked in test_capacity_planner
    assert "Kaplan et al. 2020" in result.output and "given (--mfu)" in result.output
    assert "assumptions:" in result.output


def test_json_carries_every_figure_with_its_basis_and_a_stack_s_facts(tmp_path: Path) -> None:
    """The stack's PUE (1.25), budget and price override reach the figures; without --node-type the stack's
    training group (p5.48xlarge) is estimated. 16 nodes: 16 x 10.2 kW x 1.25 = 204 kW of a 500 kW budget."""
    result = runner.invoke(app, ["capacity", str(_stack(tmp_path, 500)), *RUN, "--nodes", "16", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["facility"]["pue"] == 1.25 and doc["facility"]["budget_kw"] == 500
    assert doc["facility"]["budget_source"] == "the stack's power.budget_kw"
    [p5] = doc["estimates"]
    assert p5["node_type"] == "p5.48xlarge" and p5["over_budget"] is False
    figures = p5["figures"]
    assert figures["peak_facility_kw"]["value"] == 204.0
    assert figures["budget_share"]["value"] == 204.0 / 500
    assert "50/h" in figures["cost_on_demand"]["basis"]
    assert all(figure["basis"] for figure in figures.values())
    assert doc["assumptions"]


def test_exit_1_when_the_run_does_not_fit_the_budget(tmp_path: Path) -> None:
    """64 nodes x 10.2 kW x 1.25 = 816 kW against a 500 kW budget."""
    result = runner.invoke(app, ["capacity", str(_stack(tmp_path, 500)), *RUN, "--nodes", "64"])
    assert result.exit_code == 1, result.output
    assert "exceeds the budget" in result.output


def test_compare_puts_the_catalog_s_node_types_side_by_side_and_says_what_it_skipped() -> None:
    result = runner.invoke(app, ["capacity", *RUN, "--days", "60", "--compare", "--json"])
    assert result.exit_code == 0, result.output
    estimates = {e["node_type"]: e for e in json.loads(result.stdout)["estimates"]}
    assert {"p4de.24xlarge", "p5.48xlarge", "p5en.48xlarge", "dgx-h100"} <= {
        name for name, e in estimates.items() if "figures" in e
    }
    assert "pass --mfu" in estimates["p6-b200.48xlarge"]["skipped"]
    assert estimates["p6-b200.48xlarge"]["skipped_for"] == "--mfu"
    # the same run needs fewer H100 nodes than A100 nodes
    assert (
        estimates["p5.48xlarge"]["figures"]["nodes"]["value"] < estimates["p4de.24xlarge"]["figures"]["nodes"]["value"]
    )


def test_markdown_for_a_pr(tmp_path: Path) -> None:
    path = tmp_path / "out" / "capacity.md"
    result = runner.invoke(
        app, ["capacity", "--flops", "8.4e23", "--node-type", "dgx-h100", "--nodes", "32", "--markdown", str(path)]
    )
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert text.startswith("## Capacity")
    assert "| dgx-h100 (8 x H100) |" in text and "server model (owned hardware)" in text
    assert "Where each figure comes from" in text


def test_bad_input_is_every_problem_at_once_exit_2_no_traceback() -> None:
    result = runner.invoke(app, ["capacity", "--params", "seventy", "--mfu", "2", "--node-type", "p5.48xlarge"])
    assert result.exit_code == 2
    assert "invalid options" in result.output
    for option in ("--params: 'seventy'", "--tokens", "--mfu: 2", "--days"):
        assert option in result.output
    assert "Traceback" not in result.output


def test_a_node_type_that_cannot_answer_is_bad_input() -> None:
    result = runner.invoke(app, ["capacity", *RUN, "--node-type", "p4d.24xlarge", "--precision", "fp8", "--nodes", "8"])
    assert result.exit_code == 2
    assert "--precision: no peak dense fp8 figure for A100" in result.output


def test_help_teaches_the_method() -> None:
    result = runner.invoke(app, ["capacity", "--help"])
    assert result.exit_code == 0
    for words in ("6 x N x D", "Kaplan", "--compare", "Capacity Block", "Exit 0"):
        assert words in result.output


def test_the_hybrid_stack_estimates_its_site_and_its_cloud_nodes_under_their_own_pue() -> None:
    result = runner.invoke(app, ["capacity", "hybrid", *RUN, "--nodes", "2", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    estimates = {e["node_type"]: e for e in doc["estimates"]}
    assert set(estimates) == {"dgx-h100", "p5.48xlarge"}, result.output  # the site's hosts and the cloud group
    site, cloud = doc["facility"]["site"], doc["facility"]
    assert f"PUE {site['pue']:g}" in estimates["dgx-h100"]["figures"]["peak_facility_kw"]["basis"]
    assert f"PUE {cloud['pue']:g}" in estimates["p5.48xlarge"]["figures"]["peak_facility_kw"]["basis"]
    assert site["pue"] != cloud["pue"]
