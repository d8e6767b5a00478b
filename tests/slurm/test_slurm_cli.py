"""`gpuforge render slurm STACK` prints exactly the files nodes receive; mistakes exit 2 with a message."""

from __future__ import annotations

from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.spec import resolve

runner = CliRunner()


def test_render_prints_every_file() -> None:
    result = runner.invoke(app, ["render", "slurm", "prod"])
    assert result.exit_code == 0, result.output
    files = render_slurm(slurm_config(resolve(load_stack("prod").cluster, "prod")))
    assert result.stdout == "".join(f"# ==> {name} <==\n{text}" for name, text in files.items())
    assert "SlurmctldHost=forge-prod-ctl-1(" in result.stdout


def test_render_writes_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = runner.invoke(app, ["render", "slurm", "dev", "-o", str(tmp_path), "-f", "slurm.conf"])
    assert result.exit_code == 0, result.output
    assert [p.name for p in tmp_path.iterdir()] == ["slurm.conf"]


def test_render_without_scheduler_or_unknown_file_exits_2() -> None:
    result = runner.invoke(app, ["render", "slurm", "staging"])
    assert result.exit_code == 2
    assert "has no scheduler section" in result.output
    result = runner.invoke(app, ["render", "slurm", "dev", "-f", "slurm.cfg"])
    assert result.exit_code == 2 and "no file slurm.cfg" in result.output
    result = runner.invoke(app, ["render", "slurm", "nope"])
    assert result.exit_code == 2 and "no stack 'nope'" in result.output
