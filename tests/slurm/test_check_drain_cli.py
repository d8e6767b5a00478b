"""`gpuforge check STACK --drain slurm --execute-drain` through the command line: the options reach
run_checks, a failing node is drained by slurm-drain.yml running scontrol on the inventory's controller,
with the node's problems as the reason. The booted cluster (test_slurm_cluster.py) calls run_checks
directly; this test covers the CLI's wiring. The health check's Ansible run is stubbed with what the
gpu_healthcheck role fetches from a node that lost a GPU; the drain play runs for real against this host
(local connection) with a stand-in scontrol on PATH that records its arguments."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import gpuforge.nodes.check as check_module
from gpuforge.cli import app
from gpuforge.nodes.bake import HostSummary, PlaybookResult

NODE, CONTROLLER = "dgx-a01", "slurm-01"  # onprem-lab's first DGX and its controller
ONE_GPU = (
    "index, name, uuid, driver_version, pci.bus_id\n"
    "0, NVIDIA H100 80GB HBM3, GPU-0, 580.65.06, 00000000:18:00.0\n"
)


def test_check_drain_slurm_execute_drain_runs_scontrol_on_the_controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, record = tmp_path / "bin", tmp_path / "scontrol-argv"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done >> {record}\n')
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    real_run_playbook = check_module.run_playbook
    played: list[tuple[str, str | None]] = []

    def run_playbook(playbook: str, inventory: Any, **kwargs: Any) -> PlaybookResult:
        played.append((str(playbook), kwargs.get("limit")))
        if playbook != "healthcheck.yml":
            return real_run_playbook(playbook, inventory, **kwargs)
        fetched = Path(kwargs["extravars"]["gpu_healthcheck_fetch_dir"]) / NODE
        fetched.mkdir()
        (fetched / "nvidia-smi.csv").write_text(ONE_GPU)
        return PlaybookResult("healthcheck.yml", "successful", 0, hosts={NODE: HostSummary(ok=4)})

    monkeypatch.setattr(check_module, "run_playbook", run_playbook)
    # The stack's controller, reached here through a local connection (no sudo on this host: no become).
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "ansible_become": False}
    extra = tmp_path / "local.yml"
    extra.write_text(yaml.safe_dump({"all": {"children": {"slurm_controller": {"hosts": {CONTROLLER: local}}}}}))

    result = CliRunner().invoke(
        app,
        ["check", "onprem-lab", "--checks", "gpu", "--limit", NODE, "--drain", "slurm", "--execute-drain",
         "--inventory", str(extra)],
    )  # fmt: skip

    assert result.exit_code == 1, result.output  # a failing node is not a pass, drained or not
    assert played == [("healthcheck.yml", NODE), ("slurm-drain.yml", None)]
    reason = "gpuforge check: found 1 GPUs, expected 8"
    assert record.read_text().splitlines() == ["update", f"nodename={NODE}", "state=drain", f"reason={reason}"]
    assert f"ran on the Slurm controller scontrol update nodename={NODE} state=drain reason={reason}" in result.output


def test_without_execute_drain_the_cli_only_prints_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    played: list[str] = []

    def run_playbook(playbook: str, inventory: Any, **kwargs: Any) -> PlaybookResult:
        played.append(str(playbook))
        fetched = Path(kwargs["extravars"]["gpu_healthcheck_fetch_dir"]) / NODE
        fetched.mkdir()
        (fetched / "nvidia-smi.csv").write_text(ONE_GPU)
        return PlaybookResult("healthcheck.yml", "successful", 0, hosts={NODE: HostSummary(ok=4)})

    monkeypatch.setattr(check_module, "run_playbook", run_playbook)
    result = CliRunner().invoke(app, ["check", "onprem-lab", "--checks", "gpu", "--limit", NODE, "--drain", "slurm"])
    assert result.exit_code == 1, result.output
    assert played == ["healthcheck.yml"]  # no drain play
    assert f"drain with: scontrol update nodename={NODE} state=drain" in result.output
