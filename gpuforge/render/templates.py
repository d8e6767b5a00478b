"""The one Jinja environment for gpuforge's templates (gpuforge/assets/templates/ and the playbooks' shared
gpuforge/assets/playbooks/templates/), shared by the components and the CLI.

Ansible renders the same files; `version` mirrors Ansible's `version` test so a template
behaves the same in both renderers.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2
from packaging.version import Version

from gpuforge.assets import PLAYBOOK_TEMPLATES_DIR, TEMPLATES_DIR

_OPERATORS = {
    "<": Version.__lt__,
    "lt": Version.__lt__,
    "<=": Version.__le__,
    "le": Version.__le__,
    ">": Version.__gt__,
    "gt": Version.__gt__,
    ">=": Version.__ge__,
    "ge": Version.__ge__,
    "==": Version.__eq__,
    "eq": Version.__eq__,
    "!=": Version.__ne__,
    "ne": Version.__ne__,
}


def version_test(value: str, other: str, operator: str = "eq") -> bool:
    return bool(_OPERATORS[operator](Version(str(value)), Version(str(other))))


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        # Ansible's template action also searches the rendered template's own directory, so a Slurm template
        # imports its sibling by bare name (slurm.conf.j2: `from 'node.j2'`); the same name resolves here.
        loader=jinja2.FileSystemLoader([TEMPLATES_DIR, PLAYBOOK_TEMPLATES_DIR, PLAYBOOK_TEMPLATES_DIR / "slurm"]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.tests["version"] = version_test
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def macro(template: str, name: str) -> Any:
    """A macro of *template*, callable from Python: one template path for what Python and a template both write."""
    return getattr(environment().get_template(template).module, name)
