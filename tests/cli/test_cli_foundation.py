"""The command line as a user meets it: exit codes, the JSON shape, readable errors."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.plan.schema import render_schema

runner = CliRunner()
INVALID = Path(__file__).parent.parent / "fixtures" / "specs" / "invalid"


def broken_stack(tmp_path: Path, fixture: str) -> Path:
    spec = yaml.safe_load((INVALID / fixture).read_text())
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text(yaml.safe_dump({"config": {"gpuforge:cluster": spec}}))
    return path


def test_validate_accepts_the_shipped_stacks() -> None:
    for stack in ("dev", "prod"):
        result = runner.invoke(app, ["validate", stack])
        assert result.exit_code == 0, result.output
        assert "valid" in result.output


def test_validate_rejects_with_field_paths_and_no_traceback(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(broken_stack(tmp_path, "many-problems-at-once.yaml"))])
    assert result.exit_code == 2
    assert "cluster.node_groups[train].fabric" in result.output
    assert "cluster.storage.object_stores[ckpt].replication_region" in result.output
    assert "Traceback" not in result.output


def test_unknown_stack_names_the_known_ones() -> None:
    result = runner.invoke(app, ["plan", "nope"])
    assert result.exit_code == 2
    assert "dev" in result.output and "prod" in result.output


def test_plan_json_shape(tmp_path: Path) -> None:
    out = tmp_path / "prod.json"
    result = runner.invoke(app, ["plan", "prod", "--json", str(out), "--markdown", str(tmp_path / "prod.md")])
    assert result.exit_code == 0, result.output
    plan = json.loads(out.read_text())
    assert plan["stack"] == "prod" and plan["placement"] == "aws"
    summary = plan["summary"]
    assert (summary["nodes"], summary["spare_nodes"], summary["gpus"], summary["efa_interfaces"]) == (68, 2, 512, 2048)
    for key in ("node_groups", "parallel_fs_tib", "parallel_fs_throughput_mbps", "power_kw"):
        assert isinstance(summary[key], int | float)
    resource = plan["resources"][0]
    assert set(resource) >= {"urn", "type", "name", "parent", "inputs", "protect"}
    assert any(r["protect"] for r in plan["resources"])
    assert "| GPUs | 512 |" in (tmp_path / "prod.md").read_text()


def test_plan_prints_the_tree_and_summary() -> None:
    result = runner.invoke(app, ["plan", "dev"])
    assert result.exit_code == 0, result.output
    assert "forge-dev-train-lt" in result.output
    assert "GPUs" in result.output


def test_plan_rejects_an_invalid_spec_with_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", str(broken_stack(tmp_path, "efa-on-type-without-efa.yaml"))])
    assert result.exit_code == 2
    assert "cluster.node_groups[train].fabric" in result.output


def test_schema_prints_the_committed_schema() -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    assert result.output == render_schema()


def test_validate_reports_spec_and_policy_problems_together(tmp_path: Path) -> None:
    spec = yaml.safe_load((INVALID / "efa-on-type-without-efa.yaml").read_text())
    path = tmp_path / "Pulumi.both.yaml"
    path.write_text(
        yaml.safe_dump(
            {"config": {"gpuforge:cluster": spec, "gpuforge:policy": {"levels": {"no-such-rule": "advisory"}}}}
        )
    )
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert "cluster.node_groups[train].fabric" in result.output
    assert "policy.levels" in result.output


def test_onprem_plan_names_site_storage_and_does_not_pretend_to_price_hosts() -> None:
    result = runner.invoke(app, ["plan", "onprem-lab", "--no-tree"])
    assert result.exit_code == 0, result.output
    assert "site: lustre /lustre" in result.output
    assert "site hosts not priced" in result.output
    assert "1 node group)" in result.output


def test_validate_json_lists_every_problem_for_machines(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(broken_stack(tmp_path, "many-problems-at-once.yaml")), "--json"])
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert report["valid"] is False and len(report["problems"]) >= 2
    assert {"path", "message", "fix", "line"} <= set(report["problems"][0])
    assert any(p["path"] == "cluster.node_groups[train].fabric" for p in report["problems"])

    valid = runner.invoke(app, ["validate", "dev", "--json"])
    report = json.loads(valid.stdout)
    assert valid.exit_code == 0 and report["valid"] is True and report["problems"] == []
    assert report["stack"].endswith("stacks/Pulumi.dev.yaml")
