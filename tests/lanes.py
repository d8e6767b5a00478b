"""`make test`: the whole suite, in two lanes that run side by side.

    python -m tests.lanes

- The booted lane: `pytest -m "slow and not vm"`, the tests that boot machines, debootstrap and run the playbooks
  for real. Its output streams here.
- The checks lane: ruff, lint-imports, mypy, then `pytest -m "not slow and not vm"`. Its output goes to a log
  (.cache/test-checks-lane.log), printed whole once the booted lane is done; a line says when it finished.

Why two lanes: the booted tests spend most of their time waiting on machines, daemons and timers, while the checks
and the fast tests need a CPU throughout. One after the other they took about 53 minutes on CI's two cores, which
has an hour. The checks lane runs at a lower CPU priority (nice 10), so the booted machines' daemons, whose tests
wait on timers and timeouts, are not made late by it: it takes what they leave.

The two marker expressions split the suite between them, and both lanes append to one production task log, so the
task coverage guard (tests/taskcoverage) judges the whole suite once both lanes pass, as it would judge one session
of it. The VM tests stay out, as in a plain `pytest` (`make test-vm`).

Exit status: 0 when both lanes and the guard pass, else 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tests.taskcoverage.plugin import LANES

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CHECKS_LOG = REPO / ".cache" / "test-checks-lane.log"
TASK_LOG = REPO / ".cache" / "test-task-log.jsonl"

BOOTED = [[str(BIN / "pytest"), "-m", "slow and not vm"]]
CHECKS = [
    [str(BIN / "ruff"), "check", "."],
    [str(BIN / "lint-imports")],
    [str(BIN / "mypy")],
    [str(BIN / "pytest"), "-m", "not slow and not vm"],
]


@dataclass
class Lane:
    name: str
    commands: list[list[str]]
    niceness: int = 0
    rc: int | None = None
    seconds: float = 0.0

    def run(self, env: dict[str, str], output: int | None = None) -> None:
        """Each command in turn, stopping at the first that fails (as make would)."""
        start = time.monotonic()
        for command in self.commands:
            if output is not None:
                os.write(output, f"\n$ {' '.join([Path(command[0]).name, *command[1:]])}\n".encode())
            self.rc = subprocess.run(command, cwd=REPO, env=env, stdout=output, stderr=output, check=False,
                                     preexec_fn=(lambda: os.nice(self.niceness)) if self.niceness else None).returncode
            if self.rc:
                break
        self.seconds = time.monotonic() - start

    def verdict(self) -> str:
        return f"{self.name}: {'passed' if self.rc == 0 else f'FAILED (exit {self.rc})'} in {self.seconds:.0f} s"


def main(argv: list[str]) -> int:
    if argv:
        print(__doc__.strip(), file=sys.stderr if argv[0] not in ("-h", "--help") else sys.stdout)
        return 0 if argv[0] in ("-h", "--help") else 2
    CHECKS_LOG.parent.mkdir(exist_ok=True)
    TASK_LOG.write_text("")
    env = {**os.environ, "GPUFORGE_TASK_LOG": str(TASK_LOG), LANES: "tests.lanes"}
    booted, checks = Lane("booted lane", BOOTED), Lane("checks lane", CHECKS, niceness=10)
    start = time.monotonic()

    def run_checks() -> None:
        with CHECKS_LOG.open("wb") as log:
            checks.run(env, log.fileno())
        print(f"\n[make test] {checks.verdict()} (log: {CHECKS_LOG.relative_to(REPO)}); the booted lane goes on",
              flush=True)

    print(f"[make test] checks lane (ruff, lint-imports, mypy, fast tests) into {CHECKS_LOG.relative_to(REPO)}; "
          "booted lane here", flush=True)
    worker = threading.Thread(target=run_checks)
    worker.start()
    booted.run(env)
    worker.join()
    print(f"\n[make test] ===== checks lane output ({CHECKS_LOG.relative_to(REPO)}) =====", flush=True)
    sys.stdout.buffer.write(CHECKS_LOG.read_bytes())
    sys.stdout.flush()
    ok = booted.rc == 0 and checks.rc == 0
    if ok:
        print("\n[make test] ===== production task coverage, both lanes =====", flush=True)
        guard = subprocess.run([sys.executable, "-m", "tests.taskcoverage", "--guard", str(TASK_LOG)], cwd=REPO,
                               check=False)
        ok = guard.returncode == 0
    print(f"\n[make test] {booted.verdict()}; {checks.verdict()}; "
          f"{'passed' if ok else 'FAILED'} in {time.monotonic() - start:.0f} s", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
