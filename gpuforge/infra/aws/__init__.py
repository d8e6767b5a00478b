"""AWS placement: network, GPU node groups, storage. Imports no other placement."""

from .network import SegmentedNetwork, SegmentedNetworkArgs
from .node_group import GpuNodeGroup, GpuNodeGroupArgs, LustreMount
from .placement import build_aws_cluster, build_aws_network_and_cluster
from .storage import ClusterKey, LustreFileSystem, LustreFileSystemArgs, ObjectStore, ObjectStoreArgs

__all__ = [
    "ClusterKey",
    "GpuNodeGroup",
    "GpuNodeGroupArgs",
    "LustreFileSystem",
    "LustreFileSystemArgs",
    "LustreMount",
    "ObjectStore",
    "ObjectStoreArgs",
    "SegmentedNetwork",
    "SegmentedNetworkArgs",
    "build_aws_cluster",
    "build_aws_network_and_cluster",
]
