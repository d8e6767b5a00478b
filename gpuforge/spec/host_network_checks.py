"""A site host's network as its model is built: compute HCAs, storage ports, IPoIB addresses, LNet NIDs.

The catalog holds each server model's port table (gpuforge/catalog/data/facts.yaml, `network_ports`, with its
source): which ConnectX ports carry the compute fabric (one per GPU, rail order), which the storage fabric and
which in-band management, with their default RDMA device and Linux interface names. From it:

- a host's `hcas` may list compute ports only: a storage or management port listed as a rail puts NCCL's
  traffic on the wrong card and leaves a GPU's own rail card idle;
- a host's `storage_ips` pair with its model's storage ports in the table's order: they are the IPoIB
  addresses gpuforge renders (gpuforge/render/host_network.py) and the host's LNet NIDs on o2ib;
- an o2ib Lustre mount runs LNet on the hosts' storage ports (or on the `lnet_interfaces` it lists, which must
  be storage ports of every model that has a port table), and its MGS NIDs are on the storage network.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from typing import TYPE_CHECKING

from gpuforge.catalog import NetworkPort, ServerModel

from .errors import SpecIssue
from .site import LustreMount, Site

if TYPE_CHECKING:  # site_checks imports this module
    from .resolved_site import ResolvedHost

SITE = "cluster.site"


def storage_ports(server: ServerModel) -> tuple[NetworkPort, ...]:
    return server.ports("storage")


def o2ib_mounts(site: Site) -> dict[str, LustreMount]:
    return {
        key: mount
        for key, mount in site.storage.mounts.items()
        if isinstance(mount, LustreMount) and mount.lnet.startswith("o2ib")
    }


def lnet_interfaces(mount: LustreMount, server: ServerModel) -> list[str]:
    """The interfaces a host of this model runs the mount's o2ib network on: the mount's list, else the
    model's storage ports."""
    return list(mount.lnet_interfaces) or [p.interface for p in storage_ports(server)]


def host_storage_addresses(site: Site, host: ResolvedHost) -> dict[str, str]:
    """Storage interface -> address (ip/prefix) on the site's storage network: the IPoIB addressing."""
    network = site.storage.network
    if network is None:
        return {}
    prefix = ipaddress.ip_network(network.cidr).prefixlen
    ports = storage_ports(host.server)
    return {port.interface: f"{ip}/{prefix}" for port, ip in zip(ports, host.spec.storage_ips, strict=False)}


def host_lnet(site: Site, host: ResolvedHost) -> dict[str, dict[str, list[str]]]:
    """Per o2ib network of the site's Lustre: the interfaces LNet runs on and the host's NIDs there (the
    storage addresses of those interfaces, `<address>@<net>`)."""
    addresses = host_storage_addresses(site, host)
    out: dict[str, dict[str, list[str]]] = {}
    for mount in o2ib_mounts(site).values():
        net = out.setdefault(mount.lnet, {"interfaces": [], "nids": []})
        for interface in lnet_interfaces(mount, host.server):
            if interface in net["interfaces"]:
                continue
            net["interfaces"].append(interface)
            if interface in addresses:
                net["nids"].append(f"{addresses[interface].split('/')[0]}@{mount.lnet}")
    return out


def check_host_network(site: Site, hosts: dict[str, ResolvedHost]) -> list[SpecIssue]:
    """Every problem of the hosts' ports, storage addresses and LNet interfaces, at once."""
    return _check_compute_ports(hosts) + _check_storage_ips(site, hosts) + _check_lnet(site, hosts)


def _port_list(ports: tuple[NetworkPort, ...]) -> str:
    return ", ".join(
        f"{p.device} (rail {p.rail})" if p.rail is not None else f"{p.interface} ({p.label}, {p.device})" for p in ports
    )


def _check_compute_ports(hosts: dict[str, ResolvedHost]) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    for name, host in sorted(hosts.items()):
        server = host.server
        if not server.network_ports:
            continue  # no port table: the host's own list stands (hgx-h100-8gpu: the vendor's layout)
        by_device = {p.device: p for p in server.network_ports}
        compute = server.ports("compute")
        for device in host.spec.hcas:
            port = by_device.get(device.split(":")[0])
            if port is not None and port.role == "compute":
                continue
            what = f"its {port.role} port {port.label} ({port.interface})" if port else "not one of its ports"
            issues.append(
                SpecIssue(
                    f"{SITE}.hosts[{name}].hcas[{device}]",
                    f"{device} is {what} on a {host.spec.model}, not a compute-fabric port: NCCL would send rail "
                    f"traffic through it and leave a GPU's own rail card idle; the compute ports are "
                    f"{_port_list(compute)} ({server.network_ports_source})",
                    "remove hcas to take the catalog's compute ports in rail order, or list only those ports",
                )
            )
    return issues


def _check_storage_ips(site: Site, hosts: dict[str, ResolvedHost]) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    network = site.storage.network
    cidr = ipaddress.ip_network(network.cidr) if network else None
    seen: dict[str, str] = {}
    needs_addresses = bool(o2ib_mounts(site)) and cidr is not None
    for name, host in sorted(hosts.items()):
        path = f"{SITE}.hosts[{name}].storage_ips"
        ips = host.spec.storage_ips
        ports = storage_ports(host.server)
        if ips and cidr is None:
            issues.append(
                SpecIssue(path, "storage addresses without a storage network", "add site.storage.network: {cidr: ...}")
            )
            continue
        if ips and not ports:
            issues.append(
                SpecIssue(
                    path,
                    f"the catalog has no storage ports for {host.spec.model} to put {', '.join(ips)} on",
                    f"add network_ports for {host.spec.model} to the catalog (catalog overrides), or remove them",
                )
            )
            continue
        if ports and (ips or needs_addresses) and len(ips) != len(ports):
            issues.append(
                SpecIssue(
                    path,
                    f"{len(ips)} address(es) for the {len(ports)} storage ports of a {host.spec.model} "
                    f"({_port_list(ports)}): each needs its IPoIB address, which is also its LNet NID on o2ib "
                    f"({host.server.network_ports_source})",
                    f"list {len(ports)} addresses in {network.cidr if network else 'site.storage.network'}, "
                    f"one per port in that order",
                )
            )
        for i, ip in enumerate(ips):
            if cidr is not None and ipaddress.ip_address(ip) not in cidr:
                issues.append(
                    SpecIssue(f"{path}[{i}]", f"{ip} is not in the storage network {cidr}", f"use an address in {cidr}")
                )
            if ip in seen:
                issues.append(SpecIssue(f"{path}[{i}]", f"{ip} is already {seen[ip]}'s", "give every port its own"))
            seen.setdefault(ip, name)
    return issues


def _check_lnet(site: Site, hosts: dict[str, ResolvedHost]) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    network = site.storage.network
    cidr = ipaddress.ip_network(network.cidr) if network else None
    for key, mount in sorted(o2ib_mounts(site).items()):
        path = f"{SITE}.storage.mounts[{key}]"
        by_model: dict[str, list[str]] = defaultdict(list)
        for name, host in sorted(hosts.items()):
            by_model[host.spec.model].append(name)
        for model, names in sorted(by_model.items()):
            server = hosts[names[0]].server
            ports = storage_ports(server)
            if not ports and not mount.lnet_interfaces:
                issues.append(
                    SpecIssue(
                        f"{path}.lnet_interfaces",
                        f"the catalog has no storage ports for {model} ({', '.join(names)}), so nothing says which "
                        f"interfaces LNet's {mount.lnet} network runs on: without it they have no route to "
                        f"{', '.join(mount.mgs_nids)}",
                        f"list the hosts' IPoIB interfaces, e.g. lnet_interfaces: [ib0], or add network_ports for "
                        f"{model} to the catalog",
                    )
                )
            known = {p.interface for p in ports}
            for i, interface in enumerate(mount.lnet_interfaces):
                if ports and interface not in known:
                    issues.append(
                        SpecIssue(
                            f"{path}.lnet_interfaces[{i}]",
                            f"{interface} is not a storage port of {model} ({', '.join(names)}); its storage ports "
                            f"are {_port_list(ports)} ({server.network_ports_source})",
                            "remove lnet_interfaces (LNet then runs on the model's storage ports), or list some of "
                            + ", ".join(sorted(known)),
                        )
                    )
        for i, nid in enumerate(mount.mgs_nids):
            address = nid.rpartition("@")[0]
            try:
                ip = ipaddress.ip_address(address)
            except ValueError:
                continue  # a host name: resolved by the site's DNS
            if cidr is not None and ip not in cidr:
                issues.append(
                    SpecIssue(
                        f"{path}.mgs_nids[{i}]",
                        f"{nid} is not on the storage network {cidr}: o2ib reaches a peer through its IPoIB address",
                        f"use the MGS's address in {cidr}, or fix site.storage.network.cidr",
                    )
                )
    return issues
