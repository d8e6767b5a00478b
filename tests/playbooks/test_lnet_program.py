"""gpuforge-lnet (the lustre_client role's boot-time LNet configuration) against the stand-in lnetctl: what
it configures on an EFA node and on a node without EFA, that a second run changes nothing, that a boot
(LNet's state gone) brings the same configuration back, and that it fails with the reason when it cannot.

The booted site test runs the same program through its systemd unit at boot (test_site_booted.py)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "gpuforge" / "assets" / "playbooks" / "roles" / "lustre_client" / "files" / "gpuforge-lnet"
LNETCTL = ROOT / "tests" / "standins" / "lnetctl.py"
# A p5's 32 EFA devices and a ConnectX port, as the booted site test lays them out.
EFA_DEVICES = [f"rdmap{bus}s0" for bus in range(10, 42)]
# The default route's interface: loopback, so the stand-in finds its IPv4 address on any host.
ROUTES = "Iface\tDestination\tGateway\tFlags\nlo\t00000000\t0101007F\t0003\n"


@dataclass
class Node:
    tmp: Path
    sysfs: Path
    run_dir: Path
    bin: Path

    def env(self) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "LNETCTL_STANDIN_RUN": str(self.run_dir),
                "LNETCTL_STANDIN_SYSFS": str(self.sysfs)}  # fmt: skip

    def program(self, *args: str, routes: str = ROUTES) -> subprocess.CompletedProcess[str]:
        route_file = self.tmp / "route"
        route_file.write_text(routes)
        argv = [sys.executable, str(PROGRAM), "--sysfs", str(self.sysfs), "--route-file", str(route_file),
                "--lnetctl", str(self.bin / "lnetctl"), "--modprobe", str(self.bin / "modprobe"), *args]  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, env=self.env(), timeout=60)

    def lnetctl(self, *args: str) -> Any:
        out = subprocess.run([str(self.bin / "lnetctl"), *args], capture_output=True, text=True, env=self.env(),
                             check=True, timeout=30).stdout  # fmt: skip
        return yaml.safe_load(out)

    def nets(self) -> dict[str, list[str]]:
        return {
            net["net type"]: [i for ni in net["local NI(s)"] for i in (ni.get("interfaces") or {}).values()]
            for net in self.lnetctl("net", "show")["net"]
        }

    def modules(self) -> str:
        return (self.run_dir / "modules").read_text()

    def boot(self) -> None:
        """What a reboot does to LNet: the kernel's configuration (the stand-in's state) is gone."""
        for path in self.run_dir.iterdir():
            path.unlink()


def _node(tmp: Path, devices: list[str]) -> Node:
    sysfs, run_dir, bin_dir = tmp / "sys", tmp / "run", tmp / "bin"
    for d in (sysfs / "bus/pci/drivers/efa", sysfs / "bus/pci/drivers/mlx5_core", sysfs / "class/infiniband", bin_dir):
        d.mkdir(parents=True)
    for slot, device in enumerate(devices):
        pci = sysfs / f"devices/pci0000:00/0000:00:{slot:02x}.0"
        (pci / "infiniband" / device).mkdir(parents=True)
        (pci / "driver").symlink_to(sysfs / "bus/pci/drivers" / ("mlx5_core" if device.startswith("mlx5") else "efa"))
        (pci / "infiniband" / device / "device").symlink_to(pci)
        (sysfs / "class/infiniband" / device).symlink_to(pci / "infiniband" / device)
    # lnetctl is the stand-in; modprobe does what the stand-in package's modprobe.d install rules do.
    (bin_dir / "lnetctl").write_text(f'#!/bin/sh\nexec {sys.executable} {LNETCTL} "$@"\n')
    (bin_dir / "modprobe").write_text(f'#!/bin/sh\nm=$1; shift\nexec {bin_dir}/lnetctl --standin-load "$m" "$@"\n')
    for tool in ("lnetctl", "modprobe"):
        (bin_dir / tool).chmod(0o755)
    return Node(tmp, sysfs, run_dir, bin_dir)


@pytest.fixture
def efa_node(tmp_path: Path) -> Node:
    return _node(tmp_path, [*EFA_DEVICES, "mlx5_0"])


def test_efa_node_gets_tcp_efa_discovery_and_the_efa_preference(efa_node: Node) -> None:
    first = efa_node.program("--efa-interfaces", "8", "--peer-credits", "32")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("changed: lnet configured; tcp on lo; efa on rdmap10s0")
    # Every fourth of the 32 EFA devices (FSx's 8 for a p5); the ConnectX port is no EFA device.
    assert efa_node.nets() == {"lo": [], "tcp": ["lo"], "efa": EFA_DEVICES[::4]}
    assert "kefalnd ipif_name=lo" in efa_node.modules()
    assert efa_node.lnetctl("global", "show")["global"]["discovery"] == 1
    assert efa_node.lnetctl("udsp", "show")["udsp"] == [
        {"idx": 0, "src": "efa", "dst": "NA", "rte": "NA", "action": {"priority": 0}}
    ]
    state = (efa_node.run_dir / "lnet.json").read_text()
    again = efa_node.program("--efa-interfaces", "8", "--peer-credits", "32")
    assert again.returncode == 0 and again.stdout.startswith("unchanged"), again.stdout + again.stderr
    assert (efa_node.run_dir / "lnet.json").read_text() == state  # one udsp rule, no NI added twice


def test_a_boot_brings_the_same_configuration_back(efa_node: Node) -> None:
    assert efa_node.program("--efa-interfaces", "8").returncode == 0
    before = (efa_node.nets(), efa_node.lnetctl("udsp", "show"))
    efa_node.boot()
    assert efa_node.program("--efa-interfaces", "8").returncode == 0
    assert (efa_node.nets(), efa_node.lnetctl("udsp", "show")) == before


def test_fewer_efa_interfaces_removes_the_others(efa_node: Node) -> None:
    assert efa_node.program("--efa-interfaces", "8").returncode == 0
    fewer = efa_node.program("--efa-interfaces", "2")
    assert fewer.returncode == 0, fewer.stderr
    assert efa_node.nets()["efa"] == [EFA_DEVICES[0], EFA_DEVICES[16]]


def test_node_without_efa_falls_back_to_tcp(tmp_path: Path) -> None:
    node = _node(tmp_path, ["mlx5_0"])
    result = node.program("--efa-interfaces", "8")
    assert result.returncode == 0, result.stderr
    assert node.nets() == {"lo": [], "tcp": ["lo"]}
    assert "kefalnd" not in node.modules()
    assert node.lnetctl("udsp", "show") is None  # no efa network, no preference for it


def test_without_a_default_route_it_fails_with_the_reason(efa_node: Node) -> None:
    result = efa_node.program("--efa-interfaces", "8", routes="Iface\tDestination\n")
    assert result.returncode == 1
    assert "no IPv4 default route" in result.stderr


def test_discovery_off_when_asked(efa_node: Node) -> None:
    assert efa_node.program("--efa-interfaces", "1", "--discovery", "0").returncode == 0
    assert efa_node.lnetctl("global", "show")["global"]["discovery"] == 0


def test_site_o2ib_network_on_its_ipoib_interface_and_back_after_a_boot(efa_node: Node) -> None:
    """A site's Lustre over InfiniBand (no EFA-enabled file system: --efa-interfaces 0): o2ib on the declared
    interface (here loopback, the one interface with an IPv4 address on every host; the booted site test gives
    its machines an ib0), ko2iblnd loaded, no efa network; a second run changes nothing, a boot brings it back."""
    args = ("--efa-interfaces", "0", "--ib-net", "o2ib=lo")
    first = efa_node.program(*args)
    assert first.returncode == 0, first.stderr
    assert "o2ib on lo" in first.stdout
    assert efa_node.nets() == {"lo": [], "tcp": ["lo"], "o2ib": ["lo"]}
    assert "ko2iblnd" in efa_node.modules() and "kefalnd" not in efa_node.modules()
    again = efa_node.program(*args)
    assert again.returncode == 0 and again.stdout.startswith("unchanged"), again.stdout + again.stderr
    efa_node.boot()
    assert efa_node.program(*args).returncode == 0
    assert efa_node.nets() == {"lo": [], "tcp": ["lo"], "o2ib": ["lo"]}


def test_efa_and_a_site_o2ib_network_together(efa_node: Node) -> None:
    result = efa_node.program("--efa-interfaces", "8", "--ib-net", "o2ib1=lo")
    assert result.returncode == 0, result.stderr
    assert efa_node.nets() == {"lo": [], "tcp": ["lo"], "efa": EFA_DEVICES[::4], "o2ib1": ["lo"]}


def test_an_ipoib_interface_that_is_not_there_fails_with_the_reason(efa_node: Node) -> None:
    result = efa_node.program("--efa-interfaces", "0", "--ib-net", "o2ib=ib9")
    assert result.returncode == 1
    assert "net add --net o2ib --if ib9" in result.stderr and "no such interface ib9" in result.stderr


@pytest.mark.parametrize("value", ["o2ib", "tcp=eth0", "o2ib="])
def test_an_ib_net_not_of_the_form_net_equals_interfaces_is_refused(efa_node: Node, value: str) -> None:
    result = efa_node.program("--ib-net", value)
    assert result.returncode == 2 and "write NET=IF[,IF...], e.g. o2ib=ib0" in result.stderr
