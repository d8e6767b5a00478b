"""Options removed from the node roles (efa_install_method: packages, nvidia_driver_source: distro: neither
converged, as the distribution's packages lack aws-ofi-nccl and NVIDIA's other packages) fail a run whose
inventory still sets them, at the role's first task and with the fix, before the role changes anything.
The run is Ansible's own against this host (local connection, check mode: nothing would change here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from gpuforge.nodes.bake import run_playbook


@pytest.mark.parametrize(
    ("role", "variable", "value", "fix"),
    [
        ("efa", "efa_install_method", "packages", "Remove efa_install_method from the inventory"),
        ("nvidia_driver", "nvidia_driver_source", "distro", "Remove nvidia_driver_source from the inventory"),
    ],
)
def test_an_inventory_that_sets_a_removed_option_fails_with_the_fix(
    tmp_path: Path, role: str, variable: str, value: str, fix: str
) -> None:
    playbook = tmp_path / "role.yml"
    playbook.write_text(yaml.safe_dump([{"name": role, "hosts": "all", "gather_facts": False, "roles": [role]}]))
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, variable: value}
    result = run_playbook(playbook, {"all": {"hosts": {"node": host}}}, check=True)
    assert result.failed_hosts == ["node"]
    assert [f.task for f in result.failures] == [f"Refuse the removed {variable}"]
    message = result.failures[0].message
    assert f"{variable} ({value}) was removed" in message and fix in message, message
    assert result.hosts["node"].changed == 0
