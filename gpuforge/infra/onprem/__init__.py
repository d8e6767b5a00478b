"""On-premises placement: site, racks with their power feeds, hosts, rail-optimized fabric, storage endpoints.
Imports no other placement (gpuforge/infra/aws never appears here); hybrid composes both."""

from .host import Host, HostArgs, host_labels, host_props
from .placement import build_onprem_cluster, build_onprem_site, pool_outputs, site_kubeconfig
from .rack import Rack, RackArgs, rack_props
from .site import OnPremSite, OnPremSiteArgs, site_gpu_pools, site_props

__all__ = [
    "Host",
    "HostArgs",
    "OnPremSite",
    "OnPremSiteArgs",
    "Rack",
    "RackArgs",
    "build_onprem_cluster",
    "build_onprem_site",
    "host_labels",
    "host_props",
    "pool_outputs",
    "rack_props",
    "site_gpu_pools",
    "site_kubeconfig",
    "site_props",
]
