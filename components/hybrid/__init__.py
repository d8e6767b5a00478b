"""Hybrid placement: an on-premises site bursting into one AWS region. Composes the aws and onprem
placements (the only module that imports both) and adds the site-to-cloud link, the burst lender
queue in the site's Kueue cohort, and object storage sync between site and S3."""

from .burst import BurstCapacity, BurstCapacityArgs, BurstPool, burst_node_labels, burst_queue_spec
from .link import SiteLink, SiteLinkArgs, link_description
from .object_sync import ObjectSync, ObjectSyncArgs, egress_statement
from .placement import build_hybrid_cluster

__all__ = [
    "BurstCapacity",
    "BurstCapacityArgs",
    "BurstPool",
    "ObjectSync",
    "ObjectSyncArgs",
    "SiteLink",
    "SiteLinkArgs",
    "build_hybrid_cluster",
    "burst_node_labels",
    "burst_queue_spec",
    "egress_statement",
    "link_description",
]
