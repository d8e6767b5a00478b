"""Paths and places a user gives: a missing folder is created, an unwritable path or a directory outside
any project is a sentence with exit 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuforge.cli import app

runner = CliRunner()


def test_plan_writes_json_and_markdown_into_missing_folders(tmp_path: Path) -> None:
    json_file, markdown = tmp_path / "out" / "plans" / "dev.json", tmp_path / "md" / "dev.md"
    result = runner.invoke(app, ["plan", "dev", "--no-tree", "--json", str(json_file), "--markdown", str(markdown)])
    assert result.exit_code == 0, result.output
    assert json.loads(json_file.read_text())["stack"] == "dev"
    assert markdown.read_text().startswith("#")
    assert f"wrote {json_file}" in result.output


def test_plan_into_a_path_under_a_file_says_so(tmp_path: Path) -> None:
    blocker = tmp_path / "out"
    blocker.write_text("not a folder")
    result = runner.invoke(app, ["plan", "dev", "--no-tree", "--json", str(blocker / "dev.json")])
    assert result.exit_code == 2
    assert f"cannot write {blocker / 'dev.json'}: {blocker} is a file, not a folder" in result.output
    assert isinstance(result.exception, SystemExit)


def test_diff_markdown_and_json_into_missing_folders(tmp_path: Path) -> None:
    plan_file = tmp_path / "dev.json"
    assert runner.invoke(app, ["plan", "dev", "--no-tree", "--json", str(plan_file)]).exit_code == 0
    markdown, json_file = tmp_path / "pr" / "comment.md", tmp_path / "pr" / "json" / "diff.json"
    result = runner.invoke(
        app, ["diff", str(plan_file), str(plan_file), "--markdown", str(markdown), "--json", str(json_file)]
    )
    assert result.exit_code == 0, result.output
    assert markdown.is_file() and json.loads(json_file.read_text())["counts"]["replace"] == 0


def test_outside_a_project_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for command in (["plan", "dev"], ["validate", "dev"], ["render", "slurm", "dev"], ["preflight", "dev"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, (command, result.output)
        assert f"no Pulumi.yaml at or above {tmp_path.resolve()}" in result.output, command
        assert "invalid spec" not in result.output, command
        assert "gpuforge init" in result.output


def test_an_unknown_stack_is_not_an_invalid_spec() -> None:
    result = runner.invoke(app, ["validate", "prdo"])
    assert result.exit_code == 2
    assert "no such stack" in result.output and "prod" in result.output
    assert "invalid spec" not in result.output


def test_init_into_a_file_says_so(tmp_path: Path) -> None:
    blocker = tmp_path / "repo"
    blocker.write_text("")
    result = runner.invoke(app, ["init", str(blocker / "stacks")])
    assert result.exit_code == 2
    assert "a folder on the path is a file" in result.output
    assert not isinstance(result.exception, OSError)


def test_schema_and_render_outputs_into_missing_folders(tmp_path: Path) -> None:
    schema = tmp_path / "a" / "b" / "cluster.schema.json"
    assert runner.invoke(app, ["schema", "-o", str(schema)]).exit_code == 0
    assert json.loads(schema.read_text())["title"]
    rendered = tmp_path / "slurm" / "etc"
    result = runner.invoke(app, ["render", "slurm", "dev", "-o", str(rendered)])
    assert result.exit_code == 0, result.output
    assert (rendered / "slurm.conf").is_file()


# --- one command answers "will this deploy" ---------------------------------------------------------------

BROKEN = Path(__file__).parents[1] / "fixtures" / "stacks" / "Pulumi.prod-broken.yaml"


def test_validate_runs_the_policy_packs_and_blocks_like_plan() -> None:
    validated = runner.invoke(app, ["validate", str(BROKEN)])
    planned = runner.invoke(app, ["plan", str(BROKEN), "--no-tree"])
    assert validated.exit_code == planned.exit_code == 1
    blocked = [line for line in planned.output.splitlines() if line.startswith("blocked")]
    assert blocked and blocked[0] in validated.output
    assert "redundancy-nodegroup-spares" in validated.output and "set node_groups[train].spares: 2" in validated.output


def test_validate_json_says_whether_it_deploys() -> None:
    broken = json.loads(runner.invoke(app, ["validate", str(BROKEN), "--json"]).stdout)
    assert broken["valid"] is True and broken["deploys"] is False
    mandatory = {p["rule"] for p in broken["policies"] if p["level"] == "mandatory"}
    assert "security-securitygroup-open-ingress" in mandatory
    dev = runner.invoke(app, ["validate", "dev", "--json"])
    assert dev.exit_code == 0 and json.loads(dev.stdout)["deploys"] is True


def test_validate_spec_only_says_the_packs_did_not_run() -> None:
    result = runner.invoke(app, ["validate", str(BROKEN), "--spec-only"])
    assert result.exit_code == 0
    assert "policy packs not run (--spec-only)" in result.output
    assert json.loads(runner.invoke(app, ["validate", str(BROKEN), "--spec-only", "--json"]).stdout)["deploys"] is None
