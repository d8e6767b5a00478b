"""NCCL environment: golden files per fabric and instance type, the derivation rules, and parity of
the `version` test with Ansible's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from gpuforge.render.nccl import NcclInputs, nccl_env, parse_nccl_conf, render_nccl_env, version_test

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden" / "nccl"
CASES: dict[str, dict[str, Any]] = yaml.safe_load((GOLDEN_DIR / "cases.yml").read_text())


def _inputs(case: str) -> NcclInputs:
    data = dict(CASES[case])
    data["ib_hcas"] = tuple(data.get("ib_hcas", ()))
    return NcclInputs(**data)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize(("fmt", "suffix"), [("conf", ".conf"), ("profile", ".sh")])
def test_rendering_matches_golden(case: str, fmt: str, suffix: str) -> None:
    rendered = render_nccl_env(_inputs(case), fmt)  # type: ignore[arg-type]
    golden = GOLDEN_DIR / f"{case}{suffix}"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(rendered)
    assert golden.is_file(), f"{golden} missing: run UPDATE_GOLDEN=1 pytest {__file__}"
    assert rendered == golden.read_text(), f"{case}: rendering differs from {golden.name}"


def test_required_golden_cases_exist() -> None:
    assert {
        "efa-p5.48xlarge",
        "efa-p4d-plugin-1.6",
        "efa-p5en.48xlarge",
        "efa-g5.12xlarge",
        "infiniband-8rail",
        "roce-2port",
    } <= set(CASES)


def test_p5_with_current_plugin_gets_only_the_socket_interface() -> None:
    assert nccl_env(_inputs("efa-p5.48xlarge")) == {"NCCL_SOCKET_IFNAME": "en"}


def test_plugin_1_6_on_p4d_enables_gpudirect_rdma() -> None:
    env = nccl_env(_inputs("efa-p4d-plugin-1.6"))
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert "FI_PROVIDER" not in env and "NCCL_PROTO" not in env


@pytest.mark.parametrize("plugin", ["1.7.0", "1.7.3", "1.13.2"])
def test_plugin_1_7_and_later_never_sets_device_rdma(plugin: str) -> None:
    env = nccl_env(NcclInputs(fabric="efa", instance_type="p4d.24xlarge", aws_ofi_nccl_version=plugin))
    assert "FI_EFA_USE_DEVICE_RDMA" not in env


def test_plugin_before_1_7_without_gpudirect_rdma_does_not_set_device_rdma() -> None:
    # g5: the catalog's gdr flag is false (aws-ofi-nccl src/platform-aws.cpp).
    for plugin in ("1.5.0", "1.6.0"):
        env = nccl_env(NcclInputs(fabric="efa", instance_type="g5.48xlarge", aws_ofi_nccl_version=plugin))
        assert "FI_EFA_USE_DEVICE_RDMA" not in env


@pytest.mark.parametrize("plugin", ["1.4.0", "1.5.0", "1.6.0", "1.6.5"])
def test_plugin_before_1_7_on_a_gpudirect_type_sets_device_rdma(plugin: str) -> None:
    """aws-ofi-nccl doc/efa-env-var.md: FI_EFA_USE_DEVICE_RDMA=1 is needed until plugin 1.7 (with libfabric
    1.18) on GPUDirect RDMA types: 1.5 and older too, not only 1.6.x."""
    inputs = NcclInputs(fabric="efa", instance_type="p4d.24xlarge", aws_ofi_nccl_version=plugin, gpudirect_rdma=True)
    assert nccl_env(inputs)["FI_EFA_USE_DEVICE_RDMA"] == "1"


def test_inventory_sets_gpudirect_rdma_from_the_catalog() -> None:
    from gpuforge.catalog import load_catalog
    from gpuforge.nodes.inventory import build_inventory

    catalog = load_catalog()
    for instance_type in ("p4d.24xlarge", "p5.48xlarge", "g5.12xlarge"):
        outputs = {
            "cluster": {"name": "c"},
            "software": {"awsOfiNcclVersion": "1.5.0"},
            "nodeGroups": {"g": {"fabric": "efa", "instanceType": instance_type, "gpusPerNode": 8}},
        }
        group = build_inventory("c", outputs=outputs)["all"]["children"]["ng_g"]["vars"]
        assert group["nccl_tuning_gpudirect_rdma"] is bool(catalog.instance_type(instance_type).gpudirect_rdma)


def test_plugin_1_5_and_older_selects_provider_and_protocol() -> None:
    env = nccl_env(_inputs("efa-p4d-plugin-1.5"))
    assert env["FI_PROVIDER"] == "efa"
    assert env["NCCL_PROTO"] == "simple"
    newer = nccl_env(NcclInputs(fabric="efa", instance_type="p4d.24xlarge", aws_ofi_nccl_version="1.5.1"))
    assert "FI_PROVIDER" not in newer and "NCCL_PROTO" not in newer


def test_old_installer_with_new_nccl_disables_cuda_sync_memops() -> None:
    assert nccl_env(_inputs("efa-p5en.48xlarge"))["FI_EFA_SET_CUDA_SYNC_MEMOPS"] == "0"
    fixed = _inputs("efa-p5en.48xlarge").model_copy(update={"efa_installer_version": "1.29.1"})
    assert "FI_EFA_SET_CUDA_SYNC_MEMOPS" not in nccl_env(fixed)
    old_nccl = _inputs("efa-p5en.48xlarge").model_copy(update={"nccl_version": "2.18.5"})
    assert "FI_EFA_SET_CUDA_SYNC_MEMOPS" not in nccl_env(old_nccl)


def test_g5_and_g6_copy_shared_memory_with_cuda() -> None:
    assert nccl_env(_inputs("efa-g5.12xlarge"))["NCCL_SHM_USE_CUDA_MEMCPY"] == "1"
    g6 = NcclInputs(fabric="none", instance_type="g6.xlarge")
    assert nccl_env(g6)["NCCL_SHM_USE_CUDA_MEMCPY"] == "1"
    assert "NCCL_SHM_USE_CUDA_MEMCPY" not in nccl_env(_inputs("efa-p5.48xlarge"))


def test_rail_optimized_infiniband_pins_hcas_and_forbids_cross_nic() -> None:
    env = nccl_env(_inputs("infiniband-8rail"))
    assert env["NCCL_IB_HCA"] == "=mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11"
    assert env["NCCL_CROSS_NIC"] == "0"
    assert not any(key.startswith("FI_") for key in env)
    not_rail = _inputs("infiniband-8rail").model_copy(update={"rail_optimized": False})
    assert "NCCL_CROSS_NIC" not in nccl_env(not_rail)


def test_roce_sets_gid_index_and_traffic_class() -> None:
    env = nccl_env(_inputs("roce-2port"))
    assert env == {
        "NCCL_SOCKET_IFNAME": "bond0",
        "NCCL_IB_HCA": "=mlx5_0,mlx5_1",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_TC": "106",
    }
    default_gid = NcclInputs(fabric="roce")
    assert nccl_env(default_gid)["NCCL_IB_GID_INDEX"] == "3"


def test_every_emitted_variable_has_a_reason_and_comments_are_safe_for_nccl() -> None:
    for case in CASES:
        lines = render_nccl_env(_inputs(case), "conf").splitlines()
        for index, line in enumerate(lines):
            if line and not line.startswith("#"):
                assert lines[index - 1].startswith("# "), f"{case}: {line} has no reason above it"
            if line.startswith("#"):
                # NCCL releases before 2.20 read any line with '=' as a variable, comments included.
                assert "=" not in line, f"{case}: comment with '=': {line}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_profile_exports_the_same_values_as_the_conf(case: str, tmp_path: Path) -> None:
    profile = tmp_path / "nccl.sh"
    profile.write_text(render_nccl_env(_inputs(case), "profile"))
    out = subprocess.run(
        ["sh", "-c", f". {profile} && env"], check=True, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}
    ).stdout
    exported = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    expected = nccl_env(_inputs(case))
    assert {key: exported.get(key) for key in expected} == expected


def test_extra_variables_are_emitted_last_and_validated() -> None:
    env = nccl_env(NcclInputs(fabric="none", extra={"NCCL_NVLS_ENABLE": "0"}))
    assert list(env)[-1] == "NCCL_NVLS_ENABLE"
    with pytest.raises(ValidationError, match="not an environment variable name"):
        NcclInputs(fabric="none", extra={"nccl debug": "INFO"})
    with pytest.raises(ValidationError, match="only letters"):
        NcclInputs(fabric="none", extra={"NCCL_DEBUG": "$(reboot)"})


def test_nccl_debug_takes_only_nccls_levels() -> None:
    assert nccl_env(NcclInputs(fabric="none", debug="INFO"))["NCCL_DEBUG"] == "INFO"
    with pytest.raises(ValidationError, match="VERSION"):
        NcclInputs(fabric="none", debug="VERBOSE")  # type: ignore[arg-type]


def test_a_value_cannot_break_out_of_the_shell_file(tmp_path: Path) -> None:
    """Validation refuses shell metacharacters; the template single-quotes even so. A hostile value
    that bypassed validation still ends up as a literal, and runs nothing when the file is sourced."""
    hostile = "x'; touch " + str(tmp_path / "pwned") + "; echo '"
    inputs = NcclInputs.model_construct(**{**NcclInputs(fabric="none").model_dump(), "extra": {"NCCL_X": hostile}})
    profile = tmp_path / "nccl.sh"
    profile.write_text(render_nccl_env(inputs, "profile"))
    out = subprocess.run(
        ["sh", "-c", f". {profile} && printf %s \"$NCCL_X\""], check=True, capture_output=True, text=True
    ).stdout
    assert out == hostile
    assert not (tmp_path / "pwned").exists()


def test_efa_without_plugin_version_is_refused() -> None:
    with pytest.raises(ValidationError, match="aws_ofi_nccl_version"):
        NcclInputs(fabric="efa", instance_type="p5.48xlarge")


def test_hcas_on_efa_are_refused() -> None:
    with pytest.raises(ValidationError, match="infiniband/roce"):
        NcclInputs(fabric="efa", aws_ofi_nccl_version="1.13.2", ib_hcas=("mlx5_0",))


def test_conf_parser_keeps_the_first_value_like_nccl() -> None:
    assert parse_nccl_conf("# a comment\nA=1\nA=2\nB==x:1\nnot a var\n") == {"A": "1", "B": "=x:1"}


VERSION_PAIRS = [
    ("1.6.0", "1.6", ">="),
    ("1.6.0", "1.7", "<"),
    ("1.13.2", "1.7", ">="),
    ("1.5.0", "1.5.0", "<="),
    ("1.5.1", "1.5.0", "<="),
    ("2.19.3", "2.19", ">="),
    ("2.18.5", "2.19", "ge"),
    ("1.29.0", "1.29.1", "lt"),
    ("1.29.1", "1.29.1", "eq"),
    ("1.10", "1.9", "gt"),
    ("2.1.0", "1.18", "!="),
    ("1.0rc1", "1.0", "<="),
]


@pytest.mark.parametrize(("left", "right", "op"), VERSION_PAIRS)
def test_version_test_agrees_with_ansible(left: str, right: str, op: str) -> None:
    ansible_core = pytest.importorskip("ansible.plugins.test.core")
    assert version_test(left, right, op) == ansible_core.version_compare(left, right, op)
