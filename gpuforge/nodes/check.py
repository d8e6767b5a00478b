"""``gpuforge check STACK``: run healthcheck.yml, parse what every node reported, name the failing
nodes and (optionally) drain them from the scheduler."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from gpuforge.nodes.bake import (
    EventHandler,
    Inventories,
    Inventory,
    PlaybookResult,
    parse_target,
    rootfs_inventory,
    run_playbook,
)
from gpuforge.nodes.health import DEFAULT_FLOOR_FRACTION, NodeExpectations, NodeHealth, evaluate_node
from gpuforge.nodes.inventory import build_inventory, node_group_vars

DrainMethod = Literal["none", "slurm", "kubernetes"]
ALL_CHECKS = ("gpu", "dcgm", "nvlink", "xid", "fabric", "nccl")


@dataclass
class CheckReport:
    nodes: list[NodeHealth]
    playbook: PlaybookResult
    drain_commands: list[list[str]] = field(default_factory=list)
    # The Slurm drain run on the controller (slurm-drain.yml), when --execute-drain asked for one.
    drain: PlaybookResult | None = None

    @property
    def failing(self) -> list[str]:
        return sorted(node.host for node in self.nodes if not node.healthy)

    @property
    def ok(self) -> bool:
        """Every checked node healthy, and at least one checked: zero hosts checked proves nothing."""
        return bool(self.nodes) and not self.failing and self.playbook.ok and (self.drain is None or self.drain.ok)

    @property
    def reason(self) -> str | None:
        """Why the report is not ok, in one sentence (None when it is)."""
        if not self.nodes:
            return "no host was checked: the inventory matched no GPU node (gpu_nodes), so nothing is proven healthy"
        if self.failing:
            why = "; ".join(
                f"{node.host}: {', '.join(node.problems)}" for node in self.nodes if not node.healthy
            )
            return f"{len(self.failing)} of {len(self.nodes)} node(s) failing: {why}"
        if not self.playbook.ok:
            return f"healthcheck.yml failed ({self.playbook.status}, rc {self.playbook.rc})"
        if self.drain is not None and not self.drain.ok:
            return f"slurm-drain.yml failed on the controller ({self.drain.status}, rc {self.drain.rc})"
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "reason": self.reason,
            "checked": len(self.nodes),
            "failing": self.failing,
            "nodes": {
                node.host: {"healthy": node.healthy, "problems": node.problems, "busbw_gbps": node.busbw_gbps}
                for node in self.nodes
            },
            "drain_commands": self.drain_commands,
            "drained": None if self.drain is None else self.drain.ok,
        }


def _host_vars(inventory: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Variables of every host of a YAML inventory dict: all vars < group vars < host vars."""
    result: dict[str, dict[str, Any]] = {}

    def walk(group: Mapping[str, Any], inherited: dict[str, Any]) -> None:
        merged = {**inherited, **(group.get("vars") or {})}
        for host, hvars in (group.get("hosts") or {}).items():
            result.setdefault(host, {}).update({**merged, **(hvars or {})})
        for child in (group.get("children") or {}).values():
            walk(child or {}, merged)

    for root in inventory.values():
        walk(root, {})
    return result


def expectations_from_vars(hostvars: Mapping[str, Any]) -> NodeExpectations:
    """The same expectations the gpu_healthcheck role judges with (its gpu_healthcheck_* variables)."""
    floor = hostvars.get("gpu_healthcheck_busbw_floor_gbps")
    return NodeExpectations(
        gpus=int(hostvars.get("gpu_healthcheck_expected_gpus", 8)),
        driver_branch=str(hostvars["nvidia_driver_branch"]) if hostvars.get("nvidia_driver_branch") else None,
        fabric=str(hostvars.get("gpu_healthcheck_fabric", "none")),
        efa_devices=int(hostvars.get("gpu_healthcheck_expected_efa", 0)),
        ib_hcas=tuple(hostvars.get("gpu_healthcheck_ib_hcas") or ()),
        nvlinks_per_gpu=int(hostvars.get("gpu_healthcheck_nvlinks_per_gpu", 0)),
        busbw_floor_gbps=float(floor) if floor is not None else None,
    )


def drain_reason(node: NodeHealth) -> str:
    """The reason Slurm shows (``sinfo -R``) for a node gpuforge drained."""
    return f"gpuforge check: {'; '.join(node.problems)}"[:200]


def _role_failures(host_dir: Path) -> list[str]:
    """The problems the gpu_healthcheck role recorded for one node (its failures.json), if any."""
    path = host_dir / "failures.json"
    if not path.is_file():
        return []
    try:
        failures = json.loads(path.read_text())
    except json.JSONDecodeError:
        return []
    return [str(item) for item in failures] if isinstance(failures, list) else []


def drain_commands(nodes: list[NodeHealth], method: DrainMethod) -> list[list[str]]:
    """Commands that take the unhealthy nodes out of service (Slurm drain, or Kubernetes cordon+drain)."""
    commands: list[list[str]] = []
    for node in nodes:
        if node.healthy:
            continue
        reason = drain_reason(node)
        if method == "slurm":
            commands.append(["scontrol", "update", f"nodename={node.host}", "state=drain", f"reason={reason}"])
        elif method == "kubernetes":
            commands.append(["kubectl", "cordon", node.host])
            commands.append(
                ["kubectl", "drain", node.host, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=10m"]
            )
    return commands


def drain_in_slurm(nodes: list[NodeHealth], inventory: Inventories, **run_args: Any) -> PlaybookResult:
    """Drain the unhealthy *nodes* in the running Slurm controller: slurm-drain.yml runs scontrol on the
    inventory's slurm_controller host, where the cluster's configuration and MUNGE key are."""
    failing = [{"host": node.host, "reason": drain_reason(node)} for node in nodes if not node.healthy]
    result = run_playbook("slurm-drain.yml", inventory, extravars={"slurm_drain_nodes": failing}, **run_args)
    if not result.hosts:
        raise ValueError("--drain slurm: the inventory has no slurm_controller host to run scontrol on")
    return result


def inventory_hostvars(inventory: Inventories) -> dict[str, dict[str, Any]]:
    """Every host's variables as Ansible merges them (all < groups < hosts, later sources win)."""
    if isinstance(inventory, Mapping):
        return _host_vars(inventory)
    sources: list[Inventory] = [inventory] if isinstance(inventory, Path) else list(inventory)
    with tempfile.TemporaryDirectory(prefix="gpuforge-hostvars-") as tmp:
        command = [str(Path(sys.executable).parent / "ansible-inventory"), "--list"]
        for index, source in enumerate(sources):
            if isinstance(source, Path):
                command += ["-i", str(source.resolve())]
            else:
                file = Path(tmp) / f"inventory-{index}.yml"
                file.write_text(yaml.safe_dump(dict(source), sort_keys=False))
                command += ["-i", str(file)]
        listing = subprocess.run(command, capture_output=True, text=True, check=False)
    if listing.returncode != 0:
        raise ValueError(f"cannot read the inventory: {listing.stderr.strip()}")
    hostvars = json.loads(listing.stdout).get("_meta", {}).get("hostvars") or {}
    return {host: dict(hvars) for host, hvars in hostvars.items()}


def run_checks(
    inventory: Inventories,
    *,
    checks: tuple[str, ...] = ALL_CHECKS,
    dcgm_level: int = 2,
    limit: str | None = None,
    drain: DrainMethod = "none",
    execute_drain: bool = False,
    on_event: EventHandler | None = None,
    runner: Callable[..., Any] = subprocess.run,
    forks: int | None = None,
    user: str | None = None,
    private_key: Path | None = None,
) -> CheckReport:
    """Run healthcheck.yml on *inventory*, judge every node from its raw outputs, and drain if asked."""
    unknown = set(checks) - set(ALL_CHECKS)
    if unknown:
        raise ValueError(f"unknown checks {sorted(unknown)}; choose from {', '.join(ALL_CHECKS)}")
    if dcgm_level not in (1, 2, 3, 4):
        raise ValueError(f"DCGM diagnostic level must be 1-4, not {dcgm_level}")
    hostvars = inventory_hostvars(inventory)
    with tempfile.TemporaryDirectory(prefix="gpuforge-check-") as fetch:
        result = run_playbook(
            "healthcheck.yml",
            inventory,
            extravars={
                "gpu_healthcheck_fetch_dir": fetch,
                "gpu_healthcheck_checks": list(checks),
                "gpu_healthcheck_dcgm_level": dcgm_level,
            },
            limit=limit,
            on_event=on_event,
            forks=forks,
            user=user,
            private_key=private_key,
        )
        nodes: list[NodeHealth] = []
        for host in sorted(set(result.hosts) | {p.name for p in Path(fetch).iterdir()}):
            outputs = {
                path.name: path.read_text(errors="replace")
                for path in (Path(fetch) / host).glob("*")
                if path.name != "failures.json"
            }
            health = evaluate_node(host, outputs, expectations_from_vars(hostvars.get(host, {})))
            # The role's own verdicts come first: they also say why a tool gave no output at all
            # (nvidia-smi missing, nccl-tests not built), which the parsers cannot know.
            health.problems[:0] = [p for p in _role_failures(Path(fetch) / host) if p not in health.problems]
            summary = result.hosts.get(host)
            if summary and summary.unreachable:
                health.problems.insert(0, "unreachable")
            elif summary and summary.failed and not health.problems:
                # The role failed the node for a reason the parsers did not restate: keep Ansible's words.
                health.problems.extend(f.message for f in result.failures if f.host == host)
            nodes.append(health)
    report = CheckReport(nodes=nodes, playbook=result, drain_commands=drain_commands(nodes, drain))
    if execute_drain and report.failing:
        if drain == "slurm":
            report.drain = drain_in_slurm(
                nodes, inventory, on_event=on_event, forks=forks, user=user, private_key=private_key
            )
        else:
            for command in report.drain_commands:
                runner(command, check=True)
    return report


def check(
    stack: str,
    *,
    target: str = "hosts",
    node_group: str | None = None,
    checks: tuple[str, ...] = ALL_CHECKS,
    dcgm_level: int = 2,
    floor_fraction: float = DEFAULT_FLOOR_FRACTION,
    limit: str | None = None,
    drain: DrainMethod = "none",
    execute_drain: bool = False,
    on_event: EventHandler | None = None,
    inventory_files: tuple[Path, ...] | list[Path] = (),
    forks: int | None = None,
    user: str | None = None,
    private_key: Path | None = None,
) -> CheckReport:
    """``gpuforge check STACK``: the stack's nodes (plus hosts from *inventory_files*, merged over the
    stack's groups as ``gpuforge bake`` does), or one root file system, as a dry run of the checks."""

    for path in inventory_files:
        if not path.exists():
            raise FileNotFoundError(f"--inventory {path}: no such file or directory")
    stack_inventory = build_inventory(stack, floor_fraction=floor_fraction)
    kind, rootfs = parse_target(target)
    inventory: Inventories = stack_inventory
    if kind == "rootfs":
        assert rootfs is not None
        inventory = rootfs_inventory(rootfs, node_group_vars(stack_inventory, node_group))
    elif inventory_files:
        inventory = [stack_inventory, *inventory_files]
    return run_checks(
        inventory,
        checks=checks,
        dcgm_level=dcgm_level,
        limit=limit,
        drain=drain,
        execute_drain=execute_drain,
        on_event=on_event,
        forks=forks,
        user=user,
        private_key=private_key,
    )
