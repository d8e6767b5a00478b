"""The gpu_healthcheck role's own verdict on real tool outputs, through `gpuforge check`'s production path
(run_checks: healthcheck.yml over ansible-runner), on this host by a local connection.

Stand-ins on PATH print what the tools printed on a real GPU node (tests/fixtures/healthcheck/*-h200*,
captured by tests/device/gpu-node.sh on a lent H200). Written after that run found the role's nccl-tests
parser matching no row of real output (every node unhealthy: "reported no bus bandwidth"), which the
parsers in health.py, judging the same files, had hidden. So each case asserts the role's verdict (its
metrics file and Ansible's result), not only the merged problems.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gpuforge.nodes.check import run_checks

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "healthcheck"
NODE = "h200-node"


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Host variables of one local GPU node whose nvidia-smi and all_reduce_perf print the H200's outputs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = {"nvidia-smi": "nvidia-smi-h200.csv", "all_reduce_perf": "all_reduce_perf-h200-1gpu.txt"}
    for tool, fixture in tools.items():
        (bin_dir / tool).write_text(f"#!/bin/sh\ncat {FIXTURES / fixture}\n")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "textfile").mkdir()
    return {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "ansible_become": False,  # no sudo on this host; the role's commands need none
        "gpu_healthcheck_expected_gpus": 1,
        "nvidia_driver_branch": "580",
        "gpu_healthcheck_nccl_tests_dir": str(bin_dir),
        "gpu_healthcheck_report_dir": str(tmp_path / "report"),
        "gpu_healthcheck_textfile_dir": str(tmp_path / "textfile"),
    }


def _check(hostvars: dict[str, object], checks: tuple[str, ...] = ("gpu", "nccl")) -> tuple[list[str], str, bool]:
    """(merged problems, the role's metrics file, whether Ansible failed the node)."""
    report = run_checks({"gpu_nodes": {"hosts": {NODE: hostvars}}}, checks=checks)
    (health,) = report.nodes
    metrics = (Path(str(hostvars["gpu_healthcheck_textfile_dir"])) / "gpuforge_healthcheck.prom").read_text()
    return health.problems, metrics, report.playbook.hosts[NODE].failed > 0


def test_a_healthy_h200_passes_the_role_and_the_parsers(node: dict[str, object]) -> None:
    problems, metrics, failed = _check(node)
    assert problems == []
    assert "gpuforge_healthcheck_ok 1" in metrics and "gpuforge_healthcheck_failures 0" in metrics
    assert not failed


def test_a_driver_off_the_pinned_branch_fails_the_node(node: dict[str, object]) -> None:
    problems, metrics, failed = _check({**node, "nvidia_driver_branch": "575"})
    assert problems == ["driver 580.159.04 is not branch 575"]
    assert "gpuforge_healthcheck_failures 1" in metrics and failed


def test_the_role_reads_the_bus_bandwidth_of_real_output(node: dict[str, object]) -> None:
    # One GPU's all-reduce moves nothing over a bus: busbw 0.00 at 8 GiB, below any floor. The role and
    # the parsers word it alike (%g), so the merged report says it once.
    problems, metrics, failed = _check({**node, "gpu_healthcheck_busbw_floor_gbps": 1.0})
    assert problems == ["all_reduce_perf busbw 0 GB/s at 8589934592 B is below the floor 1 GB/s"]
    assert "gpuforge_healthcheck_failures 1" in metrics and failed


def test_the_role_reads_mpirun_tagged_output_of_two_nodes(node: dict[str, object], tmp_path: Path) -> None:
    # Two H100 nodes' run as mpirun prints it, every line tagged: busbw 338.82 GB/s at 8 GiB.
    lines = (FIXTURES / "all_reduce_perf-h100-2node.txt").read_text().splitlines()
    (tmp_path / "tagged.txt").write_text("".join(f"[1,0]<stdout>:{line}\n" for line in lines))
    (tmp_path / "bin" / "all_reduce_perf").write_text(f"#!/bin/sh\ncat {tmp_path / 'tagged.txt'}\n")
    problems, metrics, failed = _check({**node, "gpu_healthcheck_busbw_floor_gbps": 360.0}, checks=("nccl",))
    assert problems == ["all_reduce_perf busbw 338.82 GB/s at 8589934592 B is below the floor 360 GB/s"]
    assert "gpuforge_healthcheck_failures 1" in metrics and failed
