"""The `scheduler` section: a Slurm cluster people submit jobs to, placement-neutral.

What a user declares: where slurmctld runs (EC2 instances at fixed addresses on AWS, site hosts on
premises) and whether a backup takes over, accounting (slurmdbd and its MariaDB), partitions of node
groups, login nodes, users (local accounts or the site's directory) and the container runtime.
Rules that cross sections (a partition naming an unknown group, two default partitions, a login
group without a scheduler) live in `scheduler_checks.py`, so every problem is reported at once.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from gpuforge.catalog.spec_limits import spec_limits

from .base import SpecModel
from .directory import LdapDirectory
from .fields import Name
from .keys import ssh_public_key_problem
from .limits import rds_class_problem, refusing
from .preemption import Preemption
from .reservations import Reservation
from .rest_api import RestApi
from .slurm_settings import SlurmValue
from .slurm_time import SLURM_TIME
from .tenancy import Qos


def _not_a_defaults_record(name: str) -> str:
    limits = spec_limits().slurm
    if name.lower() in limits.reserved_partition_names:
        raise ValueError(
            f"{name} is not a partition in slurm.conf but the defaults of the partitions after it "
            f"({limits.reserved_partition_names_source}); rename it, e.g. main"
        )
    return name


def _not_a_system_account(name: str) -> str:
    limits = spec_limits().slurm
    if name in limits.system_accounts or name.startswith(("systemd-", "_")):
        raise ValueError(
            f"{name} is a system account on every node ({limits.system_accounts_source}): the slurm_users role "
            "would change its uid, group and shell; rename it to the person's own login"
        )
    return name


def _public_key(text: str) -> str:
    problem = ssh_public_key_problem(text)
    if problem:
        raise ValueError(
            f"{problem} ({spec_limits().ssh.source}; a private key never belongs in a stack file); give the public "
            "key line of the user's .pub file (type, base64, comment)"
        )
    return text


UserName = Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_-]{0,31}$"), AfterValidator(_not_a_system_account)]
PartitionName = Annotated[Name, AfterValidator(_not_a_defaults_record)]
SshPublicKey = Annotated[str, AfterValidator(_public_key)]
HostRef = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.-]{0,61}[a-z0-9]$")]


def _slurm_time(value: str | None) -> str | None:
    if value is not None and not SLURM_TIME.match(value):
        raise ValueError(f"{value!r} is not a Slurm time; write minutes (60), D-HH:MM:SS (7-00:00:00) or UNLIMITED")
    return value


def _host_addresses(value: dict[str, str]) -> dict[str, str]:
    for host, address in value.items():
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise ValueError(f"{host}: {address!r} is not an IP address; write it like 10.64.1.5") from None
    return value


class SlurmController(SpecModel):
    instance_type: str | None = Field(
        default=None,
        description="AWS placement: instance type of the controller (slurmctld, slurmdbd). It runs at a fixed "
        "address in the management tier, so configless nodes always find it.",
    )
    hosts: dict[HostRef, str] = Field(
        default_factory=dict,
        max_length=2,
        description="On a site (onprem, hybrid): the service hosts that run slurmctld and slurmdbd, with their "
        "management addresses, e.g. {slurm-01: 10.64.1.5}; a second one is the backup.",
    )
    backup: bool = Field(
        default=False,
        description="AWS placement: a backup controller in the second availability zone. Both share the state "
        "directory on the shared file system (StateSaveLocation).",
    )
    state_mount: Name | None = Field(
        default=None,
        description="On a site with two controller hosts: the key of the site mount (site.storage.mounts) that "
        "holds the shared state directory. Its export is mounted at StateSaveLocation on both controllers and its "
        "root made slurm's: a mount of its own, never the users' /home.",
    )

    @field_validator("hosts")
    @classmethod
    def _addresses(cls, value: dict[str, str]) -> dict[str, str]:
        return _host_addresses(value)


class Accounting(SpecModel):
    database: Literal["managed", "controller"] | None = Field(
        default=None,
        description="Where slurmdbd's MariaDB runs: managed (Amazon RDS for MariaDB, encrypted, automated "
        "backups, Multi-AZ in prod; AWS placement) or controller (MariaDB on the controller host, dumped "
        "nightly). Default: managed on AWS, controller on a site.",
    )
    instance_class: Annotated[str, AfterValidator(refusing(rds_class_problem))] = Field(
        default="db.t4g.medium", description="RDS instance class (managed database): db.<type>.<size>."
    )
    backup_retention_days: int = Field(
        default=7, ge=1, le=35, description="Days of automated database backups (point-in-time recovery)."
    )
    purge_after_months: int = Field(
        default=24, ge=1, le=120, description="Job records older than this are purged from accounting."
    )
    # Provenance (AccountingStoreFlags): what ran is traceable from the job record (`sacct --batch-script`,
    # `sacct --env-vars`), for as long as the record is kept (purge_after_months).
    store_job_script: bool = Field(
        default=True,
        description="Keep each batch job's script in its accounting record (AccountingStoreFlags=job_script; "
        "`sacct -j ID --batch-script`).",
    )
    store_job_environment: bool = Field(
        default=False,
        description="Keep each batch job's environment in its accounting record (AccountingStoreFlags=job_env; "
        "`sacct -j ID --env-vars`). Off by default: an environment often holds tokens and keys (HF_TOKEN, "
        "WANDB_API_KEY, AWS credentials), which slurmdbd would then keep in its database and show to the job's "
        "user and Slurm operators until the record is purged.",
    )


class Partition(SpecModel):
    node_groups: list[Name] = Field(
        default_factory=list,
        description="Node groups (AWS) or site host pools whose nodes the partition holds; a group may sit in "
        "several partitions.",
    )
    default: bool = Field(default=False, description="The partition jobs land in without --partition. One only.")
    max_time: str = Field(default="UNLIMITED", description="Longest run time: D-HH:MM:SS, minutes or UNLIMITED.")
    default_time: str | None = Field(default=None, description="Run time of a job that asks for none.")
    exclusive: bool = Field(
        default=False, description="Whole nodes per job (OverSubscribe=EXCLUSIVE): multi-node training."
    )
    allow_accounts: list[Name] = Field(
        default_factory=list,
        description="AllowAccounts: only jobs charged to these accounts (scheduler.accounts) may use the partition; "
        "empty: every account.",
    )
    allow_qos: list[Name] = Field(
        default_factory=list,
        description="AllowQos: only jobs of these QOS (scheduler.qos) may use the partition; empty: every QOS.",
    )
    priority_tier: int = Field(
        default=1,
        ge=1,
        le=65533,
        description="Higher tiers are scheduled first; they never preempt a running job (scheduler.preemption).",
    )
    extra_options: dict[str, SlurmValue] = Field(
        default_factory=dict,
        description="Options of this PartitionName line gpuforge does not set, e.g. {Hidden: \"YES\", ExclusiveUser: "
        "\"YES\"}, checked like scheduler.extra_settings (docs/slurm.md, \"Settings gpuforge does not set\").",
    )

    @field_validator("max_time", "default_time")
    @classmethod
    def _times(cls, value: str | None) -> str | None:
        return _slurm_time(value)


class SlurmLogin(SpecModel):
    node_groups: list[Name] = Field(
        default_factory=list, description="Node groups (AWS, role login) or site host pools users log in to."
    )
    hosts: dict[HostRef, str] = Field(
        default_factory=dict,
        description="On a site (onprem, hybrid): service hosts users log in to, with their management addresses, "
        "e.g. {login-01: 10.64.1.7}: small servers outside the GPU racks, like the controller's.",
    )
    bastion: bool = Field(
        default=False,
        description="AWS: an SSH bastion in the ingress tier: port 22 open only to the network.allowed_ingress "
        "rules that list 22, SSH onward to the login nodes only. Default: reach login nodes through SSM Session "
        "Manager (no open port).",
    )
    bastion_instance_type: str = Field(
        default="t3.micro",
        description="Instance type of the bastion (it only forwards SSH connections).",
    )

    @field_validator("hosts")
    @classmethod
    def _addresses(cls, value: dict[str, str]) -> dict[str, str]:
        return _host_addresses(value)


class LocalUser(SpecModel):
    uid: int = Field(ge=1000, le=60000, description="Numeric user id, the same on every node.")
    account: Name = Field(description="Slurm account (scheduler.accounts) the user's jobs are charged to.")
    further_accounts: list[Name] = Field(
        default_factory=list,
        description="Further accounts (scheduler.accounts) the user may charge a job to with --account.",
    )
    ssh_public_keys: list[SshPublicKey] = Field(
        default_factory=list,
        description="Public keys allowed to log in: OpenSSH public key lines (ssh-ed25519 AAAA... comment).",
    )


class Account(SpecModel):
    description: str = Field(description="Who the account is (a team, a project).")
    fairshare: int = Field(default=1, ge=1, le=1000, description="Fair-share weight among accounts.")
    max_gpus: int | None = Field(
        default=None,
        ge=1,
        description="GPUs the account's running jobs may hold together (GrpTRES=gres/gpu=N); a job past it waits "
        "(reason AssocGrpGRES). None: no limit.",
    )
    parent: Name | None = Field(
        default=None,
        description="The account above it (scheduler.accounts), e.g. the organisation of a team: its fair share "
        "is divided among its children, its max_gpus holds them together. None: under Slurm's root.",
    )
    coordinators: list[UserName] = Field(
        default_factory=list,
        description="Users (scheduler.users) who manage the account and those below it: hold, cancel and "
        "change their jobs, add users (sacctmgr add coordinator).",
    )
    qos: list[Name] = Field(
        default_factory=list,
        description="The team QOS (scheduler.qos) its users may submit with (sbatch --qos); jobs without --qos "
        "get normal.",
    )


class SchedulerSpec(SpecModel):
    kind: Literal["slurm"] = Field(description="slurm. (Kubernetes clusters use the kubernetes section.)")
    controller: SlurmController = Field(description="Where slurmctld and slurmdbd run.")
    accounting: Accounting = Field(default_factory=Accounting, description="slurmdbd and its database.")
    partitions: dict[PartitionName, Partition] = Field(
        min_length=1, description="Partitions keyed by their Slurm name (not default: slurm.conf's defaults record)."
    )
    login: SlurmLogin = Field(default_factory=SlurmLogin, description="Login nodes and how users reach them.")
    accounts: dict[Name, Account] = Field(
        default_factory=dict,
        description="Slurm accounts keyed by name; slurmdbd keeps exactly these (one removed from here is removed "
        "there, unless jobs still run or wait in it).",
    )
    qos: dict[Name, Qos] = Field(
        default_factory=dict,
        description="Teams' own QOS keyed by name: priority, GPU and per-user limits, longest run time.",
    )
    users: dict[UserName, LocalUser] = Field(
        default_factory=dict,
        description="Cluster users keyed by login name, with their Slurm accounts: created on every node, or, with "
        "a directory, the directory's users (same uids), not created.",
    )
    directory: LdapDirectory | None = Field(
        default=None,
        description="The site's existing directory (LDAP through SSSD on every Slurm node): users and groups come "
        "from there, none is created locally, and `users` lists the directory's users with their Slurm accounts.",
    )
    containers: Literal["enroot_pyxis", "none"] = Field(
        default="enroot_pyxis",
        description="Container runtime for jobs: enroot + pyxis (srun --container-image) or none.",
    )
    preemption: Preemption = Field(
        default_factory=Preemption,
        description="Whether a running job may be preempted: none by default; opt in to a scavenger QOS.",
    )
    rest_api: RestApi = Field(
        default_factory=RestApi,
        description="slurmrestd on the controllers for pipelines and notebooks (JSON Web Tokens); off by default.",
    )
    reservations: dict[Name, Reservation] = Field(
        default_factory=dict,
        description="Maintenance windows and team bookings keyed by name, kept as Slurm reservations named "
        "gpuforge-<name> (the controller's role adds, changes and deletes those, never others).",
    )
    rolling_updates_outside_windows: bool = Field(
        default=True,
        description="Whether gpuforge-lifecycle may drain a node group that no maintenance window covers for a "
        "rolling image update at any time (true), or never (false: it waits for a window the spec declares). A "
        "group a window covers is drained only inside its window either way.",
    )
    job_tmpfs: bool = Field(
        default=True,
        description="Per-job private /tmp and /dev/shm (job_container/tmpfs), on local NVMe where the node has it.",
    )
    extra_settings: dict[str, SlurmValue] = Field(
        default_factory=dict,
        description="slurm.conf keys gpuforge does not set, e.g. {JobCompType: jobcomp/filetxt, ResumeTimeout: 1800}: "
        "each key and value checked against slurm.conf(5) and the stack's Slurm release; a key gpuforge renders is "
        "refused with the field that sets it (docs/slurm.md, \"Settings gpuforge does not set\").",
    )

