"""`python -m tests.taskcoverage [--guard] LOG...`: the production tasks that did not run in the sessions
that wrote these logs (GPUFORGE_TASK_LOG), and why. With --guard, also the verdict a complete session
gets (allowlist.py): the logs must add up to the whole suite (e.g. the fast suite and each booted file
run one at a time, one log); exit 1 when a task neither ran nor is in never_run.yml, or a listed one ran."""

from __future__ import annotations

import sys
from pathlib import Path

from .allowlist import ALLOWLIST, AllowlistError, judge, load_allowlist
from .tasks import coverage


def main(argv: list[str]) -> int:
    guard = "--guard" in argv
    logs = [Path(arg) for arg in argv if arg != "--guard"]
    if not logs:
        print("usage: python -m tests.taskcoverage [--guard] LOG [LOG...]", file=sys.stderr)
        return 2
    report = coverage(logs)
    print(report.summary())
    print(report.table())
    if not guard:
        return 0
    try:
        verdict = judge(report, load_allowlist(ALLOWLIST))
    except AllowlistError as error:
        print(f"task coverage guard: FAILED: {error}")
        return 1
    print()
    print(verdict.report(ALLOWLIST))
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
