"""gpuforge's non-Python files, as package data: the Jinja templates, the Ansible playbooks and
roles (with the templates they share with gpuforge's own rendering, so the playbooks directory is usable on its
own), the monitoring rules with their tests (all three live here, in the package, in a checkout and
in a wheel alike), and the example stack, workflows and policy packs that `gpuforge init` copies.

Those three are the repository's own (stacks/, .github/workflows/, policy-packs/): a wheel
carries copies of them here (setup.py maps them in), a checkout reads them where they are.
"""

from __future__ import annotations

from pathlib import Path

# A real directory, not an importlib.resources Traversable: Ansible and Jinja read these files by path, and
# pip installs a wheel unzipped, so the package's directory is where they are (setup.py runs this file too).
ASSETS_DIR = Path(__file__).resolve().parent
TEMPLATES_DIR = ASSETS_DIR / "templates"  # the Pulumi program's own (cloud-init user data)
PLAYBOOKS_DIR = ASSETS_DIR / "playbooks"
# What the roles write and gpuforge renders the same (Slurm, containers, NCCL, IPoIB, the Lustre mount): inside the
# playbooks directory, which the roles reach as {{ role_path }}/../../templates, so it is complete on its own (the
# image pipeline ships only it).
PLAYBOOK_TEMPLATES_DIR = PLAYBOOKS_DIR / "templates"
MONITORING_DIR = ASSETS_DIR / "monitoring"

# The repository's own files that a wheel carries here: name -> place in a checkout (setup.py reads this).
REPOSITORY_FILES = {"stacks": "stacks", "workflows": ".github/workflows", "policy_packs": "policy-packs"}


def repository_dir(name: str) -> Path:
    """The example stacks, workflows or policy packs: the wheel's copy, else the checkout's."""
    bundled = ASSETS_DIR / name
    return bundled if bundled.is_dir() else ASSETS_DIR.parents[1] / REPOSITORY_FILES[name]
