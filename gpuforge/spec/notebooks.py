"""`scheduler.notebooks`: JupyterHub on the login nodes, each user's notebook server a Slurm job (batchspawner).

Off by default. Turned on, the jupyterhub role runs the hub on every login node (the hub submits jobs with sbatch
as the user, and the login node is where the cluster's users and client commands already are). Users log in
with their cluster password (PAM on the login node: the same users as ssh and sbatch; `scheduler.users` are the
only ones the hub lets in), and their server is submitted to `partition` under their own account (the user's
team, `scheduler.users.<u>.account`), with the time, GPUs, CPUs and memory named here.

Reaching it, secure by default: `access: ssh_tunnel` (the default) binds the hub's proxy to the login node's
loopback only, so users reach it through the SSH they already have (`ssh -L 8000:localhost:8000 <login>`);
nothing is opened. `access: network` serves it over TLS on the catalog's port (flows.yaml ports.jupyterhub) to
`allowed_cidrs` only (never every address): the login nodes' security group on AWS, and the unit's own IP
filter on every placement. docs/notebooks.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from .base import SpecModel
from .errors import SpecIssue
from .fields import ABSOLUTE_PATH, client_range
from .slurm_time import SLURM_TIME, slurm_time_minutes

if TYPE_CHECKING:  # scheduler.py imports this module for its notebooks field
    from .scheduler import SchedulerSpec

EXAMPLE = "10.20.0.0/16"
PATH = "cluster.scheduler.notebooks"


def _a_client_range(value: str) -> str:
    return client_range(
        value, EXAMPLE, "the hub takes cluster passwords and starts jobs as their owners, so only the networks "
        f"your users work from may reach it; name those, e.g. {EXAMPLE}, or keep access: ssh_tunnel")


ClientRange = Annotated[str, AfterValidator(_a_client_range)]


class Notebooks(SpecModel):
    enabled: bool = Field(
        default=False,
        description="Run JupyterHub on the login nodes, each user's notebook server a Slurm job (batchspawner).",
    )
    access: Literal["ssh_tunnel", "network"] = Field(
        default="ssh_tunnel",
        description="ssh_tunnel: the hub listens on the login node's loopback only (users forward a port over "
        "ssh); network: over TLS on the login nodes' address, from allowed_cidrs only.",
    )
    allowed_cidrs: list[ClientRange] = Field(
        default_factory=list,
        description="With access network: IPv4 ranges allowed to reach the hub (the users' networks); never "
        "0.0.0.0/0.",
    )
    tls_certificate: str | None = Field(
        default=None,
        pattern=ABSOLUTE_PATH,
        description="With access network: the TLS certificate (PEM, chain included) on the login nodes, which the "
        "site delivers, e.g. /etc/ssl/certs/notebooks.pem.",
    )
    tls_key: str | None = Field(
        default=None,
        pattern=ABSOLUTE_PATH,
        description="With access network: the certificate's private key on the login nodes, readable by root "
        "only, e.g. /etc/ssl/private/notebooks.key.",
    )
    partition: str | None = Field(
        default=None,
        description="The partition (scheduler.partitions) notebook servers run in; required when enabled.",
    )
    time_limit: str = Field(
        default="8:00:00",
        description="A notebook server's run time (sbatch --time): D-HH:MM:SS, HH:MM:SS or minutes; within the "
        "partition's max_time. The server stops when it runs out.",
    )
    gpus: int = Field(default=0, ge=0, le=16, description="GPUs per notebook server (sbatch --gres=gpu:N).")
    cpus: int = Field(default=2, ge=1, le=512, description="CPUs per notebook server (sbatch --cpus-per-task).")
    memory_gib: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="Memory per notebook server in GiB (sbatch --mem); none: the partition's default per CPU/GPU.",
    )

    @field_validator("time_limit")
    @classmethod
    def _a_time(cls, value: str) -> str:
        if not SLURM_TIME.match(value) or value in ("UNLIMITED", "INFINITE"):
            raise ValueError(
                f"{value!r} is not a bounded Slurm time; write HH:MM:SS (8:00:00), D-HH:MM:SS or minutes: a "
                "notebook server holds its GPUs until it ends"
            )
        return value

    @model_validator(mode="after")
    def _reachable_and_placed(self) -> Notebooks:
        if not self.enabled:
            return self
        problems = []
        if self.partition is None:
            problems.append("enabled with no partition: name the partition notebook servers run in, e.g. "
                            "partition: gpu")
        if self.access == "network":
            if not self.allowed_cidrs:
                problems.append("access network with no allowed_cidrs: nothing could reach the hub; list your "
                                f"users' networks, e.g. allowed_cidrs: [{EXAMPLE}], or use access: ssh_tunnel")
            if self.tls_certificate is None or self.tls_key is None:
                problems.append("access network without tls_certificate and tls_key: the hub takes cluster "
                                "passwords, so it is served over TLS only; give the certificate and key paths the "
                                "site delivers to the login nodes, or use access: ssh_tunnel")
        elif self.allowed_cidrs or self.tls_certificate or self.tls_key:
            problems.append("allowed_cidrs, tls_certificate and tls_key apply to access: network only; with "
                            "ssh_tunnel the hub is on the login node's loopback: remove them or set access: network")
        if problems:
            raise ValueError("; ".join(problems))
        return self


def check_notebooks(sched: SchedulerSpec) -> list[SpecIssue]:
    """What one field cannot say: there is a login node to run the hub and users to log in, the partition
    exists, admits the users' accounts, and runs a server as long as time_limit."""
    notebooks = sched.notebooks
    if not notebooks.enabled or notebooks.partition is None:
        return []
    issues: list[SpecIssue] = []
    if not sched.login.node_groups and not sched.login.hosts:
        issues.append(SpecIssue(f"{PATH}.enabled", "true, but the cluster has no login nodes to run the hub on",
                                "add a login group (scheduler.login.node_groups or hosts), or turn notebooks off"))
    if not sched.users:
        issues.append(SpecIssue(f"{PATH}.enabled", "true, but scheduler.users lists nobody: no one could log in",
                                "list the cluster's users with their accounts in scheduler.users"))
    partition = sched.partitions.get(notebooks.partition)
    if partition is None:
        issues.append(SpecIssue(f"{PATH}.partition", f"no partition named {notebooks.partition!r}",
                                f"use one of {', '.join(sorted(sched.partitions))}"))
        return issues
    if slurm_time_minutes(notebooks.time_limit) > slurm_time_minutes(partition.max_time):
        issues.append(SpecIssue(f"{PATH}.time_limit", f"{notebooks.time_limit} is longer than partition "
                                f"{notebooks.partition}'s max_time {partition.max_time}: Slurm would never start "
                                "the server", f"use at most {partition.max_time}"))
    allowed = partition.allow_accounts
    refused = sorted(name for name, user in sched.users.items() if allowed and user.account not in allowed)
    if refused:
        issues.append(SpecIssue(f"{PATH}.partition", f"{notebooks.partition} admits only accounts "
                                f"{', '.join(allowed)}, not those of {', '.join(refused)}: their servers would "
                                "never run", "name a partition every user's account may use, or add their "
                                "accounts to its allow_accounts"))
    return issues
