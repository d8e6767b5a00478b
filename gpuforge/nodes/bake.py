"""Run gpuforge's playbooks through ansible-runner: progress events and a per-host summary.

``run_playbook`` is the driver every command uses (bake, check, the tests); ``bake`` adds what
``gpuforge bake STACK`` needs: the inventory from the stack, or a root file system as the target
(``--target rootfs:PATH``, through the community.general.chroot connection, as an image build does).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.assets import PLAYBOOKS_DIR

EventHandler = Callable[[dict[str, Any]], None]


@dataclass
class HostSummary:
    """Task results of one host, as Ansible's PLAY RECAP counts them."""

    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0


@dataclass
class TaskFailure:
    host: str
    task: str
    message: str


@dataclass
class PlaybookResult:
    """Outcome of one playbook run."""

    playbook: str
    status: str
    rc: int
    hosts: dict[str, HostSummary] = field(default_factory=dict)
    failures: list[TaskFailure] = field(default_factory=list)
    stdout: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not any(h.failed or h.unreachable for h in self.hosts.values())

    @property
    def changed(self) -> int:
        return sum(h.changed for h in self.hosts.values())

    @property
    def failed_hosts(self) -> list[str]:
        return sorted(name for name, h in self.hosts.items() if h.failed or h.unreachable)

    def summary_rows(self) -> list[tuple[str, int, int, int, int, int]]:
        """(host, ok, changed, failed, unreachable, skipped) rows, sorted by host."""
        return [(name, h.ok, h.changed, h.failed, h.unreachable, h.skipped) for name, h in sorted(self.hosts.items())]


def _failure_message(res: Mapping[str, Any]) -> str:
    for key in ("msg", "stderr", "stdout", "reason"):
        value = res.get(key)
        if value:
            return str(value).strip()
    return "failed"


def _summarise(stats: Mapping[str, Any] | None) -> dict[str, HostSummary]:
    hosts: dict[str, HostSummary] = {}
    if not stats:
        return hosts
    for stat_key, attr in (
        ("ok", "ok"),
        ("changed", "changed"),
        ("failures", "failed"),
        ("dark", "unreachable"),
        ("skipped", "skipped"),
    ):
        for host, count in (stats.get(stat_key) or {}).items():
            setattr(hosts.setdefault(host, HostSummary()), attr, int(count))
    for host in stats.get("processed") or {}:
        hosts.setdefault(host, HostSummary())
    return hosts


def resolve_playbook(playbook: str | Path) -> Path:
    """A playbook name (``bake-image.yml``) or path, as an absolute path."""
    path = Path(playbook)
    if not path.is_absolute() and not path.exists():
        path = PLAYBOOKS_DIR / path
    if not path.is_file():
        raise FileNotFoundError(f"playbook {playbook} not found (looked in {PLAYBOOKS_DIR})")
    return path.resolve()


def run_playbook(
    playbook: str | Path,
    inventory: Mapping[str, Any] | Path,
    *,
    extravars: Mapping[str, Any] | None = None,
    limit: str | None = None,
    check: bool = False,
    on_event: EventHandler | None = None,
    private_data_dir: Path | None = None,
    verbosity: int = 0,
) -> PlaybookResult:
    """Run *playbook* against *inventory* (a YAML inventory dict or a file) with ansible-runner."""
    import ansible_runner  # type: ignore[import-untyped]  # imported late: plans need no Ansible

    playbook_path = resolve_playbook(playbook)
    failures: list[TaskFailure] = []

    def handle(event: dict[str, Any]) -> bool:
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            failures.append(
                TaskFailure(
                    host=str(data.get("host", "?")),
                    task=str(data.get("task", "?")),
                    message=_failure_message(data.get("res") or {}),
                )
            )
        if on_event is not None:
            on_event(event)
        return True

    cmdline: list[str] = []
    if check:
        cmdline.append("--check")
    if verbosity:
        cmdline.append("-" + "v" * verbosity)
    env = {
        # ansible-playbook from the same environment as this Python (a venv need not be activated).
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_NOCOLOR": "True",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_ROLES_PATH": str(PLAYBOOKS_DIR / "roles"),
    }
    with tempfile.TemporaryDirectory(prefix="gpuforge-runner-") as tmp:
        pdd = Path(private_data_dir or tmp)
        pdd.mkdir(parents=True, exist_ok=True)
        if isinstance(inventory, Path):
            inventory_arg = str(inventory.resolve())
        else:
            inv_file = pdd / "inventory.yml"
            inv_file.write_text(yaml.safe_dump(dict(inventory), sort_keys=False))
            inventory_arg = str(inv_file)
        old_path = os.environ.get("PATH", "")
        os.environ["PATH"] = env["PATH"]
        try:
            runner = ansible_runner.run(
                private_data_dir=str(pdd),
                playbook=str(playbook_path),
                inventory=inventory_arg,
                extravars=dict(extravars or {}),
                limit=limit,
                cmdline=" ".join(cmdline) or None,
                envvars=env,
                event_handler=handle,
                quiet=True,
                suppress_env_files=True,
            )
        finally:
            os.environ["PATH"] = old_path
        stdout = runner.stdout.read() if runner.stdout else ""
        return PlaybookResult(
            playbook=playbook_path.name,
            status=str(runner.status),
            rc=int(runner.rc if runner.rc is not None else 1),
            hosts=_summarise(runner.stats),
            failures=failures,
            stdout=stdout,
        )


def rootfs_inventory(
    rootfs: Path, host_vars: Mapping[str, Any] | None = None, *, name: str = "rootfs", group: str = "gpu_nodes"
) -> dict[str, Any]:
    """An inventory with one host: the root file system at *rootfs*, reached with chroot (needs root)."""
    hostvars: dict[str, Any] = {
        "ansible_connection": "community.general.chroot",
        "ansible_host": str(Path(rootfs).resolve()),
        "ansible_python_interpreter": "/usr/bin/python3",
        # Already root inside the chroot: no sudo in a minimal root file system.
        "ansible_become": False,
    }
    hostvars.update(host_vars or {})
    return {"all": {"children": {group: {"hosts": {name: hostvars}}}}}


def parse_target(target: str) -> tuple[str, Path | None]:
    """``--target`` values: ``hosts`` (the stack's nodes over SSH) or ``rootfs:PATH``."""
    if target == "hosts":
        return "hosts", None
    kind, sep, path = target.partition(":")
    if kind == "rootfs" and sep and path:
        return "rootfs", Path(path)
    raise ValueError(f"--target {target!r}: expected 'hosts' or 'rootfs:PATH'")


def progress_printer(write: Callable[[str], None]) -> EventHandler:
    """An event handler that writes one line per task start and per host result."""

    def handle(event: dict[str, Any]) -> None:
        kind = event.get("event")
        data = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            write(f"PLAY {data.get('play', '')}")
        elif kind == "playbook_on_task_start":
            write(f"  TASK {data.get('task', '')}")
        elif kind in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped"):
            res = data.get("res") or {}
            state = {
                "runner_on_ok": "changed" if res.get("changed") else "ok",
                "runner_on_failed": "FAILED",
                "runner_on_unreachable": "UNREACHABLE",
                "runner_on_skipped": "skipped",
            }[kind]
            line = f"    {data.get('host', '?')}: {state}"
            if state in ("FAILED", "UNREACHABLE"):
                line += f" - {_failure_message(res)}"
            write(line)

    return handle


def bake(
    stack: str,
    *,
    target: str = "hosts",
    check: bool = False,
    limit: str | None = None,
    node_group: str | None = None,
    on_event: EventHandler | None = None,
    extravars: Mapping[str, Any] | None = None,
) -> PlaybookResult:
    """``gpuforge bake STACK``: site.yml on the stack's nodes, or bake-image.yml into a root file system.

    With ``target="rootfs:PATH"`` the node group's variables (the first group, or *node_group*) are
    applied to the root file system, as an image build for that group does.
    """
    from gpuforge.nodes.inventory import build_inventory, node_group_vars

    kind, rootfs = parse_target(target)
    inventory = build_inventory(stack)
    if kind == "rootfs":
        assert rootfs is not None
        if not rootfs.is_dir():
            raise FileNotFoundError(f"--target rootfs:{rootfs}: no such directory")
        group_vars = node_group_vars(inventory, node_group)
        return run_playbook(
            "bake-image.yml",
            rootfs_inventory(rootfs, group_vars),
            extravars=extravars,
            check=check,
            limit=limit,
            on_event=on_event,
        )
    if not _aws_credentials():
        # Offline (no credentials): the groups and their variables are complete, the ASG members unknown;
        # the run then matches no hosts, which still proves the playbooks and variables load.
        return run_playbook("site.yml", inventory, extravars=extravars, check=check, limit=limit, on_event=on_event)
    from gpuforge.nodes.inventory import aws_ec2_inventory

    with tempfile.TemporaryDirectory(prefix="gpuforge-inventory-") as tmp:
        # A directory inventory: the static groups/vars and the aws_ec2 plugin filling ng_<group> with
        # each Auto Scaling group's running instances.
        (Path(tmp) / "00-groups.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
        (Path(tmp) / "10-cluster.aws_ec2.yml").write_text(yaml.safe_dump(aws_ec2_inventory(stack), sort_keys=False))
        return run_playbook("site.yml", Path(tmp), extravars=extravars, check=check, limit=limit, on_event=on_event)


def _aws_credentials() -> bool:
    """Whether boto3 finds AWS credentials (what the aws_ec2 inventory plugin needs)."""
    try:
        import boto3  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return False
    return boto3.session.Session().get_credentials() is not None
