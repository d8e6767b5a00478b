"""The playbooks read facts only through ansible_facts: run_playbook turns off Ansible's copy of each fact into a
top-level ansible_* variable (ANSIBLE_INJECT_FACT_VARS=False, gpuforge/nodes/bake.py), so a task or template
that used one (ansible_distribution, ansible_hostname, ...) would find it undefined, or worse, silently take a
default() in its place."""

from __future__ import annotations

import re
from pathlib import Path

from gpuforge.nodes import bake

REPO = Path(__file__).resolve().parents[2]
# Ansible's own variables (magic, connection and play variables), which are not facts.
NOT_FACTS = {
    "ansible_facts",
    "ansible_check_mode",
    "ansible_connection",
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_become",
    "ansible_python_interpreter",
    "ansible_ssh_common_args",
    "ansible_ssh_private_key_file",
    "ansible_managed",
    "ansible_loop",
    "ansible_loop_var",
    "ansible_index_var",
    "ansible_play_hosts",
    "ansible_play_hosts_all",
    "ansible_play_batch",
    "ansible_play_name",
    "ansible_version",
    "ansible_parent_role_names",
    "ansible_role_name",
    "ansible_search_path",
    "ansible_config_file",
    # Not a variable: the key of an async task's result (async_status reads it back from the registered result).
    "ansible_job_id",
    # Not a variable: secret_store's name for a secret kept in Ansible Vault (secret_store_ref.store).
    "ansible_vault",
}
NAME = re.compile(r"\bansible_[a-z0-9_]+")


def _sources() -> list[Path]:
    root = REPO / "gpuforge" / "assets" / "playbooks"
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in {".yml", ".yaml", ".j2"})


def test_run_playbook_does_not_inject_facts_as_variables() -> None:
    source = Path(bake.__file__).read_text()
    assert '"ANSIBLE_INJECT_FACT_VARS": "False"' in source


def test_playbooks_read_facts_only_through_ansible_facts() -> None:
    found = {
        f"{path.relative_to(REPO)}: {name}"
        for path in _sources()
        for name in NAME.findall(path.read_text())
        if name not in NOT_FACTS
    }
    assert not found, f"facts read as top-level variables (use ansible_facts['...']): {sorted(found)}"


def test_the_check_finds_a_top_level_fact() -> None:
    assert NAME.findall("{{ ansible_distribution }}") == ["ansible_distribution"]
    assert NAME.findall("{{ ansible_facts['distribution'] }}") == ["ansible_facts"]
