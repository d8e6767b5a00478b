"""A VPC for booted machines: a subnet per bridge, every machine in a network namespace of its own at its
planned address, and the subnets routed to each other as a VPC's router does.

The VPC router is a network namespace (ROUTER_NETNS) holding each subnet's bridge at the subnet's first host,
the address AWS reserves for the router in every subnet (so no instance ever has it), with forwarding on.
A veth pair joins it to the host: the host's end holds HARNESS_ADDRESS, and the host routes the VPC's CIDR
through it, so SSH and Ansible reach every machine from there and nothing else on the host changes (the host
forwards nothing). Each machine's default route is its subnet's router. Filtering (the security groups) is
each machine's own nftables (tests/bench/plan_network.py), loaded into its namespace before it boots.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

ROUTER_NETNS = "gf-vpc"
HOST_LINK = "gf-vpc0"  # the host's end of its link to the router
HARNESS_ADDRESS = "198.18.255.1"  # RFC 2544's benchmarking range, as tests/machines' own networks
ROUTER_UPLINK = "198.18.255.2"
LINK_PREFIX = 30
TIMEOUT_S = 30


class VpcError(RuntimeError):
    """An ip or nft command that makes the VPC failed."""


@dataclass(frozen=True)
class VpcHost:
    """A machine's place in the VPC: its subnet, its address there and its nftables ruleset."""

    name: str
    address: str
    subnet_cidr: str
    router_address: str  # the subnet's first host
    ruleset: str


def make_router(vpc_cidr: str, hosts: list[VpcHost]) -> None:
    """The router namespace, a bridge per subnet of *hosts*, and the host's route to *vpc_cidr* through it."""
    missing = [tool for tool, package in (("ip", "iproute2"), ("nft", "nftables")) if shutil.which(tool) is None]
    if missing:
        raise VpcError(f"a VPC needs {' and '.join(missing)} on this host (apt-get install iproute2 nftables)")
    _run("ip", "netns", "add", ROUTER_NETNS)
    _in_router("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    _in_router("ip", "link", "set", "lo", "up")
    _run("ip", "link", "add", HOST_LINK, "type", "veth", "peer", "name", "uplink", "netns", ROUTER_NETNS)
    _run("ip", "addr", "add", f"{HARNESS_ADDRESS}/{LINK_PREFIX}", "dev", HOST_LINK)
    _run("ip", "link", "set", HOST_LINK, "up")
    _in_router("ip", "addr", "add", f"{ROUTER_UPLINK}/{LINK_PREFIX}", "dev", "uplink")
    _in_router("ip", "link", "set", "uplink", "up")
    _in_router("ip", "route", "add", "default", "via", HARNESS_ADDRESS)
    for cidr, router in sorted({(h.subnet_cidr, h.router_address) for h in hosts}):
        bridge = _bridge(cidr, hosts)
        _in_router("ip", "link", "add", "name", bridge, "type", "bridge")
        _in_router("ip", "addr", "add", f"{router}/{cidr.split('/')[1]}", "dev", bridge)
        _in_router("ip", "link", "set", bridge, "up")
    _run("ip", "route", "add", vpc_cidr, "via", ROUTER_UPLINK, "dev", HOST_LINK)


def attach(netns: str, index: int, host: VpcHost, hosts: list[VpcHost]) -> None:
    """*host*'s namespace *netns*: eth0 at its address on its subnet's bridge, its default route the subnet's
    router, and its security groups' ruleset. Made before it boots, so sshd finds its address there."""
    port = f"m{index}"
    _run("ip", "netns", "add", netns)
    _in_router("ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", netns)
    _in_router("ip", "link", "set", port, "master", _bridge(host.subnet_cidr, hosts), "up")
    prefix = host.subnet_cidr.split("/")[1]
    _run("ip", "-n", netns, "addr", "add", f"{host.address}/{prefix}", "dev", "eth0")
    _run("ip", "-n", netns, "link", "set", "eth0", "up")
    _run("ip", "-n", netns, "link", "set", "lo", "up")
    _run("ip", "-n", netns, "route", "add", "default", "via", host.router_address)
    load_ruleset(netns, host.ruleset)


def load_ruleset(netns: str, ruleset: str) -> None:
    """Replace the nftables ruleset of *netns* with *ruleset* (atomically: nft applies a file as one transaction)."""
    _run("ip", "netns", "exec", netns, "nft", "-f", "-", stdin="flush ruleset\n" + ruleset)


def delete_router(vpc_cidr: str) -> None:
    """The host's route and link, and the router namespace with its bridges (gone with the namespace)."""
    subprocess.run(["ip", "route", "del", vpc_cidr], capture_output=True, timeout=TIMEOUT_S)
    subprocess.run(["ip", "link", "del", HOST_LINK], capture_output=True, timeout=TIMEOUT_S)
    subprocess.run(["ip", "netns", "delete", ROUTER_NETNS], capture_output=True, timeout=TIMEOUT_S)


def _bridge(cidr: str, hosts: list[VpcHost]) -> str:
    return f"br{sorted({h.subnet_cidr for h in hosts}).index(cidr)}"


def _in_router(*args: str) -> None:
    _run("ip", "netns", "exec", ROUTER_NETNS, *args)


def _run(*args: str, stdin: str | None = None) -> None:
    try:
        subprocess.run(args, check=True, capture_output=True, text=True, timeout=TIMEOUT_S, input=stdin)
    except subprocess.CalledProcessError as exc:
        raise VpcError(f"{' '.join(args)}: {exc.stderr.strip()}") from None
