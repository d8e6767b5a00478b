"""One template, two renderers: the fstab entry the lustre_client role mounts (vars/main.yml
__lustre_client_mount, rendered by Ansible from templates/lustre/fsx-mount.yaml.j2) is the entry a launched
node's user data writes (gpuforge/infra/aws/lustre_mount.py). The booted site test compares the written fstab
line too (test_site_booted.py); this runs Ansible's renderer alone, in seconds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuforge.infra.aws.lustre_mount import fsx_mount_entry
from tests.support import REPO as SOURCE_ROOT

ROLE = SOURCE_ROOT / "gpuforge" / "assets" / "playbooks" / "roles" / "lustre_client"
FS = {"dnsName": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", "mountName": "abcdefgh"}


def _role_entry(tmp_path: Path, efa: bool) -> dict[str, str]:
    # A copy of the role (symlinks followed, as the image pipeline's archive does) with one task that prints the
    # entry, so nothing of the role runs against this host.
    role = tmp_path / "roles" / "lustre_client"
    shutil.copytree(ROLE, role, symlinks=False)
    (role / "tasks" / "print_entry.yml").write_text(
        "- name: Print the fstab entry\n  ansible.builtin.copy:\n"
        '    content: "{{ __lustre_client_mount | to_json }}"\n    dest: "{{ out }}"\n    mode: \'0644\'\n'
    )
    out = tmp_path / "entry.json"
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.include_role:\n"
        "        name: lustre_client\n        tasks_from: print_entry.yml\n"
    )
    extra = {"out": str(out), "lustre_client_filesystem": {**FS, "efa": efa}}
    ansible = Path(sys.executable).parent / "ansible-playbook"
    result = subprocess.run(
        [str(ansible), "-i", "localhost,", "-c", "local", "-e", json.dumps(extra), str(play)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={
            "PATH": f"{ansible.parent}:/usr/bin:/bin",
            "ANSIBLE_ROLES_PATH": str(tmp_path / "roles"),
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
            "HOME": str(tmp_path),
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(json.loads(out.read_text()))


@pytest.mark.parametrize("efa", [True, False])
def test_the_role_and_the_user_data_render_the_same_entry(tmp_path: Path, efa: bool) -> None:
    role = _role_entry(tmp_path, efa)
    launched = fsx_mount_entry(FS["dnsName"], FS["mountName"], "/fsx", efa)
    assert role == {k: launched[k] for k in ("src", "path", "fstype", "opts")}
    assert ("x-systemd.requires=gpuforge-lnet.service" in role["opts"].split(",")) is efa
