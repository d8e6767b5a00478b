"""playbooks/acceptance.yml (gpu_healthcheck at the acceptance DCGM level, then fabric_acceptance) on two
nodes of this host by a local connection, with stand-ins that print real runs' outputs:

- ib_write_bw: tests/standins/ib_write_bw.py, a server that listens and a client that connects (so the
  ring of peers and ports is real) and prints NVIDIA's recorded client runs on two DGX Spark rails
  (tests/fixtures/acceptance/ib_write_bw-spark-rail*.txt: 92.57 and 97.28 Gb/s);
- mpirun: prints NCCL's INFO log of a real two-node, 16-GPU run (nccl-debug-2node-gdrdma.txt, 64 network
  channels, all GDRDMA) and then nccl-tests' table of a real two-node H100 run
  (tests/fixtures/healthcheck/all_reduce_perf-h100-2node.txt: 338.82 GB/s at 8 GiB), the two kinds of line
  mpirun interleaves with NCCL_DEBUG=INFO; it records its arguments;
- dcgmi: DCGM 3.3.9's recorded level-3 pass (tests/fixtures/healthcheck/dcgmi-diag-r3-pass.txt), recording its
  arguments.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from gpuforge.nodes.bake import PlaybookResult, run_playbook
from gpuforge.render.lifecycle import site_fabric_floors

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
ACCEPTANCE = FIXTURES / "acceptance"
STANDIN = ROOT / "tests" / "standins" / "ib_write_bw.py"
RAILS = ["rocep1s0f0", "roceP2p1s0f0"]  # the recorded runs' RDMA devices
NODES = ("node-a", "node-b")


def _fixture(path: Path) -> Path:
    assert path.with_name(path.name + ".source").is_file(), f"{path.name} has no .source sidecar"
    return path


def _tool(bin_dir: Path, name: str, body: str) -> None:
    (bin_dir / name).write_text(body)
    (bin_dir / name).chmod(0o755)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Two nodes' inventory and the stand-ins on PATH; returns {"inventory", "tmp"}."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(bin_dir, "ib_write_bw", f"#!{sys.executable}\n" + STANDIN.read_text())
    outputs = {rail: str(_fixture(ACCEPTANCE / f"ib_write_bw-spark-rail{i}.txt")) for i, rail in enumerate(RAILS)}
    (tmp_path / "ib_write_bw.json").write_text(json.dumps(outputs))
    monkeypatch.setenv("IB_WRITE_BW_OUTPUTS", str(tmp_path / "ib_write_bw.json"))
    (tmp_path / "nccl-log.txt").write_text(_fixture(ACCEPTANCE / "nccl-debug-2node-gdrdma.txt").read_text())
    table = _fixture(FIXTURES / "healthcheck" / "all_reduce_perf-h100-2node.txt")
    _tool(
        bin_dir,
        "mpirun",
        f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/mpirun.args\ncat {tmp_path}/nccl-log.txt {table}\n',
    )
    dcgm = _fixture(FIXTURES / "healthcheck" / "dcgmi-diag-r3-pass.txt")
    _tool(bin_dir, "dcgmi", f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/dcgmi.args\ncat {dcgm}\n')
    _tool(bin_dir, "all_reduce_perf", "#!/bin/sh\nexit 0\n")  # found by the role's stat; mpirun runs it
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    floors = site_fabric_floors(100, len(RAILS))  # the recordings' ~100 Gb/s endpoints
    hosts = {
        name: {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "ansible_become": False,
            "ansible_host": "127.0.0.1",  # as gpuforge's inventory gives it: the management address
            "fabric_acceptance_port_base": 18515 + 1000 * index,  # both nodes on this host: their own ports
            "fabric_acceptance_report_dir": str(tmp_path / name / "acceptance"),
            "gpu_healthcheck_report_dir": str(tmp_path / name / "health"),
        }
        for index, name in enumerate(NODES)
    }
    group_vars = {
        "fabric_acceptance_hcas": RAILS,
        "fabric_acceptance_rail_floor_gbps": floors.rail_gbps,
        "fabric_acceptance_busbw_floor_gbps": 331.2,  # site_fabric_floors(400, 8): a DGX H100's eight NDR rails
        "fabric_acceptance_install": False,  # no root package manager here
        "fabric_acceptance_duration_s": 1,
        "fabric_acceptance_nccl_tests_dir": str(bin_dir),
        "gpu_healthcheck_checks": ["dcgm"],
        "gpu_healthcheck_textfile_dir": None,
    }
    return {"inventory": {"gpu_nodes": {"hosts": hosts, "vars": group_vars}}, "tmp": tmp_path}


def _accept(site: dict[str, object], **overrides: object) -> tuple[PlaybookResult, dict[str, list[str]]]:
    """Run acceptance.yml; returns the result and each node's failures.json."""
    inventory = json.loads(json.dumps(site["inventory"]))
    inventory["gpu_nodes"]["vars"].update(overrides)
    result = run_playbook("acceptance.yml", inventory, forks=2)
    tmp = Path(str(site["tmp"]))
    failures = {
        node: json.loads((tmp / node / "acceptance" / "failures.json").read_text())
        for node in NODES
        if (tmp / node / "acceptance" / "failures.json").exists()
    }
    return result, failures


def test_two_healthy_nodes_are_accepted(site: dict[str, object]) -> None:
    result, failures = _accept(site)
    assert result.failures == [], result.failures
    assert failures == {"node-a": [], "node-b": []}
    tmp = Path(str(site["tmp"]))
    # DCGM ran at the acceptance level, 3.
    assert (tmp / "dcgmi.args").read_text().split() == ["diag", "-r", "3"]
    # Each rail measured to the next node in the ring, its raw output kept.
    kept = sorted(p.name for p in (tmp / "node-a" / "acceptance").iterdir())
    assert "ib_write_bw-rocep1s0f0-to-node-b.txt" in kept and "ib_write_bw-roceP2p1s0f0-to-node-b.txt" in kept
    assert "92.57" in (tmp / "node-b" / "acceptance" / "ib_write_bw-rocep1s0f0-to-node-a.txt").read_text()
    # One nccl-tests run over both nodes: a rank per GPU, each node's slots, NCCL's network log on.
    args = (tmp / "mpirun.args").read_text().split("\n")
    assert args[args.index("-np") + 1] == "16"
    assert args[args.index("-H") + 1] == "127.0.0.1:8,127.0.0.1:8"
    assert "NCCL_DEBUG=INFO" in args and "NCCL_DEBUG_SUBSYS=INIT,NET" in args


def test_every_problem_is_named_at_once(site: dict[str, object]) -> None:
    """One run with three faults (each a playbook run costs about 50 s here): a rail below its floor (95 Gb/s:
    rail 0's recorded 92.57 misses it, rail 1's 97.28 passes), the bus bandwidth below the fabric's floor, and
    the real log with one connection as NCCL prints it without GPUDirect RDMA ("via NET/IB/5", no "/GDRDMA")."""
    tmp = Path(str(site["tmp"]))
    log = (tmp / "nccl-log.txt").read_text()
    line = next(line for line in log.splitlines() if "via NET/IB/5/GDRDMA" in line)
    staged = line.replace("/GDRDMA", "")
    (tmp / "nccl-log.txt").write_text(log.replace(line, staged, 1))
    result, failures = _accept(site, fabric_acceptance_rail_floor_gbps=95.0, fabric_acceptance_busbw_floor_gbps=360.0)
    across = [
        "all_reduce_perf across 2 nodes: busbw 338.82 GB/s at 8589934592 B is below the floor 360 GB/s",
        "GPUDirect RDMA is off on 1 of 64 network channels (NCCL stages through host memory; load nvidia-peermem "
        f"or use DMA-BUF): {staged.strip()}",
    ]
    assert failures == {
        "node-a": ["rail 0 rocep1s0f0 -> node-b: 92.57 Gb/s is below the floor 95 Gb/s", *across],
        "node-b": ["rail 0 rocep1s0f0 -> node-a: 92.57 Gb/s is below the floor 95 Gb/s", *across],
    }
    assert {f.host for f in result.failures} == set(NODES)
    assert all("is not accepted: rail 0 rocep1s0f0" in f.message for f in result.failures)


def test_one_node_is_refused(site: dict[str, object]) -> None:
    inventory = site["inventory"]
    assert isinstance(inventory, dict)
    del inventory["gpu_nodes"]["hosts"]["node-b"]
    result = run_playbook("acceptance.yml", inventory)
    assert [f.host for f in result.failures] == ["node-a"]
    assert "fabric acceptance needs two nodes or more (got 1)" in result.failures[0].message


def test_the_floors_follow_the_catalog() -> None:
    floors = site_fabric_floors(400, 8)
    assert (floors.rail_gbps, floors.busbw_gbps) == (360.0, 331.2)  # 0.9 x 400; 8 x 46 GB/s x 0.9
    assert site_fabric_floors(200, 8).busbw_gbps == 172.8  # 8 x 24 GB/s x 0.9
    assert site_fabric_floors(800, 8).busbw_gbps is None  # no published figure: reported, not judged
