"""Kubernetes platform components, reused on EKS and on-premises clusters (any provider)."""

from gpuforge.render.labels import NODE_LABEL_GPU_MODEL, NODE_LABEL_GROUP, TEAM_LABEL

from .platform import GpuPlatform, GpuPlatformArgs, GpuPool, ParallelFsVolume

__all__ = [
    "NODE_LABEL_GPU_MODEL",
    "NODE_LABEL_GROUP",
    "TEAM_LABEL",
    "GpuPlatform",
    "GpuPlatformArgs",
    "GpuPool",
    "ParallelFsVolume",
]
