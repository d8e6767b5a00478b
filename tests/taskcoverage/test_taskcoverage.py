"""The task coverage tool on a real Ansible run: a playbook tree shaped like gpuforge/assets/playbooks/ (demo/), run on
localhost through run_playbook with the session's callback, then read back by file and line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpuforge.nodes.bake import run_playbook

from .tasks import Coverage, coverage, production_tasks

DEMO = Path(__file__).resolve().parent / "demo" / "playbooks"
LOCALHOST = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
INVENTORY = {"all": {"hosts": {"localhost": LOCALHOST}}}


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, check: bool = False, unhealthy: bool = False) -> Coverage:
    log = tmp_path / "tasks.jsonl"
    monkeypatch.setenv("GPUFORGE_TASK_LOG", str(log))
    result = run_playbook(DEMO / "site.yml", INVENTORY, check=check, extravars={"demo_unhealthy": unhealthy})
    assert result.ok is not unhealthy, result.stdout[-3000:]
    return coverage([log], DEMO)


def _why(report: Coverage) -> dict[str, str]:
    return {task.name: ("ran" if outcome.ran else outcome.why_not()) for task, outcome in report.outcomes.items()}


def test_the_lister_finds_tasks_in_plays_roles_blocks_handlers_and_includes() -> None:
    listed = {(task.path, task.line, task.name) for task in production_tasks(DEMO)}
    assert listed == {
        ("playbooks/site.yml", 12, "Task of the play"),
        ("playbooks/roles/demo/tasks/main.yml", 2, "Runs and notifies"),
        ("playbooks/roles/demo/tasks/main.yml", 7, "Skipped by its condition"),
        ("playbooks/roles/demo/tasks/main.yml", 14, "Inside the block"),
        ("playbooks/roles/demo/tasks/main.yml", 18, "In the rescue, never reached"),
        ("playbooks/roles/demo/tasks/main.yml", 22, "Loop whose items are all skipped"),
        ("playbooks/roles/demo/tasks/main.yml", 28, "Include the other file"),
        ("playbooks/roles/demo/tasks/main.yml", 35, "Fail the host on a verdict"),
        ("playbooks/roles/demo/tasks/extra.yml", 2, "Included task"),
        ("playbooks/roles/demo/handlers/main.yml", 2, "Notified handler"),
        ("playbooks/roles/demo/handlers/main.yml", 6, "Handler never notified"),
        ("playbooks/roles/other/tasks/main.yml", 2, "Task of a role the play skips"),
    }


def test_a_run_is_matched_by_file_and_line_with_the_condition_that_skipped_each_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _run(tmp_path, monkeypatch)
    assert report.unmatched == set()
    assert _why(report) == {
        "Task of the play": "ran",
        "Runs and notifies": "ran",
        "Skipped by its condition": "skipped: demo_flag | default(false)",
        "Inside the block": "ran",
        "In the rescue, never reached": "never reached",
        "Loop whose items are all skipped": "skipped: item > 5",
        "Include the other file": "ran",
        "Fail the host on a verdict": "skipped: demo_unhealthy | default(false)",
        "Included task": "ran",
        "Notified handler": "ran",
        "Handler never notified": "never reached",
        # The role's own `when` in the play is what skipped its tasks.
        "Task of a role the play skips": "skipped: demo_other | default(false)",
    }
    assert report.summary().startswith("production tasks: 12 counted, 6 ran, 6 did not")
    assert "never reached" in report.table() and "roles/demo/handlers/main.yml:6" in report.table()


def test_a_task_that_ran_only_in_check_mode_did_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = _run(tmp_path, monkeypatch, check=True)
    assert _why(report)["Task of the play"] == "ran in check mode only"
    assert not any(outcome.ran for outcome in report.outcomes.values())


def test_a_verdict_task_that_failed_the_host_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    why = _why(_run(tmp_path, monkeypatch, unhealthy=True))
    assert why["Fail the host on a verdict"] == "ran"
    # The host failed before the handlers and the play's own task: those did not run.
    assert why["Task of the play"] == "never reached"


def test_results_recorded_in_another_checkout_count_but_its_test_playbooks_do_not() -> None:
    """Sessions run in another worktree or a clean clone add up with this one's; the playbooks of its tests/
    (which play production roles) are not production playbooks."""
    from .tasks import PLAYBOOKS, _relative

    role_task = "/elsewhere/clone/playbooks/roles/nccl/tasks/main.yml"
    assert _relative(role_task, PLAYBOOKS) == "playbooks/roles/nccl/tasks/main.yml"
    assert _relative("/elsewhere/clone/tests/playbooks/nccl_goldens.yml", PLAYBOOKS) is None
    assert _relative("/elsewhere/clone/tests/taskcoverage/demo/playbooks/site.yml", PLAYBOOKS) is None
    assert _relative("/elsewhere/clone/components/x.yml", PLAYBOOKS) is None
