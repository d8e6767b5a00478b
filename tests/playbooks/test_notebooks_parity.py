"""One template, two renderers: Ansible renders the hub's jupyterhub_config.py (the shared template of the jupyterhub
role) exactly as gpuforge.render.notebooks does and as the golden file says, from a jupyterhub_config the role's
argument specs accept."""

from __future__ import annotations

import sys
from pathlib import Path

from gpuforge.assets import PLAYBOOKS_DIR
from gpuforge.nodes.bake import run_playbook
from tests.slurm.test_notebooks import GOLDEN, HUB_ADDRESS, ON, _config

HERE = Path(__file__).resolve().parent


def test_ansible_python_and_golden_agree(tmp_path: Path) -> None:
    config = _config("dev", ON)
    inventory = {"all": {"hosts": {"localhost": {"ansible_python_interpreter": sys.executable}}}}
    result = run_playbook(HERE / "notebooks_golden.yml", inventory, extravars={
        "jupyterhub_config": config, "jupyterhub_hub_address": HUB_ADDRESS,
        "notebooks_role_dir": str(PLAYBOOKS_DIR / "roles" / "jupyterhub"),
        "notebooks_templates_dir": str(PLAYBOOKS_DIR / "templates" / "notebooks"),
        "notebooks_golden_dir": str(tmp_path)})
    assert result.ok, [f"{f.task}: {f.message}" for f in result.failures]
    assert (tmp_path / "jupyterhub_config.py").read_text() == GOLDEN.read_text()
