"""`gpuforge capacity`'s arithmetic against examples worked by hand (each test's docstring shows the working),
its input checks (every bad option at once, with the fix), and the catalog figures it reads (each sourced)."""

from __future__ import annotations

import math

import pytest

from gpuforge.catalog import load_catalog
from gpuforge.catalog.prices import CapacityBlockTerms
from gpuforge.plan.capacity import Facility, Workload, comparable_node_types, estimate, plan_capacity, training_flops
from gpuforge.plan.capacity_input import check_node_types, check_workload, parse_quantity
from gpuforge.spec import SpecError

# Prices fixed by override so the working below does not move when the price table is revised; the GPU
# figures (989.4 TFLOPS, 700 W) and node power (10.2 kW) are the shipped catalog's.
PRICES = {
    "prices": {
        "instances": {"p5.48xlarge": {"hourly_usd": 50.0}},
        "reservations": {"p5.48xlarge": {"hourly_usd": 40.0}},
    }
}
FACILITY = Facility(pue=1.2, pue_source="test", budget_kw=1000.0, budget_source="test budget")


def _workload(**given: object) -> Workload:
    options: dict[str, object] = {
        "params": "70B",
        "tokens": "2T",
        "flops": None,
        "precision": "bf16",
        "mfu": 0.4,
        "days": None,
        "nodes": None,
    }
    return check_workload(**(options | given))  # type: ignore[arg-type]


def test_70b_on_2t_tokens_by_a_30_day_deadline_on_p5() -> None:
    """70B parameters x 2T tokens x 6 = 8.4e23 FLOPs (Kaplan et al. 2020; Hoffmann et al. 2022).
    H100 bf16 dense 989.4 TFLOPS x 0.40 MFU = 395.76 TFLOPS delivered per GPU.
    8.4e23 / 3.9576e14 = 2.1225e9 GPU-seconds = 589,583 GPU-hours.
    p5.48xlarge has 8 GPUs: 2.1225e9 / 8 = 2.6531e8 node-seconds; 30 days = 2,592,000 s:
    2.6531e8 / 2.592e6 = 102.36, rounded up to 103 nodes, which finish in 2.6531e8 / 103 / 86400 = 29.81 days.
    Node-hours: 589,583 / 8 = 73,698. On-demand at $50/h: 73,698 x 50 = $3,684,893.
    Capacity Block: 29.81 days is past the 14 days sold daily, so a 35-day block (whole weeks):
    103 x 35 x 24 x $40 = $3,460,800.
    Node power 8 x 700 W + 4,600 W host = 10.2 kW: IT energy 10.2 x 73,698 = 751,718 kWh, x PUE 1.2 =
    902,062 kWh; peak 103 x 10.2 x 1.2 = 1,260.72 kW, 126% of a 1,000 kW budget."""
    catalog = load_catalog(PRICES)
    result = estimate(catalog, _workload(days=30), FACILITY, "p5.48xlarge")
    figures = {name: figure.value for name, figure in result.figures.items()}
    assert result.gpu == "H100" and result.gpus_per_node == 8
    assert figures["peak_tflops_per_gpu"] == 989.4
    assert figures["gpu_hours"] == pytest.approx(589_582.9, rel=1e-6)
    assert figures["nodes"] == 103
    assert figures["days"] == pytest.approx(29.813, abs=1e-3)
    assert figures["node_hours"] == pytest.approx(73_697.86, rel=1e-6)
    assert figures["cost_on_demand"] == pytest.approx(3_684_893.2, rel=1e-6)
    assert figures["cost_reserved"] == pytest.approx(3_460_800.0)
    assert figures["energy_it_kwh"] == pytest.approx(751_718.2, rel=1e-6)
    assert figures["energy_facility_kwh"] == pytest.approx(902_061.9, rel=1e-6)
    assert figures["peak_facility_kw"] == pytest.approx(1_260.72)
    assert figures["budget_share"] == pytest.approx(1.26072)
    assert result.over_budget


def test_a_node_count_gives_the_days_and_the_budget_share() -> None:
    """The same 8.4e23 FLOPs on 64 p5.48xlarge (512 H100) at 0.40 MFU:
    2.1225e9 GPU-seconds / 512 GPUs / 86,400 = 47.98 days.
    Peak 64 x 10.2 kW x PUE 1.2 = 783.36 kW: 78% of the 1,000 kW budget, so it fits."""
    result = estimate(load_catalog(PRICES), _workload(nodes=64), FACILITY, "p5.48xlarge")
    assert result.figures["days"].value == pytest.approx(47.980, abs=1e-3)
    assert result.figures["nodes"].basis == "given (--nodes)"
    assert result.figures["peak_facility_kw"].value == pytest.approx(783.36)
    assert result.figures["budget_share"].value == pytest.approx(0.78336)
    assert not result.over_budget


def test_flops_given_and_the_catalog_mfu_default() -> None:
    """--flops 1e23 with no --mfu: the H100's catalog default, 0.38 (Llama 3, Table 4).
    989.4 TFLOPS x 0.38 = 375.972 TFLOPS delivered; 1e23 / 3.75972e14 = 265,977,254 GPU-seconds
    / 3600 = 73,882.6 GPU-hours."""
    workload = _workload(params=None, tokens=None, flops="1e23", mfu=None, nodes=8)
    result = estimate(load_catalog(), workload, FACILITY, "p5.48xlarge")
    assert workload.flops.basis == "given (--flops)"
    assert result.figures["mfu"].value == 0.38
    assert "Llama 3" in result.figures["mfu"].basis
    assert result.figures["gpu_hours"].value == pytest.approx(73_882.6, rel=1e-6)


def test_flops_are_six_n_d_with_the_citation() -> None:
    flops = training_flops(70e9, 2e12)
    assert flops.value == 8.4e23
    assert "Kaplan et al. 2020" in flops.basis and "Hoffmann et al. 2022" in flops.basis


def test_every_figure_says_where_it_comes_from() -> None:
    plan = plan_capacity(load_catalog(), _workload(days=30), FACILITY, comparable_node_types(load_catalog()))
    assert plan.estimated, "no node type estimated at all"
    for result in plan.estimated:
        assert result.figures, result.node_type
        for name, figure in result.figures.items():
            assert figure.basis.strip(), f"{result.node_type}.{name} has no basis"


def test_a_gpu_without_the_precision_or_an_mfu_is_skipped_with_the_fix() -> None:
    """A100 has no FP8 Tensor Cores: no fp8 figure. B200 has figures but no published MFU in the catalog:
    it is estimated only with --mfu. Trainium is not a GPU of the catalog's gpus."""
    catalog = load_catalog()
    fp8 = estimate(catalog, _workload(precision="fp8", days=30), FACILITY, "p4d.24xlarge")
    assert fp8.skipped_for == "--precision" and "gpus.A100.dense_tflops.fp8" in fp8.skipped
    no_mfu = estimate(catalog, _workload(mfu=None, days=30), FACILITY, "p6-b200.48xlarge")
    assert no_mfu.skipped_for == "--mfu" and "pass --mfu" in no_mfu.skipped
    with_mfu = estimate(catalog, _workload(mfu=0.35, days=30), FACILITY, "p6-b200.48xlarge")
    assert with_mfu.figures["peak_tflops_per_gpu"].value == 2250
    trainium = estimate(catalog, _workload(days=30), FACILITY, "trn1.32xlarge")
    assert trainium.skipped_for == "--node-type" and "Trainium" in trainium.skipped


def test_a_server_model_has_energy_but_no_hourly_price() -> None:
    """dgx-h100: 8 H100, 10.2 kW at its rated maximum (catalog servers), owned: no price line."""
    result = estimate(load_catalog(), _workload(nodes=4), FACILITY, "dgx-h100")
    assert "cost_on_demand" not in result.figures and "cost_reserved" not in result.figures
    assert any("server model" in note for note in result.notes)
    assert result.figures["peak_facility_kw"].value == pytest.approx(4 * 10.2 * 1.2)


@pytest.mark.parametrize(
    ("days", "billed"),
    [(0.2, 1), (1.0, 1), (13.5, 14), (14.0, 14), (14.01, 21), (29.8, 35), (182.0, 182), (182.5, None)],
)
def test_capacity_blocks_are_sold_in_days_then_weeks(days: float, billed: int | None) -> None:
    """Amazon EC2 User Guide, Capacity Blocks: 1-day increments up to 14 days, 7-day increments up to 182."""
    terms = load_catalog().prices.capacity_block_terms  # type: ignore[union-attr]
    assert isinstance(terms, CapacityBlockTerms)
    assert terms.billed_days(days) == billed


def test_a_run_longer_than_any_capacity_block_says_so() -> None:
    result = estimate(load_catalog(PRICES), _workload(nodes=1), FACILITY, "p5.48xlarge")
    assert result.figures["days"].value > 182
    assert "cost_reserved" not in result.figures
    assert any("no Capacity Block is" in note for note in result.notes)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("70B", 70e9),
        ("70b", 70e9),
        ("2T", 2e12),
        ("8.4e23", 8.4e23),
        ("1_000_000", 1e6),
        ("1.5e12", 1.5e12),
        ("7K", 7e3),
    ],
)
def test_quantities_read_as_people_write_them(text: str, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["0", "-5", "70x", "inf", "nan", "", "1e999", "B", "7 billion"])
def test_quantities_that_are_not_counts(text: str) -> None:
    assert parse_quantity(text) is None


def test_every_bad_option_at_once_with_its_value_and_fix() -> None:
    with pytest.raises(SpecError) as caught:
        check_workload(params="70x", tokens=None, flops=None, precision="fp4", mfu=1.5, days=-1, nodes=None)
    issues = {issue.path: issue for issue in caught.value.issues}
    assert set(issues) == {"--params", "--tokens", "--precision", "--mfu", "--days"}
    assert "'70x'" in issues["--params"].message and issues["--params"].fix == "--params 70B"
    assert "fp4" in issues["--precision"].message and "bf16" in issues["--precision"].fix
    assert "1.5" in issues["--mfu"].message
    assert "-1" in issues["--days"].message


@pytest.mark.parametrize(
    ("given", "path"),
    [
        ({"flops": "1e23"}, "--flops"),  # with --params/--tokens too
        ({"days": 30, "nodes": 8}, "--days"),
        ({"nodes": 0}, "--nodes"),
        ({"days": math.inf}, "--days"),
        ({"mfu": 0.0, "days": 30}, "--mfu"),
    ],
)
def test_contradictions_and_ranges(given: dict[str, object], path: str) -> None:
    with pytest.raises(SpecError) as caught:
        _workload(**given)
    assert path in {issue.path for issue in caught.value.issues}


def test_node_types_from_the_options() -> None:
    catalog = load_catalog()
    assert check_node_types(catalog, "dgx-h100", False, None) == ["dgx-h100"]
    assert "p5.48xlarge" in check_node_types(catalog, None, True, None)
    for node_type, compare in (("p5.48xlrge", False), ("m7i.xlarge", False), (None, False), ("p5.48xlarge", True)):
        with pytest.raises(SpecError) as caught:
            check_node_types(catalog, node_type, compare, None)
        assert caught.value.issues[0].path.startswith("--"), caught.value.issues
    with pytest.raises(SpecError, match=r"did you mean: p5\.48xlarge"):
        check_node_types(catalog, "p5.48xlrge", False, None)


def test_gpu_figures_in_the_catalog_carry_their_sources() -> None:
    for name, gpu in load_catalog().data.gpus.items():
        if gpu.dense_tflops:
            assert gpu.dense_tflops_source, name
            # dense never exceeds the sparse figures' half: fp8 is twice bf16 where both exist
            if "fp8" in gpu.dense_tflops:
                assert gpu.dense_tflops["fp8"] == pytest.approx(2 * gpu.dense_tflops["bf16"], rel=0.02), name
        if gpu.mfu_default is not None:
            assert gpu.mfu_source, name


def test_the_docs_table_of_mfu_defaults_matches_the_catalog() -> None:
    """docs/capacity.md lists each GPU's default MFU; a catalog edit that leaves the page behind fails here."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "capacity.md").read_text(encoding="utf-8")
    rows = {
        line.split("|")[1].strip(): line.split("|")[2].strip()
        for line in page.splitlines()
        if line.startswith("| ") and line.count("|") == 4
    }
    for name, gpu in load_catalog().data.gpus.items():
        if not gpu.dense_tflops:
            continue
        documented = next((value for gpus, value in rows.items() if name in gpus.split(", ")), None)
        expected = f"{gpu.mfu_default:g}" if gpu.mfu_default is not None else "none"
        assert documented == expected, f"docs/capacity.md says {documented!r} for {name}, the catalog {expected!r}"


def test_a_hybrid_stack_s_server_models_run_under_the_site_s_pue_and_budget() -> None:
    """Hybrid: p5.48xlarge in the cloud at PUE 1.2 against 1,000 kW; dgx-h100 on the site at PUE 1.5 against
    100 kW. 4 nodes of 10.2 kW: 48.96 kW in the cloud, 61.2 kW on the site (61% of its budget)."""
    site = Facility(pue=1.5, pue_source="site", budget_kw=100.0, budget_source="site budget")
    hybrid = Facility(pue=1.2, pue_source="cloud", budget_kw=1000.0, budget_source="cloud budget", site=site)
    catalog = load_catalog()
    cloud = estimate(catalog, _workload(nodes=4), hybrid, "p5.48xlarge")
    on_site = estimate(catalog, _workload(nodes=4), hybrid, "dgx-h100")
    assert cloud.figures["peak_facility_kw"].value == pytest.approx(48.96)
    assert on_site.figures["peak_facility_kw"].value == pytest.approx(61.2)
    assert on_site.figures["budget_share"].value == pytest.approx(0.612)
    assert "site budget" in on_site.figures["budget_share"].basis
