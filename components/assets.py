"""Where gpuforge's non-Python files are: the Jinja templates, the Ansible playbooks and the
example stacks and workflows that `gpuforge init` copies.

A source checkout keeps them at the repository's top (templates/, playbooks/, ...); a built
wheel carries them as package data under components/bundled/ (setup.py maps them there), so an
installed gpuforge works from any directory.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
BUNDLED = _HERE / "bundled"
SOURCE_ROOT = _HERE.parent  # the repository, when running from a checkout

# name -> its place in a checkout, relative to the repository root (setup.py reads this too)
ASSETS = {
    "templates": "templates",
    "playbooks": "playbooks",
    "stacks": "stacks",
    "workflows": ".github/workflows",
}


def asset_dir(name: str) -> Path:
    """The directory of one kind of asset: bundled in a wheel, else the checkout's."""
    bundled = BUNDLED / name
    return bundled if bundled.is_dir() else SOURCE_ROOT / ASSETS[name]


TEMPLATES_DIR = asset_dir("templates")
PLAYBOOKS_DIR = asset_dir("playbooks")
