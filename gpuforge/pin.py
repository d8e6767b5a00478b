"""`gpuforge pin-images STACK`: resolve each group's AMI once and record it in the stack file (issue 12).

A group whose image is an SSM parameter (the Deep Learning AMI's by default, or the image pipeline's)
resolves it at every launch, so a spare or a replacement can boot a newer driver, NCCL and EFA stack
than the rest of the job. Pinning asks SSM once, checks the AMI exists (EC2 DescribeImages), and
writes `image: {ami_id: ...}` into the stack file with a comment naming the parameter it came from.
The change is then a line in the pull request, and `gpuforge diff` says how it rolls (drain or
instance refresh). Run it again to take a newer image on purpose.

The stack file is edited in place with ruamel.yaml's round trip, so its comments and order stay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from io import StringIO
from pathlib import Path
from typing import Any

from gpuforge.plan.stacks import load_stack
from gpuforge.plan.validation import check_stack
from gpuforge.preflight import AwsClients, call_aws
from gpuforge.spec import ResolvedSpec
from gpuforge.spec.models import AMI_ID


@dataclass(frozen=True)
class Pin:
    group: str
    parameter: str
    ami_id: str


class PinError(RuntimeError):
    """A parameter or its AMI could not be resolved; nothing was written."""


def resolve_pins(resolved: ResolvedSpec, clients: AwsClients) -> list[Pin]:
    """The AMI behind each group's SSM parameter, checked to exist; all failures at once."""
    pins: list[Pin] = []
    failures: list[str] = []
    for name, group in sorted(resolved.node_groups.items()):
        if group.spec.orchestrator == "eks" or not group.image_id.startswith("resolve:ssm:"):
            continue  # EKS managed groups take EKS's AMI (ami_type); a fixed ami_id is pinned already
        parameter = group.image_id.removeprefix("resolve:ssm:")
        answer, failure = call_aws(partial(clients.ssm.get_parameter, Name=parameter))
        if failure is not None:
            failures.append(f"cluster.node_groups[{name}].image: cannot read {parameter}: {failure}")
            continue
        ami_id = str(answer["Parameter"]["Value"])
        if not re.fullmatch(AMI_ID, ami_id):  # what is written must load again as image.ami_id
            failures.append(f"cluster.node_groups[{name}].image: {parameter} holds {ami_id!r}, not an AMI id")
            continue
        images, failure = call_aws(partial(clients.ec2.describe_images, ImageIds=[ami_id]))
        if failure is not None or not (images or {}).get("Images"):
            failures.append(
                f"cluster.node_groups[{name}].image: {parameter} names {ami_id}, which "
                f"cannot be found in the region ({failure or 'no such image'})"
            )
            continue
        pins.append(Pin(name, parameter, ami_id))
    if failures:
        raise PinError("\n".join(failures))
    return pins


def write_pins(path: Path, pins: list[Pin], today: datetime | None = None) -> str:
    """Rewrite the stack file with each pinned group's `image: {ami_id}`; returns the new text."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    yaml = YAML()  # round trip: comments, order and quoting stay as the user wrote them
    yaml.preserve_quotes = True
    yaml.width = 4096
    document: Any = yaml.load(path.read_text(encoding="utf-8"))
    groups = document["config"]["gpuforge:cluster"]["node_groups"]
    stamp = (today or datetime.now(UTC)).date().isoformat()
    for pin in pins:
        image = CommentedMap(ami_id=pin.ami_id)
        image.yaml_add_eol_comment(f"pinned {stamp} from {pin.parameter} (gpuforge pin-images)", "ami_id")
        groups[pin.group]["image"] = image
    text = StringIO()
    yaml.dump(document, text)
    path.write_text(text.getvalue(), encoding="utf-8")
    return text.getvalue()


def pin_stack(stack: str, clients: AwsClients | None = None, dry_run: bool = False) -> list[Pin]:
    """Load and validate the stack (SpecError on a bad spec), resolve its images, write them unless dry."""

    stack_file = load_stack(stack)
    resolved = check_stack(stack_file).resolved
    if resolved.spec.region is None:
        return []  # on premises: nodes are baked, not launched from an AMI
    pins = resolve_pins(resolved, clients or AwsClients.for_region(resolved.spec.region))
    if pins and not dry_run:
        write_pins(stack_file.path, pins)
        check_stack(load_stack(stack_file.path))  # what was written still validates
    return pins
