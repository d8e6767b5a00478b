"""What a user sees while `gpuforge bake` runs and after: the live table per host (role, task, counts) on
a terminal, one line per task and host result in a log, and the summary table (ok/changed/failed/
unreachable/skipped per host). Fed ansible-runner's events as it emits them, then one real CLI run."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.cli import nodes as cli_nodes
from gpuforge.nodes.bake import HostSummary, PlaybookResult, TaskFailure
from gpuforge.nodes.progress import LiveProgress, line_printer

WIDTH = 160


def _event(kind: str, **data: Any) -> dict[str, Any]:
    return {"event": kind, "event_data": data}


# Two hosts through three tasks, as ansible-runner reports them: node1 changes, node2 fails the NCCL
# install after an ignored failure, node3 is unreachable from the first task.
EVENTS = [
    _event("playbook_on_play_start", play="Configure GPU training nodes"),
    _event("playbook_on_task_start", task="Gathering Facts"),
    _event("runner_on_start", host="node1", task="Gathering Facts"),
    _event("runner_on_ok", host="node1", task="Gathering Facts", res={"changed": False}),
    _event("runner_on_ok", host="node2", task="Gathering Facts", res={"changed": False}),
    _event("runner_on_unreachable", host="node3", task="Gathering Facts", res={"msg": "ssh: connect to host: refused"}),
    _event("playbook_on_task_start", task="os_tuning : Write kernel parameters", role="os_tuning"),
    _event("runner_on_start", host="node1", task="os_tuning : Write kernel parameters", role="os_tuning"),
    _event("runner_on_ok", host="node1", task="Write kernel parameters", role="os_tuning", res={"changed": True}),
    _event(
        "runner_on_failed", host="node2", task="Write kernel parameters", role="os_tuning", ignore_errors=True, res={}
    ),
    _event("runner_on_ok", host="node2", task="Write kernel parameters", role="os_tuning", res={"changed": True}),
    _event("playbook_on_task_start", task="Install NCCL 2.26.2", role="nccl"),
    _event("runner_on_start", host="node1", task="Install NCCL 2.26.2", role="nccl"),
    _event("runner_on_start", host="node2", task="Install NCCL 2.26.2", role="nccl"),
    _event("runner_on_skipped", host="node1", task="Install NCCL 2.26.2", role="nccl"),
    _event(
        "runner_on_failed", host="node2", task="Install NCCL 2.26.2", role="nccl", res={"msg": "No package libnccl2"}
    ),
]


def _rows(text: str) -> dict[str, list[str]]:
    """Table rows by their first cell (box-drawing borders and padding removed)."""
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.replace("┃", "│").split("│")[1:-1]]
        if cells and cells[0]:
            rows[cells[0]] = cells[1:]
    return rows


def test_a_log_gets_one_line_per_play_task_and_host_result() -> None:
    lines: list[str] = []
    handle = line_printer(lines.append)
    for event in EVENTS:
        handle(event)
    assert lines == [
        "PLAY Configure GPU training nodes",
        "  TASK Gathering Facts",
        "    node1: ok",
        "    node2: ok",
        "    node3: unreachable - ssh: connect to host: refused",
        "  TASK [os_tuning] Write kernel parameters",
        "    node1: changed",
        "    node2: failed - failed",
        "    node2: changed",
        "  TASK [nccl] Install NCCL 2.26.2",
        "    node1: skipped",
        "    node2: failed - No package libnccl2",
    ]


def test_the_live_table_shows_each_host_on_its_role_and_task_with_its_counts() -> None:
    screen = io.StringIO()
    console = Console(file=screen, width=WIDTH, force_terminal=False, color_system=None)
    with LiveProgress(console, "gpuforge bake lab") as live:
        for event in EVENTS[:8]:  # node1 has started the os_tuning task, node2 is still on the facts
            live.handle(event)
        during = Console(file=io.StringIO(), width=WIDTH, record=True, color_system=None)
        during.print(live._table())
        assert _rows(during.export_text()) == {
            "host": ["role", "task", "ok", "changed", "failed", "unreachable"],
            "node1": ["os_tuning", "Write kernel parameters", "1", "0", "0", "0"],
            # No task of its own started yet: the play's current task.
            "node2": ["-", "[os_tuning] Write kernel parameters", "1", "0", "0", "0"],
            "node3": ["-", "[os_tuning] Write kernel parameters", "0", "0", "0", "1"],
        }
        for event in EVENTS[8:]:
            live.handle(event)
    # Off a terminal the live display prints its last state once, when the run ends.
    final = screen.getvalue()
    assert "gpuforge bake lab" in final
    assert _rows(final) == {
        "host": ["role", "task", "ok", "changed", "failed", "unreachable"],
        "node1": ["nccl", "Install NCCL 2.26.2", "2", "1", "0", "0"],
        # The ignored failure is not counted; the NCCL one is.
        "node2": ["nccl", "Install NCCL 2.26.2", "2", "1", "1", "0"],
        "node3": ["-", "[nccl] Install NCCL 2.26.2", "0", "0", "0", "1"],
    }


def _recorded(monkeypatch: pytest.MonkeyPatch) -> tuple[Console, Console]:
    out = Console(file=io.StringIO(), width=WIDTH, record=True, color_system=None)
    err = Console(file=io.StringIO(), width=WIDTH, record=True, color_system=None)
    monkeypatch.setattr(cli_nodes, "out", out)
    monkeypatch.setattr(cli_nodes, "err", err)
    return out, err


def test_the_summary_table_has_each_hosts_counts_and_names_the_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    out, err = _recorded(monkeypatch)
    result = PlaybookResult(
        playbook="site.yml",
        status="failed",
        rc=2,
        hosts={
            "node2": HostSummary(ok=40, changed=3, failed=1, skipped=7),
            "node1": HostSummary(ok=52, changed=0, skipped=9),
            "node3": HostSummary(unreachable=1),
        },
        failures=[TaskFailure("node2", "nccl : Install NCCL 2.26.2", "No package libnccl2")],
    )
    cli_nodes._recap(result)
    text = out.export_text()
    assert "site.yml: summary" in text
    assert _rows(text) == {
        "host": ["ok", "changed", "failed", "unreachable", "skipped"],
        "node1": ["52", "0", "0", "0", "9"],
        "node2": ["40", "3", "1", "0", "7"],
        "node3": ["0", "0", "0", "1", "0"],
    }
    assert list(_rows(text))[1:] == ["node1", "node2", "node3"]  # sorted by host
    assert err.export_text().strip() == "failed node2: nccl : Install NCCL 2.26.2: No package libnccl2"


def test_bake_in_a_log_prints_progress_lines_then_the_summary_table() -> None:
    """A real run (ansible-runner, site.yml) of one onprem-lab host whose SSH port refuses: the progress
    lines name the play, the task and the host's result, the summary counts it unreachable, exit 1."""
    digests = '{"enroot_checksums": {"enroot_4.1.2-1_amd64.deb": "0"}}'
    unreachable = ["-e", "ansible_host=127.0.0.1", "-e", "ansible_port=9"]
    result = CliRunner().invoke(app, ["bake", "onprem-lab", "--limit", "dgx-a01", "-e", digests, *unreachable])
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[:3] == ["PLAY Configure GPU training nodes", "  TASK Gathering Facts", lines[2]]
    assert lines[2].startswith("    dgx-a01: unreachable - ") and "Connection refused" in result.stdout
    assert "site.yml: summary" in result.stdout
    assert _rows(result.stdout) == {
        "host": ["ok", "changed", "failed", "unreachable", "skipped"],
        "dgx-a01": ["0", "0", "0", "1", "0"],
    }
    assert "dgx-a01: Gathering Facts:" in result.stderr
