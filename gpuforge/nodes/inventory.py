"""Ansible inventory from a stack: groups per node group and per role, group variables for every role.

Where the facts come from:
- stack outputs (``nodeGroups``, ``software``, ``parallelFs``, ``cluster``): from the deployed stack
  through the Pulumi Automation API when the Pulumi CLI and the stack exist, otherwise from the offline
  plan (``gpuforge.plan.engine.plan_stack``), which registers the same outputs;
- hardware facts (NVSwitch, EFA count, NVLinks per GPU, the bus-bandwidth reference): the catalog.

Hosts: AWS node groups are Auto Scaling groups, so their instances are found at run time by Ansible's
``amazon.aws.aws_ec2`` inventory plugin, filtered on each group's ``aws:autoscaling:groupName`` tag and
put into the same ``ng_<name>`` groups (``aws_ec2_inventory``; pass both files with ``-i``). Node
groups whose outputs list ``hosts`` (on premises) get those hosts directly.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from typing import Any, Literal

import yaml

from gpuforge.nodes.health import DEFAULT_FLOOR_FRACTION

Source = Literal["auto", "stack", "plan"]


def group_name(prefix: str, name: str) -> str:
    """A valid Ansible group name (letters, digits, underscores)."""
    return f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"


def stack_outputs(stack: str, source: Source = "auto") -> dict[str, Any]:
    """Outputs of the deployed stack (Automation API) or, offline, of the plan."""
    if source in ("auto", "stack") and shutil.which("pulumi"):
        try:
            from pulumi import automation

            from gpuforge.plan.stacks import PROJECT_ROOT

            ws_stack = automation.select_stack(stack_name=stack, work_dir=str(PROJECT_ROOT))
            outputs = {key: value.value for key, value in ws_stack.outputs().items()}
            if outputs:
                return outputs
        except Exception as exc:  # no such stack, no backend login: fall back only when allowed
            if source == "stack":
                raise RuntimeError(f"stack {stack}: cannot read its outputs through Pulumi: {exc}") from exc
    elif source == "stack":
        raise RuntimeError("the Pulumi CLI is not installed: use source='plan' for the offline plan's outputs")
    from gpuforge.plan.engine import plan_stack

    return dict(plan_stack(stack).outputs)


def _catalog() -> Any:
    from components.catalog import load_catalog

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
    catalog = _catalog()
    it = catalog.instance_type(instance_type) if instance_type and catalog.has_instance_type(instance_type) else None
    nvswitch = bool(it and it.nvswitch)
    nvlinks = 0
    if nvswitch and group.get("gpuModel"):
        try:
            nvlinks = int(catalog.gpu(group["gpuModel"]).nvlink_links or 0)
        except (KeyError, ValueError):
            nvlinks = 0
    reference = it.nccl_busbw_reference_gbps if it else None
    vars_: dict[str, Any] = {
        "gpuforge_node_group": name,
        "gpuforge_role": group.get("role"),
        "gpuforge_fabric": fabric,
        "gpuforge_instance_type": instance_type,
        "gpuforge_gpus_per_node": gpus,
        "nvidia_driver_branch": str(software.get("nvidiaDriverBranch", "580")),
        "nvidia_fabricmanager_enabled": nvswitch,
        "nccl_version": software.get("ncclVersion"),
        "nccl_net_plugin": "aws-ofi-nccl" if fabric == "efa" else "none",
        "nccl_tuning_fabric": fabric,
        "nccl_tuning_instance_type": instance_type,
        "nccl_tuning_nccl_version": software.get("ncclVersion"),
        "gpu_healthcheck_fabric": fabric,
        "gpu_healthcheck_expected_gpus": gpus,
        "gpu_healthcheck_nvlinks_per_gpu": nvlinks,
        "gpu_healthcheck_busbw_floor_gbps": round(float(reference) * floor_fraction, 3) if reference else None,
    }
    if fabric == "efa":
        vars_.update(
            {
                "efa_installer_version": software.get("efaInstallerVersion"),
                "nccl_tuning_aws_ofi_nccl_version": software.get("awsOfiNcclVersion"),
                "nccl_tuning_efa_installer_version": software.get("efaInstallerVersion"),
                "gpu_healthcheck_expected_efa": int(group.get("efaInterfacesPerNode") or 0),
            }
        )
    if fabric in ("infiniband", "roce"):
        hcas = list(group.get("ibHcas") or [])
        vars_.update(
            {
                "rdma_fabric": fabric,
                "nccl_tuning_ib_hcas": hcas,
                "nccl_tuning_rail_optimized": bool(group.get("railOptimized", False)),
                "nccl_tuning_sharp": bool(group.get("sharp", False)),
                "gpu_healthcheck_ib_hcas": hcas,
            }
        )
    fs = outputs.get("parallelFs")
    if fs and fs.get("dnsName") and fs.get("mountName"):
        vars_["lustre_client_filesystem"] = {"dnsName": fs["dnsName"], "mountName": fs["mountName"]}
    return {key: value for key, value in vars_.items() if value is not None}


def _host_vars(host: Mapping[str, Any]) -> dict[str, Any]:
    """Per-host variables of an on-premises host (gpuforge:onprem:Host's inventory). The HCAs in
    rail order become nccl_tuning_ib_hcas, so the nccl_tuning role (templates/nccl/nccl.env.j2) emits
    NCCL_IB_HCA for exactly this host's rails."""
    vars_: dict[str, Any] = {
        "ansible_host": host.get("managementIp"),
        "gpuforge_bmc_address": host.get("bmcAddress"),
        "gpuforge_site": host.get("site"),
        "gpuforge_rack": host.get("rack"),
        "gpuforge_rack_u": host.get("uPosition"),
        "gpuforge_scalable_unit": host.get("scalableUnit"),
        "gpuforge_server_model": host.get("model"),
        "gpuforge_ib_hcas_by_rail": dict(host.get("hcas") or {}) or None,
    }
    if host.get("kubeletConfig"):
        # The kubelet drop-in the node registers with (taints, reservations): components/onprem/host.py.
        vars_["kubelet_config_dropin"] = yaml.safe_dump(host["kubeletConfig"], sort_keys=False)
    if host.get("ibHcas"):
        vars_["nccl_tuning_ib_hcas"] = list(host["ibHcas"])
        vars_["gpu_healthcheck_ib_hcas"] = list(host["ibHcas"])
    return {key: value for key, value in vars_.items() if value is not None}


def build_inventory(
    stack: str,
    *,
    source: Source = "auto",
    floor_fraction: float = DEFAULT_FLOOR_FRACTION,
    outputs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The YAML inventory (as a dict) for *stack*: ``gpu_nodes``, ``ng_<group>`` and ``role_<role>`` groups."""
    outputs = dict(outputs) if outputs is not None else stack_outputs(stack, source)
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
    return {
        "all": {
            "vars": {
                "gpuforge_stack": stack,
                "gpuforge_cluster": cluster.get("name"),
                "gpuforge_region": cluster.get("region"),
            },
            "children": children,
        }
    }


def aws_ec2_inventory(
    stack: str, *, outputs: Mapping[str, Any] | None = None, source: Source = "auto"
) -> dict[str, Any]:
    """``amazon.aws.aws_ec2`` plugin configuration that puts each ASG's running instances into its ng_ group.

    Write it as ``<name>.aws_ec2.yml`` and pass it with ``-i`` next to the YAML inventory.
    """
    outputs = dict(outputs) if outputs is not None else stack_outputs(stack, source)
    groups = {name: g for name, g in (outputs.get("nodeGroups") or {}).items() if g.get("asgName")}
    region = (outputs.get("cluster") or {}).get("region")
    config: dict[str, Any] = {
        "plugin": "amazon.aws.aws_ec2",
        "filters": {
            "instance-state-name": ["running"],
            "tag:aws:autoscaling:groupName": sorted(g["asgName"] for g in groups.values()),
        },
        # Compute nodes have no public address (many EFAs): reach them on their private IP.
        "hostnames": ["private-ip-address"],
        "compose": {"ansible_host": "private_ip_address"},
        "groups": {
            group_name("ng", name): f"tags['aws:autoscaling:groupName'] == '{g['asgName']}'"
            for name, g in groups.items()
        },
    }
    if region:
        config["regions"] = [region]
    return config
