"""Jinja filter `gpuforge_files_on_disk`: the files one `ansible.builtin.find` read, as the roles compare them.

Why: a re-bake's time is its module runs (docs/benchmarks.md). A `template` or `copy` of an unchanged file
still costs two (a stat with checksum, then `file` for owner, group and mode), so a role that writes several
files reads them all first with one find (`get_checksum: true`) and runs each template or copy only where
its entry here differs from what it would write:

    when: __os_tuning_on_disk['/etc/sysctl.d/90-gpuforge.conf'] | default('')
      != lookup('ansible.builtin.template', 'sysctl.conf.j2') | hash('sha1') ~ ' root root 0644'

A missing file has no entry (`default('')` never matches), so it is written; so is one whose content, owner,
group or mode changed. Five roles need the same mapping (os_tuning, node_textfile_collectors, local_scratch,
dcgm_exporter, nccl_tuning); this filter is that one definition. Ansible finds it because those roles list
gpuforge_filters (this file's role) in their meta dependencies, and Ansible adds a role's plugin directories
when it loads the role, wherever the play that loads it lives.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError  # type: ignore[import-untyped]


def files_on_disk(find_result: Mapping[str, Any]) -> dict[str, str]:
    """Map each file of a registered `ansible.builtin.find` result to "checksum owner group mode".

    *find_result* is the registered result itself (not its `files` list). Each file's SHA-1 (find's default
    checksum algorithm, as `hash('sha1')` gives on the controller), owner and group names and four-digit octal
    mode, space-separated: the same words a role's condition builds for the file it would write. A result
    without files (nothing found, or a find that was skipped) gives an empty mapping: every file is written.
    """
    if not isinstance(find_result, Mapping):
        raise AnsibleFilterError(
            f"gpuforge_files_on_disk: expected a registered ansible.builtin.find result (a mapping), got "
            f"{type(find_result).__name__}: pass the registered variable itself, not its files list"
        )
    on_disk: dict[str, str] = {}
    for entry in find_result.get("files") or []:
        if "checksum" not in entry:
            # Without a checksum every file would look changed and be rewritten on every run: a mistake, not
            # a state to tolerate.
            raise AnsibleFilterError(
                f"gpuforge_files_on_disk: {entry.get('path', '?')} has no checksum: set get_checksum: true on "
                f"the ansible.builtin.find task that registered it"
            )
        on_disk[entry["path"]] = f"{entry['checksum']} {entry['pw_name']} {entry['gr_name']} {entry['mode']}"
    return on_disk


class FilterModule:
    """Ansible's entry point for the filters of this file."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"gpuforge_files_on_disk": files_on_disk}
