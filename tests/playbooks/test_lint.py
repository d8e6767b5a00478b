"""ansible-lint production profile with an empty skip list, and --syntax-check of every playbook."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpuforge.assets import PLAYBOOKS_DIR
from tests.support import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLAYBOOKS = [*sorted(PLAYBOOKS_DIR.glob("*.yml")), REPO / "tests/playbooks/nccl_goldens.yml"]
ROLES = sorted(p for p in (PLAYBOOKS_DIR / "roles").iterdir() if p.is_dir())


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists() and shutil.which(name) is None:
        skip_or_fail(f"{name} not installed (pip install -e .[dev])")
    return str(path if path.exists() else name)


def test_lint_config_is_production_with_nothing_skipped() -> None:
    config = yaml.safe_load((REPO / ".ansible-lint").read_text())
    assert config["profile"] == "production"
    assert config["skip_list"] == [] and config.get("warn_list", []) == []


@pytest.mark.slow
def test_ansible_lint_production_profile_is_clean() -> None:
    proc = subprocess.run(
        [
            _tool("ansible-lint"),
            "--profile",
            "production",
            "--strict",
            "gpuforge/assets/playbooks/",
            "tests/playbooks/nccl_goldens.yml",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "Passed" in proc.stdout + proc.stderr


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=lambda p: p.name)
def test_syntax_check(playbook: Path) -> None:
    proc = subprocess.run(
        [_tool("ansible-playbook"), "--syntax-check", "-i", "localhost,", str(playbook)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PATH": f"{BIN}:/usr/bin:/bin", "ANSIBLE_ROLES_PATH": str(REPO / "gpuforge/assets/playbooks/roles")},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_every_role_has_argument_specs_and_prefixed_defaults(role: Path) -> None:
    specs = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]
    assert "main" in specs
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text()) or {}
    documented = set().union(*(set(entry.get("options", {})) for entry in specs.values()))
    for name in defaults:
        assert name.startswith(role.name + "_"), f"{role.name}: {name} lacks the role prefix"
        assert name in documented, f"{role.name}: {name} missing from meta/argument_specs.yml"
    vars_dir = role / "vars"
    loads = any("distribution_major_version" in path.read_text() for path in (role / "tasks").glob("*.yml"))
    if loads or (vars_dir.is_dir() and any(vars_dir.glob("*-*.yml"))):
        # Each supported distribution has its file (a missing one fails first_found on that distribution),
        # and they set the same variables (one left out would be undefined there only).
        per_distribution = {p.name: set(yaml.safe_load(p.read_text()) or {}) for p in vars_dir.glob("*-*.yml")}
        # Debian 13 as well where a role runs there (the Slurm hosts' roles: tests/slurm/test_slurm_trixie.py).
        supported = {"Debian-12.yml", "Ubuntu-22.yml", "Ubuntu-24.yml"}
        assert supported <= set(per_distribution) <= supported | {"Debian-13.yml"}
        assert len({frozenset(keys) for keys in per_distribution.values()}) == 1, per_distribution
