"""Every Python file is linted and type-checked, also the scripts the roles install under their command
names (no .py suffix, found by their shebang): ruff and mypy only find Python files by suffix, so
pyproject.toml lists these scripts, and a new one left out of the lists fails here."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def python_scripts() -> set[str]:
    """Files of the repository (tracked, or new and not ignored) without a .py suffix whose first line runs
    Python."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    scripts = set()
    for name in listed:
        path = REPO / name
        if path.suffix == ".py" or not path.is_file() or path.is_symlink():
            continue
        with path.open("rb") as file:
            first = file.readline(200)
        if first.startswith(b"#!") and b"python" in first:
            scripts.add(name)
    return scripts


def test_the_role_scripts_are_found() -> None:
    # The scripts this test was written for: the prolog health check, the EC2 topology writer, collectors.
    assert {
        "gpuforge/assets/playbooks/roles/slurm_compute/files/gpuforge-healthcheck",
        "gpuforge/assets/playbooks/roles/slurm_controller/files/gpuforge-slurm-topology",
        "gpuforge/assets/playbooks/roles/node_textfile_collectors/files/efa-counters",
    } <= python_scripts()


def test_ruff_checks_every_python_script() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    shown = subprocess.run(
        [str(ruff), "check", "--show-files", "."], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    checked = {Path(line.strip()).resolve() for line in shown.splitlines() if line.strip()}
    missing = sorted(name for name in python_scripts() if (REPO / name).resolve() not in checked)
    assert not missing, f"add to [tool.ruff] extend-include in pyproject.toml: {missing}"


def test_mypy_checks_every_python_script() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["scripts_are_modules"] is True  # else every script is a module "__main__", and they clash
    files = config["files"]
    missing = [name for name in python_scripts() if not any(name == f or name.startswith(f + "/") for f in files)]
    assert not missing, f"add to [tool.mypy] files in pyproject.toml: {sorted(missing)}"
