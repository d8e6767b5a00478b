"""The operating system a site's hosts run (site.host_os), which decides who puts NVIDIA's stack on them.

- generic: a distribution (Ubuntu, Debian). gpuforge's roles add NVIDIA's CUDA repository (or site.driver_source's
  mirror) and install the driver, Fabric Manager, DCGM and NCCL from it, as they always have.
- dgx_os: NVIDIA's DGX OS, which runs on DGX systems only (the catalog's servers say which: dgx_os). DGX OS
  brings the driver, Fabric Manager, DCGM and NCCL from NVIDIA's DGX repositories (catalog dgx_os_source), so the
  roles add no repository and install, replace or hold nothing: they check that what is there is the plan's
  driver branch, Fabric Manager of the same driver, DCGM, and the NCCL version pinned, and refuse a host that
  differs (docs/onprem-hybrid.md, "The host OS").

A site states one OS for all its pools (default) and the pools that differ (pools), e.g. DGX nodes on DGX OS
beside vendor HGX servers on Ubuntu.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from .base import SpecModel
from .errors import SpecIssue
from .fields import Name

if TYPE_CHECKING:  # site_checks imports this module; the resolved hosts are built there
    from .resolved_site import ResolvedHost
    from .site import Site

HostOsKind = Literal["generic", "dgx_os"]
PATH = "cluster.site.host_os"


class HostOs(SpecModel):
    default: HostOsKind = Field(
        default="generic",
        description="The hosts' OS: generic (a distribution; gpuforge installs NVIDIA's driver, Fabric Manager, DCGM "
        "and NCCL) or dgx_os (DGX OS brings them; gpuforge checks them against the plan and installs nothing).",
    )
    pools: dict[Name, HostOsKind] = Field(
        default_factory=dict, description="The pools whose hosts run another OS than default: pool -> OS."
    )

    def of_pool(self, pool: str) -> HostOsKind:
        return self.pools.get(pool, self.default)


def check_host_os(site: Site, hosts: dict[str, ResolvedHost]) -> list[SpecIssue]:
    """Every problem at once: a pool that is not the site's, DGX OS on a server model that does not run it, and a
    driver_source that no pool would use (every pool on DGX OS)."""
    host_os = site.host_os
    issues: list[SpecIssue] = []
    pools: dict[str, set[str]] = {}
    for host in hosts.values():
        pools.setdefault(host.spec.pool, set()).add(host.server.name)
    for pool in sorted(set(host_os.pools) - set(pools)):
        issues.append(SpecIssue(f"{PATH}.pools[{pool}]", f"{pool} is not a pool of the site's hosts",
                                f"name one of the pools: {', '.join(sorted(pools))}"))
    dgx_models = {host.server.name for host in hosts.values() if host.server.dgx_os}
    for pool, models in sorted(pools.items()):
        others = sorted(models - dgx_models)
        if host_os.of_pool(pool) == "dgx_os" and others:
            path = f"{PATH}.pools[{pool}]" if pool in host_os.pools else f"{PATH}.default"
            issues.append(SpecIssue(
                path,
                f"pool {pool} has {', '.join(others)} hosts, and DGX OS runs on NVIDIA's DGX systems only (the "
                "catalog's servers with dgx_os: NVIDIA DGX OS user guide)",
                f"set pools: {{{pool}: generic}} (gpuforge then installs NVIDIA's driver, Fabric Manager, DCGM and "
                "NCCL on them)",
            ))
    if site.driver_source is not None and pools and all(host_os.of_pool(p) == "dgx_os" for p in pools):
        issues.append(SpecIssue(
            "cluster.site.driver_source",
            "every pool runs DGX OS, whose driver, Fabric Manager, DCGM and NCCL come from NVIDIA's DGX "
            "repositories: no host would install from this mirror",
            "remove driver_source, or set the pools that run a distribution to generic in site.host_os.pools",
        ))
    return issues
