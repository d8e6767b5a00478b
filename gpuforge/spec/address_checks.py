"""One address, one host: the site's hosts and BMCs, its subnet managers, the Slurm controller and login
hosts, the monitoring host and the storage endpoints, across sections.

Each section checks its own names; two different names at one address slip past every one of them, and
then one machine gets the other's configuration (a login node that is really the controller, Prometheus
on a GPU host). The same name at one address is one host listed twice, which the sections allow (a
small site runs monitoring on its controller). Storage endpoints have no host name: one may share a
service host's address (a controller exporting /home) or another endpoint's, never a GPU host's or a BMC's.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from .errors import SpecIssue
from .models import ClusterSpec
from .monitoring import SiteHostServer
from .site import LustreMount, NfsMount, WekaMount


@dataclass(frozen=True)
class _Claim:
    path: str  # where the spec states it
    host: str  # the host's name, or "" for a storage endpoint
    kind: str  # "gpu", "bmc", "service", "storage"


def check_host_addresses(spec: ClusterSpec) -> list[SpecIssue]:
    claims: dict[str, list[_Claim]] = {}

    def claim(address: str, path: str, host: str, kind: str) -> None:
        try:
            key = str(ipaddress.ip_address(address))
        except ValueError:
            return  # a host name, not an address (each section checks its own form)
        claims.setdefault(key, []).append(_Claim(path, host, kind))

    site = spec.site
    if site is not None:
        for name, host in site.hosts.items():
            claim(host.management_ip, f"cluster.site.hosts[{name}].management_ip", name, "gpu")
            claim(host.bmc_address, f"cluster.site.hosts[{name}].bmc_address", f"{name}'s BMC", "bmc")
        for name, address in (site.fabric.subnet_managers if site.fabric else {}).items():
            claim(address, f"cluster.site.fabric.subnet_managers[{name}]", name, "service")
        for key, mount in site.storage.mounts.items():
            path = f"cluster.site.storage.mounts[{key}]"
            if isinstance(mount, NfsMount):
                claim(mount.server, f"{path}.server", "", "storage")
            elif isinstance(mount, LustreMount):
                for i, nid in enumerate(mount.mgs_nids):
                    claim(nid.split("@", 1)[0], f"{path}.mgs_nids[{i}]", "", "storage")
            elif isinstance(mount, WekaMount):
                for i, backend in enumerate(mount.backends):
                    claim(backend, f"{path}.backends[{i}]", "", "storage")
            else:
                claim(mount.mgmtd_host, f"{path}.mgmtd_host", "", "storage")
    if spec.scheduler is not None:
        for name, address in spec.scheduler.controller.hosts.items():
            claim(address, f"cluster.scheduler.controller.hosts[{name}]", name, "service")
        for name, address in spec.scheduler.login.hosts.items():
            claim(address, f"cluster.scheduler.login.hosts[{name}]", name, "service")
    server = spec.monitoring.server if spec.monitoring is not None else None
    if isinstance(server, SiteHostServer):
        claim(server.address, "cluster.monitoring.server.address", server.host, "service")
    return [issue for address, found in claims.items() for issue in _clashes(address, found)]


def _clashes(address: str, found: list[_Claim]) -> list[SpecIssue]:
    issues = []
    for i, later in enumerate(found):
        for first in found[:i]:
            if _compatible(first, later):
                continue
            if first.kind in ("gpu", "bmc") and later.kind in ("gpu", "bmc"):
                continue  # site.hosts' own check reports these (site_checks)
            issues.append(
                SpecIssue(
                    later.path,
                    f"{address} is already {first.host or 'a storage endpoint'} ({first.path}): two "
                    f"{'hosts' if later.host else 'machines'} cannot share one address",
                    "give each host its own address, or name the same host the same way everywhere",
                )
            )
            break
    return issues


def _compatible(a: _Claim, b: _Claim) -> bool:
    if a.host and a.host == b.host:
        return True  # one host, listed in two sections
    kinds = {a.kind, b.kind}
    return kinds <= {"storage", "service"} and "storage" in kinds
