#!/usr/bin/python3
"""A cloud node's Slurm name: ``<group>-<instance id>``, so the controller can map a node to its instance.

Slurm's node name is what gpuforge-lifecycle (gpuforge/nodes/lifecycle.py) reads to find the EC2
instance behind a node: the idle node it terminates, the failed node the group replaces, the node on an
old image. Both ends use :func:`node_name`. On the node, the slurm_compute role runs this file before
slurmd starts (a systemd ``ExecStartPre=`` in slurmd's drop-in, cloud groups only): it asks the
instance metadata service for the instance id with IMDSv2 (a session token by ``PUT
/latest/api/token``, then ``GET /latest/meta-data/instance-id`` with it; the launch templates require
tokens) and writes ``GPUFORGE_SLURMD_NODENAME=<group>-<instance id>`` to an environment file, which
slurmd's ``ExecStart=`` passes as ``-N`` to its dynamic registration (``slurmd -Z``). With
``--pam-template``/``--pam-output`` it also writes sshd's pam_slurm_adopt lines with ``nodename=`` set
to that name: the module finds the node's job steps by its Slurm name, which it otherwise looks up by the
host name in slurm.conf, where a dynamic node is not (so it refused every user, even into their job).

The host name is not used: on EC2 it is ``ip-10-0-1-2``, an address that the next instance in the
group may get again. A node whose metadata cannot be read does not start slurmd (it would register
under a name nothing maps): the unit fails and says why in the journal.

Standard library only: it runs on the node before anything else of gpuforge.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

IMDS_ENDPOINT = "http://169.254.169.254"
TOKEN_TTL_S = 60  # the token is used at once, for one request
INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")
GROUP = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")  # gpuforge/spec/fields.py NAME_PATTERN
ENV_VAR = "GPUFORGE_SLURMD_NODENAME"
# Where the slurm_compute role's PAM template takes the node's name.
PAM_PLACEHOLDER = "@SLURMD_NODENAME@"


def node_name(group: str, instance_id: str) -> str:
    """The Slurm name an instance of *group* registers under (slurmd -Z -N on a cloud node)."""
    return f"{group}-{instance_id}"


class MetadataError(RuntimeError):
    """The instance metadata service gave no instance id."""


def read_instance_id(endpoint: str = IMDS_ENDPOINT, timeout_s: float = 2.0) -> str:
    """The instance id from IMDSv2: a session token, then the id with the token."""
    base = endpoint.rstrip("/")
    token_request = urllib.request.Request(
        f"{base}/latest/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_S)}
    )
    with urllib.request.urlopen(token_request, timeout=timeout_s) as response:
        token = response.read().decode().strip()
    id_request = urllib.request.Request(
        f"{base}/latest/meta-data/instance-id", headers={"X-aws-ec2-metadata-token": token}
    )
    with urllib.request.urlopen(id_request, timeout=timeout_s) as response:
        instance_id = response.read().decode().strip()
    if not INSTANCE_ID.match(instance_id):
        raise MetadataError(f"the metadata service answered {instance_id[:40]!r}, not an instance id (i-...)")
    return instance_id


def wait_for_instance_id(endpoint: str = IMDS_ENDPOINT, wait_s: float = 60.0) -> str:
    """:func:`read_instance_id`, retried while the metadata service is not answering yet (early boot)."""
    deadline = time.monotonic() + wait_s
    delay = 0.5
    while True:
        try:
            return read_instance_id(endpoint)
        except urllib.error.HTTPError as exc:
            if exc.code < 500 and exc.code != 429:  # refused (401: a bad token), not busy: asking again won't help
                raise MetadataError(f"the instance metadata service at {endpoint} refused: HTTP {exc.code}") from exc
            failure: Exception = exc
        except (urllib.error.URLError, OSError) as exc:  # refused connection, timed out: not up yet
            failure = exc
        if time.monotonic() + delay > deadline:
            raise MetadataError(f"no answer from the instance metadata service at {endpoint}: {failure}")
        time.sleep(delay)
        delay = min(delay * 2, 5.0)


def _write_atomically(path: Path, text: str) -> None:
    """Replace *path* in one step: systemd or sshd may read it while a restart rewrites it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def write_env(path: Path, name: str) -> None:
    """Write the environment file slurmd's unit reads."""
    _write_atomically(path, f"{ENV_VAR}={name}\n")


def write_pam(template: Path, output: Path, name: str) -> None:
    """Write sshd's pam_slurm_adopt lines from the role's *template*, the node's *name* in place of the
    placeholder. A template without it would leave the module naming no node: refuse it."""
    text = template.read_text()
    if PAM_PLACEHOLDER not in text:
        raise ValueError(f"{template} has no {PAM_PLACEHOLDER} for the node's name")
    _write_atomically(output, text.replace(PAM_PLACEHOLDER, name))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpuforge-slurmd-name", description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", required=True, help="the node group (slurm_config.groups key)")
    parser.add_argument("--output", type=Path, required=True, help="the environment file slurmd's unit reads")
    parser.add_argument("--endpoint", default=IMDS_ENDPOINT, help="the metadata service (tests: a stand-in)")
    parser.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the metadata service")
    parser.add_argument("--pam-template", type=Path, help=f"PAM lines, {PAM_PLACEHOLDER} for the name")
    parser.add_argument("--pam-output", type=Path, help="the PAM file written from --pam-template")
    args = parser.parse_args(argv)
    if (args.pam_template is None) != (args.pam_output is None):
        parser.error("--pam-template and --pam-output go together")
    if not GROUP.match(args.group):
        print(f"gpuforge-slurmd-name: {args.group!r} is not a node group name", file=sys.stderr)
        return 2
    try:
        name = node_name(args.group, wait_for_instance_id(args.endpoint, args.wait))
    except MetadataError as exc:
        print(f"gpuforge-slurmd-name: {exc}; slurmd is not started under a name nothing maps", file=sys.stderr)
        return 1
    if args.pam_template is not None:
        try:
            write_pam(args.pam_template, args.pam_output, name)
        except (OSError, ValueError) as exc:
            # slurmd does not start either: users' ssh would be refused even into their own jobs.
            print(f"gpuforge-slurmd-name: cannot write {args.pam_output}: {exc}", file=sys.stderr)
            return 1
    write_env(args.output, name)
    print(f"gpuforge-slurmd-name: this node registers as {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
