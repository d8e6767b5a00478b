"""Hardware catalog: data matches its source, facts carry sources, lookups and rules behave."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from gpuforge.catalog import CatalogError, load_catalog
from gpuforge.catalog.models import DATA_DIR

REPO = Path(__file__).resolve().parent.parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_aws_catalog", REPO / "scripts" / "gen_aws_catalog.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_committed_aws_catalog_matches_moto_snapshot() -> None:
    gen = _generator()
    committed = (DATA_DIR / "aws_instance_types.json").read_text(encoding="utf-8")
    assert committed == gen.render(gen.build_catalog()), "stale: run make catalog"


def test_generator_check_flag_reports_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = _generator()
    stale = tmp_path / "aws.json"
    stale.write_text(gen.render(gen.build_catalog()).replace('"vcpus": 192', '"vcpus": 191', 1))
    assert gen.main(["--check", "--output", str(stale)]) == 1
    assert "stale" in capsys.readouterr().err


def test_p5_facts_from_describe_instance_types() -> None:
    p5 = load_catalog().instance_type("p5.48xlarge")
    assert (p5.gpu_model, p5.gpu_count) == ("H100", 8)
    assert p5.max_efa_interfaces == 32 and p5.max_network_cards == 32 and len(p5.network_cards) == 32
    assert p5.efa_supported and p5.nvswitch and p5.gpudirect_rdma is True
    assert p5.nccl_busbw_reference_gbps == 450.0
    assert p5.azs_offering("us-east-1") and all(
        az.startswith("us-east-1") for az in p5.azs_offering("us-east-1")
    )
    assert "us-east-1" in p5.regions()
    assert p5.azs_offering("nowhere-1") == ()


def test_small_and_cpu_types() -> None:
    cat = load_catalog()
    g5 = cat.instance_type("g5.xlarge")
    assert not g5.efa_supported and g5.max_efa_interfaces == 0
    assert g5.nccl_busbw_reference_gbps is None and g5.gpudirect_rdma is None
    m7i = cat.instance_type("m7i.large")
    assert m7i.accelerator is None and m7i.gpu_count == 0 and m7i.gpu_model is None
    trn = cat.instance_type("trn1.32xlarge")
    assert trn.accelerator is not None and trn.accelerator.kind == "neuron" and trn.gpu_count == 16


def test_every_fact_has_a_source() -> None:
    facts: dict[str, Any] = yaml.safe_load((DATA_DIR / "facts.yaml").read_text(encoding="utf-8"))
    for section in ("gpus", "instance_extras", "servers", "fsx_lustre"):
        for name, entry in facts[section].items():
            assert str(entry.get("source", "")).strip(), f"{section}.{name} has no source"
    host = facts["host_power"]
    assert host["overhead_source"] and host["pue_source"]
    assert set(load_catalog().sources()) == {
        "gpuforge/catalog/data/aws_instance_types.json",
        "gpuforge/catalog/data/facts.yaml",
    }


@pytest.mark.parametrize(
    ("deployment", "gib", "throughput", "efa", "valid", "next_valid"),
    [
        ("SCRATCH_2", 1200, None, False, True, 1200),
        ("SCRATCH_2", 1300, None, False, False, 2400),
        ("SCRATCH_2", 3600, None, False, False, 4800),
        ("SCRATCH_1", 3600, None, False, True, 3600),
        ("SCRATCH_1", 4800, None, False, False, 7200),
        ("PERSISTENT_1", 100, 12, False, False, 6000),
        ("PERSISTENT_1", 3600, 40, False, True, 3600),
        ("PERSISTENT_2", 19200, 250, True, True, 19200),
        ("PERSISTENT_2", 2400, 250, True, False, 19200),
        ("PERSISTENT_2", 20000, 250, True, False, 38400),
        ("PERSISTENT_2", 2400, 250, False, True, 2400),
    ],
)
def test_fsx_capacity_steps(
    deployment: str, gib: int, throughput: int | None, efa: bool, valid: bool, next_valid: int
) -> None:
    rules = load_catalog().fsx_lustre(deployment)
    assert rules.is_valid_capacity(gib, throughput, efa=efa) is valid
    assert rules.next_valid_capacity(gib, throughput, efa=efa) == next_valid


def test_fsx_rules_and_metadata() -> None:
    cat = load_catalog()
    p2 = cat.fsx_lustre("PERSISTENT_2")
    assert p2.per_unit_throughputs == (125, 250, 500, 1000)
    assert p2.efa_supported and p2.replicated and p2.dra_supported
    assert p2.metadata_iops_valid(24000) and p2.metadata_iops_valid(1500)
    assert not p2.metadata_iops_valid(13000) and not p2.metadata_iops_valid(204000)
    s1 = cat.fsx_lustre("SCRATCH_1")
    assert not (s1.dra_supported or s1.replicated or s1.efa_supported)
    assert not s1.is_valid_capacity(2400, efa=True)
    with pytest.raises(CatalogError, match="only PERSISTENT_2"):
        s1.next_valid_capacity(2400, efa=True)
    with pytest.raises(CatalogError, match="allowed: 125, 250, 500, 1000"):
        p2.next_valid_capacity(2400, per_unit_throughput=200)
    assert "multiples of 19200" in p2.valid_capacities_description()
    with pytest.raises(CatalogError, match="SCRATCH_1"):
        cat.fsx_lustre("SCRATCH")


def test_node_power() -> None:
    cat = load_catalog()
    host_kw = cat.data.host_power.overhead_w / 1000
    assert cat.node_power_kw("p5.48xlarge") == pytest.approx(8 * 0.7 + host_kw)
    # An instance is charged its share of the host: p5's 192 vCPUs carry the whole overhead,
    # an m7i.large (2 vCPUs) 2/192 of it, a g5.12xlarge (48 vCPUs, 4 A10G) a quarter.
    assert cat.node_power_kw("m7i.large") == pytest.approx(host_kw * 2 / 192)
    assert cat.node_power_kw("g5.12xlarge") == pytest.approx(4 * 0.3 + host_kw * 48 / 192)
    assert cat.node_power_kw("dgx-b200") == 14.3
    assert cat.pue_default == 1.14  # AWS's published global average, for cloud placements
    with pytest.raises(CatalogError, match=r"gpus\.Trainium\.tdp_w"):
        cat.node_power_kw("trn1.32xlarge")


def test_overrides_deep_merge() -> None:
    base = load_catalog()
    cat = load_catalog(
        {
            "gpus": {"H100": {"tdp_w": 800}},
            "fsx_lustre": {"PERSISTENT_2": {"capacity": {"first_steps": [600, 1200, 2400]}}},
        }
    )
    assert cat.node_power_kw("p5.48xlarge") == pytest.approx(base.node_power_kw("p5.48xlarge") + 0.8)
    assert cat.gpu("H100").nvlink_links == 18  # untouched siblings survive the merge
    assert cat.fsx_lustre("PERSISTENT_2").is_valid_capacity(600)
    assert "gpus.H100.tdp_w" in cat.sources()["overrides"]
    assert base.gpu("H100").tdp_w == 700  # the cached default is not mutated
    assert load_catalog() is base


def test_override_adds_a_full_instance_type_row() -> None:
    row = load_catalog().instance_type("p5.48xlarge").model_dump(exclude={"extras"})
    row["instance_type"] = "p5.96xlarge"
    cat = load_catalog({"instance_types": {"p5.96xlarge": row}})
    assert cat.instance_type("p5.96xlarge").gpu_count == 8
    with pytest.raises(CatalogError, match=r"instance_types\[p9.48xlarge\]\.vcpus: Field required"):
        load_catalog({"instance_types": {"p9.48xlarge": {"instance_type": "p9.48xlarge"}}})


def test_override_with_bogus_field_names_the_path() -> None:
    with pytest.raises(CatalogError, match=r"gpus\.H100\.tdpw: Extra inputs are not permitted"):
        load_catalog({"gpus": {"H100": {"tdpw": 800}}})
    with pytest.raises(CatalogError, match=r"instance_types\[p5\.48xlarge\]\.efa_count"):
        load_catalog({"instance_types": {"p5.48xlarge": {"efa_count": 4}}})


def test_unknown_instance_type_suggests_close_names() -> None:
    cat = load_catalog()
    assert cat.has_instance_type("p5.48xlarge") and not cat.has_instance_type("p5.48xl")
    assert "p5.48xlarge" in cat.instance_type_names()
    with pytest.raises(KeyError, match=r"did you mean: p5\.48xlarge"):
        cat.instance_type("p5.48xl")
