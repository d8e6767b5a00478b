"""Ansible inventory from a stack: groups per node group and per role, group variables for every role.

Where the facts come from:
- stack outputs (``nodeGroups``, ``software``, ``parallelFs``, ``cluster``): from the deployed stack
  through the Pulumi Automation API when the Pulumi CLI and the stack exist, otherwise from the offline
  plan (``gpuforge.plan.engine.plan_stack``), which registers the same outputs;
- hardware facts (NVSwitch, EFA count, NVLinks per GPU, the bus-bandwidth reference): the catalog.

- hardware facts (NVSwitch, EFA count, NVLinks per GPU, GPUDirect RDMA, compute HCAs in rail order,
  the bus-bandwidth reference): the catalog, by EC2 instance type or by on-premises server model.

Hosts: AWS node groups are Auto Scaling groups (or EKS managed groups), so their instances are found at
run time by Ansible's ``amazon.aws.aws_ec2`` inventory plugin, filtered on the stable
``gpuforge:cluster`` and ``gpuforge:node-group`` tags every instance carries (not on the ASG's name,
which Pulumi suffixes) and put into the same ``ng_<name>`` groups (``aws_ec2_inventory``; pass both
files with ``-i``). Node groups whose outputs list ``hosts`` (on premises) get those hosts directly.

Offline, the plan knows every value the spec and the catalog decide, but not those only the engine
computes (an FSx file system's DNS and mount names, resource ids): the inventory marks those as
``ENGINE_ONLY`` and says so in ``gpuforge_outputs_source``, never passing a mock value off as real.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from typing import Any, Literal

import yaml

from gpuforge.catalog import load_catalog
from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.catalog.tokens import CLUSTER_TAG, NODE_GROUP_TAG
from gpuforge.nodes.health import DEFAULT_FLOOR_FRACTION
from gpuforge.nodes.slurm_inventory import slurm_inventory
from gpuforge.plan.engine import plan_stack
from gpuforge.plan.stacks import find_project
from gpuforge.render.lifecycle import site_fabric_floors

Source = Literal["auto", "stack", "plan"]
Origin = Literal["stack", "plan"]

# What an inventory built from the offline plan shows for a value only the deployed stack knows.
ENGINE_ONLY = "<known after pulumi up>"
# Output fields the engine computes (the offline plan's mocks invent them): never real offline.
_ENGINE_ONLY_FIELDS = {
    "parallelFs": ("dnsName", "mountName", "fileSystemId"),
    # The Slurm cluster's EFS file systems (/home, the controllers' state): ids and DNS names.
    "slurm": ("databaseEndpoint", "homeFileSystem", "homeDnsName", "stateFileSystem", "stateDnsName"),
}
# The tags the aws_ec2 inventory selects a node group's instances by (gpuforge/infra/aws/node_group.py).


def group_name(prefix: str, name: str) -> str:
    """A valid Ansible group name (letters, digits, underscores)."""
    return f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"


def stack_outputs(stack: str, source: Source = "auto") -> dict[str, Any]:
    """Outputs of the deployed stack (Automation API) or, offline, of the plan."""
    return load_outputs(stack, source)[0]


def load_outputs(stack: str, source: Source = "auto") -> tuple[dict[str, Any], Origin]:
    """The stack's outputs and where they came from: the deployed stack, or the offline plan."""
    if source in ("auto", "stack") and shutil.which("pulumi"):
        try:
            from pulumi import automation

            ws_stack = automation.select_stack(stack_name=stack, work_dir=str(find_project().root))
            outputs = {key: value.value for key, value in ws_stack.outputs().items()}
            if outputs:
                return outputs, "stack"
        except Exception as exc:  # no such stack, no backend login: fall back only when allowed
            if source == "stack":
                raise RuntimeError(f"stack {stack}: cannot read its outputs through Pulumi: {exc}") from exc
    elif source == "stack":
        raise RuntimeError("the Pulumi CLI is not installed: use source='plan' for the offline plan's outputs")

    return _mark_engine_only(dict(plan_stack(stack).outputs)), "plan"


def _mark_engine_only(outputs: dict[str, Any]) -> dict[str, Any]:
    """The plan's outputs with every engine-computed value replaced by ENGINE_ONLY."""
    for key, fields in _ENGINE_ONLY_FIELDS.items():
        section = outputs.get(key)
        if isinstance(section, Mapping):
            outputs[key] = {k: (ENGINE_ONLY if k in fields else v) for k, v in section.items()}
    # A Slurm burst's scaler ARNs (trust anchor, profile, role): the site controller's credential_process.
    burst = (outputs.get("hybrid") or {}).get("burst")
    if isinstance(burst, Mapping) and isinstance(burst.get("scaler"), Mapping):
        scaler = {k: ENGINE_ONLY for k in burst["scaler"]}
        outputs["hybrid"] = {**outputs["hybrid"], "burst": {**burst, "scaler": scaler}}
    return outputs


def engine_only_values(inventory: Mapping[str, Any]) -> list[str]:
    """Dotted paths of the inventory's values that only the deployed stack knows."""
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                walk(value, f"{path}.{key}" if path else str(key))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{path}[{index}]")
        elif node == ENGINE_ONLY:
            found.append(path)

    walk(inventory, "")
    return found


def _catalog() -> Any:

    return load_catalog()


def node_group_vars(
    outputs_or_inventory: Mapping[str, Any], node_group: str | None = None, *, floor_fraction: float | None = None
) -> dict[str, Any]:
    """Variables of one node group: from an inventory built here (its ng_ group vars), or stack outputs."""
    if "all" in outputs_or_inventory:
        children = outputs_or_inventory["all"]["children"]
        gpu_groups = [name for name in children.get("gpu_nodes", {}).get("children", {})]
        if not gpu_groups:
            raise ValueError("the inventory has no GPU node groups")
        wanted = group_name("ng", node_group) if node_group else gpu_groups[0]
        if wanted not in children:
            raise ValueError(f"no node group {node_group!r}; GPU node groups: {', '.join(g[3:] for g in gpu_groups)}")
        return dict(children[wanted].get("vars", {}))
    groups = outputs_or_inventory.get("nodeGroups") or {}
    name = node_group or next(iter(groups))
    return _group_vars(name, groups[name], outputs_or_inventory, floor_fraction or DEFAULT_FLOOR_FRACTION)


def _group_vars(
    name: str, group: Mapping[str, Any], outputs: Mapping[str, Any], floor_fraction: float
) -> dict[str, Any]:
    software = outputs.get("software") or {}
    fabric = group.get("fabric") or "none"
    instance_type = group.get("instanceType")
    gpus = int(group.get("gpusPerNode") or 0)
    facts = _hardware_facts(group)
    reference = facts["busbw_reference_gbps"]
    vars_: dict[str, Any] = {
        "gpuforge_node_group": name,
        "gpuforge_role": group.get("role"),
        "gpuforge_fabric": fabric,
        "gpuforge_instance_type": instance_type,
        "gpuforge_server_model": group.get("serverModel"),
        "gpuforge_gpus_per_node": gpus,
        "nvidia_driver_branch": str(software.get("nvidiaDriverBranch", "580")),
        # Every NVSwitch system (p4d/p5, DGX/HGX on premises): without Fabric Manager CUDA fails (802).
        "nvidia_fabricmanager_enabled": facts["nvswitch"],
        "nccl_version": software.get("ncclVersion"),
        "nccl_cuda_version": software.get("ncclCudaVersion"),
        "nccl_net_plugin": "aws-ofi-nccl" if fabric == "efa" else "none",
        "nccl_tuning_fabric": fabric,
        "nccl_tuning_instance_type": instance_type,
        "nccl_tuning_nccl_version": software.get("ncclVersion"),
        "gpu_healthcheck_fabric": fabric,
        "gpu_healthcheck_expected_gpus": gpus,
        "gpu_healthcheck_nvlinks_per_gpu": facts["nvlinks_per_gpu"],
        "gpu_healthcheck_busbw_floor_gbps": round(float(reference) * floor_fraction, 3) if reference else None,
    }
    repository = group.get("driverRepository")
    if repository:
        # A site pool's mirror of NVIDIA's CUDA repository (site.driver_source): the driver role adds it, and
        # Fabric Manager, DCGM and NCCL install from what it added.
        vars_["nvidia_driver_cuda_repo_base_url"] = repository["url"]
        if repository.get("keyUrl"):
            vars_["nvidia_driver_cuda_repo_key_url"] = repository["keyUrl"]
    if fabric == "efa":
        vars_.update(
            {
                "efa_installer_version": software.get("efaInstallerVersion"),
                "nccl_tuning_aws_ofi_nccl_version": software.get("awsOfiNcclVersion"),
                "nccl_tuning_efa_installer_version": software.get("efaInstallerVersion"),
                "nccl_tuning_gpudirect_rdma": bool(facts["gpudirect_rdma"]),  # not listed: no GDR
                "gpu_healthcheck_expected_efa": int(group.get("efaInterfacesPerNode") or 0),
            }
        )
    if fabric in ("infiniband", "roce"):
        hcas = list(group.get("ibHcas") or facts["compute_hcas"])
        vars_.update(
            {
                "rdma_fabric": fabric,
                "nccl_tuning_ib_hcas": hcas,
                "nccl_tuning_rail_optimized": bool(group.get("railOptimized", False)),
                "nccl_tuning_sharp": bool(group.get("sharp", False)),
                "gpu_healthcheck_ib_hcas": list(hcas),
                "fabric_acceptance_hcas": list(hcas),
            }
        )
        if group.get("fabricRateGbps"):
            floors = site_fabric_floors(int(group["fabricRateGbps"]), len(hcas))
            vars_["fabric_acceptance_rail_floor_gbps"] = floors.rail_gbps
            vars_["fabric_acceptance_busbw_floor_gbps"] = floors.busbw_gbps
    fs = outputs.get("parallelFs")
    if fs and fs.get("dnsName") and fs.get("mountName"):
        vars_["lustre_client_filesystem"] = {
            "dnsName": fs["dnsName"],
            "mountName": fs["mountName"],
            # EFA-enabled file system: nodes with EFA devices configure LNet over EFA (lustre_client).
            "efa": bool(fs.get("efa", False)),
        }
        if fs.get("efa") and fabric == "efa":
            vars_["lustre_client_efa_interfaces"] = lustre_efa_interfaces(instance_type)
            lustre = _aws_wiring().lustre
            vars_["lustre_client_efa_peer_credits"] = lustre.efa_client_peer_credits
            vars_["lustre_client_lnet_discovery"] = lustre.efa_client_discovery
            vars_["lustre_client_efa_udsp_priority"] = lustre.efa_client_udsp_priority
    mounts = site_mounts(outputs)
    # The site's file systems reach site pools only (groups with hosts): a cloud burst node has no IPoIB port
    # for LNet's o2ib, and its /home comes with the Slurm burst (slurm_config.home), its data through S3.
    if mounts and group.get("hosts"):
        vars_["site_mounts_mounts"] = mounts
        vars_["lustre_client_o2ib_networks"] = dict(group.get("lnetInterfaces") or {}) or o2ib_networks(mounts) or None
    vars_.update(_local_scratch_vars(group))
    return {key: value for key, value in vars_.items() if value is not None}


def _local_scratch_vars(group: Mapping[str, Any]) -> dict[str, Any]:
    """How the local_scratch role finds the node's local NVMe: on AWS by the instance-store model (required
    where the catalog gives the type instance store), on premises by the server model's drive paths."""
    catalog = _catalog()
    instance_type = group.get("instanceType")
    if instance_type and catalog.has_instance_type(instance_type):
        return {
            "local_scratch_model": _aws_wiring().instance_store.nvme_model,
            "local_scratch_required": catalog.instance_type(instance_type).nvme_gb > 0,
        }
    server = catalog.data.servers.get(group.get("serverModel") or "")
    devices = list(server.scratch_devices) if server else []
    return {"local_scratch_devices": devices, "local_scratch_required": bool(devices)}


def _hardware_facts(group: Mapping[str, Any]) -> dict[str, Any]:
    """NVSwitch, NVLinks per GPU, GPUDirect RDMA, compute HCAs and the busbw reference of a node group:
    from the catalog's instance type (AWS) or server model (on premises)."""
    catalog = _catalog()
    instance_type = group.get("instanceType")
    it = catalog.instance_type(instance_type) if instance_type and catalog.has_instance_type(instance_type) else None
    model = group.get("serverModel")
    server = catalog.data.servers.get(model) if model else None
    nvswitch = bool((it and it.nvswitch) or (server and server.nvswitch))
    gpu_model = group.get("gpuModel") or (server.gpu_model if server else None)
    nvlinks = 0
    if nvswitch and gpu_model and gpu_model in catalog.data.gpus:
        nvlinks = int(catalog.gpu(gpu_model).nvlink_links or 0)
    return {
        "nvswitch": nvswitch,
        "nvlinks_per_gpu": nvlinks,
        "gpudirect_rdma": it.gpudirect_rdma if it else None,
        "compute_hcas": list(server.compute_hcas) if server else [],
        "busbw_reference_gbps": it.nccl_busbw_reference_gbps
        if it
        else (server.nccl_busbw_reference_gbps if server else None),
    }


def lustre_efa_interfaces(instance_type: str | None) -> int:
    """EFA devices an FSx for Lustre client puts on LNet (FSx's default per instance type, data/aws_wiring.yaml)."""
    catalog = _catalog()
    it = catalog.instance_type(instance_type) if instance_type and catalog.has_instance_type(instance_type) else None
    return _aws_wiring().lustre.efa_interfaces_for(instance_type, it.max_network_cards if it else 1)


def _aws_wiring() -> Any:

    return load_aws_wiring()


def site_mounts(outputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The site's shared file systems (NFS, Lustre, BeeGFS, WEKA) as the site_mounts role takes them."""
    mounts = ((outputs.get("site") or {}).get("parallelFs")) or {}
    return [{"name": name, **dict(mount)} for name, mount in sorted(mounts.items())]


def o2ib_networks(mounts: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The LNet o2ib networks the site's Lustre mounts need and the interfaces each runs on (a mount's
    lnet_interfaces, for its MGS NIDs' network): gpuforge-lnet.service adds them before those mounts."""
    networks: dict[str, list[str]] = {}
    for mount in mounts:
        nids = mount.get("mgs_nids") or []
        net = str(nids[0]).rpartition("@")[2] if mount.get("kind") == "lustre" and nids else ""
        if net.startswith("o2ib"):
            interfaces = networks.setdefault(net, [])
            interfaces += [i for i in mount.get("lnet_interfaces") or [] if i not in interfaces]
    return networks


def _host_vars(host: Mapping[str, Any]) -> dict[str, Any]:
    """Per-host variables of an on-premises host (gpuforge:onprem:Host's inventory). The HCAs in
    rail order become nccl_tuning_ib_hcas, so the nccl_tuning role
    (gpuforge/assets/playbooks/templates/nccl/nccl.env.j2) emits NCCL_IB_HCA for exactly this host's rails."""
    vars_: dict[str, Any] = {
        "ansible_host": host.get("managementIp"),
        "gpuforge_bmc_address": host.get("bmcAddress"),
        "gpuforge_site": host.get("site"),
        "gpuforge_rack": host.get("rack"),
        "gpuforge_rack_u": host.get("uPosition"),
        "gpuforge_scalable_unit": host.get("scalableUnit"),
        "gpuforge_server_model": host.get("model"),
        "gpuforge_ib_hcas_by_rail": dict(host.get("hcas") or {}) or None,
        # The storage ports' IPoIB addresses (the rdma role writes them) and the LNet NIDs they make.
        "rdma_ipoib_addresses": dict(host.get("storageAddresses") or {}) or None,
        "gpuforge_lnet_nids": dict(host.get("lnetNids") or {}) or None,
    }
    if host.get("kubeletConfig"):
        # The kubelet drop-in the node registers with (taints, reservations): gpuforge/infra/onprem/host.py.
        vars_["kubelet_config_dropin"] = yaml.safe_dump(host["kubeletConfig"], sort_keys=False)
    if host.get("ibHcas"):
        vars_["nccl_tuning_ib_hcas"] = list(host["ibHcas"])
        vars_["gpu_healthcheck_ib_hcas"] = list(host["ibHcas"])
        vars_["fabric_acceptance_hcas"] = list(host["ibHcas"])
    if host.get("ncclIbPkeyIndex") is not None:
        # The P_Key index of the host's tenant key (gpuforge/render/ib_partitions.py): NCCL_IB_PKEY.
        vars_["nccl_tuning_ib_pkey_index"] = host["ncclIbPkeyIndex"]
    return {key: value for key, value in vars_.items() if value is not None}


def build_inventory(
    stack: str,
    *,
    source: Source = "auto",
    floor_fraction: float = DEFAULT_FLOOR_FRACTION,
    outputs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The YAML inventory (as a dict) for *stack*: ``gpu_nodes``, ``ng_<group>`` and ``role_<role>`` groups.

    ``all.vars.gpuforge_outputs_source`` says whether the values come from the deployed stack or the
    offline plan; offline, values only the engine knows read ENGINE_ONLY (``engine_only_values``).
    """
    origin: Origin = "stack"
    if outputs is None:
        loaded, origin = load_outputs(stack, source)
        outputs = loaded
    outputs = dict(outputs)
    node_groups: Mapping[str, Any] = outputs.get("nodeGroups") or {}
    if not node_groups:
        raise ValueError(f"stack {stack}: outputs have no nodeGroups")
    cluster = outputs.get("cluster") or {}
    children: dict[str, Any] = {}
    gpu_children: dict[str, Any] = {}
    roles: dict[str, dict[str, Any]] = {}
    for name, group in node_groups.items():
        ng = group_name("ng", name)
        entry: dict[str, Any] = {"vars": _group_vars(name, group, outputs, floor_fraction)}
        if group.get("hosts"):
            hosts = group["hosts"]
            # On-prem outputs map each host to its inventory (address, BMC, rack, HCAs per rail).
            entry["hosts"] = (
                {str(h): _host_vars(inv) for h, inv in hosts.items()}
                if isinstance(hosts, Mapping)
                else {str(host): {} for host in hosts}
            )
        children[ng] = entry
        if int(group.get("gpusPerNode") or 0) > 0:
            gpu_children[ng] = {}
        roles.setdefault(group_name("role", str(group.get("role") or "none")), {"children": {}})["children"][ng] = {}
    children["gpu_nodes"] = {"children": gpu_children}
    children.update(roles)

    slurm_vars, slurm_children = slurm_inventory(stack, outputs, group_name)
    children.update(slurm_children)
    return {
        "all": {
            "vars": {
                "gpuforge_stack": stack,
                "gpuforge_cluster": cluster.get("name"),
                "gpuforge_region": cluster.get("region"),
                "gpuforge_outputs_source": origin,
                **slurm_vars,
            },
            "children": children,
        }
    }


def aws_ec2_inventory(
    stack: str, *, outputs: Mapping[str, Any] | None = None, source: Source = "auto"
) -> dict[str, Any]:
    """``amazon.aws.aws_ec2`` plugin configuration that puts each node group's running instances into
    its ng_ group, selected by the stable gpuforge:cluster and gpuforge:node-group instance tags.

    Write it as ``<name>.aws_ec2.yml`` and pass it with ``-i`` next to the YAML inventory. The plugin
    needs boto3 (a gpuforge dependency) and AWS credentials.
    """
    outputs = dict(outputs) if outputs is not None else stack_outputs(stack, source)
    cluster = outputs.get("cluster") or {}
    groups = sorted(name for name, g in (outputs.get("nodeGroups") or {}).items() if not g.get("hosts"))
    config: dict[str, Any] = {
        "plugin": "amazon.aws.aws_ec2",
        "filters": {
            "instance-state-name": ["running"],
            f"tag:{CLUSTER_TAG}": [cluster.get("name")],
            f"tag:{NODE_GROUP_TAG}": groups,
        },
        # Compute nodes have no public address (many EFAs): reach them on their private IP.
        "hostnames": ["private-ip-address"],
        # A cloud node's Slurm name (gpuforge/nodes/instance_name.py): slurm-drain.yml drains it by this.
        "compose": {
            "ansible_host": "private_ip_address",
            "slurm_node_name": f"tags['{NODE_GROUP_TAG}'] ~ '-' ~ instance_id",
        },
        "groups": {group_name("ng", name): f"tags.get('{NODE_GROUP_TAG}') == '{name}'" for name in groups},
    }
    if cluster.get("region"):
        config["regions"] = [cluster["region"]]
    return config
