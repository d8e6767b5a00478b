"""`gpuforge render monitoring STACK`: what a stack gets, printed or written; mistakes exit 2."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from gpuforge.cli import app

runner = CliRunner()


def test_render_monitoring_prints_config_rules_and_routes() -> None:
    result = runner.invoke(app, ["render", "monitoring", "prod"])
    assert result.exit_code == 0, result.output
    for section in (
        "/etc/prometheus/prometheus.yml",
        "/etc/prometheus/rules/gpuforge.yml",
        "/etc/prometheus/alertmanager.yml",
    ):
        assert f"# --- {section}" in result.output
    assert "alert: GpuXidCritical" in result.output
    assert "<- pulumi config gpuforge:alertPagerdutyKey" in result.output


def test_render_monitoring_writes_files(tmp_path: Path) -> None:
    result = runner.invoke(app, ["render", "monitoring", "onprem-lab", "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    targets = yaml.safe_load((tmp_path / "etc/prometheus/file_sd/node.json").read_text())
    assert {"targets": ["10.64.1.5:9100"], "labels": {"instance": "mon-01", "node_group": "monitoring"}} in targets


def test_a_stack_without_monitoring_is_a_usage_error() -> None:
    result = runner.invoke(app, ["render", "monitoring", "dev"])
    assert result.exit_code == 2
    assert "declares no monitoring section" in result.output


def test_a_bad_monitoring_section_names_its_field(tmp_path: Path) -> None:
    spec = yaml.safe_load(Path("tests/fixtures/specs/invalid/monitoring-on-a-training-group.yaml").read_text())
    stack = tmp_path / "Pulumi.broken.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpuforge:cluster": spec}}))
    result = runner.invoke(app, ["render", "monitoring", str(stack)])
    assert result.exit_code == 2
    assert "cluster.monitoring.server.node_group" in result.output
    assert "Traceback" not in result.output
