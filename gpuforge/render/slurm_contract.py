"""The Slurm contract: what the renderer hands the templates and the roles, as one typed model.

``gpuforge.render.slurm.slurm_contract`` builds a ``SlurmConfig``; ``to_vars()`` is the JSON-able dict the
inventory carries as the Ansible variable ``slurm_config`` and the templates read. The same model generates
the roles' ``meta/argument_specs.yml`` option for ``slurm_config`` (so Ansible checks the shape before a
task runs) and the table in docs/slurm.md (gpuforge/render/slurm_contract_views.py, ``make slurm-contract``).

``files`` is the one rule for which files exist: ``render_slurm`` renders exactly these, and the
slurm_controller and slurm_login roles and playbooks/slurm.yml loop over or test the same list.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_serializer, field_validator, model_validator

# The files every cluster has, in the order render_slurm returns them, then the optional ones (``files``).
ALWAYS = ("slurm.conf", "gres.conf", "cgroup.conf")


def _absent(value: object) -> bool:
    return value is None


class Contract(BaseModel):
    """A part of slurm_config: immutable, and no key the templates and roles do not read."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Host(Contract):
    name: str = Field(description="Host name (SlurmctldHost, the login host's inventory name).")
    address: str = Field(description="Address the other hosts reach it at (slurmd --conf-server, NodeAddr).")


class Timeouts(Contract):
    slurmctld: int = Field(description="SlurmctldTimeout, seconds: 120 with a backup controller, else 300.")
    slurmd: int = Field(description="SlurmdTimeout, seconds.")


class NodeHardware(Contract):
    """One node line, site or cloud: the same record, rendered by one macro (templates/slurm/node.j2)
    into a site's NodeName line and a cloud group's ``slurmd -Z --conf`` string."""

    names: str = Field(description="Slurm host list of the nodes (dgx-a[01-04]); empty for a cloud group.")
    addresses: str = Field(description="NodeAddr: the nodes' management addresses, in host list order; empty "
                                       "for a cloud group (its nodes register themselves).")
    port: int | None = Field(default=None, exclude_if=_absent,
                             description="slurmd's Port where nodes share one address (test machines in one "
                                         "network namespace); absent in production (ports.slurmd).")
    cpus: int = Field(description="CPUs: hardware threads of the node (catalog).")
    sockets: int | None = Field(default=None, exclude_if=_absent,
                                description="Sockets (catalog server); absent for a cloud group, whose catalog "
                                            "entry counts cores, not sockets (Slurm's default of one).")
    cores_per_socket: int = Field(description="CoresPerSocket (catalog).")
    threads_per_core: int = Field(description="ThreadsPerCore (catalog).")
    real_memory: int = Field(description="RealMemory, MiB: the catalog's memory times slurm.real_memory_fraction.")
    gres: str = Field(description="Gres (gpu:<type>:<count>); empty without GPUs.")
    features: list[str] = Field(description="Feature: group_<group>, the server model or instance type, the GPU "
                                            "type, a cloud group's availability zone.")


class DynamicGroup(Contract):
    name: str = Field(description="The cloud node group.")
    conf: str = Field(description="What its nodes register with (slurmd -Z --conf): its NodeHardware rendered by "
                                  "templates/slurm/node.j2.")
    features: list[str] = Field(description="Its nodes' features (NodeSet Feature=group_<group> selects them).")


class NodeSet(Contract):
    name: str = Field(description="NodeSet name, ns_<group>.")
    feature: str = Field(description="Feature selecting a cloud group's nodes (group_<group>); empty for a site pool.")
    nodes: str = Field(description="Host list of a site pool's nodes; empty for a cloud group.")


class Partition(Contract):
    name: str = Field(description="PartitionName (scheduler.partitions key).")
    nodesets: list[str] = Field(description="Its node sets (Nodes=).")
    default: bool = Field(description="Default=YES (scheduler.default_partition).")
    max_time: str = Field(description="MaxTime.")
    default_time: str = Field(description="DefaultTime; empty: none.")
    exclusive: bool = Field(description="OverSubscribe=EXCLUSIVE (whole nodes per job).")
    allow_accounts: list[str] = Field(default_factory=list, description="AllowAccounts; empty: every account.")
    allow_qos: list[str] = Field(default_factory=list, description="AllowQos; empty: every QOS.")
    priority_tier: int = Field(description="PriorityTier: a higher tier is scheduled first; it preempts nothing "
                                           "(preemption is preempt/none or preempt/qos).")
    def_cpu_per_gpu: int = Field(description="DefCpuPerGPU: CPUs a job gets per GPU it asks for (the smallest "
                                             "node's CPUs / GPUs); 0: a partition without GPUs, none written.")
    def_mem_per_cpu: int = Field(description="DefMemPerCPU, MiB: memory a job gets per CPU (the smallest node's "
                                             "RealMemory / CPUs), so a 1-GPU job takes its share, not the node.")
    billing_weights: str = Field(description="TRESBillingWeights: a node's CPUs, memory and GPUs each bill as "
                                             "its GPUs (with PriorityFlags=MAX_TRES, the largest share counts).")
    extra_options: dict[str, str] = Field(
        default_factory=dict, description="Options the stack passes through (partitions.<name>.extra_options), "
                                          "checked against slurm.conf(5); written after gpuforge's.")


class Qos(Contract):
    name: str = Field(description="The QOS's name (sacctmgr).")
    priority: int = Field(description="Its Priority (PriorityWeightQOS scales it).")
    preempt: list[str] = Field(description="Preempt: the QOS whose jobs this one's jobs may preempt.")
    preempt_mode: Literal["cluster", "requeue"] = Field(description="PreemptMode of its jobs when preempted.")
    grace_time_s: int = Field(description="GraceTime, seconds: SIGTERM first, SIGKILL this much later.")


class Preemption(Contract):
    type: Literal["preempt/none", "preempt/qos"] = Field(
        description="PreemptType: preempt/none (default: no running job is ever stopped for another) or "
                    "preempt/qos (scheduler.preemption.kind qos: only the scavenger QOS's jobs are).")
    mode: Literal["OFF", "REQUEUE"] = Field(description="PreemptMode: OFF, or REQUEUE with preempt/qos.")
    qos: list[Qos] = Field(description="The QOS the slurm_dbd role creates and keeps as given (preempt/qos: the "
                                       "scavenger and normal, which preempts it); empty with preempt/none.")


class Group(Contract):
    nodeset: str = Field(description="The group's node set.")
    dynamic: bool = Field(description="A cloud group (nodes register with slurmd -Z), else a site pool.")
    conf: str = Field(description="A cloud group's slurmd -Z --conf string (DynamicGroup.conf); empty on a site.")
    local_nvme: bool = Field(description="Its nodes have local NVMe (enroot's and the job container's paths).")
    gpus: int = Field(description="GPUs per node (the prolog's expected count).")


class GresFile(Contract):
    nodes: str = Field(description="NodeName= of the line (host list); empty: every node.")
    type: str = Field(description="GRES type (h100, ...).")
    file: str = Field(description="Device files (/dev/nvidia[0-7]).")


class Gres(Contract):
    types: list[str] = Field(description="GresTypes.")
    autodetect: Literal["nvml", ""] = Field(description="AutoDetect: nvml in production; empty with stand-in GPUs.")
    files: list[GresFile] = Field(description="Explicit device lines, with stand-in GPUs only (tests).")


class Switch(Contract):
    name: str = Field(description="SwitchName.")
    switches: str = Field(description="Switches= (child switches); empty for a leaf.")
    nodes: str = Field(description="Nodes= (host list); empty for a switch of switches.")
    comment: str = Field(description="Comment line above it in topology.conf.")


class Topology(Contract):
    kind: Literal["site", "ec2", "hybrid", "none"] = Field(
        description="site: switches from the site fabric; ec2: the controller's timer writes the tree from EC2 "
                    "instance topology; hybrid: the site's switches rendered, the cloud's added by that timer; "
                    "none: no topology.conf, no TopologyPlugin.")
    source: str = Field(description="Where the tree comes from (topology.conf's header).")
    region: str | None = Field(default=None, exclude_if=_absent,
                               description="AWS region of the timer's EC2 calls (ec2 and hybrid only).")
    switches: list[Switch] = Field(description="The rendered switches (a site fabric's); the timer keeps them.")
    static_nodes: list[str] | None = Field(
        default=None, exclude_if=_absent,
        description="hybrid only: the site's nodes, which the timer keeps under the rendered switches.")


class Ports(Contract):
    slurmctld: int = Field(description="SlurmctldPort (catalog slurm.ports).")
    slurmd: int = Field(description="SlurmdPort (catalog slurm.ports).")
    slurmdbd: int = Field(description="slurmdbd's DbdPort and AccountingStoragePort (catalog slurm.ports).")
    srun: str = Field(description="SrunPortRange, low-high (catalog slurm.ports.srun).")


class Mpi(Contract):
    default: Literal["pmix"] = Field(
        description="MpiDefault: steps start MPI ranks through PMIx (srun --mpi=pmix without asking; docs/slurm.md).")
    packages: dict[str, list[str]] = Field(
        description="Per distribution codename (ansible_facts.distribution_release): the packages carrying Slurm's "
                    "mpi/pmix plugin and the PMIx library it opens (catalog slurm.distributions.<os>.pmix); the "
                    "slurm_pmix role installs them on compute, login and controller nodes.")


class JobContainer(Contract):
    enabled: bool = Field(description="job_container/tmpfs: a private /tmp and /dev/shm per job (scheduler.job_tmpfs).")
    base_path: str = Field(description="BasePath, on local NVMe where the node has it.")


class HealthCheck(Contract):
    program: str = Field(description="HealthCheckProgram: the prolog's quick check under its periodic name.")
    interval_s: int = Field(description="HealthCheckInterval, seconds.")
    node_state: str = Field(description="HealthCheckNodeState (IDLE: Debian 12's Slurm 22.05 has no NONDRAINED_IDLE).")


class Database(Contract):
    kind: Literal["controller", "managed"] = Field(
        description="controller: MariaDB on the primary controller; managed: Amazon RDS.")
    host: str = Field(description="localhost, or the RDS endpoint (empty until the inventory fills it from the "
                                  "deployed stack's outputs).")
    port: int = Field(description="MariaDB's port.")
    name: str = Field(description="The accounting database's name.")
    user: str = Field(description="The database user slurmdbd connects as.")


class Accounting(Contract):
    host: str = Field(description="AccountingStorageHost: slurmdbd on the primary controller.")
    backup_host: str = Field(description="AccountingStorageBackupHost: the backup controller where both reach one "
                                         "(managed) database; empty otherwise.")
    port: int = Field(description="AccountingStoragePort (slurmdbd's port).")
    purge_after_months: int = Field(description="slurmdbd's Purge*After (scheduler.accounting.purge_after_months).")
    store_flags: list[str] = Field(
        description="AccountingStoreFlags: job_script and job_env where scheduler.accounting.store_job_script and "
        "store_job_environment ask (the job's script and environment kept in its record); empty: the line is left out."
    )
    database: Database = Field(description="The database slurmdbd writes to.")


class SecretRef(Contract):
    """Where a node reads a secret (the secret_store role): never the value."""

    store: Literal["aws_secretsmanager", "ansible_vault"] = Field(
        description="aws_secretsmanager (read with the node's role) or ansible_vault (an inventory variable).")
    id: str = Field(description="The secret's name in Secrets Manager, or the vault variable's name.")


class Secrets(Contract):
    munge_key: SecretRef = Field(description="MUNGE's key (munge role).")
    db_password: SecretRef = Field(description="The accounting database's password (slurm_dbd role).")
    ldap_bind_password: SecretRef | None = Field(
        default=None, exclude_if=_absent,
        description="The directory's bind password (sssd role); only with scheduler.directory.bind_dn.")
    cloud_munge_key: SecretRef | None = Field(
        default=None, exclude_if=_absent,
        description="Hybrid with cloud groups: the same key in Secrets Manager, which cloud nodes read.")
    jwt_key: SecretRef | None = Field(
        default=None, exclude_if=_absent,
        description="Only with scheduler.rest_api: the key slurmctld and slurmdbd sign and check JSON Web Tokens with "
                    "(slurm_controller role; the controllers read it, no other node).")


class RestApi(Contract):
    """slurmrestd on the controllers (scheduler.rest_api; docs/slurm.md, "The REST API")."""

    port: int = Field(description="slurmrestd's listening port (catalog flows.yaml ports.slurmrestd).")
    jwt_key: str = Field(description="AuthAltParameters=jwt_key=: the signing key's file on the controllers.")
    user: str = Field(description="The unprivileged system user slurmrestd runs as (never root or SlurmUser).")
    allowed_cidrs: list[str] = Field(description="Ranges allowed to reach it (the unit's IPAddressAllow).")
    controller_addresses: list[str] = Field(
        description="The controllers' addresses, which slurmrestd calls (slurmctld, slurmdbd) through the same filter.")


class Enroot(Contract):
    version: str = Field(description="enroot's release (catalog slurm.containers.enroot), <version>-<release>.")
    packages: list[str] = Field(description="Its packages.")
    url: str = Field(description="Download URL template of the packages.")
    sha256: dict[str, str] = Field(description="sha256 of each package file, by file name.")
    settings: dict[str, dict[str, str]] = Field(
        description="enroot.conf settings (ENROOT_...) per compute and login group: paths on local NVMe where the "
                    "group has it.")


class Pyxis(Contract):
    version: str = Field(description="pyxis's release (catalog slurm.containers.pyxis), <version>-<release>.")
    package: str = Field(description="Its package.")
    plugin: str = Field(description="Path of the SPANK plugin pyxis.conf loads.")
    options: dict[str, str] = Field(description="pyxis's plugstack arguments (runtime_path, container_scope, ...).")


class ContainerToolkit(Contract):
    version: str = Field(description="NVIDIA container toolkit release (catalog).")
    packages: list[str] = Field(description="Its packages (nvidia-container-cli for enroot's GPU hook).")
    repository: str = Field(description="Its apt repository.")
    key: str = Field(description="The repository's signing key URL.")


class Containers(Contract):
    runtime: Literal["enroot_pyxis", "none"] = Field(description="Job containers (scheduler.containers).")
    plugstack_dir: str = Field(description="Directory of SPANK plugin configurations plugstack.conf includes.")
    enroot: Enroot = Field(description="enroot's release and settings.")
    pyxis: Pyxis = Field(description="pyxis's release and options.")
    nvidia_container_toolkit: ContainerToolkit = Field(description="The toolkit GPU groups get.")
    gpu_groups: list[str] = Field(description="Groups whose nodes have GPUs (they get the toolkit).")


class Reservation(Contract):
    name: str = Field(description="ReservationName: gpuforge-<scheduler.reservations key>; the role touches no other.")
    kind: Literal["maintenance", "booking"] = Field(description="maintenance (MAINT, root only) or booking.")
    start: str = Field(description="StartTime of its first window, ISO 8601 UTC (…Z); the role converts to the "
                                   "controller's time.")
    end: str = Field(description="EndTime of its first window, ISO 8601 UTC.")
    flags: list[str] = Field(description="The Flags gpuforge sets (MAINT, IGNORE_JOBS, DAILY, WEEKLY); Slurm's own "
                                         "(SPEC_NODES, ...) are not compared.")
    users: list[str] = Field(description="Users=; maintenance: root.")
    accounts: list[str] = Field(description="Accounts=; empty: none.")
    node_features: list[str] = Field(description="Its nodes: every node with one of these features (group_<group>), "
                                                 "resolved on the controller (Nodes=).")
    node_count: int = Field(description="NodeCnt= (Slurm picks the nodes in partition); 0: node_features' nodes.")
    partition: str = Field(description="PartitionName=; empty: none.")


class TeamQos(Contract):
    name: str = Field(description="The QOS's name (scheduler.qos key).")
    description: str = Field(description="sacctmgr's Description.")
    priority: int = Field(description="Priority.")
    max_gpus: int | None = Field(description="GrpTRES=gres/gpu=N; null: none (cleared with -1).")
    max_gpus_per_user: int | None = Field(description="MaxTRESPerUser=gres/gpu=N; null: none (cleared with -1).")
    max_jobs_per_user: int | None = Field(description="MaxJobsPerUser; null: none (cleared with -1).")
    max_wall: str = Field(description="MaxWall as sacctmgr lists it (HH:MM:SS, D-HH:MM:SS); empty: none.")


class Account(Contract):
    description: str = Field(description="sacctmgr account description.")
    fairshare: int = Field(description="The account's fairshare.")
    max_gpus: int | None = Field(default=None,
                                 description="GrpTRES=gres/gpu=N: GPUs its running jobs hold together; null: none.")
    parent: str = Field(default="root", description="Its parent account (root: the top of the tree).")
    coordinators: list[str] = Field(default_factory=list, description="sacctmgr coordinators of the account.")
    inherited_coordinators: list[str] = Field(
        default_factory=list, description="Its ancestors' coordinators, which sacctmgr lists for it too (kept).")
    qos: list[str] = Field(default_factory=list, description="Team QOS its associations may use (qos+=).")


class User(Contract):
    uid: int = Field(description="The same uid on every node.")
    account: str = Field(description="The user's Slurm account (its default).")
    further_accounts: list[str] = Field(default_factory=list,
                                        description="Further accounts the user may charge with --account.")
    ssh_public_keys: list[str] = Field(description="Keys slurm_users authorizes.")


class Directory(Contract):
    kind: Literal["ldap"] = Field(description="The directory service.")
    uri: str = Field(description="ldaps:// or ldap:// (with start_tls) URI.")
    start_tls: bool = Field(description="StartTLS on an ldap:// URI.")
    search_base: str = Field(description="Base DN of users and groups.")
    ca_certificate: str = Field(description="PEM of the CA; empty: the system trust store.")
    bind_dn: str = Field(description="DN sssd binds as; empty: anonymous reads.")


class Versions(Contract):
    minimum: str = Field(description="The oldest Slurm the configuration runs on: every role refuses an older "
                                     "daemon (slurm_version, catalog slurm.minimum).")
    production: str = Field(description="The release production nodes run (catalog slurm.production).")
    production_source: str = Field(description="Where that release comes from (catalog).")
    test: str = Field(description="The release the booted tests run (Debian 12's, catalog slurm.test).")


class HetJobGuard(Contract):
    partitions: dict[str, Literal["site", "cloud"]] = Field(
        description="Each partition's side of the VPN (a partition holds one side's node groups).")
    default_partition: str = Field(description="The partition a job component without -p lands in.")


class SlurmConfig(Contract):
    """slurm_config: every Slurm template and role reads this, and nothing else about the cluster's Slurm."""

    cluster_name: str = Field(description="ClusterName (the stack's name).")
    slurm_user: str = Field(description="SlurmUser.")
    controllers: list[Host] = Field(description="SlurmctldHost lines, the primary first; slurmd's --conf-server.")
    state_save_location: str = Field(description="StateSaveLocation.")
    state_shared: dict[str, Any] = Field(
        description="With a backup controller: a site_mounts mount at state_save_location (AWS: the state EFS; a "
                    "site: scheduler.controller.state_mount), which both controllers mount; {} with one.")
    timeouts: Timeouts = Field(description="Daemon timeouts.")
    max_node_count: int = Field(description="MaxNodeCount: static nodes plus every cloud node (count and spares).")
    nodes: list[NodeHardware] = Field(description="A site's static node lines: per pool, one per 16 hosts "
                                                  "(NODE_LINE_HOSTS).")
    dynamic_groups: list[DynamicGroup] = Field(description="Cloud groups, whose nodes register themselves.")
    nodesets: list[NodeSet] = Field(description="One NodeSet per Slurm node group.")
    partitions: list[Partition] = Field(description="PartitionName lines.")
    preemption: Preemption = Field(description="Whether and how running jobs are preempted (docs/slurm.md).")
    extra_settings: dict[str, str] = Field(
        default_factory=dict, description="slurm.conf keys the stack passes through (scheduler.extra_settings, "
                                          "checked against slurm.conf(5)), SchedulerParameters apart.")
    scheduler_parameters: list[str] = Field(
        description="SchedulerParameters: gpuforge's options (catalog slurm_settings, merged_after), then the "
                    "stack's (scheduler.extra_settings).")
    groups: dict[str, Group] = Field(description="Per node group (key): what the compute role needs "
                                                 "(slurmd.default.j2 takes it as slurm_group, plus name).")
    login_groups: list[str] = Field(description="Node groups and pools that get the client commands and logins.")
    login_hosts: list[Host] = Field(description="A site's login service hosts (scheduler.login.hosts).")
    gres: Gres = Field(description="gres.conf.")
    topology: Topology = Field(description="Slurm's tree (topology.conf).")
    ports: Ports = Field(description="What every firewall opens.")
    mpi: Mpi = Field(description="MPI through PMIx (MpiDefault) and the packages that make it load.")
    job_container: JobContainer = Field(description="job_container.conf.")
    prolog: str = Field(description="Prolog: the glob of scripts the compute role links.")
    epilog: str = Field(description="Epilog: the glob of scripts the compute role links.")
    health_check: HealthCheck = Field(description="slurmd's periodic health check.")
    accounting: Accounting = Field(description="slurmdbd and its database.")
    secrets: Secrets = Field(description="Where nodes read each secret: never the values.")
    home: dict[str, Any] = Field(
        description="The shared /home as a site_mounts mount (its argument spec has the shape): the cluster's EFS "
                    "(server and source from the deployed stack's outputs) or the site's mount.")
    containers: Containers = Field(description="enroot and pyxis (docs/slurm.md, Containers).")
    login_access: Literal["bastion", "ssm"] = Field(description="How users reach the login nodes.")
    accounts: dict[str, Account] = Field(description="sacctmgr accounts, by name, each after its parent; slurmdbd "
                                                    "keeps these and no others (jobs still active hold one back).")
    qos: list[TeamQos] = Field(default_factory=list, description="Teams' own QOS (scheduler.qos).")
    reservations: list[Reservation] = Field(
        default_factory=list, description="Maintenance windows and bookings (scheduler.reservations), kept by the "
                                          "slurm_controller role's reservations tasks.")
    users: dict[str, User] = Field(description="Local users, by login (none with a directory).")
    directory: Directory | None = Field(
        default=None, description="The site's LDAP directory (sssd role); {} without one.")
    lifecycle: dict[str, Any] | None = Field(
        default=None, exclude_if=_absent,
        description="Only with cloud groups: gpuforge-lifecycle's configuration (gpuforge/render/lifecycle.py, "
                    "docs/lifecycle.md), read by the slurm_scaler role.")
    rest_api: RestApi | None = Field(
        default=None, exclude_if=_absent,
        description="Only with scheduler.rest_api enabled: slurmrestd and auth/jwt (AuthAltTypes).")
    versions: Versions = Field(description="Slurm releases (catalog).")
    het_job_guard: HetJobGuard | None = Field(
        default=None, exclude_if=_absent,
        description="Only on a hybrid cluster: cli_filter.lua refuses a heterogeneous job whose components sit on "
                    "both sides of the VPN (CliFilterPlugins=lua, shipped configless).")

    @field_validator("directory", mode="before")
    @classmethod
    def _empty_is_none(cls, directory: Any) -> Any:
        return None if directory == {} else directory

    @field_serializer("directory")
    def _directory_or_empty(self, directory: Directory | None) -> dict[str, Any]:
        # The roles test `slurm_config.directory | length > 0`: no directory is an empty mapping.
        return {} if directory is None else directory.model_dump(mode="json")

    @model_validator(mode="before")
    @classmethod
    def _files_are_derived(cls, data: Any) -> Any:
        """A dict read back (the inventory's variable, a test's variation of it) may carry ``files``: it must
        be what the rest gives, or the roles would read one list and the renderer another."""
        if not isinstance(data, dict) or "files" not in data:
            return data
        rest = {key: value for key, value in data.items() if key != "files"}
        derived = cls.model_validate(rest).files
        if list(data["files"]) != derived:
            raise ValueError(f"files is derived from the rest of slurm_config: it says {data['files']}, the rest "
                             f"gives {derived}; drop it (or rebuild the dict with SlurmConfig.to_vars())")
        return rest

    @computed_field(description="The files render_slurm renders and the roles write: slurm.conf, gres.conf, "  # type: ignore[prop-decorator]
                                "cgroup.conf; job_container.conf, topology.conf, plugstack.conf when in use; "
                                "slurmd.<group> per node group; with containers pyxis.conf and enroot.conf.<group>.")
    @property
    def files(self) -> list[str]:
        optional = {
            "job_container.conf": self.job_container.enabled,
            # A hybrid site without a fabric has no rendered switch, yet the controller's timer writes the cloud
            # groups' switches into the file: it exists for every kind but none.
            "topology.conf": self.topology.kind != "none",
            "plugstack.conf": self.containers.runtime != "none",
            "cli_filter.lua": self.het_job_guard is not None,
        }
        files = [*ALWAYS, *(name for name, wanted in optional.items() if wanted)]
        files += [f"slurmd.{group}" for group in self.groups]
        if self.containers.runtime == "enroot_pyxis":
            files += ["pyxis.conf", *(f"enroot.conf.{group}" for group in self.containers.enroot.settings)]
        return files

    def to_vars(self) -> dict[str, Any]:
        """The JSON-able dict the inventory carries and the templates read."""
        return self.model_dump(mode="json")
