"""The playbooks directory is complete on its own: a copy of gpuforge/assets/playbooks that follows its links (as
the image pipeline's archive and the wheel do), without the rest of the checkout or the package, has every template
and file its roles reach for.

- The templates the roles share with gpuforge's own rendering (Slurm, containers, NCCL, IPoIB, the Lustre mount)
  live in its templates/, reached as {{ role_path }}/../../templates or through a link inside the directory.
- The Python programs a role installs that the package runs too (the health parsers, the node naming, the
  lifecycle program, the EC2 topology) are links in the role's files/ to their one source in the package.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuforge.assets import ASSETS_DIR, PLAYBOOKS_DIR
from gpuforge.infra.aws.image_pipeline import archive_files

PACKAGE = ASSETS_DIR.parent
ROLE_PATH = re.compile(r"\{\{\s*role_path\s*\}\}(/[^\"'\s}]*)")
ROLE_FILES = ("defaults", "vars", "tasks", "handlers", "meta")


def _references(playbooks: Path) -> list[tuple[Path, Path]]:
    """(file, what it names) for each {{ role_path }}/... in a role's YAML, resolved from that role."""
    found = []
    for role in sorted((playbooks / "roles").iterdir()):
        for part in ROLE_FILES:
            for path in sorted((role / part).rglob("*.yml")) if (role / part).is_dir() else []:
                for match in ROLE_PATH.finditer(path.read_text()):
                    found.append((path, Path(f"{role}{match.group(1)}").resolve()))
    return found


def _outside(playbooks: Path, linked_into: Path) -> list[str]:
    """Each {{ role_path }}/... that leads outside *playbooks* or to nothing, and each link under it that leads
    anywhere but an existing file inside *linked_into*."""
    root = playbooks.resolve()
    problems = [
        f"{path.relative_to(playbooks)} names {target}"
        for path, target in _references(playbooks)
        if root not in target.parents or not target.exists()
    ]
    for link in sorted(p for p in playbooks.rglob("*") if p.is_symlink()):
        target = link.resolve()
        if linked_into.resolve() not in target.parents or not target.is_file():
            problems.append(f"{link.relative_to(playbooks)} links to {target}")
    return problems


def test_the_roles_reach_nothing_by_path_outside_the_playbooks_directory() -> None:
    assert _references(PLAYBOOKS_DIR), "no {{ role_path }}/... found: the pattern no longer matches the roles"
    assert _outside(PLAYBOOKS_DIR, linked_into=PACKAGE) == []


def test_the_check_sees_a_role_reaching_outside(tmp_path: Path) -> None:
    """What the roles did before: templates beside the playbooks directory, a package module by a relative path."""
    role = tmp_path / "playbooks" / "roles" / "demo"
    (role / "defaults").mkdir(parents=True)
    (role / "tasks").mkdir()
    (role / "defaults" / "main.yml").write_text('demo_templates_dir: "{{ role_path }}/../../../templates/slurm"\n')
    (role / "tasks" / "main.yml").write_text('- ansible.builtin.copy: {src: "{{ role_path }}/../../../nodes/x.py"}\n')
    (tmp_path / "templates" / "slurm").mkdir(parents=True)
    (role / "templates").mkdir()
    (role / "templates" / "x.j2").symlink_to("../../../nothing.j2")
    assert len(_outside(tmp_path / "playbooks", linked_into=tmp_path)) == 3


def test_the_image_pipeline_ships_every_file_of_the_playbooks_directory_itself() -> None:
    """The AMI bake gets the playbooks directory alone, links followed: the role's linked programs are in it."""
    shipped = archive_files()
    assert {name.split("/", 1)[0] for name in shipped} == {"playbooks"}
    for name in ("roles/slurm_compute/files/health.py", "roles/slurm_scaler/files/lifecycle.py",
                 "roles/slurm_controller/files/ec2_topology.py", "templates/slurm/slurm.conf.j2"):
        assert shipped[f"playbooks/{name}"].read_bytes() == (PLAYBOOKS_DIR / name).read_bytes()


@pytest.mark.slow
def test_a_copy_that_follows_links_passes_ansibles_syntax_check_alone(tmp_path: Path) -> None:
    copy = tmp_path / "playbooks"
    shutil.copytree(PLAYBOOKS_DIR, copy, symlinks=False, ignore=shutil.ignore_patterns("__pycache__"))
    assert not [p for p in copy.rglob("*") if p.is_symlink()]
    assert _outside(copy, linked_into=copy) == []
    ansible = Path(sys.executable).parent / "ansible-playbook"
    for playbook in sorted(copy.glob("*.yml")):
        result = subprocess.run([str(ansible), "--syntax-check", "-i", "localhost,", str(playbook)], cwd=tmp_path,
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, f"{playbook.name}:\n{result.stdout}{result.stderr}"
