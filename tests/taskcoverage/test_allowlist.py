"""The task coverage guard: judged on synthetic coverage, then applied by the plugin in real pytest
sessions (subprocesses) over the demo tree: a complete session fails on a task neither run nor listed and
on a listed task that ran; partial sessions (-m "not slow", one file, -k, a slow test skipped) are never
failed by it, and say why it was not applied."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
import yaml

from .allowlist import ALLOWLIST, Allowed, AllowlistError, judge, load_allowlist
from .plugin import LANES
from .tasks import REPO, Coverage, Outcome, production_tasks

DEMO = Path(__file__).resolve().parent / "demo" / "playbooks"
DEMO_TASKS = {task.name: task for task in production_tasks(DEMO)}


def _coverage(ran: set[str]) -> Coverage:
    outcomes = {}
    for name, task in DEMO_TASKS.items():
        outcome = Outcome(check_only=name not in ran)
        outcome.statuses.add("ok" if name in ran else "skipped")
        outcome.conditions.add("demo_flag | default(false)")
        outcomes[task] = outcome
    return Coverage(outcomes)


def _entry(name: str, why: str = "needs a kernel module this sandbox cannot load") -> Allowed:
    task = DEMO_TASKS[name]
    return Allowed(file=task.path.split("/", 1)[1], task=name, why=why)


ALL = set(DEMO_TASKS)
NOT_RUN = {"Skipped by its condition", "Handler never notified"}


# --- the verdict ---------------------------------------------------------------------------------


def test_every_task_ran_or_listed_passes() -> None:
    verdict = judge(_coverage(ALL - NOT_RUN), [_entry(name) for name in sorted(NOT_RUN)], DEMO)
    assert verdict.ok and verdict.allowed == 2
    assert verdict.report().startswith("task coverage guard: passed")


def test_a_task_neither_run_nor_listed_fails_with_the_entry_to_add() -> None:
    verdict = judge(_coverage(ALL - NOT_RUN), [_entry("Handler never notified")], DEMO)
    assert not verdict.ok and [task.name for task, _ in verdict.missing] == ["Skipped by its condition"]
    report = verdict.report()
    assert "1 production task(s) neither ran nor are listed" in report
    # The snippet is an entry of never_run.yml as written, with this session's reason to start from...
    snippet = [line for line in report.splitlines() if line.startswith(("- file:", "  task:", "  why:"))]
    assert yaml.safe_load("\n".join(snippet)) == [
        {
            "file": "roles/demo/tasks/main.yml",
            "task": "Skipped by its condition",
            "why": "FILL IN: skipped: demo_flag | default(false)",
        }
    ]


def test_an_entry_still_to_fill_in_is_refused(tmp_path: Path) -> None:
    listed = tmp_path / "never_run.yml"
    listed.write_text(
        "- file: roles/demo/tasks/main.yml\n  task: Skipped by its condition\n  why: 'FILL IN: skipped'\n"
    )
    with pytest.raises(AllowlistError, match=r"entry 0 .Skipped by its condition.: say why"):
        load_allowlist(listed)


def test_a_listed_task_that_ran_is_stale() -> None:
    verdict = judge(_coverage(ALL - {"Skipped by its condition"}), [_entry(name) for name in sorted(NOT_RUN)], DEMO)
    assert not verdict.ok and [entry.task for entry in verdict.stale] == ["Handler never notified"]
    assert "1 listed task(s) ran in this session: remove their entries" in verdict.report()
    assert "roles/demo/handlers/main.yml: Handler never notified" in verdict.report()


def test_an_entry_naming_no_task_is_reported() -> None:
    gone = Allowed(file="roles/demo/tasks/main.yml", task="Renamed since", why="was a kernel module")
    verdict = judge(_coverage(ALL), [gone], DEMO)
    assert not verdict.ok and verdict.unknown == [gone]
    assert "name no task of playbooks/" in verdict.report()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("file: x\n", "expected a list of entries"),
        ("- file: roles/a/tasks/main.yml\n  task: T\n", r"exactly the keys file, task, why; found \['file', 'task'\]"),
        ("- file: roles/a/tasks/main.yml\n  task: T\n  why: ''\n", "non-empty strings"),
        ("- file: roles/a/tasks/main.yml\n  task: T\n  why: w\n  line: 3\n", "exactly the keys"),
    ],
)
def test_a_malformed_allowlist_names_the_entry(tmp_path: Path, text: str, message: str) -> None:
    listed = tmp_path / "never_run.yml"
    listed.write_text(text)
    with pytest.raises(AllowlistError, match=message):
        load_allowlist(listed)


# --- the committed list --------------------------------------------------------------------------


def test_the_committed_allowlist_names_existing_tasks_each_with_why() -> None:
    tasks = production_tasks()
    entries = load_allowlist(ALLOWLIST)
    unknown = [entry for entry in entries if not any(entry.names(task) for task in tasks)]
    assert unknown == [], "entries of never_run.yml that name no task of playbooks/"
    assert len({(entry.file, entry.task) for entry in entries}) == len(entries), "an entry is listed twice"


def test_no_file_has_two_tasks_of_one_name() -> None:
    # An entry names a task by file and name: two tasks of one name in a file would be one entry.
    twice = [key for key, count in Counter((task.path, task.name) for task in production_tasks()).items() if count > 1]
    assert twice == []


# --- the plugin in real sessions -----------------------------------------------------------------

SLOW_FILE = "test_booted.py"


def _session(
    tmp_path: Path, ran: set[str], listed: set[str], *args: str, slow_body: str = "pass", lane: bool = False
) -> tuple[int, str]:
    """A pytest session in *tmp_path* over the demo tree: a fast and a slow test, a task log in which the
    tasks *ran* ran (the others were skipped), and an allowlist of *listed*; with *lane*, run as one lane of
    `make test` (tests/lanes.py)."""
    (tmp_path / "pytest.ini").write_text(
        textwrap.dedent(
            f"""\
            [pytest]
            testpaths = suite
            markers = slow: boots machines
            task_coverage_playbooks = {DEMO}
            task_coverage_allowlist = never_run.yml
            """
        )
    )
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    (suite / "test_fast.py").write_text("def test_fast():\n    pass\n")
    (suite / SLOW_FILE).write_text(f"import pytest\n\n\n@pytest.mark.slow\ndef test_booted():\n    {slow_body}\n")
    entries = [{"file": e.file, "task": e.task, "why": e.why} for e in map(_entry, sorted(listed))]
    (tmp_path / "never_run.yml").write_text(yaml.safe_dump(entries))
    log = tmp_path / "tasks.jsonl"
    events = [
        {
            "path": str(DEMO.parent / task.path),
            "line": task.line,
            "task": name,
            "action": "ansible.builtin.debug",
            "host": "node1",
            "status": "ok" if name in ran else "skipped",
            "check_mode": False,
            **({} if name in ran else {"condition": "demo_flag | default(false)"}),
        }
        for name, task in DEMO_TASKS.items()
    ]
    log.write_text("".join(json.dumps(event) + "\n" for event in events))
    # Not CI's, not pytest's, and not make test's lane marker (tests/lanes.py): the inner session is judged alone.
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "CI", LANES))}
    env |= {"GPUFORGE_TASK_LOG": str(log), "PYTHONPATH": str(REPO)} | ({LANES: "tests.lanes"} if lane else {})
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.taskcoverage.plugin", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.returncode, result.stdout + result.stderr


def test_a_complete_session_with_everything_ran_or_listed_passes(tmp_path: Path) -> None:
    code, output = _session(tmp_path, ALL - NOT_RUN, NOT_RUN)
    assert code == 0, output
    assert "task coverage guard: passed (every production task ran, or is one of the 2 in never_run.yml)" in output


def test_a_complete_session_fails_on_a_task_neither_run_nor_listed_and_on_a_stale_entry(tmp_path: Path) -> None:
    code, output = _session(tmp_path, ALL - {"Skipped by its condition"}, {"Handler never notified"})
    assert code == 1, output
    assert "2 passed" in output and "task coverage guard: FAILED" in output
    assert '- file: roles/demo/tasks/main.yml\n  task: "Skipped by its condition"' in output
    assert "remove their entries from never_run.yml:\n  roles/demo/handlers/main.yml: Handler never notified" in output


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("-m", "not slow"), "1 test(s) deselected"),
        (("-k", "fast"), "1 test(s) deselected"),
        (("suite/test_fast.py",), "run on part of the suite (suite/test_fast.py)"),
        ((f"suite/{SLOW_FILE}",), f"run on part of the suite (suite/{SLOW_FILE})"),
        ((f"suite/{SLOW_FILE}::test_booted",), "run on single tests"),
        (("--ignore", "suite/test_fast.py"), "paths ignored"),
    ],
)
def test_a_partial_session_is_not_failed_by_the_guard(tmp_path: Path, args: tuple[str, ...], why: str) -> None:
    code, output = _session(tmp_path, set(), set(), *args)
    assert code == 0, output
    assert f"task coverage guard: not applied, the session was partial: {why}" in output


def test_a_lane_of_make_test_leaves_the_guard_to_the_lanes(tmp_path: Path) -> None:
    """Each lane is partial by design; tests/lanes.py applies the guard to both lanes' log once both pass."""
    code, output = _session(tmp_path, set(), set(), "-m", "not slow", lane=True)
    assert code == 0, output
    assert "not applied here, this session is one lane of `make test`: tests.lanes applies it" in output


def test_the_whole_suite_named_as_an_argument_is_complete(tmp_path: Path) -> None:
    code, output = _session(tmp_path, set(), set(), "suite")
    assert code == 1 and "task coverage guard: FAILED" in output, output


def test_a_session_whose_slow_test_skipped_is_partial(tmp_path: Path) -> None:
    code, output = _session(tmp_path, set(), set(), slow_body="pytest.skip('no debootstrap')")
    assert code == 0, output
    assert (
        "not applied, the session was partial: 1 of 1 slow tests did not pass: suite/test_booted.py::test_booted"
        in output
    )


def test_a_failed_slow_test_fails_the_session_not_the_guard(tmp_path: Path) -> None:
    code, output = _session(tmp_path, set(), set(), slow_body="assert False")
    assert code == 1 and "1 of 1 slow tests did not pass" in output and "guard: FAILED" not in output, output


def test_the_command_applies_the_guard_to_logs_added_up(tmp_path: Path) -> None:
    """`python -m tests.taskcoverage --guard LOG...` over the production tree: a log in which nothing ran
    fails, naming the tasks to run or list (here every production task but the listed ones)."""
    log = tmp_path / "empty.jsonl"
    log.write_text("")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "tests.taskcoverage"]
    plain = subprocess.run([*run, str(log)], capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert plain.returncode == 0 and "guard" not in plain.stdout
    guarded = subprocess.run(
        [*run, "--guard", str(log)], capture_output=True, text=True, env=env, cwd=tmp_path, check=False
    )
    listed = len(load_allowlist(ALLOWLIST))
    missing = len(production_tasks()) - listed
    assert guarded.returncode == 1, guarded.stdout + guarded.stderr
    assert f"{missing} production task(s) neither ran nor are listed" in guarded.stdout
