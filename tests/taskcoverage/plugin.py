"""Records every Ansible task result of the test session (callback/gpuforge_task_log.py) and prints, at
the end, the production tasks that did not run and why. Loaded for every test directory by
tests/conftest.py.

After a complete session (the whole suite, nothing deselected, every slow test passed: `make test`), it
is also a guard: a production task that neither ran nor is listed in never_run.yml with why fails the
session, and so does a listed task that ran (allowlist.py). A partial session (`-m "not slow"`, one file,
`-k`, a slow test skipped or failed) only prints the report and says why the guard was not applied: its
tasks did not have their chance to run.

The log is $GPUFORGE_TASK_LOG when set (appended to: several sessions, e.g. the booted test files run one
at a time, add up), else .pytest_cache/d/gpuforge-task-log/session.jsonl (a file in the temporary directory
without the cache plugin), emptied at the session's start.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from .allowlist import ALLOWLIST, AllowlistError, Verdict, judge, load_allowlist
from .tasks import PLAYBOOKS, coverage

CALLBACK_DIR = Path(__file__).resolve().parent / "callback"
CALLBACK = "gpuforge_task_log"
WATCH = "gpuforge-task-coverage-watch"
# Set by tests/lanes.py (`make test`) in each of its two sessions, which together are the whole suite.
LANES = "GPUFORGE_TASK_GUARD"


def _append(variable: str, value: str, sep: str) -> None:
    current = os.environ.get(variable, "")
    if value not in current.split(sep):
        os.environ[variable] = sep.join(filter(None, (current, value)))


def pytest_addoption(parser: pytest.Parser) -> None:
    # The production tree and its allowlist; the plugin's own tests point them at a demo tree.
    parser.addini(
        "task_coverage_playbooks", "the playbooks/ tree whose task coverage is reported", default=str(PLAYBOOKS)
    )
    parser.addini(
        "task_coverage_allowlist", "production tasks that cannot run in tests, and why", default=str(ALLOWLIST)
    )


class SessionWatch:
    """Whether this session ran the whole suite: what was collected, deselected and how slow tests ended."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.deselected = 0
        self.collection_errors = 0
        self.slow: set[str] = set()
        self.slow_passed: set[str] = set()  # its call passed (or xfailed as expected)
        self.slow_spoilt: set[str] = set()  # some phase failed or skipped

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self.collection_errors += int(report.failed)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.slow = {item.nodeid for item in items if item.get_closest_marker("slow")}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid not in self.slow:
            return
        if report.when == "call" and (report.passed or hasattr(report, "wasxfail")):
            self.slow_passed.add(report.nodeid)
        elif report.failed or report.skipped:
            self.slow_spoilt.add(report.nodeid)

    def incomplete(self) -> str | None:
        """None when the session ran the whole suite and every slow test passed, else what was missing."""
        narrowed = self._narrowed()
        if narrowed:
            return narrowed
        if self.collection_errors:
            return f"{self.collection_errors} file(s) failed to collect"
        if not self.slow:
            return "no slow test was collected"
        not_passed = sorted(self.slow - (self.slow_passed - self.slow_spoilt))
        if not_passed:
            shown = ", ".join(not_passed[:5]) + (f" and {len(not_passed) - 5} more" if len(not_passed) > 5 else "")
            return f"{len(not_passed)} of {len(self.slow)} slow tests did not pass: {shown}"
        return None

    def _narrowed(self) -> str | None:
        config = self.config
        if self.deselected:
            return f"{self.deselected} test(s) deselected (-m, -k, --deselect, --lf or --sw)"
        if config.getoption("ignore", None) or config.getoption("ignore_glob", None):
            return "paths ignored (--ignore)"
        if any("::" in arg for arg in config.args):
            return "run on single tests (PATH::NAME)"
        here = config.invocation_params.dir
        args = [(here / arg).resolve() for arg in config.args]
        suites = [(config.rootpath / path).resolve() for path in config.getini("testpaths")] or [config.rootpath]
        partial = [suite for suite in suites if not any(arg == suite or arg in suite.parents for arg in args)]
        if partial:
            return f"run on part of the suite ({' '.join(config.args)}), not all of {' '.join(map(str, partial))}"
        return None


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
    config.pluginmanager.register(SessionWatch(config), WATCH)


class _Guard:
    """The guard's outcome, kept on the config for the terminal summary."""

    def __init__(self, verdict: Verdict | None, message: str, allowlist: Path) -> None:
        self.verdict, self.message, self.allowlist = verdict, message, allowlist


_GUARD = pytest.StashKey[_Guard]()


def _paths(config: pytest.Config) -> tuple[Path, Path]:
    root = config.rootpath
    return (root / config.getini("task_coverage_playbooks")).resolve(), (
        root / config.getini("task_coverage_allowlist")
    ).resolve()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Applies the guard after a complete session; its failure fails the session (exit status 1)."""
    config = session.config
    watch = config.pluginmanager.get_plugin(WATCH)
    if not isinstance(watch, SessionWatch):
        return
    playbooks, allowlist = _paths(config)
    incomplete = watch.incomplete()
    if incomplete:
        lanes = os.environ.get(LANES)
        message = (
            f"task coverage guard: not applied here, this session is one lane of `make test`: {lanes} applies it "
            "to both lanes' log once both pass"
            if lanes
            else f"task coverage guard: not applied, the session was partial: {incomplete}"
        )
        config.stash[_GUARD] = _Guard(None, message, allowlist)
        return
    try:
        entries = load_allowlist(allowlist)
    except AllowlistError as error:
        config.stash[_GUARD] = _Guard(None, f"task coverage guard: FAILED: {error}", allowlist)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    verdict = judge(coverage([Path(os.environ["GPUFORGE_TASK_LOG"])], playbooks), entries, playbooks)
    config.stash[_GUARD] = _Guard(verdict, verdict.report(allowlist), allowlist)
    if not verdict.ok:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    log = Path(os.environ["GPUFORGE_TASK_LOG"])
    playbooks, _ = _paths(config)
    report = coverage([log], playbooks)
    guard = config.stash.get(_GUARD, None)
    ran_any = any(outcome.statuses for outcome in report.outcomes.values())
    if not ran_any and (guard is None or (guard.verdict is None and "FAILED" not in guard.message)):
        return  # no production task ran in this session, and the guard had nothing to say
    terminalreporter.section("production task coverage")
    terminalreporter.write_line(f"{report.summary()} (log: {log})")
    if ran_any:
        terminalreporter.write_line(report.table())
    if guard is not None:
        failed = "FAILED" in guard.message
        terminalreporter.write_line("")
        terminalreporter.write_line(
            guard.message, red=failed, bold=failed, green=guard.verdict is not None and not failed
        )
