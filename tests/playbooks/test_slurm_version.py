"""Every Slurm role refuses an installed Slurm older than the rendered configuration needs (role
slurm_version, catalog slurm.minimum): Ubuntu 22.04's slurmd 21.08.5 has no dynamic nodes (`slurmd -Z
--conf`), so a cloud node on it would never register. Ansible's own run against this host (local
connection), with a stand-in slurmd that prints what each distribution's package prints for -V."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from gpuforge.catalog import load_catalog
from gpuforge.nodes.bake import PlaybookResult, run_playbook


def _run(tmp_path: Path, printed: str) -> PlaybookResult:
    stub = tmp_path / "slurmd"
    stub.write_text(f"#!/bin/sh\necho '{printed}'\n")
    stub.chmod(0o755)
    playbook = tmp_path / "version.yml"
    play = {
        "name": "version",
        "hosts": "all",
        "gather_facts": False,
        "roles": [{"role": "slurm_version", "slurm_version_command": str(stub)}],
    }
    playbook.write_text(yaml.safe_dump([play]))
    minimum = load_catalog().slurm.minimum.version
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "slurm_config": {"versions": {"minimum": minimum}},
    }
    return run_playbook(playbook, {"all": {"hosts": {"node": host}}}, check=True)


def test_ubuntu_2204s_slurm_is_refused_with_the_reason_and_the_fix(tmp_path: Path) -> None:
    result = _run(tmp_path, "slurm-wlm 21.08.5")
    assert result.failed_hosts == ["node"]
    assert [f.task for f in result.failures] == ["Refuse a Slurm older than the configuration needs"]
    message = result.failures[0].message
    assert "is Slurm 21.08.5" in message and "needs Slurm 22.05 or newer" in message, message
    assert "slurmd -Z --conf" in message and "Ubuntu 24.04" in message, message


@pytest.mark.parametrize("printed", ["slurm 22.05.8", "slurm-wlm 23.11.4", "slurm 24.11.1"])
def test_debian_12s_and_ubuntu_2404s_slurm_pass(tmp_path: Path, printed: str) -> None:
    result = _run(tmp_path, printed)
    assert result.ok, result.failures
