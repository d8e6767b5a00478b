"""A stand-in for IAM Roles Anywhere's credential helper (aws_signing_helper), served like its release.

The real helper signs a CreateSession call to rolesanywhere.amazonaws.com with the controller's private key
and prints the session's credentials as credential-process JSON; nothing here reaches AWS. The stand-in
records its arguments (one JSON list a line), reads the certificate and key it is given (the real one must
read them: a key the scaler's user cannot read fails it), and prints that JSON with fixed credentials, which
moto's server accepts. It is served over HTTP on 127.0.0.1 at the release's path, and the tests give the
slurm_scaler role its sha256 in place of the catalog's (as the enroot stand-ins' digests are given).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .repo import serve_tree, stop_server

RELEASE_PATH = "releases/1.8.2/X86_64/Linux/Amzn2023/aws_signing_helper"
ACCESS_KEY = "ASIAROLESANYWHERESTANDIN"
# What the stack output hybrid.burst.scaler holds once deployed (public identifiers).
ARNS = {
    "trust_anchor_arn": "arn:aws:rolesanywhere:us-east-1:111122223333:trust-anchor/5f0e6a1c-8b2d-4c3e-9f10-2a3b4c5d",
    "profile_arn": "arn:aws:rolesanywhere:us-east-1:111122223333:profile/9d8c7b6a-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
    "role_arn": "arn:aws:iam::111122223333:role/forge-hybrid-burst-scaler-role-7c1d2e3",
}

_SCRIPT = """#!{python}
# gpuforge test stand-in for aws_signing_helper credential-process (tests/standins/signing_helper.py):
# records its arguments, reads the certificate and key it is given, prints credential-process JSON.
import datetime, json, sys
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
if not args or args[0] != "credential-process":
    sys.exit("stand-in: only credential-process")
options = dict(zip(args[1::2], args[2::2]))
for option in ("--certificate", "--private-key", "--trust-anchor-arn", "--profile-arn", "--role-arn"):
    if option not in options:
        sys.exit("stand-in: missing " + option)
for option in ("--certificate", "--private-key"):
    open(options[option]).read()
expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
print(json.dumps({{"Version": 1, "AccessKeyId": {key!r}, "SecretAccessKey": "standin-secret",
                  "SessionToken": "standin-session", "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
"""


@dataclass(frozen=True)
class ServedHelper:
    url: str  # the stand-in release binary's URL
    sha256: str

    def signing_helper(self, version: str = "1.8.2") -> dict[str, object]:
        """slurm_config.lifecycle.aws_credentials.signing_helper pointing at the stand-in (x86_64)."""
        return {"version": version, "url": {"x86_64": self.url}, "sha256": {"x86_64": self.sha256}}


@contextmanager
def served_signing_helper(directory: Path, python: str, log: str) -> Iterator[ServedHelper]:
    """Serve the stand-in from *directory* until the block ends. *python* is the interpreter on the host
    that will run it, *log* where it records its calls there."""
    binary = directory / RELEASE_PATH
    binary.parent.mkdir(parents=True, exist_ok=True)
    binary.write_text(_SCRIPT.format(python=python, log=log, key=ACCESS_KEY))
    server, url = serve_tree(directory, RELEASE_PATH, "the stand-in signing helper's release")
    try:
        yield ServedHelper(f"{url}/{RELEASE_PATH}", hashlib.sha256(binary.read_bytes()).hexdigest())
    finally:
        stop_server(server)


def calls(log: Path) -> list[list[str]]:
    """The stand-in's recorded argument lists, oldest first."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
