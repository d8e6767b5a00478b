"""Where the nccl role finds aws-ofi-nccl: EFA installers put it in /opt/amazon/ofi-nccl/lib or, on
Debian-family hosts, lib/x86_64-linux-gnu. The role's own two tasks (the find, and the directory choice of
the task that writes the loader path), read from playbooks/roles/nccl/tasks/main.yml and run by Ansible on
this host, see each layout as the stand-in package lays it out, under a temporary root (the role's default
directories with that root in front). The bakes install the first layout (tests/playbooks/test_bake_rootfs.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.assets import PLAYBOOKS_DIR
from gpuforge.nodes.bake import run_playbook
from tests.standins import packages as standin

ROLE = PLAYBOOKS_DIR / "roles" / "nccl"
LOCALHOST = {
    "all": {"hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}
}


def _task(name: str) -> dict[str, Any]:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    return next(task for task in tasks if task["name"] == name)


def _chosen_dir(tmp_path: Path, libdirs: list[str]) -> str:
    """The directory the role would put on the loader path, given these candidate directories."""
    find = {key: value for key, value in _task("Find the aws-ofi-nccl plugin").items() if key != "when"}
    put = _task("Put aws-ofi-nccl on the loader path")
    choose = {"name": "The directory the role puts on the loader path", "vars": put["vars"]}
    choose["ansible.builtin.debug"] = {"msg": "{{ __nccl_plugin_dir }}"}
    playbook = tmp_path / "plugin_dir.yml"
    play = {"name": "The nccl role's plugin directory", "hosts": "all", "gather_facts": False, "tasks": [find, choose]}
    playbook.write_text(yaml.safe_dump([play], sort_keys=False))
    said: list[str] = []

    def record(event: dict[str, Any]) -> None:
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_ok" and data.get("task") == choose["name"]:
            said.append(str(data["res"]["msg"]))

    result = run_playbook(playbook, LOCALHOST, extravars={"nccl_aws_ofi_nccl_libdirs": libdirs}, on_event=record)
    assert result.ok, result.stdout[-3000:]
    return said[0]


def test_the_role_looks_in_both_installer_layouts_in_order() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["nccl_aws_ofi_nccl_libdirs"] == list(standin.AWS_OFI_NCCL_LIBDIRS)


@pytest.mark.parametrize("libdir", standin.AWS_OFI_NCCL_LIBDIRS, ids=["lib", "lib-x86_64-linux-gnu"])
def test_the_directory_holding_the_plugin_goes_on_the_loader_path(tmp_path: Path, libdir: str) -> None:
    root = tmp_path / "root"
    for path, content in standin.aws_ofi_nccl(libdir).files.items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_text(str(content))
    libdirs = [f"{root}{directory}" for directory in standin.AWS_OFI_NCCL_LIBDIRS]
    assert _chosen_dir(tmp_path, libdirs) == f"{root}{libdir}"
