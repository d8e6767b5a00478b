"""gpuforge as a team gets it: the wheel built from this checkout, installed into a fresh virtual environment
outside the checkout. The environment gets gpuforge only from the wheel; its dependencies are this
environment's, reached through a plain .pth line (which runs none of the .pth hooks there, so the editable
install of this checkout stays invisible)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from tests.support import REPO

# Console scripts of gpuforge's dependencies that gpuforge runs as programs (ansible-runner starts
# ansible-playbook from the PATH gpuforge.nodes.bake gives it: the environment's bin first).
DEPENDENCY_SCRIPTS = ("ansible-playbook",)


def build_wheel(dest: Path) -> Path:
    """`pip wheel` of this checkout, without dependencies; the .whl file."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dest), str(REPO)],
        check=True,
        capture_output=True,
    )
    return next(dest.glob("*.whl"))


def fresh_venv(venv: Path) -> Path:
    """A new virtual environment without gpuforge, whose dependencies are this one's; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = venv / "bin" / "python"
    # What pip writes into bin/ when it installs the dependencies there: their scripts, run by this python.
    for script in DEPENDENCY_SCRIPTS:
        source = Path(sysconfig.get_paths()["scripts"]) / script
        body = source.read_text().split("\n", 1)[1]
        (venv / "bin" / script).write_text(f"#!{python}\n{body}")
        (venv / "bin" / script).chmod(0o755)
    return python


def install_wheel(wheel: Path, venv: Path) -> tuple[Path, set[str]]:
    """*wheel* unpacked into a fresh venv (what pip does with a pure-Python wheel, minus gpuforge's own script
    shim): the venv's python and the wheel's top-level names."""
    python = fresh_venv(venv)
    site = next(venv.glob("lib/python3*/site-packages"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
        top_level = {name.split("/")[0] for name in archive.namelist()}
    return python, top_level
