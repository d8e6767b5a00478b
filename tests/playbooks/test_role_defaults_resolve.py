"""A role's defaults and argument-spec defaults may name only variables that exist when the role starts.

Ansible checks a role's arguments (meta/argument_specs.yml) before its first task, templating the defaults as it
goes; variables a task loads later (the per-distribution vars/<distribution>.yml of include_vars) are undefined
then, and the role fails on every host before it does anything. That shipped once: the prometheus role's key
owner defaulted to `{{ __prometheus_user }}`, defined only in vars/Debian-12.yml, and monitoring.yml failed on
every monitoring host (found by the booted monitoring test, never by a fast one).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from gpuforge.assets import PLAYBOOKS_DIR

ROLES = PLAYBOOKS_DIR / "roles"
# A role's private variables (`__<role>_...`): the ones a per-distribution vars file may define.
PRIVATE = re.compile(r"\b(__[a-z0-9_]+)\b")


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.is_file() else None


def _defined_at_start(role: Path) -> set[str]:
    """Variables the role defines before its arguments are checked: vars/main.yml and defaults/main.yml."""
    names: set[str] = set()
    for source in (role / "vars" / "main.yml", role / "defaults" / "main.yml"):
        names |= set(_yaml(source) or {})
    return names


def _default_texts(role: Path) -> list[tuple[str, str]]:
    """(where, text) of every default value: defaults/main.yml's and meta/argument_specs.yml's."""
    texts = [
        (f"defaults/main.yml {name}", str(value))
        for name, value in (_yaml(role / "defaults" / "main.yml") or {}).items()
    ]
    for entry, spec in ((_yaml(role / "meta" / "argument_specs.yml") or {}).get("argument_specs") or {}).items():
        for name, option in (spec.get("options") or {}).items():
            if isinstance(option, dict) and "default" in option:
                texts.append((f"argument_specs {entry}.{name}", str(option["default"])))
    return texts


def undefined_at_start(role: Path) -> list[str]:
    defined = _defined_at_start(role)
    return [
        f"{role.name}: {where} names {name}, which only a later task defines"
        for where, text in _default_texts(role)
        for name in PRIVATE.findall(text)
        if name not in defined
    ]


def test_every_default_names_only_what_exists_when_the_role_starts() -> None:
    problems = [problem for role in sorted(ROLES.iterdir()) if role.is_dir() for problem in undefined_at_start(role)]
    assert not problems, "\n".join(problems)


def test_the_check_finds_a_default_that_names_a_per_distribution_variable(tmp_path: Path) -> None:
    role = tmp_path / "demo"
    for sub, text in (
        ("defaults", "demo_owner: '{{ __demo_user }}'\ndemo_mode: '{{ __demo_mode }}'\n"),
        ("vars", "__demo_mode: '0600'\n"),
    ):
        (role / sub).mkdir(parents=True)
        (role / sub / "main.yml").write_text(text)
    (role / "vars" / "Debian-12.yml").write_text("__demo_user: demo\n")
    assert undefined_at_start(role) == [
        "demo: defaults/main.yml demo_owner names __demo_user, which only a later task defines"
    ]
