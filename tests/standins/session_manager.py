"""A stand-in for `aws ssm start-session --target ID --region R` (the AWS CLI, its Session Manager plugin and
the SSM agent on the instance), for booted machines that have no agent: it asks EC2 (the moto server at
AWS_ENDPOINT_URL) for the target's private address, as the agent's registration ties a session to one
instance, and opens a shell there over SSH. What the real chain adds and this leaves out: the agent's
outbound channel (no open port), the account's Session Manager preferences (Run As, logging, KMS).

Installed as `aws` on PATH by ``install`` (the test's PATH only); any other AWS CLI command is refused, so a
gpuforge command that asks the CLI for something else fails the test instead of passing unseen.

Environment: AWS_ENDPOINT_URL and credentials (moto), GPUFORGE_STANDIN_SSH (the ssh arguments that reach
the machines, before the destination: key, known hosts), GPUFORGE_STANDIN_SSH_USER (the machines' user).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

import boto3  # type: ignore[import-not-found,import-untyped,unused-ignore]


def install(bin_dir: Path) -> Path:
    """An `aws` executable in *bin_dir* that runs this module with this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    aws = bin_dir / "aws"
    aws.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(__file__)} "$@"\n')
    aws.chmod(0o755)
    return aws


def main(argv: list[str]) -> int:
    if argv[:2] != ["ssm", "start-session"]:
        print(f"stand-in aws: only `ssm start-session` stands in here, not {shlex.join(argv)}", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog="aws ssm start-session")
    parser.add_argument("--target", required=True)
    parser.add_argument("--region", required=True)
    args = parser.parse_args(argv[2:])

    ec2 = boto3.client("ec2", region_name=args.region)  # the moto server's EC2, through AWS_ENDPOINT_URL
    found = [i for r in ec2.describe_instances(InstanceIds=[args.target])["Reservations"] for i in r["Instances"]]
    if not found or found[0]["State"]["Name"] != "running":
        print(f"An error occurred (TargetNotConnected): {args.target} is not connected.", file=sys.stderr)
        return 254
    address = found[0]["PrivateIpAddress"]
    user = os.environ["GPUFORGE_STANDIN_SSH_USER"]
    ssh = ["ssh", *shlex.split(os.environ["GPUFORGE_STANDIN_SSH"]), f"{user}@{address}"]
    os.execvp(ssh[0], ssh)
    return 0  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
