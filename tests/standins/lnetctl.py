#!/usr/bin/python3
"""gpuforge test stand-in for Lustre's lnetctl (lustre-client-utils): there is no lnet.ko here.

LNet's state, which the kernel module keeps, lives in a state file under /run (gone at reboot, as the
module's state is). `modprobe lnet` stands in for loading the module: the stand-in package's modprobe.d
rule runs `lnetctl --standin-load lnet` (and records kefalnd's ipif_name). The commands the lustre_client
role runs behave as the real ones:

    lnetctl lnet configure             fails until lnet is loaded; brings up the lo network (0@lo)
    lnetctl net add --net N --if I     N tcp or o2ib[N]: I must be a network interface with an IPv4
                                       address (o2iblnd takes the IPoIB interface's); N efa: an RDMA
                                       device whose driver is efa (sysfs); a duplicate is refused (EEXIST)
    lnetctl net del --net N --if I     removes that NI (ENOENT when there is none)
    lnetctl net show [--net N]         the YAML of lustre_lnet_show_net() without --verbose
                                       (lnet/utils/lnetconfig/liblnetconfig.c, lustre/lustre-release):
                                       net: - net type / local NI(s): - nid, status, interfaces: {0: if}
    lnetctl set discovery 0|1          and `lnetctl global show` prints it (global: discovery: N; the
                                       real one prints more keys)
    lnetctl udsp add --src N --priority P   a rule, as lustre_lnet_show_udsp() (liblnetconfig_udsp.c)
    lnetctl udsp show                  prints it: udsp: - idx, src, dst: NA, rte: NA, action: priority

NIDs: tcp and o2ib NIs carry the interface's IPv4 address; efa NIs carry the address of kefalnd's ipif_name
(how kefalnd numbers its NIDs is not modelled: the role and the tests read interfaces, not NIDs).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import struct
import sys
from pathlib import Path
from typing import Any

# LNETCTL_STANDIN_RUN: where the state lives (tests that run this outside a machine point it at a temporary
# directory); LNETCTL_STANDIN_SYSFS: the stand-in sysfs tree of RDMA devices (this host's sysfs has none).
RUN_DIR = Path(os.environ.get("LNETCTL_STANDIN_RUN", "/run/lustre-standin"))
STATE = RUN_DIR / "lnet.json"
# What `modprobe` loaded, one "<module> <options>" line each (the stand-in's /proc/modules).
MODULES = RUN_DIR / "modules"
SYSFS_ROOTS = (Path("/sys"), Path(os.environ.get("LNETCTL_STANDIN_SYSFS", "/var/lib/gpuforge-standin/sysfs")))


def _load() -> dict[str, Any]:
    return json.loads(STATE.read_text()) if STATE.is_file() else {}


def _save(state: dict[str, Any]) -> None:
    STATE.parent.mkdir(parents=True, exist_ok=True)
    STATE.write_text(json.dumps(state))


def _error(command: str, errno: int, descr: str) -> int:
    # liblnetconfig's error tree (cYAML_build_error: "<verb>: - <object>: errno, descr"), on stderr.
    obj, _, verb = command.partition(" ")
    sys.stderr.write(f'{verb or obj}:\n    - {obj}:\n          errno: {errno}\n          descr: "{descr}"\n')
    return 1


def _ipv4(interface: str) -> str | None:
    """The interface's IPv4 address (SIOCGIFADDR), as the LND reads it; None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            request = struct.pack("256s", interface.encode()[:15])
            return socket.inet_ntoa(fcntl.ioctl(sock.fileno(), 0x8915, request)[20:24])
        except OSError:
            return None


def _is_efa(device: str) -> bool:
    for root in SYSFS_ROOTS:
        driver = root / "class/infiniband" / device / "device/driver"
        if driver.exists() and os.path.basename(os.path.realpath(driver)) == "efa":
            return True
    return False


def _opts(args: list[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    key = None
    for arg in args:
        if arg.startswith("--"):
            key = arg[2:]
            opts[key] = ""
        elif key is not None:
            opts[key] = arg
            key = None
    return opts


def _show(state: dict[str, Any], net: str | None) -> int:
    nets = [n for n in state["nets"] if net is None or n["type"] == net]
    if not nets:
        return _error("net show", -2, "cannot get networks: No such file or directory")
    lines = ["net:"]
    for n in nets:
        lines += [f"    - net type: {n['type']}", "      local NI(s):"]
        for ni in n["nis"]:
            lines += [f"        - nid: {ni['nid']}", "          status: up"]
            if ni.get("if"):
                lines += ["          interfaces:", f"              0: {ni['if']}"]
    print("\n".join(lines))
    return 0


def main(argv: list[str]) -> int:
    state = _load()
    if argv[:1] == ["--standin-load"]:  # modprobe's install rule: the module is now loaded
        modules = state.setdefault("modules", {})
        modules[argv[1]] = " ".join(argv[2:])
        _save(state)
        MODULES.write_text("".join(f"{name} {opts}".rstrip() + "\n" for name, opts in modules.items()))
        return 0
    if "lnet" not in state.get("modules", {}):
        sys.stderr.write("opening /dev/lnet failed: No such device\nhint: the lnet module should be loaded\n")
        return 1
    command = " ".join(argv[:2])
    opts = _opts(argv[2:])
    if command == "lnet configure":
        if not state.get("configured"):
            state |= {"configured": True, "discovery": 1, "nets": [{"type": "lo", "nis": [{"nid": "0@lo"}]}]}
            _save(state)
        return 0
    if not state.get("configured"):
        return _error(command, -100, "LNet is not configured: Network is down")
    if command == "net show":
        return _show(state, opts.get("net"))
    if command == "set discovery":
        state["discovery"] = int(argv[2])
        _save(state)
        return 0
    if command == "global show":
        print(f"global:\n    discovery: {state['discovery']}")
        return 0
    if command == "udsp add":
        rules = state.setdefault("udsp", [])
        rules.append({"src": opts.get("src", "NA"), "priority": int(opts.get("priority", "0"))})
        _save(state)
        return 0
    if command == "udsp show":
        lines = ["udsp:"]
        for idx, rule in enumerate(state.get("udsp", [])):
            lines += [f"    - idx: {idx}", f"      src: {rule['src']}", "      dst: NA", "      rte: NA",
                      "      action:", f"          priority: {rule['priority']}"]  # fmt: skip
        print("\n".join(lines) if len(lines) > 1 else "", end="\n" if len(lines) > 1 else "")
        return 0
    if command == "net del":
        net, interface = opts.get("net", ""), opts.get("if", "")
        entry = next((n for n in state["nets"] if n["type"] == net), None)
        kept = [ni for ni in entry["nis"] if ni["if"] != interface] if entry else []
        if entry is None or len(kept) == len(entry["nis"]):
            return _error("net del", -2, "cannot delete network: No such file or directory")
        entry["nis"] = kept
        if not kept:
            state["nets"].remove(entry)
        _save(state)
        return 0
    if command == "net add":
        net, interface = opts.get("net", ""), opts.get("if", "")
        if net == "tcp" or re.fullmatch(r"o2ib\d*", net):
            address = _ipv4(interface)
        elif net == "efa":
            ipif = dict(o.split("=", 1) for o in state["modules"].get("kefalnd", "").split() if "=" in o)
            address = _ipv4(ipif.get("ipif_name", "")) if _is_efa(interface) else None
        else:
            return _error("net add", -22, f"unsupported network type {net}")
        if address is None:
            return _error("net add", -19, f"cannot add network: no such interface {interface}: No such device")
        entry = next((n for n in state["nets"] if n["type"] == net), None)
        if entry is None:
            entry = {"type": net, "nis": []}
            state["nets"].append(entry)
        if any(ni["if"] == interface for ni in entry["nis"]):
            return _error("net add", -17, "cannot add network: File exists")
        entry["nis"].append({"nid": f"{address}@{net}", "if": interface, "peer_credits": opts.get("peer-credits")})
        _save(state)
        return 0
    return _error(command, -22, f"stand-in lnetctl does not implement '{command}'")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
