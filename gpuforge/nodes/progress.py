"""Live progress of a playbook run: one row per host with the role and task it is on and its counts.

On a terminal it is a rich ``Live`` table redrawn as ansible-runner reports events; piped (CI logs,
files) it falls back to one line per task and per host result, which reads well in a log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from gpuforge.nodes.bake import EventHandler, failure_message

_RESULTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_unreachable": "unreachable",
    "runner_on_skipped": "skipped",
}


@dataclass
class _HostRow:
    role: str = ""
    task: str = ""
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    last_error: str = ""


def _role_and_task(data: dict[str, Any]) -> tuple[str, str]:
    task = str(data.get("task") or "")
    role = str(data.get("role") or "")
    if not role and " : " in task:  # Ansible names role tasks "role : Task"
        role, task = task.split(" : ", 1)
    return role, task.removeprefix(f"{role} : ") if role else task


def line_printer(write: Callable[[str], None]) -> EventHandler:
    """One line per play, per task start and per host result (failures with Ansible's message)."""

    def handle(event: dict[str, Any]) -> None:
        kind = event.get("event")
        data = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            write(f"PLAY {data.get('play', '')}")
        elif kind == "playbook_on_task_start":
            role, task = _role_and_task(data)
            write(f"  TASK [{role}] {task}" if role else f"  TASK {task}")
        elif kind in _RESULTS:
            res = data.get("res") or {}
            state = _RESULTS[kind]
            if state == "ok" and res.get("changed"):
                state = "changed"
            line = f"    {data.get('host', '?')}: {state}"
            if state in ("failed", "unreachable"):
                line += f" - {failure_message(res)}"
            write(line)

    return handle


class LiveProgress:
    """A context manager whose ``handle`` is the ``on_event`` of run_playbook."""

    def __init__(self, console: Console, title: str) -> None:
        self.console = console
        self.title = title
        self.rows: dict[str, _HostRow] = {}
        self.task = ""
        self.live = Live(self._table(), console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.live.update(self._table())
        self.live.__exit__(kind, error, tb)

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        data = event.get("event_data") or {}
        if kind == "playbook_on_task_start":
            role, task = _role_and_task(data)
            self.task = f"[{role}] {task}" if role else task
        elif kind == "runner_on_start" and data.get("host"):
            row = self.rows.setdefault(str(data["host"]), _HostRow())
            row.role, row.task = _role_and_task(data)
        elif kind in _RESULTS and data.get("host"):
            row = self.rows.setdefault(str(data["host"]), _HostRow())
            res = data.get("res") or {}
            state = _RESULTS[kind]
            if state == "ok":
                row.ok += 1
                row.changed += int(bool(res.get("changed")))
            elif state == "failed" and not data.get("ignore_errors"):
                row.failed += 1
                row.last_error = failure_message(res)
            elif state == "unreachable":
                row.unreachable += 1
                row.last_error = failure_message(res)
        else:
            return
        self.live.update(self._table())

    def _table(self) -> Table:
        table = Table("host", "role", "task", "ok", "changed", "failed", "unreachable", title=self.title)
        for host, row in sorted(self.rows.items()):
            failed = f"[red]{row.failed}[/]" if row.failed else "0"
            unreachable = f"[red]{row.unreachable}[/]" if row.unreachable else "0"
            table.add_row(
                escape(host),
                escape(row.role or "-"),
                escape(row.task or self.task),
                str(row.ok),
                str(row.changed),
                failed,
                unreachable,
            )
        return table
