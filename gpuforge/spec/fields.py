"""Field types and parsers every section of the spec shares: names, addresses, ports, paths, the
orchestrators, and the CloudWatch Logs retention periods."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from .errors import described_pattern
from .limits import read_parameter_problem, refusing

NAME_PATTERN = described_pattern(
    r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$",
    "a name of 2 to 32 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen",
    "train-h100",
)
MAX_NODES_PER_GROUP = 4096  # beyond one EC2 Auto Scaling group's practical size; split the group


def parse_cidr(value: str, example: str) -> ipaddress.IPv4Network:
    """An IPv4 CIDR block, or a ValueError that says what to write: the network a block with host
    bits set falls in, the IPv4 form for an IPv6 block (every address field of the spec is IPv4:
    VPCs, subnets, security group rules and routes are planned in IPv4)."""
    try:
        network = ipaddress.ip_network(value, strict=False)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a CIDR block; write it like {example}") from exc
    if network.version != 4:
        raise ValueError(f"{value} is an IPv6 block and this field is IPv4; write an IPv4 CIDR like {example}")
    if str(network) != value.strip():
        if "/" not in value:
            raise ValueError(f"{value!r} has no prefix length; write the block like {network} or {example}")
        raise ValueError(
            f"{value} has host bits set: the /{network.prefixlen} network it falls in is {network}; write {network}"
            + (f" (or {value.split('/')[0]}/{_smallest_prefix(value)} for a smaller block)" if _smallest_prefix(value)
               > network.prefixlen else "")
        )
    return network


def _smallest_prefix(value: str) -> int:
    """The shortest prefix at which the address in `value` is a network address (10.40.1.0 -> 24)."""
    address = int(ipaddress.IPv4Address(value.split("/")[0]))
    return 32 - ((address & -address).bit_length() - 1) if address else 0


def parse_ipv4(value: str, what: str) -> str:
    """An IPv4 address, or a ValueError saying how to write it."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an IP address; write the {what} like 10.10.0.11") from exc
    if address.version != 4:
        raise ValueError(f"{value} is an IPv6 address and the {what} is IPv4; write an IPv4 address like 10.10.0.11")
    return value


Name = Annotated[str, Field(pattern=NAME_PATTERN)]
Environment = Literal["dev", "staging", "prod"]
Fabric = Literal["efa", "infiniband", "roce", "none"]
NodeRole = Literal["training", "login", "services"]
# Who schedules work on a group's nodes. `eks` makes the group an EKS managed node group
# (AWS placement); `kubernetes` joins the site's Kubernetes cluster (hybrid burst groups);
# `slurm` leaves the nodes to the Slurm playbooks; `none`: plain instances.
Orchestrator = Literal["eks", "kubernetes", "slurm", "none"]
# Orchestrators whose nodes join a Kubernetes cluster, so the platform and Kueue count them.
KUBERNETES_ORCHESTRATORS: tuple[Orchestrator, ...] = ("eks", "kubernetes")

Port = Annotated[int, Field(ge=1, le=65535)]
# CloudWatch Logs accepts only these retention periods (PutRetentionPolicy retentionInDays).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                      3288, 3653)


def check_log_retention(days: int) -> int:
    if days not in LOG_RETENTION_DAYS:
        nearest = min(LOG_RETENTION_DAYS, key=lambda d: (abs(d - days), d))
        raise ValueError(
            f"got {days}; CloudWatch Logs keeps logs for one of {', '.join(map(str, LOG_RETENTION_DAYS))} days; "
            f"use {nearest}"
        )
    return days


ABSOLUTE_PATH = described_pattern(
    r"^/[A-Za-z0-9_./-]*$", "an absolute path of letters, digits and _ . - /", "/datasets"
)
# An SSM parameter gpuforge reads (AWS's public ones included); one it writes is image_pipeline.WrittenParameter.
ReadParameter = Annotated[str, AfterValidator(refusing(read_parameter_problem))]
