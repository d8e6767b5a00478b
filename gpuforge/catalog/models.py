"""Typed hardware catalog: frozen pydantic models over the data files, and their loader.

Two data files, each with its provenance:
- data/aws_instance_types.json: generated from EC2 DescribeInstanceTypes (scripts/gen_aws_catalog.py);
- data/facts.yaml: hand-curated facts the EC2 API lacks (GPU power, NVLink, servers, FSx rules).

Stacks may override any fact (``load_catalog(overrides=...)``); overrides deep-merge onto the data
and are validated with the same models, so a typo is an error naming its path, not a silent no-op.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, model_validator

from gpuforge.catalog.prices import PriceTable, read_prices

DATA_DIR = Path(__file__).resolve().parent / "data"
_Model = TypeVar("_Model", bound=BaseModel)
AWS_FILE = "gpuforge/catalog/data/aws_instance_types.json"
FACTS_FILE = "gpuforge/catalog/data/facts.yaml"
_FACT_KEYS = ("gpus", "instance_extras", "host_power", "servers", "fsx_lustre", "slurm", "alertmanager", "nccl")

DeploymentType = Literal["SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"]


class CatalogError(KeyError):
    """A catalog lookup or override failed. A KeyError so `except KeyError` callers keep working.
    For invalid overrides, `validation` holds pydantic's error and the merged document it judged,
    so the spec can name each problem at its path under cluster.catalog."""

    validation: tuple[ValidationError, Any] | None = None

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message, quoting it.
        return str(self.args[0]) if self.args else ""


def load_data_file(path: Path, model: type[_Model]) -> _Model:
    """One of the catalog's data files, validated into its model. The file's `_source` key says where its
    facts come from, for the people who read it; the model does not carry it."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc.pop("_source", None)
    try:
        return model.model_validate(doc)
    except ValidationError as error:
        raise CatalogError(f"invalid {path.name}: {error}") from None


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _close(name: str, names: list[str]) -> str:
    hits = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    return f"; did you mean: {', '.join(hits)}?" if hits else ""


# --- AWS instance types (generated rows) -------------------------------------------------------


class Accelerator(_Frozen):
    kind: Literal["gpu", "neuron"]  # neuron = AWS Trainium/Inferentia (NeuronInfo)
    manufacturer: str
    name: str
    count: PositiveInt
    memory_mib: int  # per device


class NetworkCard(_Frozen):
    index: int = Field(ge=0)
    baseline_gbps: float = Field(ge=0)
    peak_gbps: float = Field(ge=0)
    max_interfaces: int = Field(ge=0)


class InstanceExtras(_Frozen):
    """Facts per instance type that DescribeInstanceTypes lacks (facts.yaml instance_extras)."""

    gpudirect_rdma: bool | None = None  # None: not listed in aws-ofi-nccl platform-aws.cpp
    nvswitch: bool = False  # NVSwitch baseboard: Fabric Manager required
    # CPU sockets (DescribeInstanceTypes counts cores only): Slurm's node line, Sockets x CoresPerSocket.
    sockets: PositiveInt | None = None
    sockets_source: str | None = None
    nccl_busbw_reference_gbps: float | None = None  # nccl-tests busbw, GB/s
    nccl_busbw_basis: str | None = None
    source: str
    secondary: bool = False

    @model_validator(mode="after")
    def _sockets_sourced(self) -> InstanceExtras:
        if (self.sockets is None) != (self.sockets_source is None):
            raise ValueError("sockets and sockets_source go together")
        return self

    @model_validator(mode="after")
    def _basis_with_figure(self) -> InstanceExtras:
        if (self.nccl_busbw_reference_gbps is None) != (self.nccl_busbw_basis is None):
            raise ValueError("nccl_busbw_reference_gbps and nccl_busbw_basis go together")
        return self


_AGGREGATE = re.compile(r"^(?:(\d+)x )?(\d+(?:\.\d+)?) Gigabit$")


class InstanceTypeRow(_Frozen):
    """One row of aws_instance_types.json, as generated."""

    instance_type: str
    accelerator: Accelerator | None
    vcpus: PositiveInt
    cores: PositiveInt  # VCpuInfo.DefaultCores: physical cores (vcpus = cores x threads_per_core)
    threads_per_core: PositiveInt  # VCpuInfo.DefaultThreadsPerCore
    memory_mib: PositiveInt
    architectures: tuple[str, ...]
    network_performance: str
    max_network_cards: PositiveInt
    network_cards: tuple[NetworkCard, ...]
    efa_supported: bool
    max_efa_interfaces: int = Field(ge=0)
    ena_srd_supported: bool
    nvme_gb: int
    placement_strategies: tuple[str, ...]
    offerings: dict[str, tuple[str, ...]]

    @model_validator(mode="after")
    def _efa_consistent(self) -> InstanceTypeRow:
        if self.efa_supported != (self.max_efa_interfaces > 0):
            raise ValueError("max_efa_interfaces must be > 0 exactly when efa_supported")
        return self


class InstanceType(InstanceTypeRow):
    """An instance type row joined with its instance_extras."""

    extras: InstanceExtras | None = None

    @property
    def gpu_count(self) -> int:
        """Accelerators per node (GPUs, or Neuron devices on Trainium; see accelerator.kind)."""
        return self.accelerator.count if self.accelerator else 0

    @property
    def gpu_model(self) -> str | None:
        return self.accelerator.name if self.accelerator else None

    @property
    def sockets(self) -> int | None:
        """CPU sockets where facts.yaml has them; None: not sourced (Slurm then assumes one)."""
        return self.extras.sockets if self.extras else None

    @property
    def gpudirect_rdma(self) -> bool | None:
        return self.extras.gpudirect_rdma if self.extras else None

    @property
    def nvswitch(self) -> bool:
        return self.extras.nvswitch if self.extras else False

    @property
    def efa_ceiling_gbps(self) -> float | None:
        """Inter-node NIC ceiling in GB/s: EFA cards' baseline Gb/s summed, capped by the advertised
        aggregate (the snapshot's per-card figures can exceed it), divided by 8. None without EFA."""
        if not self.efa_supported:
            return None
        gbit = sum(c.baseline_gbps for c in self.network_cards[: self.max_efa_interfaces])
        m = _AGGREGATE.match(self.network_performance)
        if m:
            gbit = min(gbit, int(m.group(1) or 1) * float(m.group(2)))
        return gbit / 8

    @property
    def nccl_busbw_reference_gbps(self) -> float | None:
        """nccl-tests busbw reference in GB/s: a published figure when facts.yaml has one, else the
        derived EFA ceiling (see nccl_busbw_basis), else None."""
        if self.extras and self.extras.nccl_busbw_reference_gbps is not None:
            return self.extras.nccl_busbw_reference_gbps
        return self.efa_ceiling_gbps

    @property
    def nccl_busbw_basis(self) -> str | None:
        if self.extras and self.extras.nccl_busbw_basis is not None:
            return self.extras.nccl_busbw_basis
        if self.efa_supported:
            return (
                f"derived inter-node ceiling: {self.max_efa_interfaces} EFA NICs x per-NIC rate "
                f"(capped at '{self.network_performance}') / 8; no published AWS multi-node EFA figure"
            )
        return None

    def azs_offering(self, region: str) -> tuple[str, ...]:
        return self.offerings.get(region, ())

    def regions(self) -> list[str]:
        return sorted(self.offerings)


# --- Curated facts ------------------------------------------------------------------------------


Precision = Literal["tf32", "bf16", "fp16", "fp8"]


class Gpu(_Frozen):
    name: str
    tdp_w: int = Field(gt=0, le=10_000)  # W per GPU
    nvlink_gen: int | None = None
    nvlink_links: int | None = None
    source: str
    secondary: bool = False
    # Peak dense (no 2:4 sparsity) Tensor Core TFLOPS per precision, from the vendor's datasheet;
    # a precision the GPU lacks is absent. `gpuforge capacity` divides a run's FLOPs by it.
    dense_tflops: dict[Precision, float] = Field(default_factory=dict)
    dense_tflops_source: str = ""
    # Model FLOPs utilization a published large run reached on this generation; None: no public figure.
    mfu_default: float | None = Field(default=None, gt=0, le=1)
    mfu_source: str = ""

    @model_validator(mode="after")
    def _figures_sourced(self) -> Gpu:
        if self.dense_tflops and not self.dense_tflops_source:
            raise ValueError("dense_tflops needs dense_tflops_source (where the figures come from)")
        if any(v <= 0 for v in self.dense_tflops.values()):
            raise ValueError("dense_tflops must be positive")
        if self.mfu_default is not None and not self.mfu_source:
            raise ValueError("mfu_default needs mfu_source (the published run it comes from)")
        return self


class HostPower(_Frozen):
    overhead_w: int = Field(gt=0, le=100_000)  # per full host: CPUs, NICs, fans, switches, PSU losses
    # vCPUs of the host that overhead_w was measured on: an instance is charged its share,
    # so a slice of a host (g5.12xlarge, m7i.large) is not charged a whole server.
    overhead_reference_vcpus: PositiveInt
    overhead_source: str
    overhead_secondary: bool = False
    pue_default: float = Field(ge=1.0, le=3.0)  # a PUE below 1 would make the facility produce power
    pue_source: str


class Psu(_Frozen):
    count: PositiveInt
    rating_w: PositiveInt
    redundancy: str  # "N+M": N PSUs carry the server, M are spare

    @model_validator(mode="after")
    def _n_plus_m(self) -> Psu:
        n, _, m = self.redundancy.partition("+")
        if not (n.isdigit() and m.isdigit() and int(n) + int(m) == self.count and int(n) > 0):
            raise ValueError(f"redundancy {self.redundancy!r} must read N+M with N+M = count ({self.count})")
        return self

    @property
    def required(self) -> int:
        """N: the PSUs that must stay up to carry the server at its maximum."""
        return int(self.redundancy.split("+")[0])


PortRole = Literal["compute", "storage", "management"]


class NetworkPort(_Frozen):
    """One network port of a server model as the vendor's port table names it: the RDMA device and the Linux
    interface of its default link type, and what the reference design cables it to."""

    label: str  # the vendor's name for the port (OSFP4P2, Slot1 P1)
    device: str  # default RDMA device name (mlx5_0)
    interface: str  # default Linux network interface name (ibp24s0)
    link: Literal["infiniband", "ethernet"]  # the port's default link type
    role: PortRole  # compute fabric, storage fabric, in-band management
    rail: int | None = Field(default=None, ge=0)  # compute ports: the rail (= the GPU the port sits next to)

    @model_validator(mode="after")
    def _rail_for_compute(self) -> NetworkPort:
        if (self.role == "compute") != (self.rail is not None):
            raise ValueError(f"{self.label}: a compute port has a rail (its GPU), other ports none")
        return self


class ServerModel(_Frozen):
    name: str
    gpu_model: str
    gpu_count: PositiveInt
    system_max_kw: float = Field(gt=0, le=1000)
    psus: Psu
    hca_count: int
    rack_units: PositiveInt | None = None  # chassis height (U); None: the host states u_height
    cpu_threads: PositiveInt | None = None  # logical CPUs, for whole-node Kueue quotas on-prem
    sockets: PositiveInt | None = None  # CPU sockets: Slurm's node line (Sockets x CoresPerSocket x ThreadsPerCore)
    threads_per_core: PositiveInt | None = None  # 2 with SMT/Hyper-Threading
    memory_gib: PositiveInt | None = None  # system memory
    nvswitch: bool = False  # NVSwitch baseboard: the node needs Fabric Manager and has NVLinks to check
    # Compute-fabric HCAs in rail (= GPU) order, as the default RDMA device names; empty where the
    # names depend on the vendor's layout (the host then lists its own in site.hosts[].hcas).
    compute_hcas: tuple[str, ...] = ()
    fabric_source: str | None = None  # where nvswitch and compute_hcas come from
    # The model's network ports (compute, storage, in-band management) from the vendor's port table; where
    # given, compute_hcas is their compute ports in rail order. Empty: the ports depend on the vendor's layout.
    network_ports: tuple[NetworkPort, ...] = ()
    network_ports_source: str | None = None
    # nccl-tests all_reduce busbw of one node (its GPUs over NVLink), GB/s, where a figure is published.
    nccl_busbw_reference_gbps: float | None = None
    nccl_busbw_basis: str | None = None
    # Node-local NVMe scratch drives by stable path (/dev/disk/by-path/...), assembled at /scratch by the
    # local_scratch role; empty: none (no vendor publishes the names: a site sets them in its catalog overrides).
    scratch_devices: tuple[str, ...] = ()
    source: str
    secondary: bool = False

    @model_validator(mode="before")
    @classmethod
    def _compute_hcas_from_ports(cls, data: Any) -> Any:
        """compute_hcas follows from the port table: one fact, one place."""
        if isinstance(data, dict) and data.get("network_ports") and not data.get("compute_hcas"):
            compute = [p for p in data["network_ports"] if isinstance(p, dict) and p.get("role") == "compute"]
            data = {**data, "compute_hcas": [p["device"] for p in sorted(compute, key=lambda p: p.get("rail", 0))]}
        return data

    def ports(self, role: PortRole) -> tuple[NetworkPort, ...]:
        """The model's ports of one role, in the port table's order (compute ports in rail order)."""
        ports = [p for p in self.network_ports if p.role == role]
        return tuple(sorted(ports, key=lambda p: p.rail or 0) if role == "compute" else ports)

    @model_validator(mode="after")
    def _hcas_counted(self) -> ServerModel:
        if (self.nccl_busbw_reference_gbps is None) != (self.nccl_busbw_basis is None):
            raise ValueError("nccl_busbw_reference_gbps and nccl_busbw_basis go together")
        if self.compute_hcas and len(self.compute_hcas) != self.hca_count:
            raise ValueError(f"compute_hcas lists {len(self.compute_hcas)} HCAs but hca_count is {self.hca_count}")
        if (self.nvswitch or self.compute_hcas) and not self.fabric_source:
            raise ValueError("nvswitch and compute_hcas need fabric_source (where the facts come from)")
        if self.network_ports and not self.network_ports_source:
            raise ValueError("network_ports need network_ports_source (where the port table comes from)")
        compute = tuple(p.device for p in self.ports("compute"))
        if self.network_ports and compute != self.compute_hcas:
            raise ValueError(f"compute_hcas {list(self.compute_hcas)} differ from the compute ports {list(compute)}")
        return self


class CapacityRule(_Frozen):
    """Valid sizes in GiB: any of first_steps, or any positive multiple of increment."""

    first_steps: tuple[PositiveInt, ...] = ()
    increment: PositiveInt

    def is_valid(self, gib: int) -> bool:
        return gib in self.first_steps or (gib > 0 and gib % self.increment == 0)

    def next_valid(self, gib: int) -> int:
        multiple = max(1, math.ceil(gib / self.increment)) * self.increment
        return min([s for s in self.first_steps if s >= gib] + [multiple])

    def describe(self) -> str:
        head = " or ".join(str(s) for s in self.first_steps)
        tail = f"multiples of {self.increment} GiB"
        return f"{head} GiB, then {tail}" if head else tail


class ThroughputOption(_Frozen):
    storage_type: Literal["SSD", "HDD"]
    capacity: CapacityRule | None = None  # None: the deployment type's default rule
    efa_capacity: CapacityRule | None = None  # None: EFA not available at this throughput


class MetadataIopsRule(_Frozen):
    first_steps: tuple[PositiveInt, ...]
    increment: PositiveInt
    maximum: PositiveInt

    def is_valid(self, iops: int) -> bool:
        return iops in self.first_steps or (0 < iops <= self.maximum and iops % self.increment == 0)


class FsxLustreRules(_Frozen):
    deployment_type: DeploymentType
    replicated: bool
    dra_supported: bool  # data repository associations (S3 links)
    efa_supported: bool
    capacity_increase_supported: bool
    capacity: CapacityRule
    throughputs: dict[int, ThroughputOption]  # per-unit MB/s/TiB; empty: not settable (scratch)
    baseline_throughput_per_tib: PositiveInt | None = None  # scratch: fixed MB/s/TiB
    metadata_iops: MetadataIopsRule | None
    source: str

    @model_validator(mode="after")
    def _efa_consistent(self) -> FsxLustreRules:
        has_efa = any(t.efa_capacity for t in self.throughputs.values())
        if self.efa_supported != has_efa:
            raise ValueError("efa_supported must match whether any throughput has efa_capacity")
        return self

    @property
    def per_unit_throughputs(self) -> tuple[int, ...]:
        return tuple(sorted(self.throughputs))

    def _rule(self, per_unit_throughput: int | None, efa: bool) -> CapacityRule:
        dt = self.deployment_type
        if efa and not self.efa_supported:
            raise CatalogError(f"{dt} does not support EFA; only PERSISTENT_2 does")
        if per_unit_throughput is None:
            if efa:
                raise CatalogError(f"{dt} with EFA: capacity depends on per_unit_throughput; pass one")
            return self.capacity
        option = self.throughputs.get(per_unit_throughput)
        if option is None:
            allowed = ", ".join(map(str, self.per_unit_throughputs)) or "none (not settable)"
            raise CatalogError(
                f"{dt}: per-unit throughput {per_unit_throughput} MB/s/TiB; allowed: {allowed}"
            )
        if efa:
            if option.efa_capacity is None:
                raise CatalogError(f"{dt}: no EFA at {per_unit_throughput} MB/s/TiB")
            return option.efa_capacity
        return option.capacity or self.capacity

    def is_valid_capacity(self, gib: int, per_unit_throughput: int | None = None, efa: bool = False) -> bool:
        try:
            return self._rule(per_unit_throughput, efa).is_valid(gib)
        except CatalogError:
            return False

    def next_valid_capacity(self, gib: int, per_unit_throughput: int | None = None, efa: bool = False) -> int:
        """Smallest valid capacity >= gib. Raises CatalogError for a throughput/EFA combination
        the deployment type does not allow."""
        return self._rule(per_unit_throughput, efa).next_valid(gib)

    def valid_capacities_description(self) -> str:
        parts = [self.capacity.describe()]
        for tp in self.per_unit_throughputs:
            opt = self.throughputs[tp]
            if opt.capacity is not None:
                parts.append(f"at {tp} MB/s/TiB ({opt.storage_type}): {opt.capacity.describe()}")
        for tp in self.per_unit_throughputs:
            efa_rule = self.throughputs[tp].efa_capacity
            if efa_rule is not None:
                parts.append(f"with EFA at {tp} MB/s/TiB: {efa_rule.describe()}")
        return f"{self.deployment_type}: " + "; ".join(parts)

    def metadata_iops_valid(self, iops: int) -> bool:
        return self.metadata_iops is not None and self.metadata_iops.is_valid(iops)


class SlurmRelease(_Frozen):
    version: str  # major release, e.g. "23.11"
    source: str  # where the packages come from
    reason: str  # why this release
    os: str | None = None  # the distribution whose packages production installs (a key of distributions)


class PmixPackages(_Frozen):
    """Where a distribution's archive keeps Slurm's mpi/pmix plugin and the PMIx library the plugin opens."""

    codename: str  # ansible_facts.distribution_release (bookworm, noble): how the roles pick this entry
    plugin: str  # the plugin file (mpi_pmix.so links to it), in the package that carries it
    packages: tuple[str, ...]  # what the Slurm roles install so the plugin loads: the plugin's and the library's
    source: str


class SlurmPackaged(_Frozen):
    """The slurm-wlm a distribution's own archive ships."""

    version: str  # e.g. "23.11.4"
    source: str
    pmix: PmixPackages | None = None  # none: no MPI through PMIx (a release gpuforge refuses anyway)


def version_tuple(version: str) -> tuple[int, ...]:
    """"23.11.4" -> (23, 11, 4): Slurm releases compare by their numeric parts."""
    return tuple(int(part) for part in version.split("."))


class SlurmPorts(_Frozen):
    """What Slurm's daemons listen on, and the range srun listens in (slurm.conf SrunPortRange): the
    rendered configuration and every firewall rule (security groups, the site's firewall) read these."""

    slurmctld: int
    slurmd: int
    slurmdbd: int
    srun: tuple[int, int]  # SrunPortRange, inclusive
    source: str

    @model_validator(mode="after")
    def _range(self) -> SlurmPorts:
        low, high = self.srun
        if not 1024 < low <= high < 65536:
            raise ValueError("srun must be a range of unprivileged ports, low <= high")
        return self


class AccountingDatabase(_Frozen):
    """slurmdbd's database (slurmdbd.conf StorageLoc and StorageUser): the roles create it and its user on the
    controller's MariaDB, and the RDS instance is created with them."""

    name: str
    user: str
    source: str


class EnrootRelease(_Frozen):
    version: str  # upstream release, e.g. "4.1.2"
    package_release: str  # Debian revision of the release's .debs
    packages: list[str]
    url: str  # release assets: <url>/<package>_<version>-<package_release>_<arch>.deb
    sha256: dict[str, str]  # asset file name -> hex digest
    source: str
    reason: str


class PyxisRelease(_Frozen):
    version: str
    package_release: str
    package: str
    plugin: str  # where the package installs spank_pyxis.so
    source: str
    reason: str


class ContainerToolkitRelease(_Frozen):
    version: str  # Debian version of the packages, pinned
    packages: list[str]
    repository: str  # flat apt repository; the architecture is appended
    key: str
    source: str
    reason: str


class ContainerRuntimeFacts(_Frozen):
    """enroot + pyxis for `srun --container-image`, and NVIDIA's container toolkit for enroot's GPU hook."""

    enroot: EnrootRelease
    pyxis: PyxisRelease
    nvidia_container_toolkit: ContainerToolkitRelease


class SigningHelperRelease(_Frozen):
    """IAM Roles Anywhere's credential helper (aws_signing_helper): what a site's scaler runs to trade its
    host certificate for AWS credentials (gpuforge/assets/playbooks/roles/slurm_scaler)."""

    version: str
    url: dict[str, str]  # architecture (ansible_facts.architecture: x86_64, aarch64) -> release binary
    sha256: dict[str, str]  # architecture -> hex digest AWS publishes; none: the role refuses to install
    source: str
    reason: str

    @model_validator(mode="after")
    def _digests(self) -> SigningHelperRelease:
        for arch, digest in self.sha256.items():
            if arch not in self.url:
                raise ValueError(f"sha256 for {arch!r} has no url")
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise ValueError(f"sha256[{arch}] must be 64 lowercase hex digits")
        return self


class SlurmFacts(_Frozen):
    """Slurm versions (production and the one tests run) and the rules the rendered configuration follows."""

    minimum: SlurmRelease  # the oldest release the rendered configuration runs on
    production: SlurmRelease
    distributions: dict[str, SlurmPackaged]  # OS (ubuntu-24.04) -> the slurm-wlm its archive ships
    test: SlurmRelease
    real_memory_fraction: float  # RealMemory = floor(fraction x the catalog's memory), headroom for the OS
    real_memory_source: str
    ports: SlurmPorts
    accounting_database: AccountingDatabase
    containers: ContainerRuntimeFacts
    signing_helper: SigningHelperRelease

    @model_validator(mode="after")
    def _fraction(self) -> SlurmFacts:
        if not 0.5 <= self.real_memory_fraction <= 1.0:
            raise ValueError("real_memory_fraction must be between 0.5 and 1.0")
        return self

    @model_validator(mode="after")
    def _production_is_packaged(self) -> SlurmFacts:
        os = self.production.os
        if os not in self.distributions:
            raise ValueError(f"production.os {os!r} must be one of distributions: {', '.join(self.distributions)}")
        for name, release in (("production", self.distributions[os].version), ("test", self.test.version)):
            if not self.supports_release(release):
                raise ValueError(f"{name} Slurm {release} is older than minimum {self.minimum.version}")
        return self

    @model_validator(mode="after")
    def _supported_releases_have_pmix(self) -> SlurmFacts:
        # slurm.conf says MpiDefault=pmix: a distribution the roles run on without the packages fails every job.
        missing = [os for os, packaged in self.distributions.items()
                   if packaged.pmix is None and self.supports_release(packaged.version)]
        if missing:
            raise ValueError(f"distributions {', '.join(missing)} need pmix (the packages of mpi/pmix)")
        return self

    def pmix_packages(self) -> dict[str, list[str]]:
        """Per distribution codename, the packages the Slurm roles install for mpi/pmix."""
        return {p.pmix.codename: list(p.pmix.packages) for p in self.distributions.values() if p.pmix is not None}

    def supports_release(self, version: str) -> bool:
        """Whether Slurm *version* is at least the minimum the rendered configuration needs."""
        return version_tuple(version) >= version_tuple(self.minimum.version)

    def too_old(self, os: str) -> SlurmPackaged | None:
        """The packaged Slurm of distribution *os* when it is older than the minimum; None when it is
        recent enough or the catalog does not know the distribution."""
        packaged = self.distributions.get(os)
        return packaged if packaged is not None and not self.supports_release(packaged.version) else None


class NcclFacts(_Frozen):
    """NCCL builds NVIDIA publishes: release -> the CUDA versions it is built for (libnccl2=<r>-1+cuda<x.y>)."""

    builds: dict[str, tuple[str, ...]]
    source: str

    def cuda_versions(self, release: str) -> tuple[str, ...]:
        return self.builds.get(release, ())


class AlertmanagerRelease(_Frozen):
    version: str  # e.g. "0.23.0"
    source: str  # where the package comes from


def release_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


class AlertmanagerFacts(_Frozen):
    """Alertmanager versions (production and the one tests run) and since which release each receiver's
    secret can be read from a file (`<type>.<field path>` -> version)."""

    production: AlertmanagerRelease
    test: AlertmanagerRelease
    secret_files: dict[str, str]
    secret_files_source: str

    def reads_from_file(self, field: str, version: str) -> bool:
        """Whether Alertmanager *version* has the secret file field (e.g. pagerduty.routing_key_file)."""
        return release_tuple(version) >= release_tuple(self.secret_files[field])


# --- The whole document ---------------------------------------------------------------------------


class CatalogData(_Frozen):
    """The merged data files (plus overrides); keys are the override keys."""

    instance_types: dict[str, InstanceTypeRow]
    gpus: dict[str, Gpu]
    instance_extras: dict[str, InstanceExtras]
    host_power: HostPower
    servers: dict[str, ServerModel]
    fsx_lustre: dict[str, FsxLustreRules]
    slurm: SlurmFacts
    alertmanager: AlertmanagerFacts
    nccl: NcclFacts
    prices: PriceTable | None = None  # data/prices.yaml (on-demand list prices for cost estimates)

    @model_validator(mode="before")
    @classmethod
    def _names_from_keys(cls, data: Any) -> Any:
        # facts.yaml does not repeat the map key inside each entry; fill it in.
        if not isinstance(data, Mapping):
            return data
        out = dict(data)
        for section, field in (("gpus", "name"), ("servers", "name"), ("fsx_lustre", "deployment_type")):
            entries = out.get(section)
            if isinstance(entries, Mapping):
                out[section] = {
                    k: ({field: k, **v} if isinstance(v, Mapping) else v) for k, v in entries.items()
                }
        return out

    @model_validator(mode="after")
    def _cross_refs(self) -> CatalogData:
        problems = [
            f"instance_types[{k}]: key differs from instance_type {v.instance_type!r}"
            for k, v in self.instance_types.items()
            if k != v.instance_type
        ]
        problems += [
            f"{section}[{k}]: key differs from its name {n!r}"
            for section, entries in (("gpus", self.gpus), ("servers", self.servers))
            for k, n in ((k, v.name) for k, v in entries.items())
            if k != n
        ]
        problems += [
            f"fsx_lustre[{k}]: key differs from deployment_type {v.deployment_type!r}"
            for k, v in self.fsx_lustre.items()
            if k != v.deployment_type
        ]
        problems += [
            f"instance_extras[{k}]: unknown instance type{_close(k, list(self.instance_types))}"
            for k in self.instance_extras
            if k not in self.instance_types
        ]
        problems += [
            f"servers[{k}].gpu_model: unknown GPU {v.gpu_model!r}; known: {', '.join(sorted(self.gpus))}"
            for k, v in self.servers.items()
            if v.gpu_model not in self.gpus
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return self


class Catalog:
    """Read-only view over CatalogData with the lookups components and policies use."""

    def __init__(self, data: CatalogData, sources: dict[str, str]) -> None:
        self.data = data
        self._sources = sources
        # Join rows with extras once; model_construct skips re-validating already-valid parts.
        self._types: dict[str, InstanceType] = {
            name: InstanceType.model_construct(
                _fields_set=set(row.model_fields_set) | {"extras"},
                **dict(row),
                extras=data.instance_extras.get(name),
            )
            for name, row in sorted(data.instance_types.items())
        }

    # instance types
    def instance_type(self, name: str) -> InstanceType:
        try:
            return self._types[name]
        except KeyError:
            raise CatalogError(
                f"unknown instance type {name!r}{_close(name, list(self._types))} "
                f"(add a full row under overrides instance_types if it is new)"
            ) from None

    def has_instance_type(self, name: str) -> bool:
        return name in self._types

    def instance_type_names(self) -> list[str]:
        return list(self._types)

    # facts
    def gpu(self, name: str) -> Gpu:
        try:
            return self.data.gpus[name]
        except KeyError:
            raise CatalogError(f"unknown GPU {name!r}{_close(name, list(self.data.gpus))}") from None

    def server(self, name: str) -> ServerModel:
        try:
            return self.data.servers[name]
        except KeyError:
            raise CatalogError(
                f"unknown server model {name!r}{_close(name, list(self.data.servers))}"
            ) from None

    def fsx_lustre(self, deployment_type: str) -> FsxLustreRules:
        try:
            return self.data.fsx_lustre[deployment_type]
        except KeyError:
            allowed = ", ".join(sorted(self.data.fsx_lustre))
            raise CatalogError(
                f"unknown FSx for Lustre deployment type {deployment_type!r}; allowed: {allowed}"
            ) from None

    @property
    def slurm(self) -> SlurmFacts:
        return self.data.slurm

    @property
    def alertmanager(self) -> AlertmanagerFacts:
        return self.data.alertmanager

    @property
    def pue_default(self) -> float:
        return self.data.host_power.pue_default

    def node_power_kw(self, instance_type: str) -> float:
        """Maximum power of one node in kW (IT load, before PUE).

        - a server model (servers, e.g. "dgx-h100"): its system_max_kw, the vendor's maximum;
        - an instance type: (gpus[model].tdp_w x count + host share) / 1000, where the host share
          is host_power.overhead_w x vcpus / host_power.overhead_reference_vcpus (CPU-only types
          have no GPU term).
        """
        if instance_type in self.data.servers:
            return self.data.servers[instance_type].system_max_kw
        it = self.instance_type(instance_type)
        host = self.data.host_power
        overhead_w = host.overhead_w * it.vcpus / host.overhead_reference_vcpus
        if it.accelerator is None:
            return overhead_w / 1000
        gpu = self.data.gpus.get(it.accelerator.name)
        if gpu is None:
            raise CatalogError(
                f"no power figure for accelerator {it.accelerator.name!r} ({instance_type}); "
                f"add gpus.{it.accelerator.name}.tdp_w (with a source) via catalog overrides"
            )
        return (gpu.tdp_w * it.accelerator.count + overhead_w) / 1000

    @property
    def prices(self) -> PriceTable | None:
        """On-demand price table (data/prices.yaml plus overrides); each row names its source."""
        return self.data.prices

    def sources(self) -> dict[str, str]:
        """Data file (or "overrides") -> provenance."""
        return dict(self._sources)


# --- Loading --------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _read_files() -> tuple[dict[str, Any], dict[str, Any]]:
    # Cached raw documents: callers must treat them as read-only (_deep_merge copies).
    with (DATA_DIR / "aws_instance_types.json").open(encoding="utf-8") as f:
        aws: dict[str, Any] = json.load(f)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with (DATA_DIR / "facts.yaml").open(encoding="utf-8") as f:
        facts: dict[str, Any] = yaml.load(f, Loader=loader)  # a safe loader
    return aws, facts


def _deep_merge(base: Mapping[Any, Any], override: Mapping[Any, Any]) -> dict[Any, Any]:
    out = dict(base)
    # Stack config keys are strings; the data may have int keys (FSx throughputs): match on str.
    by_str = {str(k): k for k in base}
    for key, value in override.items():
        k = by_str.get(str(key), key)
        if isinstance(value, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _deep_merge(out[k], value)
        else:
            out[k] = value
    return out


def _leaf_paths(tree: Mapping[Any, Any], prefix: str = "") -> list[str]:
    paths: list[str] = []
    for k, v in tree.items():
        p = f"{prefix}.{k}" if prefix else str(k)
        paths += _leaf_paths(v, p) if isinstance(v, Mapping) and v else [p]
    return paths


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        s = str(part)
        # Instance type names contain dots: bracket them so the path stays unambiguous.
        out += f"[{s}]" if isinstance(part, int) or "." in s else (f".{s}" if out else s)
    return out


def _build(overrides: Mapping[str, Any] | None) -> Catalog:
    aws, facts = _read_files()
    doc: dict[str, Any] = {"instance_types": aws["instance_types"], **{k: facts[k] for k in _FACT_KEYS}}
    doc["prices"] = read_prices()
    src = aws["_source"]
    sources = {
        AWS_FILE: (
            f"{src['data']} ({', '.join(src['paths'])}); generated by {src['generator']}; {src['note']}"
        ),
        FACTS_FILE: str(facts["_source"]),
    }
    if overrides:
        if not isinstance(overrides, Mapping):
            raise CatalogError(f"catalog overrides must be a mapping, got {type(overrides).__name__}")
        doc = _deep_merge(doc, overrides)
        sources["overrides"] = "per-stack overrides of: " + ", ".join(_leaf_paths(overrides))
    try:
        data = CatalogData.model_validate(doc)
    except ValidationError as e:
        where = "catalog overrides" if overrides else "catalog data files"
        lines = [f"{_loc(err['loc']) or '<root>'}: {err['msg']}" for err in e.errors()]
        error = CatalogError(f"invalid {where}:\n  " + "\n  ".join(lines))
        error.validation = (e, doc)
        raise error from None
    return Catalog(data, sources)


@lru_cache(maxsize=1)
def _default_catalog() -> Catalog:
    return _build(None)


def load_catalog(overrides: Mapping[str, Any] | None = None) -> Catalog:
    """The hardware catalog; overrides deep-merge onto the data files, keyed like them
    ({"instance_types": {...}, "gpus": {...}, "instance_extras": {...}, "host_power": {...},
    "fsx_lustre": {...}, "servers": {...}}). Without overrides the result is built once and cached."""
    return _build(overrides) if overrides else _default_catalog()
