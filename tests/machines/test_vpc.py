"""The VPC's plumbing without booting anything (namespaces and nftables only, seconds): two subnets routed
through the router namespace, each machine's ruleset admitting exactly what it says, and the host (the harness)
reaching the machines only where a ruleset admits it."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import vpc
from .boot import VPC_LEASE, _delete_netns, _netns_name, _take_lease

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("ip") is None or shutil.which("nft") is None,
                       reason="needs ip and nft (apt-get install iproute2 nftables), as root"),
]
CIDR = "10.20.0.0/16"
SERVER, CLIENT = "10.20.128.10", "10.20.0.100"
RULESET = """table inet t {{
  chain input {{
    type filter hook input priority filter; policy drop;
    iif "lo" accept
    ct state established,related accept
    ip saddr {peer} tcp dport 7000 accept
  }}
  chain output {{
    type filter hook output priority filter; policy drop;
    oif "lo" accept
    ct state established,related accept
    meta nfproto ipv4 accept
  }}
}}
"""
HOSTS = [
    vpc.VpcHost("server", SERVER, "10.20.128.0/22", "10.20.128.1", RULESET.format(peer=CLIENT)),
    vpc.VpcHost("client", CLIENT, "10.20.0.0/18", "10.20.0.1", RULESET.format(peer=SERVER)),
]


@pytest.fixture
def two_subnets() -> Iterator[None]:
    lease = _take_lease(VPC_LEASE)
    if lease is None:
        pytest.skip("another session's VPC is up on this host")
    try:
        vpc.make_router(CIDR, HOSTS)
        for index, host in enumerate(HOSTS):
            vpc.attach(_netns_name(host.address), index, host, HOSTS)
        yield
    finally:
        for host in HOSTS:
            _delete_netns(host.address)
        vpc.delete_router(CIDR)
        Path(lease.name).unlink(missing_ok=True)
        lease.close()


def _connects(netns: str | None, address: str, port: int) -> bool:
    probe = ["python3", "-c", f"import socket; socket.create_connection(('{address}', {port}), timeout=3)"]
    command = ["ip", "netns", "exec", netns, *probe] if netns else probe
    return subprocess.run(command, capture_output=True, timeout=30).returncode == 0


def _listening(netns: str) -> str:
    return subprocess.run(["ip", "netns", "exec", netns, "ss", "-Hltn"], capture_output=True, text=True,
                          timeout=30).stdout


def test_a_ruleset_admits_its_peer_across_subnets_and_nothing_else(two_subnets: None) -> None:
    server_ns, client_ns = _netns_name(SERVER), _netns_name(CLIENT)
    listeners = [subprocess.Popen(["ip", "netns", "exec", server_ns, "python3", "-m", "http.server", "--bind",
                                   SERVER, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for port in (7000, 7001)]
    try:
        deadline = time.monotonic() + 30
        while not all(f":{port} " in _listening(server_ns) for port in (7000, 7001)):
            assert time.monotonic() < deadline, _listening(server_ns)
            time.sleep(0.5)
        assert _connects(client_ns, SERVER, 7000)  # routed from the compute subnet to the management one
        assert not _connects(client_ns, SERVER, 7001)  # no rule for that port
        assert not _connects(None, SERVER, 7000)  # the host is no peer of the server's ruleset
        # Replacing the ruleset without the rule closes the port at once.
        vpc.load_ruleset(server_ns, RULESET.format(peer="192.0.2.254"))
        assert not _connects(client_ns, SERVER, 7000)
    finally:
        for listener in listeners:
            listener.terminate()
            listener.wait(timeout=10)
