"""Ansible callback: one JSON line per task result, appended to the file named by $GPUFORGE_TASK_LOG.

Enabled for the test session by tests/taskcoverage/plugin.py (ANSIBLE_CALLBACK_PLUGINS and
ANSIBLE_CALLBACKS_ENABLED), so every playbook a test runs (through ansible-runner, the CLI or
ansible-playbook) records which tasks ran, which were skipped and on what condition.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ansible.plugins.callback import CallbackBase  # type: ignore[import-untyped]

DOCUMENTATION = """
name: gpuforge_task_log
type: aggregate
short_description: record every task result as a JSON line (gpuforge's task coverage in tests)
description: Appends path, line, role, task name, status, check mode and the condition a skipped task failed.
requirements: [GPUFORGE_TASK_LOG set to a writable file]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpuforge_task_log"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._log = os.environ.get("GPUFORGE_TASK_LOG")
        self._playbook = ""

    def v2_playbook_on_start(self, playbook: Any) -> None:
        self._playbook = str(getattr(playbook, "_file_name", ""))

    def _record(self, result: Any, status: str) -> None:
        if not self._log:
            return
        task = getattr(result, "task", None) or result._task
        res = getattr(result, "result", None)
        if res is None:
            res = result._result
        path, _, line = task.get_path().rpartition(":")
        role = getattr(task, "_role", None)
        entry = {
            "playbook": self._playbook,
            "path": path,
            "line": int(line) if line.isdigit() else 0,
            "role": role.get_name() if role is not None else None,
            "task": task.get_name(),
            "action": task.action,
            "host": (getattr(result, "host", None) or result._host).get_name(),
            "status": "changed" if status == "ok" and res.get("changed") else status,
            "check_mode": bool(task.check_mode),
        }
        if status == "skipped":
            entry["condition"] = _false_condition(res)
        with open(self._log, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")

    def v2_runner_on_ok(self, result: Any) -> None:
        self._record(result, "ok")

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._record(result, "failed")

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._record(result, "unreachable")


def _false_condition(res: dict[str, Any]) -> str:
    """The condition that skipped a task (a loop's: its first item's), else Ansible's reason."""
    for candidate in [res, *(item for item in res.get("results") or [] if isinstance(item, dict))]:
        if candidate.get("false_condition"):
            return str(candidate["false_condition"])
    return str(res.get("skip_reason") or res.get("skipped_reason") or res.get("msg") or "skipped")
