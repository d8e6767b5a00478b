"""A booted machine's first boot as cloud-init gives it its plan's user data: the modules that name the
machine and write its files (set_hostname/update_hostname, write_files), applied from the launch template's
own #cloud-config document.

Not cloud-init itself: the Slurm image has no cloud-init (tests/slurm/test_slurm_home_booted.py runs real
cloud-init from a NoCloud seed on an image of its own; the bench moving to that is a next step), and its other
modules (network, the datasource) have nothing to do on a machine whose network the bench made. What a document
asks beyond the keys below is refused, so nothing in user data is silently left out; what the bench leaves out
on purpose is named in SKIPPED with the reason (the stand-ins it waits for).
"""

from __future__ import annotations

import shlex
from typing import Any

import yaml

from tests.machines import Machine

APPLIED = frozenset({"preserve_hostname", "hostname", "fqdn", "prefer_fqdn_over_hostname", "write_files"})
# key (or file path) -> why the bench does not apply it yet.
SKIPPED = {
    "runcmd": "starts nvidia-persistenced and the Lustre and EFS automounts: the bench serves no driver, FSx or EFS "
    "yet (the shared /home is the Slurm fixture's stand-in; test_slurm_home_booted.py has an EFS stand-in to reuse)",
    "/etc/fstab": "the FSx and EFS entries: the bench serves no FSx or EFS yet",
}


class UserDataError(ValueError):
    """User data asks for something the bench does not apply."""


def parse(user_data: str) -> dict[str, Any]:
    if not user_data.startswith("#cloud-config"):
        raise UserDataError("user data is not a #cloud-config document")
    document = yaml.safe_load(user_data) or {}
    unknown = sorted(set(document) - APPLIED - set(SKIPPED))
    if unknown:
        raise UserDataError(f"user data keys the bench does not apply: {unknown}")
    return dict(document)


def apply_user_data(machine: Machine, user_data: str) -> list[str]:
    """Apply *user_data* to *machine* as cloud-init's first boot would; what was skipped, with why."""
    document = parse(user_data)
    skipped = [f"{key}: {why}" for key, why in SKIPPED.items() if key in document]
    hostname = document.get("hostname")
    if hostname and document.get("preserve_hostname") is False:
        # cc_set_hostname on Debian: /etc/hostname, then the running name.
        machine.run(f"echo {shlex.quote(hostname)} > /etc/hostname && hostname {shlex.quote(hostname)}", root=True)
    for entry in document.get("write_files", []):
        path = entry["path"]
        if path in SKIPPED:
            skipped.append(f"write_files {path}: {SKIPPED[path]}")
            continue
        redirect = ">>" if entry.get("append") else ">"
        command = f"mkdir -p $(dirname {shlex.quote(path)}) && printf %s {shlex.quote(entry['content'])} {redirect} " \
                  f"{shlex.quote(path)}"
        if "permissions" in entry and not entry.get("append"):
            command += f" && chmod {shlex.quote(str(entry['permissions']))} {shlex.quote(path)}"
        machine.run(command, root=True)
    return skipped
