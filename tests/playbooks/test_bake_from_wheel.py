"""`gpuforge bake STACK --target rootfs:PATH --check` from the installed wheel, outside the checkout: the
playbooks, roles and their templates come from the wheel's package data (tests/installed.py), into a fresh
copy of the cached Debian 12 root file system (tests/playbooks/rootfs.py), for dev's GPU group as `gpuforge
init` scaffolds it. Every production package source is pointed at the stand-ins with --extra-vars, as a
user points them at a mirror; nothing is switched off. Check mode: it passes, reports what it would change,
and the root file system is as it was.

The other commands that read bundled files from the same wheel: tests/cli/test_user_repository.py.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest

from gpuforge.nodes.bake import image_slurm_vars
from gpuforge.nodes.inventory import build_inventory
from tests.installed import install_wheel
from tests.standins.containers import ContainerSources
from tests.standins.repo import StandinSources

from . import rootfs

pytestmark = pytest.mark.slow

GROUP = "train"  # dev's GPU group (g5.12xlarge), the first: what `gpuforge bake dev --target rootfs:` applies
WRITTEN = ("etc", "usr", "opt")  # where a bake writes (the chroot connection's own temp files go elsewhere)


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """What a bake would change under *root*: each path's mode and size, in the directories a bake writes."""
    tree: dict[str, tuple[int, int]] = {}
    for top in WRITTEN:
        for path in (root / top).rglob("*"):
            stat = path.lstat()
            tree[str(path.relative_to(root))] = (stat.st_mode, stat.st_size)
    return tree


def test_the_installed_wheel_bakes_a_root_file_system_in_check_mode(
    gpuforge_wheel: Path,
    rootfs_tarball: Path,
    standin_sources: StandinSources,
    container_sources: ContainerSources,
    tmp_path: Path,
) -> None:
    venv, repo = tmp_path / "venv", tmp_path / "clusters"
    python, _ = install_wheel(gpuforge_wheel, venv)
    repo.mkdir()
    init = subprocess.run([str(python), "-m", "gpuforge", "init"], cwd=repo, capture_output=True, text=True)
    assert init.returncode == 0, init.stderr[-2000:]

    # The stand-ins for the sources dev's image reaches: NVIDIA's repositories, the EFA installer, the
    # cluster's repository (pyxis, the EFS mount helper for dev's EFS /home), the release assets of enroot and
    # the container toolkit (in the group's slurm_config, where bake puts them).
    image = copy.deepcopy(image_slurm_vars(build_inventory(str(repo / "stacks" / "Pulumi.dev.yaml")), GROUP))
    container_sources.slurm_config(image["slurm_config"])
    sources = repo / "mirrors.json"
    mirrors = {
        **standin_sources.variables(),
        **container_sources.variables(),
        **container_sources.efs_helper_variables(),
    }
    sources.write_text(json.dumps({**mirrors, **image}))

    # The playbooks bake runs: the wheel's package data.
    where = [str(python), "-c", "from gpuforge.assets import PLAYBOOKS_DIR; print(PLAYBOOKS_DIR)"]
    playbooks = Path(subprocess.run(where, cwd=repo, capture_output=True, text=True, check=True).stdout.strip())
    assert playbooks.is_relative_to(venv) and (playbooks / "bake-image.yml").is_file(), playbooks

    root = rootfs.extract(rootfs_tarball, tmp_path / "rootfs")
    # The minimal root file system has no OpenSSH server: its /etc/pam.d/sshd, which every base image has, for
    # pam_slurm_adopt's entry (as tests/playbooks/test_bake_slurm_image.py writes it).
    (root / "etc/pam.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/pam.d/sshd").write_text("@include common-auth\n@include common-account\n")
    before = _tree(root)
    # ansible-playbook from the new environment's bin (bake puts it first on PATH), not this checkout's.
    env = {**os.environ, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    bake = subprocess.run(
        [str(python), "-m", "gpuforge", "bake", "dev", "--target", f"rootfs:{root}", "--check",
         "--extra-vars", f"@{sources}", "--json"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert bake.returncode == 0, (bake.stdout[-4000:], bake.stderr[-2000:])
    result = json.loads(bake.stdout)
    assert result["ok"] and result["failures"] == []
    assert result["hosts"]["rootfs"]["changed"] > 0  # a fresh root: it says what it would do
    assert _tree(root) == before  # and did none of it
    assert not (repo / ".ansible").exists()  # nothing written into the user's repository
