"""One template, two renderers: the nccl_tuning role renders every golden case exactly as
gpuforge.render.nccl does (and as the golden files say)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from gpuforge.nodes.bake import run_playbook
from gpuforge.render.nccl import NcclInputs, render_nccl_env
from tests.support import skip_or_fail

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
GOLDEN_DIR = HERE.parent / "golden" / "nccl"
CASES = yaml.safe_load((GOLDEN_DIR / "cases.yml").read_text())


@pytest.fixture(scope="module")
def ansible_rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.geteuid() != 0:
        skip_or_fail("needs root: the nccl_tuning role writes root-owned files")
    out = tmp_path_factory.mktemp("nccl-ansible")
    inventory = {"all": {"hosts": {"localhost": {"ansible_python_interpreter": os.sys.executable}}}}
    result = run_playbook(
        HERE / "nccl_goldens.yml",
        inventory,
        extravars={"nccl_golden_cases": CASES, "nccl_golden_dir": str(out)},
    )
    assert result.ok, [f"{f.task}: {f.message}" for f in result.failures]
    return out


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize(("fmt", "suffix"), [("conf", ".conf"), ("profile", ".sh")])
def test_ansible_python_and_golden_agree(ansible_rendered: Path, case: str, fmt: str, suffix: str) -> None:
    data = dict(CASES[case])
    data["ib_hcas"] = tuple(data.get("ib_hcas", ()))
    python = render_nccl_env(NcclInputs(**data), fmt)  # type: ignore[arg-type]
    ansible = (ansible_rendered / f"{case}{suffix}").read_text()
    golden = (GOLDEN_DIR / f"{case}{suffix}").read_text()
    assert ansible == python
    assert python == golden


@pytest.mark.parametrize(
    ("variables", "needle"),
    [
        ({"nccl_tuning_debug": "VERBOSE"}, "nccl_tuning_debug must be one of VERSION, WARN, INFO, TRACE"),
        ({"nccl_tuning_extra": {"NCCL_X": "a'; reboot; '"}}, "Unsafe NCCL tuning values"),
        ({"nccl_tuning_extra": {"bad name": "1"}}, "Unsafe NCCL tuning values"),
    ],
)
def test_the_role_refuses_values_that_could_break_out(
    tmp_path: Path, variables: dict[str, object], needle: str
) -> None:
    """The Ansible renderer validates as gpuforge.render.nccl does: nothing reaches the files."""
    if os.geteuid() != 0:
        skip_or_fail("needs root: the nccl_tuning role writes root-owned files")
    inventory = {"all": {"hosts": {"localhost": {"ansible_python_interpreter": os.sys.executable}}}}
    case = {"bad": {"fabric": "none", **{k.removeprefix("nccl_tuning_"): v for k, v in variables.items()}}}
    result = run_playbook(
        HERE / "nccl_goldens.yml", inventory, extravars={"nccl_golden_cases": case, "nccl_golden_dir": str(tmp_path)}
    )
    assert not result.ok
    assert any(needle in failure.message for failure in result.failures), result.failures
    assert not (tmp_path / "bad.sh").exists()
