"""Records every Ansible task result of the test session (callback/gpuforge_task_log.py) and prints, at
the end, the production tasks that did not run and why. Loaded for every test directory by
tests/conftest.py.

The log is $GPUFORGE_TASK_LOG when set (appended to: several sessions, e.g. the booted test files run one
at a time, add up), else .pytest_cache/d/gpuforge-task-log/session.jsonl (a file in the temporary directory
without the cache plugin), emptied at the session's start.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from .tasks import coverage

CALLBACK_DIR = Path(__file__).resolve().parent / "callback"
CALLBACK = "gpuforge_task_log"


def _append(variable: str, value: str, sep: str) -> None:
    current = os.environ.get(variable, "")
    if value not in current.split(sep):
        os.environ[variable] = sep.join(filter(None, (current, value)))


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("GPUFORGE_TASK_LOG"):
        cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
        directory = cache.mkdir("gpuforge-task-log") if cache is not None else Path(tempfile.gettempdir())
        log = directory / ("session.jsonl" if cache is not None else f"gpuforge-task-log-{os.getpid()}.jsonl")
        log.write_text("")
        os.environ["GPUFORGE_TASK_LOG"] = str(log)
    # ansible-runner starts ansible-playbook with a copy of this environment and appends its own callbacks.
    _append("ANSIBLE_CALLBACK_PLUGINS", str(CALLBACK_DIR), os.pathsep)
    _append("ANSIBLE_CALLBACKS_ENABLED", CALLBACK, ",")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    log = Path(os.environ["GPUFORGE_TASK_LOG"])
    report = coverage([log])
    if not any(outcome.statuses for outcome in report.outcomes.values()):
        return  # no production task ran in this session
    terminalreporter.section("production task coverage")
    terminalreporter.write_line(f"{report.summary()} (log: {log})")
    terminalreporter.write_line(report.table())
