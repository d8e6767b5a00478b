"""Health parsers on real outputs (tests/fixtures/healthcheck/*, each with a .source sidecar) and the
verdict for one node against the catalog's floor."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuforge.nodes.health import (
    NodeExpectations,
    busbw_floor_gbps,
    count_active_nvlinks,
    evaluate_node,
    parse_dcgmi_diag,
    parse_fi_info_domains,
    parse_ibstat,
    parse_nccl_tests,
    parse_nvidia_smi_csv,
    xid_errors,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "healthcheck"


def _fixture(name: str) -> str:
    assert (FIXTURES / f"{name}.source").is_file(), f"{name} has no .source sidecar"
    return (FIXTURES / name).read_text()


def test_every_fixture_names_its_source() -> None:
    for path in FIXTURES.iterdir():
        if path.suffix != ".source":
            source = path.with_name(path.name + ".source").read_text()
            assert "repo:" in source or "url:" in source, path.name


def test_nccl_tests_h100_two_nodes() -> None:
    result = parse_nccl_tests(_fixture("all_reduce_perf-h100-2node.txt"))
    assert len(result.rows) == 31
    assert result.rows[0].size_bytes == 8
    assert result.largest is not None and result.largest.size_bytes == 8589934592
    assert result.busbw_at_largest_gbps == pytest.approx(338.82)
    assert result.largest.in_place_busbw_gbps == pytest.approx(337.35)
    assert result.avg_busbw_gbps == pytest.approx(70.742)
    assert result.out_of_bounds_ok is True
    assert all(row.wrong == 0 for row in result.rows)


def test_nccl_tests_mpirun_tags_and_old_layout_without_root_column() -> None:
    tagged = "\n".join(f"[1,0]<stdout>:{line}" for line in _fixture("all_reduce_perf-h100-2node.txt").splitlines())
    assert parse_nccl_tests(tagged).busbw_at_largest_gbps == pytest.approx(338.82)
    # nccl-tests before 2.10 printed no root column: the busbw columns are found from the right.
    old = "   134217728   33554432   float   sum   58479.5   2.30   2.30   0   58055.4   2.31   2.31   0"
    row = parse_nccl_tests(old).rows[0]
    assert (row.out_of_place_busbw_gbps, row.in_place_busbw_gbps) == (2.30, 2.31)


def test_dcgmi_diag_level_3_pass() -> None:
    diag = parse_dcgmi_diag(_fixture("dcgmi-diag-r3-pass.txt"))
    assert diag.metadata["DCGM Version"] == "3.3.9"
    assert diag.metadata["Driver Version Detected"] == "570.133.20"
    names = [test.name for test in diag.tests]
    assert names[:2] == ["Denylist", "NVML Library"]
    assert {"PCIe", "GPU Memory", "Targeted Stress", "Memory Bandwidth", "EUD Test"} <= set(names)
    assert diag.passed and diag.failed == []
    by_name = {test.name: test for test in diag.tests}
    assert by_name["EUD Test"].status == "skip"
    assert by_name["PCIe"].category == "Integration"
    assert by_name["Targeted Power"].category == "Stress"


def test_dcgmi_diag_failure_names_the_test_and_reason() -> None:
    # The pass fixture with its PCIe row failed as DCGM reports it, plus DCGM's error row.
    text = _fixture("dcgmi-diag-r3-pass.txt").replace(
        "| PCIe                      | Pass - All                                     |",
        "| PCIe                      | Fail - GPU: 3                                  |\n"
        "| Error                     | GPU 3 NvLink link 4 is down                    |",
    )
    diag = parse_dcgmi_diag(text)
    assert not diag.passed
    assert [test.name for test in diag.failed] == ["PCIe"]
    assert diag.failed[0].details == ["Error: GPU 3 NvLink link 4 is down"]


def test_floor_is_a_fraction_of_the_catalog_reference() -> None:
    from gpuforge.catalog import load_catalog

    reference = load_catalog().instance_type("p5.48xlarge").nccl_busbw_reference_gbps
    assert reference is not None
    assert busbw_floor_gbps("p5.48xlarge") == pytest.approx(reference * 0.8)
    assert busbw_floor_gbps("p5.48xlarge", 0.9) == pytest.approx(reference * 0.9)
    with pytest.raises(ValueError, match="fraction"):
        busbw_floor_gbps("p5.48xlarge", 1.5)


def test_two_node_h100_run_fails_a_p5_single_node_floor() -> None:
    # 338.8 GB/s at 8 GiB is below 0.8 x the 8x H100 NVLink reference: a p5 node showing this is drained.
    floor = busbw_floor_gbps("p5.48xlarge")
    assert floor is not None
    health = evaluate_node(
        "p5-node-3",
        {"all_reduce_perf.txt": _fixture("all_reduce_perf-h100-2node.txt")},
        NodeExpectations(gpus=8, busbw_floor_gbps=floor),
    )
    assert not health.healthy
    assert health.busbw_gbps == pytest.approx(338.82)
    assert health.problems == [f"all_reduce_perf busbw 338.82 GB/s at 8589934592 B is below the floor {floor:g} GB/s"]
    relaxed = evaluate_node(
        "p5-node-3",
        {"all_reduce_perf.txt": _fixture("all_reduce_perf-h100-2node.txt")},
        NodeExpectations(gpus=8, busbw_floor_gbps=300.0),
    )
    assert relaxed.healthy


def test_node_with_passing_dcgm_and_missing_gpu_tool_output() -> None:
    health = evaluate_node(
        "ib-node-1",
        {"dcgmi-diag.txt": _fixture("dcgmi-diag-r3-pass.txt"), "nvidia-smi.csv": ""},
        NodeExpectations(gpus=8, driver_branch="570"),
    )
    assert health.problems == ["found 0 GPUs, expected 8"]


def test_small_parsers_on_tool_formats() -> None:
    csv = "index, name, driver_version, memory.total [MiB]\n0, NVIDIA H100 80GB HBM3, 550.90.07, 81559 MiB\n"
    assert parse_nvidia_smi_csv(csv) == [
        {"index": "0", "name": "NVIDIA H100 80GB HBM3", "driver_version": "550.90.07", "memory.total": "81559 MiB"}
    ]
    ibstat = (
        "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n"
        "\t\tLink layer: InfiniBand\n"
        "CA 'mlx5_1'\n\tPort 1:\n\t\tState: Initializing\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n"
    )
    ports = parse_ibstat(ibstat)
    assert [(p.ca, p.active) for p in ports] == [("mlx5_0", True), ("mlx5_1", False)]
    health = evaluate_node(
        "ib",
        {"ibstat.txt": ibstat},
        NodeExpectations(gpus=0, fabric="infiniband", ib_hcas=("mlx5_0", "mlx5_1", "mlx5_2")),
    )
    assert health.problems == ["InfiniBand ports not active: mlx5_1/1 Initializing/LinkUp, mlx5_2 missing"]
    fi = "provider: efa\n    fabric: efa\n    domain: rdmap16s27-rdm\nprovider: efa\n    domain: rdmap32s27-rdm\n"
    assert parse_fi_info_domains(fi) == ["rdmap16s27-rdm", "rdmap32s27-rdm"]
    assert count_active_nvlinks("GPU 0: H100\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n") == 1
    assert xid_errors("kernel: NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus.\nother\n") == [
        "kernel: NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus."
    ]
