"""Hybrid placement: an on-premises site bursting into one AWS region. Composes the aws and onprem
placements (the only module that imports both) and adds the site-to-cloud link, MultiKueue dispatch
from the site's Kueue to an EKS worker cluster, and object storage sync between site and S3."""

from .burst import MultiKueueBurst, MultiKueueBurstArgs
from .link import SiteLink, SiteLinkArgs, link_description
from .object_sync import ObjectSync, ObjectSyncArgs, egress_statement
from .placement import build_hybrid_cluster

__all__ = [
    "MultiKueueBurst",
    "MultiKueueBurstArgs",
    "ObjectSync",
    "ObjectSyncArgs",
    "SiteLink",
    "SiteLinkArgs",
    "build_hybrid_cluster",
    "egress_statement",
    "link_description",
]
