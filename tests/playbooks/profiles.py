"""Node-group variables of the two fabric profiles the playbook tests bake."""

from __future__ import annotations

import copy
from typing import Any

from gpuforge.plan.stacks import load_stack
from gpuforge.render.slurm import slurm_config
from gpuforge.spec import resolve
from tests.standins.containers import ContainerSources
from tests.standins.repo import StandinSources

# An EFA p5.48xlarge node group as `gpuforge inventory` writes it (versions from the spec).
EFA_P5: dict[str, Any] = {
    "gpuforge_fabric": "efa",
    "gpuforge_instance_type": "p5.48xlarge",
    # An NVSwitch system with EFA: Fabric Manager and the aws-ofi-nccl plugin, as the inventory sets them.
    "nvidia_fabricmanager_enabled": True,
    "nccl_net_plugin": "aws-ofi-nccl",
    "nccl_tuning_fabric": "efa",
    "nccl_tuning_instance_type": "p5.48xlarge",
    "nccl_tuning_nccl_version": "2.26.2",
    "nccl_tuning_aws_ofi_nccl_version": "1.13.2",
    "nccl_tuning_efa_installer_version": "1.43.1",
    "gpu_healthcheck_fabric": "efa",
    "gpu_healthcheck_expected_gpus": 8,
    "gpu_healthcheck_expected_efa": 32,
    "gpu_healthcheck_nvlinks_per_gpu": 18,  # the catalog's H100 NVLinks on an NVSwitch type
    # An EFA-enabled file system (as prod's): LNet is configured by gpuforge-lnet.service before the mount.
    "lustre_client_filesystem": {
        "dnsName": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        "mountName": "abcdefgh",
        "efa": True,
    },
    # LNet over EFA as the inventory sets it from the catalog (FSx's 8 EFA devices for p5).
    "lustre_client_efa_interfaces": 8,
    "lustre_client_efa_peer_credits": 32,
    "lustre_client_lnet_discovery": True,
    "lustre_client_efa_udsp_priority": 0,
    # p5.48xlarge has instance-store NVMe (catalog): found by its model, required.
    "local_scratch_model": "Amazon EC2 NVMe Instance Storage",
    "local_scratch_required": True,
}

# An on-premises 8-rail rail-optimized InfiniBand node group on NVIDIA DOCA-OFED (ConnectX-7 fleets), as a
# site's group variables select it (rdma_source; the booted-lab stack keeps the distribution's rdma-core).
IB_RAILS = [f"mlx5_{i}" for i in range(8)]
IB_8RAIL: dict[str, Any] = {
    "gpuforge_fabric": "infiniband",
    "rdma_fabric": "infiniband",
    "rdma_source": "doca",
    "nccl_tuning_fabric": "infiniband",
    "nccl_tuning_nccl_version": "2.26.2",
    "nccl_tuning_ib_hcas": IB_RAILS,
    "nccl_tuning_rail_optimized": True,
    "gpu_healthcheck_fabric": "infiniband",
    "gpu_healthcheck_ib_hcas": IB_RAILS,
}


def profile_vars(profile: dict[str, Any], sources: StandinSources) -> dict[str, Any]:
    """The group's variables with every production source pointed at the stand-ins (nothing switched off)."""
    return {**sources.variables(), **profile}


def image_slurm_vars(group: str, containers: ContainerSources) -> dict[str, Any]:
    """What `gpuforge bake --target rootfs:` adds for a group of prod's Slurm cluster (bake.image_slurm_vars):
    the containers and job_container parts of its slurm_config, enroot's sources pointed at the stand-ins."""
    stack = load_stack("prod")
    config = slurm_config(resolve(stack.cluster, str(stack.path)))
    image = {"containers": copy.deepcopy(config["containers"]), "job_container": config["job_container"]}
    containers.slurm_config(image)
    return {"gpuforge_node_group": group, "slurm_config": image}
