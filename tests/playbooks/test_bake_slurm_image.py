"""The Slurm part of a compute group's image (gpuforge/assets/playbooks/bake-image-slurm.yml) in a Debian 12 root file
system through the chroot connection, as an image build runs it, with the variables `gpuforge bake
--target rootfs:` gives prod's train group (bake.image_slurm_vars): a check-mode run on the fresh root
passes, the bake converges, a second bake changes nothing, and the image holds no MUNGE key, starts
nothing, and reads the key at boot from the store, id and region of the stack (the boot itself:
tests/slurm/test_slurm_baked_node.py).

What stands in: pyxis and the EFS mount helper (prod's /home is EFS) from the stand-in cluster repository
(tests/standins/containers.py, production names and versions); munge, slurmd and boto3 are Debian's. The
minimal root file system has no OpenSSH server, so its /etc/pam.d/sshd (what every base image has) is
written here for pam_slurm_adopt's entry.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuforge.nodes.bake import PlaybookResult, image_slurm_vars, rootfs_inventory, run_playbook
from gpuforge.nodes.inventory import build_inventory
from tests.standins.containers import ContainerSources

from . import rootfs

pytestmark = pytest.mark.slow

GROUP = "train"


@dataclass
class SlurmImage:
    path: Path
    image_vars: dict[str, Any]
    check: PlaybookResult
    first: PlaybookResult
    second: PlaybookResult


@pytest.fixture(scope="module")
def slurm_image(
    rootfs_tarball: Path, container_sources: ContainerSources, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmImage]:
    workdir = tmp_path_factory.mktemp("slurm-image")
    path = rootfs.extract(rootfs_tarball, workdir / "rootfs")
    (path / "etc/pam.d").mkdir(parents=True, exist_ok=True)
    (path / "etc/pam.d/sshd").write_text("@include common-auth\n@include common-account\n")
    image_vars = copy.deepcopy(image_slurm_vars(build_inventory("prod"), GROUP))
    container_sources.slurm_config(image_vars["slurm_config"])
    sources = {**container_sources.variables(), **container_sources.efs_helper_variables()}
    host_vars = {**image_vars, **sources, "gpuforge_node_group": GROUP}
    inventory = rootfs_inventory(path, host_vars)
    check = run_playbook("bake-image-slurm.yml", inventory, check=True)
    first = run_playbook("bake-image-slurm.yml", inventory)
    second = run_playbook("bake-image-slurm.yml", inventory)
    rootfs.keep_downloads(path)
    yield SlurmImage(path, image_vars, check, first, second)
    shutil.rmtree(workdir, ignore_errors=True)


def _failures(result: PlaybookResult) -> list[str]:
    return [f"{f.task}: {f.message}" for f in result.failures]


def test_check_mode_on_a_fresh_root_passes(slurm_image: SlurmImage) -> None:
    assert slurm_image.check.ok, _failures(slurm_image.check)
    assert slurm_image.check.changed > 0


def test_the_bake_converges_and_a_second_changes_nothing(slurm_image: SlurmImage) -> None:
    assert slurm_image.first.ok, _failures(slurm_image.first)
    assert slurm_image.second.ok and slurm_image.second.changed == 0, _failures(slurm_image.second)


def test_the_image_holds_no_key_and_reads_it_at_boot_from_the_stacks_store(slurm_image: SlurmImage) -> None:
    root = slurm_image.path
    # Debian's munge package generates a key at install: the image keeps none.
    assert (root / "usr/sbin/munged").exists() and not (root / "etc/munge/munge.key").exists()
    ref = slurm_image.image_vars["munge_key_ref"]
    assert ref == {"store": "aws_secretsmanager", "id": "gpuforge/forge-prod/slurm/munge-key"}
    script = (root / "usr/local/lib/gpuforge/gpuforge-munge-key").read_text()
    assert f"gpuforge-read-secret secretsmanager {ref['id']} --region us-east-1 >" in script
    assert (root / "usr/local/lib/gpuforge/gpuforge-read-secret").stat().st_mode & 0o111
    unit = (root / "etc/systemd/system/gpuforge-munge-key.service").read_text()
    assert "Before=munge.service" in unit and "RequiredBy=munge.service" in unit
    assert (root / "etc/systemd/system/munge.service.requires/gpuforge-munge-key.service").is_symlink()


def test_slurmd_and_munged_are_enabled_with_the_groups_registration(slurm_image: SlurmImage) -> None:
    root = slurm_image.path
    wants = root / "etc/systemd/system/multi-user.target.wants"
    assert (wants / "munge.service").is_symlink() and (wants / "slurmd.service").is_symlink()
    config = slurm_image.image_vars["slurm_config"]
    default = (root / "etc/default/slurmd").read_text()
    servers = ",".join(c["address"] for c in config["controllers"])
    assert f"--conf-server {servers} -Z --conf '" in default
    assert config["groups"][GROUP]["conf"] in default
    assert "instance_name.py --group train" in (root / "etc/systemd/system/slurmd.service.d/gpuforge.conf").read_text()
    assert (root / "etc/slurm/prolog.d/50-gpuforge-healthcheck").is_symlink()
    assert (root / "etc/slurm/plugstack.conf.d/pyxis.conf").is_file()
    users = (root / "etc/passwd").read_text()
    assert all(f"\n{user}:" in users for user in config["users"])
