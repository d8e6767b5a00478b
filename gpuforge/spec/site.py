"""The site model (on-premises and hybrid placements) and the hybrid link, as spec models.

A site is what a datacenter team owns: racks with two or more power feeds and cooling, bare-metal
hosts at U positions with their BMC and management addresses, a rail-optimized InfiniBand or
RoCE fabric, storage endpoints, and (optionally) the Kubernetes cluster the hosts run. Rules
that cross models (a host in an unknown rack, overlapping U positions, HCAs against rails, what
survives the loss of a feed, leaf ports) live in `site_checks.py`, so every problem is reported at once.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from .base import SpecModel
from .config_keys import BMC_PASSWORD, BMC_USERNAME
from .driver_source import DriverSource
from .errors import FieldProblems, described_pattern
from .fields import ABSOLUTE_PATH, Name, NodeRole, Port, parse_cidr, parse_ipv4
from .ib_partitions import FabricPartitioning, pkey_problems, port_guid_problems
from .keys import CaCertificates
from .limits import customer_gateway_problem, datasync_schedule_problem, port_problem, refusing
from .site_halls import Hall
from .site_ranges import expand_ranges
from .slurm_burst import SlurmBurstSpec

HOST_NAME = described_pattern(
    r"^[a-z0-9][a-z0-9.-]{0,61}[a-z0-9]$",
    "a host name of 2 to 63 lowercase letters, digits, dots and hyphens",
    "gpu-a01",
)
LUSTRE_FSNAME = described_pattern(r"^[A-Za-z0-9_-]{1,8}$", "1 to 8 letters, digits, _ or -", "lustre1")
HTTPS_ENDPOINT = described_pattern(
    r"^https://[A-Za-z0-9.-]+(:\d+)?/?$", "an https:// URL of a host and optional port", "https://s3.site.example:9000"
)
HTTPS_API_SERVER = described_pattern(
    r"^https://[A-Za-z0-9.-]+(:\d+)?$", "an https:// URL of a host and optional port", "https://k8s.site.example:6443"
)
DX_GATEWAY_ID = described_pattern(
    r"^[0-9a-f-]{36}$", "a Direct Connect gateway id (a lowercase UUID)", "5f294f92-bafb-4011-916d-9b0b2example"
)
DATASYNC_AGENT_ARN = described_pattern(
    r"^arn:aws[a-z-]*:datasync:[a-z0-9-]+:\d{12}:agent/agent-[0-9a-f]{17}$",
    "a DataSync agent ARN",
    "arn:aws:datasync:us-east-1:123456789012:agent/agent-0123456789abcdef0",
)
HostName = Annotated[str, Field(pattern=HOST_NAME)]
SiteOrchestrator = Literal["kubernetes", "slurm", "none"]


_ip = parse_ipv4


# --- power -----------------------------------------------------------------------------------


class SitePower(SpecModel):
    budget_kw: float = Field(
        gt=0, le=1_000_000, description="The site's contracted facility power for this cluster, kW."
    )
    pue: float = Field(ge=1.0, le=3.0, description="The site's measured power usage effectiveness.")


RailKey = Annotated[str, Field(pattern=r"^[0-9]{1,2}$")]  # a rail number; map keys are strings in stack config
FeedName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,30}$")]  # a, b, c or pdu-a, pdu-b, ...
FeedKw = Annotated[float, Field(gt=0, le=10_000)]


class RackShape(SpecModel):
    """What a rack and a rack range share: power feeds, cooling and height."""

    feeds: dict[FeedName, FeedKw] = Field(
        min_length=2,
        description="Power feeds (PDU circuits) by name and rated kW, before the 80 % continuous derate, e.g. "
        "{a: 57.5, b: 57.5, c: 57.5}. Each server's PSUs are spread over them in name order (PSU i on feed i mod "
        "feeds): the loss of any one feed must leave every server its N PSUs (of the catalog's N+M) and the other "
        "feeds within their continuous rating. A DGX H100 (4+2) needs three feeds: on two, a lost feed leaves 3.",
    )
    cooling_kw: float = Field(
        gt=0, le=10_000, description="Heat the rack's cooling removes, kW: the rack's power ceiling."
    )
    units: int = Field(default=42, ge=1, le=60, description="Usable rack units (U).")
    hall: Name | None = Field(
        default=None, description="The data hall (a key of site.halls) whose feeds supply the rack."
    )
    hall_feeds: dict[FeedName, FeedName] = Field(
        default_factory=dict,
        description="Which hall feed each rack feed draws from, where the names differ (default: the hall feed of "
        "the same name), e.g. {a: a, b: b, c: a} for three PDUs on a two-path (A/B) hall.",
    )


class Rack(RackShape):
    scalable_unit: Name = Field(
        description="Scalable unit (SU) the rack belongs to: the fabric has a leaf per rail per SU."
    )


# --- hosts -------------------------------------------------------------------------------------


class Taint(SpecModel):
    key: str = Field(description="Taint key, e.g. nvidia.com/gpu.")
    value: str = Field(default="", description="Taint value.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(description="Taint effect.")


def _gpu_taint() -> list[Taint]:
    return [Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")]


class HostTraits(SpecModel):
    """What a host and a host range share: the server, its HCAs, pool, role and orchestrator."""

    model: str = Field(description="Server model from the catalog's servers (dgx-h100, dgx-b200, ...).")
    u_height: int | None = Field(
        default=None, ge=1, le=20, description="Chassis height in U; default the catalog's figure for the model."
    )
    hcas: dict[str, int] = Field(
        default_factory=dict,
        description="Compute-fabric HCAs and the rail each is cabled to, e.g. {mlx5_0: 0, mlx5_3: 1, ...}; "
        "default for a training host on the fabric: the catalog's compute ports of its model in GPU order "
        "(DGX H100/H200: mlx5_0, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_9, mlx5_10, mlx5_11).",
    )
    pool: Name = Field(default="train", description="Node pool (inventory group, node-group label) of the host.")
    role: NodeRole = Field(default="training", description="training, login or services.")
    orchestrator: SiteOrchestrator = Field(
        default="kubernetes",
        description="kubernetes (joins the site's cluster, needs site.kubernetes), slurm, or none.",
    )
    taints: list[Taint] = Field(
        default_factory=_gpu_taint, description="Node taints; default keeps non-GPU pods off GPU hosts."
    )

    @field_validator("hcas")
    @classmethod
    def _hca_names(cls, value: dict[str, int]) -> dict[str, int]:
        for device, rail in value.items():
            if not re.fullmatch(r"[a-z][a-z0-9_]*(:\d+)?", device):
                raise ValueError(f"{device!r} is not an HCA device name; write it like mlx5_0 or mlx5_0:1")
            if rail < 0:
                raise ValueError(f"{device}: rail {rail} is negative; rails count from 0")
        return value


class Host(HostTraits):
    rack: Name = Field(description="Key of the rack in site.racks the host is mounted in.")
    u_position: int = Field(ge=1, le=60, description="Lowest rack unit the host occupies (1 = bottom).")
    bmc_address: str = Field(description="BMC (IPMI/Redfish) address on the out-of-band network.")
    management_ip: str = Field(description="Management (in-band) address Ansible and the scheduler reach.")
    storage_ips: list[str] = Field(
        default_factory=list,
        description="The host's addresses on the storage fabric's IPoIB network (site.storage.network), one per "
        "storage port of its model in the catalog's order (DGX H100/H200: ibp170s0f0, ibp41s0f0). gpuforge "
        "renders the IPoIB addressing from them, and they are the host's LNet NIDs on o2ib.",
    )
    port_guids: dict[str, str] = Field(
        default_factory=dict,
        description="InfiniBand port GUID per compute HCA (ibstat's 'Port GUID', 0x and 16 hex digits), e.g. "
        "{mlx5_0: '0x946dae0300a1b2c0'}: the subnet manager partitions ports by GUID "
        "(site.fabric.partitioning).",
    )

    @field_validator("bmc_address")
    @classmethod
    def _bmc(cls, value: str) -> str:
        return _ip(value, "BMC address")

    @field_validator("management_ip")
    @classmethod
    def _mgmt(cls, value: str) -> str:
        return _ip(value, "management IP")

    @field_validator("storage_ips")
    @classmethod
    def _storage_ips(cls, value: list[str]) -> list[str]:
        return [_ip(address, "storage address") for address in value]

    @model_validator(mode="after")
    def _port_guids(self) -> Host:
        problems = port_guid_problems(self.port_guids)
        if problems:
            raise FieldProblems(problems)
        return self

    def hcas_by_rail(self) -> list[str]:
        """The host's HCAs in rail order: NCCL_IB_HCA lists them so."""
        return [device for device, _ in sorted(self.hcas.items(), key=lambda item: (item[1], item[0]))]


# --- fabric ------------------------------------------------------------------------------------


class SiteFabric(SpecModel):
    kind: Literal["infiniband", "roce"] = Field(description="Compute fabric: infiniband or roce.")
    topology: Literal["rail_optimized"] = Field(
        default="rail_optimized",
        description="rail_optimized: HCA n of every host goes to the rail-n leaf of its SU (DGX SuperPOD).",
    )
    rails: int = Field(ge=1, le=16, description="Rails: compute HCAs per host, one leaf switch per rail per SU.")
    rate_gbps: Literal[100, 200, 400, 800] = Field(
        default=400, description="Link rate per HCA: 200 (HDR), 400 (NDR), 800 (XDR)."
    )
    leaf_ports: int = Field(default=64, ge=8, le=1024, description="Ports per leaf switch (64 on a QM9700 NDR switch).")
    leaf_uplinks: int | None = Field(
        default=None, ge=1, le=1024, description="Leaf ports used toward spines; default half the ports (non-blocking)."
    )
    spines: int = Field(ge=0, le=10_000, description="Spine switches; 0 for a single-SU fabric without a spine layer.")
    spine_ports: int = Field(default=64, ge=8, le=1024, description="Ports per spine switch.")
    spine_uplinks: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="With cores: spine ports used toward the core switches; default half the ports (non-blocking). "
        "Fewer oversubscribe the spine tier (its down ports per up port), which the plan shows.",
    )
    cores: int = Field(
        default=0,
        ge=0,
        le=10_000,
        description="Core switches of a three-tier fabric (leaf, spine, core); 0 for two tiers. A spine reaches at "
        "most spine_ports leaves, so past that many leaves the spines form groups (pods) of whole scalable units "
        "joined by the cores: NVIDIA's 32-SU DGX SuperPOD has 256 leaf, 256 spine and 128 core switches.",
    )
    core_ports: int = Field(default=64, ge=8, le=1024, description="Ports per core switch.")
    reserved_leaf_ports: dict[Name, Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=dict,
        description="Per scalable unit, host ports held on each of its rail leaves for the subnet managers (UFM "
        "appliances) and other fabric devices: they take the place of hosts (the SuperPOD's 4-SU design connects "
        "127 DGX, not 128).",
    )
    partitions: dict[Name, str] = Field(
        default_factory=dict,
        description="InfiniBand partition key per tenant (a Kubernetes team, or a Slurm account on a Slurm site), hex "
        "0x0001-0x7ffe; full membership is set by the subnet manager.",
    )
    subnet_managers: dict[HostName, str] = Field(
        default_factory=dict,
        description="Subnet manager hosts (UFM or opensm) and their management addresses; two for failover.",
    )
    partitioning: FabricPartitioning | None = Field(
        default=None,
        description="InfiniBand only: which hosts' compute ports are full members of each tenant's key, and the "
        "subnet managers' priorities; gpuforge renders OpenSM's partitions.conf or UFM's PKey calls from it "
        "(`gpuforge render fabric`) and NCCL_IB_PKEY on the members.",
    )
    sharp: bool = Field(default=False, description="SHARP in-network reductions (InfiniBand only).")
    rail_islands: bool = Field(
        default=False,
        description="With spines: 0 and more than one rail, each rail's leaves form a fabric of their own (a rail "
        "island): NCCL crosses rails only over NVLink (PXN). Declare it, and on InfiniBand name each rail's subnet "
        "manager in island_subnet_managers.",
    )
    island_subnet_managers: dict[RailKey, list[HostName]] = Field(
        default_factory=dict,
        description="Rail islands on InfiniBand: per rail, the subnet_managers hosts running a subnet manager on "
        "that rail's subnet (every disconnected subnet needs its own: OpenSM, one subnet manager per InfiniBand "
        "subnet).",
    )
    switch_power_kw: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="Maximum power of one leaf or spine switch, kW, from its datasheet: the fabric's switches "
        "count in the site's IT load.",
    )

    @model_validator(mode="after")
    def _partition_keys(self) -> SiteFabric:
        problems = pkey_problems(self.partitions)
        if problems:
            raise FieldProblems(problems)
        return self

    @field_validator("subnet_managers")
    @classmethod
    def _sm_addresses(cls, value: dict[str, str]) -> dict[str, str]:
        for host, address in value.items():
            _ip(address, f"{host} address")
        return value

    @model_validator(mode="after")
    def _fabric_features(self) -> SiteFabric:
        if self.kind == "roce" and (self.sharp or self.partitions or self.subnet_managers or self.partitioning):
            raise ValueError(
                "sharp, partitions, partitioning and subnet_managers are InfiniBand features; remove them on roce"
            )
        if self.kind == "infiniband" and not self.subnet_managers:
            raise ValueError("an InfiniBand fabric needs a subnet manager: list subnet_managers (two for failover)")
        if self.spine_uplinks is not None and not self.cores:
            raise ValueError("spine_uplinks without cores: spines of a two-tier fabric have no uplinks; set cores")
        if self.cores and self.spine_up >= self.spine_ports:
            raise ValueError(
                f"spine_uplinks {self.spine_up} leave no down ports on a {self.spine_ports}-port spine; "
                f"use fewer than {self.spine_ports}"
            )
        if self.sharp:
            raise ValueError(
                "sharp: true needs the NCCL SHARP plugin (NVIDIA's nccl-rdma-sharp-plugins) on every node and the "
                "SHARP aggregation manager (sharp_am) with the subnet manager; gpuforge installs neither yet, so "
                "NCCL_COLLNET_ENABLE would reach nodes without them: set sharp: false"
            )
        return self

    @property
    def oversubscription(self) -> float:
        """Leaf host ports per uplink port: 1.0 is non-blocking, as the DGX SuperPOD's leaves are (site_checks.py
        RAIL_FABRIC_SOURCE: per SU 252 host and UFM cables against 256 spine-leaf cables)."""
        return self.downlinks / self.uplinks if self.uplinks else float("inf")

    @property
    def uplinks(self) -> int:
        return self.leaf_uplinks if self.leaf_uplinks is not None else self.leaf_ports // 2

    @property
    def downlinks(self) -> int:
        return self.leaf_ports - self.uplinks

    @property
    def spine_up(self) -> int:
        """Spine ports toward the cores (0 on two tiers)."""
        if not self.cores:
            return 0
        return self.spine_uplinks if self.spine_uplinks is not None else self.spine_ports // 2

    @property
    def spine_down(self) -> int:
        return self.spine_ports - self.spine_up

    @property
    def spine_oversubscription(self) -> float:
        """Spine down ports per up port on three tiers (1.0 non-blocking); 1.0 on two tiers, where nothing is above."""
        return self.spine_down / self.spine_up if self.spine_up else 1.0

    @property
    def units_per_pod(self) -> int:
        """Three tiers: whole scalable units under one spine group, each spine a port for each of their leaves."""
        return self.spine_down // self.rails

    def pods(self, units: list[str]) -> list[list[str]]:
        """The scalable units (in order) grouped under their spine groups; one pod on two tiers."""
        size = self.units_per_pod if self.cores else len(units)
        size = max(size, 1)
        return [units[i : i + size] for i in range(0, len(units), size)]


# --- storage -----------------------------------------------------------------------------------

MountPoint = Annotated[str, Field(pattern=ABSOLUTE_PATH)]


LNET_NID = re.compile(r"^[^@\s]+@(?P<net>[a-z][a-z0-9]*)$")
IB_LNET = re.compile(r"^o2ib[0-9]*$")
INTERFACE_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")


class LustreMount(SpecModel):
    kind: Literal["lustre"] = Field(description="A Lustre file system.")
    mgs_nids: list[str] = Field(min_length=1, description="MGS NIDs, e.g. 10.30.0.10@o2ib (two for failover).")
    fsname: str = Field(pattern=LUSTRE_FSNAME, description="Lustre file system name (up to 8 chars).")
    mount_point: MountPoint = Field(description="Where hosts mount it.")
    lnet_interfaces: list[str] = Field(
        default_factory=list,
        validate_default=True,
        description="The hosts' IPoIB interfaces LNet's o2ib network runs on (`lnetctl net add --net o2ib --if "
        "IF`). Default, for MGS NIDs on an o2ib network: the storage ports of each host's model in the catalog "
        "(DGX H100/H200: ibp170s0f0, ibp41s0f0); list them only for a model without a port table, or to use a "
        "subset of the storage ports. A client without the network has no route to the NIDs and the mount fails.",
    )

    @field_validator("mgs_nids")
    @classmethod
    def _nids(cls, value: list[str]) -> list[str]:
        for nid in value:
            if not LNET_NID.match(nid):
                raise ValueError(f"{nid!r} is not an LNet NID; write it like 10.30.0.10@o2ib or 10.30.0.10@tcp")
        if len({_lnet(nid) for nid in value}) > 1:
            raise ValueError(f"{value} are on different LNet networks; list the MGS NIDs of one network")
        return value

    @field_validator("lnet_interfaces")
    @classmethod
    def _interfaces(cls, value: list[str], info: ValidationInfo) -> list[str]:
        for name in value:
            if not INTERFACE_NAME.match(name):
                raise ValueError(f"{name!r} is not a network interface name; write it like ib0")
        nids = info.data.get("mgs_nids")
        if not nids:  # invalid NIDs: reported on mgs_nids
            return value
        net = _lnet(nids[0])
        if value and not IB_LNET.match(net):
            raise ValueError(
                f"{value}: the MGS NIDs are on {net}, not an o2ib network; remove lnet_interfaces (LNet's tcp "
                "network runs on the default route's interface)"
            )
        return value

    @property
    def lnet(self) -> str:
        """The LNet network of the MGS NIDs (o2ib, o2ib1, tcp, ...)."""
        return _lnet(self.mgs_nids[0])


def _lnet(nid: str) -> str:
    match = LNET_NID.match(nid)
    return match["net"] if match else ""


class BeegfsMount(SpecModel):
    kind: Literal["beegfs"] = Field(description="A BeeGFS file system.")
    mgmtd_host: str = Field(description="BeeGFS management service host.")
    mount_point: MountPoint = Field(description="Where hosts mount it.")


class WekaMount(SpecModel):
    kind: Literal["weka"] = Field(description="A WEKA file system.")
    backends: list[str] = Field(min_length=1, description="WEKA backend hosts the client joins.")
    filesystem: str = Field(default="default", description="WEKA file system name.")
    mount_point: MountPoint = Field(description="Where hosts mount it.")


class NfsMount(SpecModel):
    kind: Literal["nfs"] = Field(description="An NFS export (home directories, small shared data).")
    server: str = Field(description="NFS server host or address.")
    export: MountPoint = Field(description="Exported path on the server.")
    version: Literal["3", "4.1", "4.2"] = Field(default="4.2", description="NFS protocol version.")
    mount_point: MountPoint = Field(description="Where hosts mount it.")


SiteMount = Annotated[LustreMount | BeegfsMount | WekaMount | NfsMount, Field(discriminator="kind")]


class SiteObjectStore(SpecModel):
    endpoint: str = Field(
        pattern=HTTPS_ENDPOINT,
        description="S3-compatible endpoint (MinIO, Ceph RGW, VAST, ...), HTTPS only.",
    )
    buckets: dict[Name, Literal["data", "checkpoints", "artifacts"]] = Field(
        default_factory=dict, description="Buckets on the store, keyed by name, with what each holds."
    )
    cidrs: list[str] = Field(
        default_factory=list,
        description="Addresses the endpoint resolves to (its load balancer or gateways), e.g. [10.64.8.30/32]: "
        "training pods may reach them (the default egress policy only allows public HTTPS).",
    )

    @field_validator("cidrs")
    @classmethod
    def _store_cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            parse_cidr(cidr, example="10.64.8.30/32")
        return value

    @property
    def port(self) -> int:
        host = self.endpoint.removeprefix("https://").rstrip("/")
        return int(host.rsplit(":", 1)[1]) if ":" in host else 443

    ca_certificate: CaCertificates | None = Field(
        default=None,
        description="PEM chain of the private CA that signed the store's certificate. Needed when the endpoint "
        "is an internal name or a private address, which no public CA certifies: DataSync trusts only the "
        "chain it is given.",
    )


    @field_validator("endpoint")
    @classmethod
    def _endpoint_port(cls, value: str) -> str:
        return _url_port(value, "object store endpoint")


def _url_port(value: str, what: str) -> str:
    host = value.split("://", 1)[-1].split("/", 1)[0]
    port = host.rsplit(":", 1)[1] if ":" in host else ""
    problem = port_problem(int(port) if port.isdigit() else None, what)
    if problem:
        raise ValueError(problem)
    return value


class StorageNetwork(SpecModel):
    cidr: str = Field(
        description="The storage fabric's IPoIB subnet, e.g. 10.72.16.0/22: every host's storage_ips and the "
        "o2ib MGS NIDs are addresses in it (LNet's o2ib resolves a peer's NID over IPoIB)."
    )

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        parse_cidr(value, example="10.72.16.0/22")
        return value


class SiteStorage(SpecModel):
    network: StorageNetwork | None = Field(
        default=None,
        description="The storage fabric's IPoIB network: with it, gpuforge renders each host's IPoIB addresses "
        "(storage_ips on its model's storage ports) and derives its LNet NIDs; without it the site addresses IPoIB.",
    )
    mounts: dict[Name, SiteMount] = Field(
        default_factory=dict, description="Shared file systems hosts mount: Lustre, BeeGFS, WEKA or NFS."
    )
    object_store: SiteObjectStore | None = Field(default=None, description="The site's S3-compatible store.")

    @model_validator(mode="after")
    def _mount_points(self) -> SiteStorage:
        seen: dict[str, str] = {}
        for key, mount in self.mounts.items():
            if mount.mount_point in seen:
                raise ValueError(f"mounts[{key}]: {mount.mount_point} is already mounts[{seen[mount.mount_point]}]")
            seen[mount.mount_point] = key
        return self


# --- the site ----------------------------------------------------------------------------------


class Equipment(SpecModel):
    """Everything in the site's IT load besides the GPU hosts and the fabric's switches."""

    kind: Literal["subnet_manager", "management_switch", "management_server", "storage", "other"] = Field(
        description="What it is: UFM/subnet manager appliances, management switches and servers, storage."
    )
    power_kw: float = Field(gt=0, le=10_000, description="Maximum power of one unit, kW, from its datasheet.")
    count: int = Field(default=1, ge=1, le=10_000, description="Units of this kind.")
    rack: Name | None = Field(
        default=None,
        description="A key of site.racks it draws from (counted in that rack's feeds); none: a rack outside them.",
    )
    psus: int = Field(default=2, ge=1, description="PSUs per unit, spread over the rack's feeds like a server's.")
    psus_required: int = Field(default=1, ge=1, description="PSUs a unit needs up (N of N+M).")


class SiteKubernetes(SpecModel):
    api_server: str = Field(pattern=HTTPS_API_SERVER, description="The site cluster's API server URL.")
    kubeconfig_secret: str = Field(
        default="siteKubeconfig",
        pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$",
        description="Pulumi config key (namespace gpuforge) holding the kubeconfig, set with "
        "`pulumi config set --secret gpuforge:siteKubeconfig < kubeconfig`.",
    )
    pod_cidrs: list[str] = Field(
        default_factory=list,
        description="The site cluster's pod CIDRs where pods reach the cloud with their own addresses (a CNI "
        "that routes pod IPs without SNAT, e.g. Calico over BGP): a hybrid link routes them from the VPC and "
        "the burst worker's API admits them (the MultiKueue manager runs in a pod). Empty: pods leave the site "
        "SNATed to node addresses in site.cidrs.",
    )

    @field_validator("api_server")
    @classmethod
    def _api_port(cls, value: str) -> str:
        return _url_port(value, "API server URL")

    @field_validator("pod_cidrs")
    @classmethod
    def _pod_cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            parse_cidr(cidr, example="10.244.0.0/16")
        return value


class SiteBmc(SpecModel):
    """How gpuforge reaches the hosts' BMCs (Redfish, `gpuforge metal`): over HTTPS at each host's bmc_address,
    with credentials that live only as Pulumi secrets."""

    username_secret: str = Field(
        default=BMC_USERNAME,
        description="Pulumi config key (namespace gpuforge) holding the BMC user, set with `pulumi config set "
        "--secret gpuforge:bmcUsername ...`.",
    )
    password_secret: str = Field(
        default=BMC_PASSWORD,
        description="Pulumi config key (namespace gpuforge) holding the BMC password, set with `pulumi config set "
        "--secret gpuforge:bmcPassword`; never in the stack file as plain text, the plan or a message.",
    )
    port: Port = Field(default=443, description="The BMCs' Redfish HTTPS port.")
    ca_certificate: CaCertificates | None = Field(
        default=None,
        description="PEM chain of the CA that signed the BMCs' certificates (a site CA); none: the system's trust "
        "store. Certificates are always verified.",
    )


# --- ranges (site_ranges.py expands them) -----------------------------------------------------------

HOSTLIST = described_pattern(
    r"^[a-z0-9][a-z0-9.-]*(\[[0-9,-]+\][a-z0-9.-]*)?$",
    "a name, or a Slurm hostlist range of names: one bracket of numbers and ranges",
    "dgx-[0001-1024]",
)
HostList = Annotated[str, Field(pattern=HOSTLIST)]


class AddressPool(SpecModel):
    """A block host ranges draw addresses from, in order, one per host."""

    cidr: str = Field(description="The block, e.g. 10.64.0.0/14; it must lie in site.cidrs for management addresses.")
    first: str | None = Field(
        default=None,
        description="The first address handed out (default: the block's first host address): keep gateways and "
        "service addresses below it.",
    )

    @field_validator("cidr")
    @classmethod
    def _pool_cidr(cls, value: str) -> str:
        parse_cidr(value, example="10.64.0.0/14")
        return value

    @model_validator(mode="after")
    def _first_in_block(self) -> AddressPool:
        if self.first is not None:
            _ip(self.first, "first address")
            if ipaddress.IPv4Address(self.first) not in ipaddress.IPv4Network(self.cidr):
                raise ValueError(f"first: {self.first} is outside the pool's block {self.cidr}; use an address in it")
        return self


class RackRange(RackShape):
    """Racks named by a hostlist pattern (the key), all alike, split evenly over scalable units."""

    scalable_units: HostList = Field(
        description="The scalable units the racks belong to, as a hostlist pattern (su[001-391]): the racks, in "
        "order, are split into equal consecutive runs, one per unit; the rack count must divide evenly.",
    )


class HostRange(HostTraits):
    """Hosts named by a hostlist pattern (the key), all alike, filling racks in order at the same U positions,
    with addresses drawn in order from address pools."""

    racks: HostList = Field(
        description="The racks the hosts fill, as a hostlist pattern of site.racks or site.rack_ranges names "
        "(r[0001-0008]): the first len(u_positions) hosts go to the first rack, and so on.",
    )
    u_positions: list[Annotated[int, Field(ge=1, le=60)]] = Field(
        min_length=1,
        description="The lowest rack unit of each host in a rack, e.g. [3, 11, 19, 27] for four 8U DGX: hosts per "
        "rack is their count.",
    )
    management_pool: Name = Field(description="Key of site.address_pools management addresses are drawn from.")
    bmc_pool: Name = Field(description="Key of site.address_pools BMC addresses are drawn from.")


class Site(SpecModel):
    name: Name = Field(description="Site name; placement.site names it.")
    power: SitePower = Field(description="The site's power budget and PUE.")
    halls: dict[Name, Hall] = Field(
        default_factory=dict,
        description="Data halls, each with its power feeds (A/B) and IT budget; racks name theirs (racks[r].hall) and "
        "their load is checked per hall and per hall feed, normal and with one feed lost.",
    )
    cidrs: list[str] = Field(
        min_length=1, description="Address ranges the site routes (management, storage); hybrid links route them."
    )
    racks: dict[Name, Rack] = Field(
        default_factory=dict, description="Racks keyed by name (with rack_ranges: the racks besides the ranges')."
    )
    hosts: dict[HostName, Host] = Field(
        default_factory=dict,
        description="Bare-metal hosts keyed by host name (with host_ranges: the hosts besides the ranges').",
    )
    address_pools: dict[Name, AddressPool] = Field(
        default_factory=dict, description="Address blocks host_ranges draw management and BMC addresses from."
    )
    rack_ranges: dict[HostList, RackRange] = Field(
        default_factory=dict,
        description="Racks by the thousand: a hostlist pattern (r[0001-3128]) -> what every rack of it is. Expanded "
        "once, in order, into site.racks.",
    )
    host_ranges: dict[HostList, HostRange] = Field(
        default_factory=dict,
        description="Hosts by the thousand: a hostlist pattern (dgx-[00001-12500]) -> what every host of it is, the "
        "racks it fills and the pools its addresses come from. Expanded once, in order, into site.hosts: a "
        "12,500-host site is a page of YAML.",
    )
    fabric: SiteFabric | None = Field(default=None, description="Compute fabric; none for hosts without one.")
    storage: SiteStorage = Field(default_factory=SiteStorage, description="Storage endpoints.")
    equipment: dict[Name, Equipment] = Field(
        default_factory=dict,
        description="Subnet managers, management network, storage and other devices: counted in the IT load.",
    )
    kubernetes: SiteKubernetes | None = Field(
        default=None, description="The site's Kubernetes cluster, for hosts with orchestrator kubernetes."
    )
    bmc: SiteBmc = Field(default_factory=SiteBmc, description="How `gpuforge metal` reaches the hosts' BMCs.")
    driver_source: DriverSource | None = Field(
        default=None,
        description="Where the site's hosts get the NVIDIA driver, Fabric Manager, DCGM and NCCL: the site's mirror "
        "of NVIDIA's CUDA repository; default NVIDIA's own (the hosts then need to reach it).",
    )

    @field_validator("cidrs")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            parse_cidr(cidr, example="10.64.0.0/16")
        return value

    @model_validator(mode="after")
    def _expand_ranges(self) -> Site:
        """The ranges, once, into site.racks and site.hosts: everything after validation reads those."""
        racks, hosts, problems = expand_ranges(self)
        if not (racks or self.rack_ranges) or not (hosts or self.host_ranges):
            fix = "list them in racks and hosts, or rack_ranges and host_ranges"
            problems.append(("hosts", "a site needs racks and hosts", fix))
        if problems:
            raise FieldProblems(problems)
        if racks is self.racks and hosts is self.hosts:
            return self
        return self.model_copy(update={"racks": racks, "hosts": hosts})


# --- hybrid ------------------------------------------------------------------------------------


class CustomerGateway(SpecModel):
    ip_address: str = Field(description="Public IPv4 address of the site's VPN device.")
    bgp_asn: int = Field(default=65000, ge=1, le=4294967294, description="The site's BGP ASN.")

    @field_validator("ip_address")
    @classmethod
    def _address(cls, value: str) -> str:
        _ip(value, "customer gateway address")
        for _, problem in customer_gateway_problem(value, 64512, None):
            raise ValueError(problem)
        return value


class SiteLinkSpec(SpecModel):
    kind: Literal["vpn", "transit_gateway"] = Field(
        description="vpn: Site-to-Site VPN on a virtual private gateway of the VPC; transit_gateway: the VPN "
        "and the VPC attach to a transit gateway."
    )
    customer_gateway: CustomerGateway = Field(description="The site's VPN endpoint.")
    static_routes_only: bool = Field(
        default=False, description="Static routes to the site's CIDRs instead of BGP (devices without BGP)."
    )
    amazon_side_asn: int = Field(
        default=64512,
        ge=64512,
        le=4294967294,
        description="Private ASN of the AWS side (VGW or transit gateway): 64512-65534 or 4200000000-4294967294.",
    )
    direct_connect_gateway_id: str | None = Field(
        default=None,
        pattern=DX_GATEWAY_ID,
        description="An existing Direct Connect gateway to associate with the VGW or transit gateway.",
    )

    @field_validator("amazon_side_asn")
    @classmethod
    def _private_asn(cls, value: int) -> int:
        # EC2 CreateVpnGateway / CreateTransitGateway: AmazonSideAsn is a private ASN.
        if not (64512 <= value <= 65534 or 4200000000 <= value <= 4294967294):
            raise ValueError(f"got {value}; the AWS side takes a private ASN, 64512-65534 or 4200000000-4294967294")
        return value


class ObjectSync(SpecModel):
    site_bucket: Name = Field(description="Bucket on the site's object store (site.storage.object_store.buckets).")
    cloud_store: Name = Field(description="Key of the S3 bucket in storage.object_stores.")
    direction: Literal["site_to_cloud", "cloud_to_site"] = Field(
        description="Which way data flows. site_to_cloud is ingress into AWS (not charged); cloud_to_site is "
        "AWS data egress (charged per GB): keep checkpoints flowing that way small."
    )
    agent_arn: str = Field(
        pattern=DATASYNC_AGENT_ARN,
        description="The DataSync agent deployed on the site (it reaches the site's object store).",
    )
    schedule: Annotated[str, AfterValidator(refusing(datasync_schedule_problem))] = Field(
        default="rate(1 hour)",
        description="DataSync schedule expression: rate(N hours|days) or an EventBridge cron(...) of six fields, "
        "at most hourly.",
    )


class BurstSpec(SpecModel):
    """Burst through Kueue MultiKueue: the site's cluster (the manager) dispatches whole jobs to an EKS
    worker cluster in the region; a job runs on one side of the VPN, never across it."""

    mechanism: Literal["multikueue"] = Field(
        description="multikueue: the site's Kueue dispatches to an EKS worker cluster (a Kubernetes site; "
        "docs/onprem-hybrid.md says why, and what EKS Hybrid Nodes would need instead).",
    )
    team_gpus: dict[Name, dict[str, int]] = Field(
        min_length=1,
        description="Per team, the cloud GPUs by model it may use (whole nodes): the worker's ClusterQueue quotas "
        "and the site's dispatching queues, e.g. {research: {H100: 16}}.",
    )
    local_queue: Name = Field(
        default="burst",
        description="LocalQueue in every team namespace (on both clusters) whose jobs run in the cloud.",
    )


Burst = Annotated[BurstSpec | SlurmBurstSpec, Field(discriminator="mechanism")]


class HybridSpec(SpecModel):
    link: SiteLinkSpec = Field(description="Site-to-cloud connectivity.")
    allowed_from_site: list[Port] = Field(
        default_factory=list,
        description="Extra TCP ports cloud nodes open to the site's CIDRs. Neither mechanism needs any: Slurm's ports "
        "come with mechanism slurm, and MultiKueue's manager "
        "reaches only the worker's API endpoint (443, opened on the EKS cluster security group).",
    )
    burst: Burst | None = Field(
        default=None,
        description="Burst capacity, by mechanism: slurm (cloud partitions of the site's Slurm controller) or "
        "multikueue (the cloud node groups as a MultiKueue worker cluster of the site's Kueue).",
    )
    object_sync: ObjectSync | None = Field(default=None, description="Object storage between site and S3.")
