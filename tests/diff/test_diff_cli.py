"""`gpuforge diff` and the Automation API commands through the CLI (typer's CliRunner)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuforge import deploy
from gpuforge.cli import app
from gpuforge.plan.stacks import find_project
from gpuforge.review.diff import load_side

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("plans")
    out = {}
    for name, stack in (
        ("dev", "dev"),
        ("prod", "prod"),
        ("rename", str(ROOT / "tests/fixtures/stacks/diff/dev-bucket-rename/Pulumi.dev.yaml")),
    ):
        path = tmp / f"{name}.json"
        result = runner.invoke(app, ["plan", stack, "--json", str(path), "--no-tree"])
        assert result.exit_code == 0, result.output
        out[name] = path
    return out


def test_plan_json_carries_the_cost_estimate(plans: dict[str, Path]) -> None:
    plan = json.loads(plans["prod"].read_text())
    assert plan["summary"]["monthly_cost_usd"] == plan["cost"]["total_monthly_usd"] > 0
    lines = {line["name"]: line for line in plan["cost"]["lines"]}
    assert lines["train"]["detail"] == "66 x p5.48xlarge (64 + 2 spare)"
    assert lines["forge-prod-data"]["monthly_usd"] is None  # bucket size unknown: said, not guessed
    assert any("data transfer" in item for item in plan["cost"]["not_counted"])


def test_diff_dev_to_prod_prints_gpu_power_and_cost(plans: dict[str, Path], tmp_path: Path) -> None:
    md, js = tmp_path / "d.md", tmp_path / "d.json"
    result = runner.invoke(
        app, ["diff", str(plans["dev"]), str(plans["prod"]), "--markdown", str(md), "--json", str(js)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(js.read_text())
    assert data["impact"]["totals"]["gpus"] == {"base": 8, "head": 512, "delta": 504}
    power = {side: json.loads(plans[side].read_text())["summary"]["power_kw"] for side in ("dev", "prod")}
    assert data["impact"]["totals"]["power_kw"]["delta"] == pytest.approx(power["prod"] - power["dev"], abs=0.01)
    # each side leaves out its own accounting database (no RDS price row): totals, and no delta between them
    cost = data["impact"]["totals"]["monthly_cost_usd"]
    assert cost["head"] > cost["base"] > 0 and cost["delta"] is None
    assert "not priced on one side only: forge-dev-slurm-db, forge-prod-slurm-db" in md.read_text()
    resources = {side: json.loads(plans[side].read_text())["resources"] for side in ("dev", "prod")}
    custom = {side: sum(r["custom"] for r in rs) for side, rs in resources.items()}
    assert (data["counts"]["delete"], data["counts"]["create"]) == (custom["dev"], custom["prod"])  # no URN in common
    text = md.read_text()
    assert "**GPUs +504**" in text and "[!WARNING]" in text and "two different stacks" in text


def test_diff_json_to_stdout_and_fail_on_data_loss(plans: dict[str, Path]) -> None:
    result = runner.invoke(app, ["diff", str(plans["dev"]), str(plans["rename"]), "--json", "-", "--fail-on-data-loss"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [r["name"] for r in data["impact"]["data_loss_risks"]] == ["forge-dev-data-bucket"]


def test_diff_bad_inputs_exit_2_without_traceback(tmp_path: Path) -> None:
    bogus = tmp_path / "x.json"
    bogus.write_text("{}")
    result = runner.invoke(app, ["diff", str(bogus), str(bogus)])
    assert result.exit_code == 2 and "not a plan JSON file" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(app, ["diff", "no-such-rev-xyz", "HEAD"])
    assert result.exit_code == 2 and "--stack" in result.output
    result = runner.invoke(app, ["diff", "no-such-rev-xyz", "HEAD", "--stack", "dev"])
    assert result.exit_code == 2 and "neither a plan JSON file nor a git revision" in result.output


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_diff_between_two_revisions_of_a_temporary_repo(tmp_path: Path) -> None:
    """Two commits of a copy of the project (its program, components, stacks): the second scales
    dev's elastic train group from a max of 2 to 4 nodes. Each side is planned in its own temporary worktree."""
    repo = tmp_path / "repo"
    ignore = shutil.ignore_patterns(
        ".venv", ".git", ".cache", "__pycache__", "*.egg-info", ".*_cache", "tests", "docs"
    )
    shutil.copytree(ROOT, repo, ignore=ignore)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base")
    stack = repo / "stacks" / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("          max: 2\n", "          max: 4\n", 1))
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "scale dev")

    base, base_label = load_side("HEAD~1", "dev", repo)
    head, head_label = load_side("HEAD", "dev", repo)
    assert base_label.startswith("HEAD~1 (") and head_label.startswith("HEAD (")
    assert base["summary"]["gpus"] == 8 and head["summary"]["gpus"] == 16
    worktrees = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True, check=True)
    assert len(worktrees.stdout.strip().splitlines()) == 1  # the temporary worktrees are gone


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_diff_real_head_against_the_working_tree_plan(plans: dict[str, Path]) -> None:
    """The repository's own HEAD, planned in a temporary worktree, against today's dev plan."""
    result = runner.invoke(app, ["diff", "HEAD", str(plans["dev"]), "--stack", "dev", "--json", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["base"].startswith("HEAD (") and data["impact"]["totals"]["gpus"]["head"] == 8


# --- preview / up / destroy / outputs ------------------------------------------------------------------


def test_engine_commands_without_the_cli_point_at_the_install_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deploy, "pulumi_cli", lambda: None)
    for argv in (["preview", "dev"], ["up", "dev"], ["outputs", "dev"], ["destroy", "dev", "--yes"]):
        result = runner.invoke(app, argv)
        assert result.exit_code == 2, argv
        assert "https://www.pulumi.com/docs/install/" in result.output
        assert "Traceback" not in result.output


def test_policy_packs_are_the_pack_directories() -> None:
    packs = deploy.policy_packs(find_project())
    assert all(Path(p, "PulumiPolicy.yaml").is_file() for p in packs)
    assert packs == sorted(str(p.parent) for p in (ROOT / "policies").glob("*/PulumiPolicy.yaml"))


@pytest.mark.skipif(
    shutil.which("pulumi") is None, reason="the Pulumi CLI is not installed (https://www.pulumi.com/docs/install/)"
)
def test_preview_through_the_automation_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real `pulumi preview` of dev on a local file backend; needs the CLI and AWS provider plugin."""
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path}")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "test")
    result = runner.invoke(app, ["preview", "dev"])
    assert result.exit_code == 0, result.output
    assert "forge-dev" in result.output
