"""`python -m tests.taskcoverage LOG...`: the production tasks that did not run in the sessions that wrote
these logs (GPUFORGE_TASK_LOG), and why."""

from __future__ import annotations

import sys
from pathlib import Path

from .tasks import coverage


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m tests.taskcoverage LOG [LOG...]", file=sys.stderr)
        return 2
    report = coverage([Path(arg) for arg in argv])
    print(report.summary())
    print(report.table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
