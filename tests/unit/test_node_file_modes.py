"""Files the roles write on nodes get the mode their content needs (issue 27).

A world-readable file (mode o+r, or no mode at all) is read by every user of a shared cluster. Whatever
a role writes there from a variable must be public by construction: these tests list every such write,
keep credential-named variables out of them, and prove that no key-shaped value of a stack file can
reach one: the stack is refused first, whichever field holds it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.spec.config_keys import CLUSTER_KEY
from gpuforge.spec.secrets import clear_text_secrets
from tests.crypto_material import ca_certificate, ca_private_key, ssh_private_key

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "gpuforge" / "assets" / "playbooks" / "roles"
WRITERS = ("ansible.builtin.copy", "ansible.builtin.template")
EXPRESSION = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.DOTALL)
CREDENTIAL = re.compile(r"password|passwd|secret|token|private_key|munge_key|credential", re.I)

# Every world-readable file a role writes whose whole content is a variable's value, and why that value is
# public. A new one fails test_every_world_readable_copy_of_a_value_is_accounted_for until it is listed.
PUBLIC_CONTENT = {
    ("sssd", "Install the CA that signed the directory's certificate"):
        "scheduler.directory.ca_certificate: PEM certificates only, each parsed (gpuforge/spec/keys.py), "
        "and asserted by the role",
    ("kubelet_config", "Write the kubelet drop-in (taints at registration, reservations)"):
        "taints and reservations rendered from the site's hosts and the catalog (gpuforge/nodes/inventory.py)",
    ("gpu_healthcheck", "Keep the raw outputs on the node"): "the node's own tool outputs (nvidia-smi, dcgmi)",
    ("gpu_healthcheck", "Hand the raw outputs to the controller"): "the node's own tool outputs",
    ("fabric_acceptance", "Keep the raw outputs on the node"):
        "the node's own tool outputs (ib_write_bw, nccl-tests with NCCL's INFO log) and the verdict",
    ("slurm_compute", "Write a cloud node's pam_slurm_adopt lines, its name to be filled in when slurmd starts"):
        "the role's own PAM lines",
    ("slurm_controller", "Tell the script which cluster and region it serves"): "the cluster's name and region",
    ("slurm_controller", "Install the topology service and timer"): "the role's own unit files",
    ("slurm_controller", "Make slurmctld require the shared state directory's mount"): "the state directory's path",
}
# Credential-named variables a world-readable file may name, because they hold where a secret is, not the secret.
NAMES_NOT_VALUES = {
    ("slurm_scaler", "slurm_scaler_private_key"): "credential_process names the key file; the key stays 0600",
    ("slurm_scaler", "__slurm_scaler_credentials"): "the Roles Anywhere trust anchor, profile and role ARNs",
    ("munge", "munge_key_ref"): "the secret store and id the boot script reads the key from (into a 0400 file)",
    ("munge", "munge_key_aws_region"): "the region of that store",
    ("munge", "munge_key_aws_endpoint_url"): "the endpoint of that store",
    ("munge", "secret_store_reader_path"): "the reader program's path",
}
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def _tasks(items: Any) -> Iterator[dict[str, Any]]:
    for task in items or []:
        if isinstance(task, dict):
            yield task
            for nested in ("block", "rescue", "always"):
                yield from _tasks(task.get(nested))


def _writes() -> Iterator[tuple[str, str, str, str | None, str]]:
    """(role, task name, module, mode, the text that becomes the file) of every copy and template task."""
    for tasks_file in sorted(ROLES.glob("*/tasks/*.yml")):
        role = tasks_file.parts[-3]
        for task in _tasks(yaml.safe_load(tasks_file.read_text())):
            for module in WRITERS:
                args = task.get(module)
                if not isinstance(args, dict):
                    continue
                mode = args.get("mode")
                if "content" in args:
                    body = str(args["content"])
                elif module.endswith("template"):
                    template = ROLES / role / "templates" / str(args["src"])
                    body = template.read_text() if template.is_file() else str(args["src"])
                else:
                    body = ""  # a file of the role's, or one rendered by gpuforge (copied as it is)
                yield role, str(task.get("name")), module, None if mode is None else str(mode), body


def _world_readable(mode: str | None) -> bool:
    return mode is None or not mode.isdigit() or bool(int(mode, 8) & 0o004)


def test_every_write_states_its_mode() -> None:
    unstated = [f"{role}: {name}" for role, name, _, mode, _ in _writes() if mode is None]
    assert not unstated, f"a file without a mode gets the umask's (world-readable): {unstated}"


def test_every_world_readable_copy_of_a_value_is_accounted_for() -> None:
    found = {
        (role, name)
        for role, name, module, mode, body in _writes()
        if module.endswith("copy") and _world_readable(mode) and EXPRESSION.search(body)
    }
    unaccounted = sorted(found - set(PUBLIC_CONTENT))
    assert not unaccounted, f"world-readable files written from a variable, not shown public: {unaccounted}"
    assert found >= set(PUBLIC_CONTENT), f"entries for writes that no longer exist: {set(PUBLIC_CONTENT) - found}"


def test_no_world_readable_file_interpolates_a_credential() -> None:
    leaks = []
    for role, name, _, mode, body in _writes():
        if not _world_readable(mode):
            continue
        for match in EXPRESSION.finditer(body):
            for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", QUOTED.sub("", match.group(0))):
                if CREDENTIAL.search(word) and (role, word) not in NAMES_NOT_VALUES:
                    leaks.append(f"{role}: {name}: {word}")
    assert not leaks, f"credential-named variables in world-readable files: {leaks}"


def test_the_sssd_role_refuses_a_key_in_its_world_readable_ca() -> None:
    tasks = list(_tasks(yaml.safe_load((ROLES / "sssd" / "tasks" / "main.yml").read_text())))
    names = [t.get("name") for t in tasks]
    guard = names.index("Refuse a directory CA that holds anything but certificates")
    assert guard < names.index("Install the CA that signed the directory's certificate")
    assert "PRIVATE KEY" in str(tasks[guard]["ansible.builtin.assert"]["that"])


STACKS = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
KEYS = {
    "pem": ca_private_key(),
    "openssh": ssh_private_key(),
    "after-a-certificate": ca_certificate() + ca_private_key(),
}


def _string_leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _string_leaves(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _string_leaves(child, (*path, i))
    elif isinstance(value, str):
        yield path


@pytest.mark.parametrize("stack", STACKS, ids=lambda p: p.stem.removeprefix("Pulumi."))
@pytest.mark.parametrize("key", KEYS.values(), ids=list(KEYS))
def test_a_key_in_any_field_of_a_stack_is_refused_before_it_reaches_a_node(stack: Path, key: str) -> None:
    """Every text field of every example stack, one at a time, holding a private key: the stack is refused
    at that field, so no role can write the key anywhere, world-readable or not."""
    config = yaml.safe_load(stack.read_text())["config"]
    leaves = list(_string_leaves(config[CLUSTER_KEY]))
    assert len(leaves) > 20
    for leaf in leaves:
        mutated = copy.deepcopy(config)
        node = mutated[CLUSTER_KEY]
        for part in leaf[:-1]:
            node = node[part]
        node[leaf[-1]] = key
        refused = clear_text_secrets(mutated)
        assert refused, f"{stack.name}: a private key at {'.'.join(map(str, leaf))} would be accepted"
        assert all(key[20:60] not in str(s.issue) for s in refused)
