"""Regenerate what the Slurm contract (gpuforge/render/slurm_contract.py) generates: the slurm_config option of
the Slurm roles' meta/argument_specs.yml and the slurm_config table in docs/slurm.md (`make slurm-contract`)."""

from __future__ import annotations

from pathlib import Path

from gpuforge.assets import PLAYBOOKS_DIR
from gpuforge.render.slurm_contract_views import ROLES, with_generated_option, with_generated_table

DOCS = Path(__file__).resolve().parents[1] / "docs" / "slurm.md"


def main() -> None:
    for role in ROLES:
        path = PLAYBOOKS_DIR / "roles" / role / "meta" / "argument_specs.yml"
        path.write_text(with_generated_option(path.read_text()))
        print(f"wrote {path}")
    DOCS.write_text(with_generated_table(DOCS.read_text()))
    print(f"wrote {DOCS}")


if __name__ == "__main__":
    main()
