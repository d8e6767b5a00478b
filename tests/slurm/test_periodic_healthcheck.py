"""slurmd's periodic health check (slurm.conf HealthCheckProgram, issue 12): the prolog's script, run under
the name gpuforge-periodic-healthcheck, drains a failing idle node as "gpuforge health: ...", which the
lifecycle program replaces like a prolog's drain; a node already drained keeps its reason; the rendered
slurm.conf runs it. The script itself, loaded from the role's files (booted proof:
tests/slurm/test_slurm_lifecycle.py)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gpuforge.nodes.lifecycle import AutoScalingGroup, Instance, LifecycleConfig, SlurmNode, Terminate, decide

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "gpuforge/assets/playbooks/roles/slurm_compute/files/gpuforge-healthcheck"
DCGMI_PASS = (ROOT / "tests/fixtures/healthcheck/dcgmi-diag-r3-pass.txt").read_text()  # recorded, with its source
NVIDIA_SMI_ONE_GPU = (
    "index, name, uuid, driver_version, pci.bus_id\n0, NVIDIA A10G, GPU-1, 550.54.15, 00000000:00:1E.0\n"
)


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    # On a node health.py sits beside the script; here it is gpuforge/nodes/health.py.
    monkeypatch.syspath_prepend(str(ROOT / "gpuforge/nodes"))
    loader = importlib.machinery.SourceFileLoader("gpuforge_healthcheck_script", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    config = tmp_path / "prolog-healthcheck.json"
    config.write_text(
        json.dumps({"checks": ["gpu", "dcgm", "xid"], "periodic_checks": ["gpu", "xid"], "expected_gpus": 2})
    )
    monkeypatch.setattr(module, "CONFIG", config)
    monkeypatch.setattr(module, "NODE_NAME_FILE", tmp_path / "slurmd-node-name")
    return module


class Node:
    """What the script runs: nvidia-smi, dcgmi and journalctl answers, and scontrol's calls."""

    def __init__(self, state: str = "IDLE") -> None:
        self.state = state
        self.commands: list[list[str]] = []
        self.scontrol: list[tuple[str, ...]] = []

    def run(self, argv: list[str]) -> tuple[int | None, str]:
        self.commands.append(argv)
        if argv[0] == "nvidia-smi":
            return 0, NVIDIA_SMI_ONE_GPU
        if argv[0] == "journalctl":
            return 1, ""  # no XID
        return 0, DCGMI_PASS

    def scontrol_call(self, *args: str) -> str:
        self.scontrol.append(args)
        return f"NodeName=x State={self.state} Reason=bios update by alice\n" if args[0] == "--oneliner" else ""


def _run_as(script: ModuleType, monkeypatch: pytest.MonkeyPatch, argv0: str, node: Node, **env: str) -> int:
    monkeypatch.setattr(script, "run", node.run)
    monkeypatch.setattr(script, "scontrol", node.scontrol_call)
    monkeypatch.setattr(sys, "argv", [argv0])
    for key in ("SLURMD_NODENAME", "SLURM_SCRIPT_CONTEXT", "SLURM_JOB_ID"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    rc: int = script.main()
    return rc


def test_the_periodic_check_drains_a_cloud_node_by_its_slurm_name_with_a_health_reason(
    script: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # slurmd may run HealthCheckProgram without SLURMD_NODENAME; a cloud node's Slurm name is in the file
    # its slurmd unit reads (instance_name.py), not its host name.
    script.NODE_NAME_FILE.write_text("GPUFORGE_SLURMD_NODENAME=train-i-0abc\n")
    node = Node()
    assert _run_as(script, monkeypatch, "/usr/local/sbin/gpuforge-periodic-healthcheck", node) == 1
    assert ("update", "nodename=train-i-0abc", "state=drain", "reason=gpuforge health: found 1 GPUs, expected 2") in (
        node.scontrol
    )
    assert not any(c[0] == "dcgmi" for c in node.commands)  # slurmd kills the program after 60 s: quick checks only


def test_the_periodic_check_leaves_a_drained_node_its_reason(
    script: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = Node(state="IDLE+DRAIN")
    assert (
        _run_as(script, monkeypatch, "/usr/local/sbin/gpuforge-periodic-healthcheck", node, SLURMD_NODENAME="n1") == 1
    )
    assert not any(call[0] == "update" for call in node.scontrol)


def test_the_prolog_still_runs_every_check_and_names_itself(
    script: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = Node(state="IDLE+DRAIN")
    argv0 = "/etc/slurm/prolog.d/50-gpuforge-healthcheck"
    assert _run_as(script, monkeypatch, argv0, node, SLURMD_NODENAME="n1", SLURM_JOB_ID="7") == 1
    assert any(c[0] == "dcgmi" for c in node.commands)
    assert ("update", "nodename=n1", "state=drain", "reason=gpuforge prolog: found 1 GPUs, expected 2") in node.scontrol
    assert ("requeue", "7") in node.scontrol


def test_a_health_drained_node_is_replaced_by_the_lifecycle_program() -> None:
    config = LifecycleConfig.from_dict(
        {
            "cluster": "c",
            "region": "us-east-1",
            "groups": {"train": {"partitions": ["gpu"], "instance_type": "g5.12xlarge"}},
        }
    )
    name = "train-i-0abc"
    node = SlurmNode(name, "IDLE", frozenset({"DRAIN"}), "gpuforge health: found 1 GPUs, expected 2")
    asg = AutoScalingGroup("asg", "train", 1, 1, 1, (Instance("i-0abc", "InService"),))
    decision = decide(config, {name: node}, [], {"train": asg}, datetime(2026, 11, 27))
    assert decision.actions == [Terminate("asg", "i-0abc", name, False, f"health: {node.reason}")]


def test_the_rendered_slurm_conf_runs_it_between_jobs(script: ModuleType) -> None:
    from gpuforge.plan.stacks import load_stack
    from gpuforge.render.slurm import render_slurm, slurm_config
    from gpuforge.spec import resolve

    config: dict[str, Any] = slurm_config(resolve(load_stack("prod").cluster, "prod"))
    text = render_slurm(config)["slurm.conf"]
    assert f"HealthCheckProgram={config['health_check']['program']}\n" in text
    assert "HealthCheckInterval=300\n" in text and "HealthCheckNodeState=IDLE\n" in text
    # The name the role links the script under is the name the script knows the periodic check by.
    assert Path(config["health_check"]["program"]).name == script.PERIODIC_NAME
