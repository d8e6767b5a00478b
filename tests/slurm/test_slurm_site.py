"""site.yml configures the scheduler too: on a Slurm stack's inventory its Slurm plays select the
controller, compute and login hosts; on a stack without a scheduler they select none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from gpuforge.nodes.bake import PLAYBOOKS_DIR
from gpuforge.nodes.inventory import build_inventory


def _plays(stack: str, tmp_path: Path, hosts: dict[str, str]) -> dict[str, list[str]]:
    """`ansible-playbook --list-hosts site.yml` on the stack's inventory, with one host put in each
    named node group (an AWS inventory finds its hosts with the aws_ec2 plugin at run time)."""
    inventory: dict[str, Any] = build_inventory(stack, source="plan")
    for group, host in hosts.items():
        inventory["all"]["children"][group]["hosts"] = {host: {}}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(PLAYBOOKS_DIR / "roles"), "ANSIBLE_NOCOLOR": "True"}
    ansible = Path(sys.executable).parent / "ansible-playbook"
    out = subprocess.run(
        [str(ansible), "--list-hosts", "-i", str(path), str(PLAYBOOKS_DIR / "site.yml")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    ).stdout
    plays: dict[str, list[str]] = {}
    current = ""
    for line in out.splitlines():
        text = line.strip()
        if text.startswith("play #"):  # play #2 (slurm_controller): Configure the Slurm controller\tTAGS: []
            current = text.split("): ", 1)[1].split("\t")[0]
            plays[current] = []
        elif current and text and not text.startswith("pattern:") and not text.startswith("hosts ("):
            plays[current].append(text)
    return plays


def test_site_configures_slurm_on_a_slurm_stack(tmp_path: Path) -> None:
    plays = _plays("dev", tmp_path, {"ng_train": "train-0", "ng_login": "login-0"})
    assert plays["Configure GPU training nodes"] == ["train-0"]
    assert plays["Configure the Slurm controller"] == ["forge-dev-ctl-0"]
    assert plays["Configure the Slurm compute nodes"] == ["train-0"]
    assert plays["Configure the Slurm login nodes"] == ["login-0"]


def test_site_configures_no_slurm_without_a_scheduler(tmp_path: Path) -> None:
    inventory = build_inventory("staging", source="plan")
    assert "slurm_config" not in inventory["all"]["vars"]
    group = next(iter(inventory["all"]["children"]["gpu_nodes"]["children"]))
    plays = _plays("staging", tmp_path, {group: "gpu-0"})
    assert plays["Configure GPU training nodes"] == ["gpu-0"]
    slurm = {name: hosts for name, hosts in plays.items() if "Slurm" in name}
    assert slurm and all(hosts == [] for hosts in slurm.values()), slurm


def test_site_configures_slurm_on_the_site_hosts(tmp_path: Path) -> None:
    """onprem-lab: the controller and login play on the service hosts at their management addresses,
    the compute play on every DGX host of the site (static nodes from the plan's inventory)."""
    inventory = build_inventory("onprem-lab", source="plan")
    children = inventory["all"]["children"]
    assert children["slurm_controller"]["hosts"] == {"slurm-01": {"ansible_host": "10.64.1.6"}}
    assert children["slurm_login"]["hosts"] == {"login-01": {"ansible_host": "10.64.1.7"}}
    plays = _plays("onprem-lab", tmp_path, {})
    dgx = sorted(f"dgx-{r}0{i}" for r in "ab" for i in range(1, 5))
    assert plays["Configure the Slurm controller"] == ["slurm-01"]
    assert sorted(plays["Configure the Slurm compute nodes"]) == dgx
    assert plays["Configure the Slurm login nodes"] == ["login-01"]
    assert sorted(plays["Configure GPU training nodes"]) == dgx
