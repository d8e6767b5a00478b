"""The gpuforge_files_on_disk filter
(gpuforge/assets/playbooks/roles/gpuforge_filters/filter_plugins/files_on_disk.py): what
a role's one find read, as its templates' and copies' conditions compare it, and that every role using it
loads the role that carries it. Its real runs: the re-bake of tests/playbooks/test_bake_rootfs.py and the
NCCL renderings of test_nccl_parity.py (a play in tests/playbooks including nccl_tuning)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError

ROLES = Path(__file__).resolve().parents[2] / "gpuforge/assets/playbooks/roles"
PLUGIN = ROLES / "gpuforge_filters/filter_plugins/files_on_disk.py"


def _plugin() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpuforge_files_on_disk", PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FILTER = _plugin().FilterModule().filters()["gpuforge_files_on_disk"]
SYSCTL = b"vm.swappiness = 1\n"


def _entry(path: str, checksum: str, mode: str, owner: str = "root", group: str = "root") -> dict[str, Any]:
    """One file of ansible.builtin.find's result with get_checksum: true, every key it returns (ansible-core
    2.19, as read on this machine; times and inode as they were)."""
    return {
        "atime": 1795759832.8394694, "checksum": checksum, "ctime": 1795759832.8440154, "dev": 65024,
        "gid": 0, "gr_name": group, "inode": 2146359, "isblk": False, "ischr": False, "isdir": False,
        "isfifo": False, "isgid": False, "islnk": False, "isreg": True, "issock": False, "isuid": False,
        "mode": mode, "mtime": 1795759832.8394694, "nlink": 1, "path": path, "pw_name": owner, "rgrp": True,
        "roth": True, "rusr": True, "size": 18, "uid": 0, "wgrp": False, "woth": False, "wusr": True,
        "xgrp": mode[2] in "1357", "xoth": mode[3] in "1357", "xusr": mode[1] in "1357",
    }  # fmt: skip


def _found(*files: dict[str, Any]) -> dict[str, Any]:
    return {
        "changed": False, "examined": len(files), "files": list(files), "matched": len(files),
        "msg": "All paths examined", "skipped_paths": {},
    }  # fmt: skip


def test_each_file_maps_to_checksum_owner_group_and_mode() -> None:
    result = _found(
        _entry("/etc/sysctl.d/90-gpuforge.conf", hashlib.sha1(SYSCTL).hexdigest(), "0644"),
        _entry("/usr/local/libexec/gpuforge/efa-counters", "bd971bec88149956458a10fc9c5ecb3eb99dd452", "0755",
               owner="nobody", group="nogroup"),
    )  # fmt: skip
    assert FILTER(result) == {
        # The words a role's condition builds for the file it would write: hash('sha1') ~ ' root root 0644'.
        "/etc/sysctl.d/90-gpuforge.conf": hashlib.sha1(SYSCTL).hexdigest() + " root root 0644",
        "/usr/local/libexec/gpuforge/efa-counters": "bd971bec88149956458a10fc9c5ecb3eb99dd452 nobody nogroup 0755",
    }


@pytest.mark.parametrize(
    "result",
    [
        _found(),  # nothing found: a fresh root
        {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"},  # no files key
        {"changed": False, "files": None},
    ],
    ids=["empty", "skipped", "none"],
)
def test_no_files_gives_an_empty_mapping_so_every_file_is_written(result: dict[str, Any]) -> None:
    assert FILTER(result) == {}


def test_a_find_without_checksums_is_refused_with_the_fix() -> None:
    entry = _entry("/etc/nccl.conf", "x", "0644")
    del entry["checksum"]
    with pytest.raises(AnsibleFilterError, match=r"/etc/nccl.conf has no checksum: set get_checksum: true"):
        FILTER(_found(entry))


def test_the_files_list_instead_of_the_result_is_refused_with_the_fix() -> None:
    with pytest.raises(AnsibleFilterError, match="pass the registered variable itself, not its files list"):
        FILTER([_entry("/etc/nccl.conf", "x", "0644")])


def test_every_role_using_the_filter_loads_its_role() -> None:
    """Ansible finds the filter only where the play loaded gpuforge_filters (a role's plugin directories are
    added when the role is loaded): a role that uses it without the dependency fails where its variable is
    first read, on a real host only."""
    users = sorted({p.parents[1].name for p in ROLES.glob("*/*/*.yml") if "gpuforge_files_on_disk" in p.read_text()})
    assert users == ["dcgm_exporter", "local_scratch", "nccl_tuning", "node_textfile_collectors", "os_tuning"]
    for role in users:
        meta = yaml.safe_load((ROLES / role / "meta/main.yml").read_text())
        assert {"role": "gpuforge_filters"} in meta["dependencies"], role
