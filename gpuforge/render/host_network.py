"""A site host's IPoIB addressing as the files it receives: one systemd-networkd unit per storage port.

The same template (gpuforge/assets/playbooks/templates/network/ipoib.network.j2) is what the rdma role writes, from
the inventory's rdma_ipoib_addresses (the plan's storageAddresses of each host)."""

from __future__ import annotations

from collections.abc import Mapping

from .templates import render

IPOIB_TEMPLATE = "network/ipoib.network.j2"


def ipoib_unit_name(interface: str) -> str:
    """The unit's file name under /etc/systemd/network: before netplan's 10-netplan-* files."""
    return f"05-gpuforge-ipoib-{interface}.network"


def render_ipoib(addresses: Mapping[str, str]) -> dict[str, str]:
    """interface -> ip/prefix, as the files /etc/systemd/network receives, by name."""
    return {
        ipoib_unit_name(interface): render(IPOIB_TEMPLATE, ipoib_interface=interface, ipoib_address=address)
        for interface, address in sorted(addresses.items())
    }
