"""The guard on task coverage: every production task runs in a complete test session, or is listed in
never_run.yml with why it cannot run here. A task neither run nor listed fails the session, and so does a
listed task that ran (the entry is stale: the reason no longer holds) or that no longer exists.

Entries name a task by its file under gpuforge/assets/playbooks/ and its name as written (not its line: lines move with
every edit above the task). A file holds no two tasks of one name (test_allowlist.py checks it), so the
pair names one task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .tasks import PLAYBOOKS, Coverage, Outcome, Task

ALLOWLIST = Path(__file__).resolve().with_name("never_run.yml")
# What the report puts in the snippet of an entry to add; an entry still saying it is refused.
FILL_IN = "FILL IN"
_KEYS = {"file", "task", "why"}


class AllowlistError(ValueError):
    pass


@dataclass(frozen=True)
class Allowed:
    file: str  # under gpuforge/assets/playbooks/, e.g. roles/efa/tasks/main.yml
    task: str  # the task's name as written in the file
    why: str  # why no test can run it here

    def names(self, task: Task, root: Path = PLAYBOOKS) -> bool:
        return task.path == f"{root.name}/{self.file}" and task.name == self.task


def load_allowlist(path: Path = ALLOWLIST) -> list[Allowed]:
    """The entries of *path*; AllowlistError naming the entry and the fix for a malformed one."""
    document = yaml.safe_load(path.read_text()) if path.is_file() else None
    if document is None:
        return []
    if not isinstance(document, list):
        raise AllowlistError(f"{path}: expected a list of entries (file, task, why), found {type(document).__name__}")
    entries: list[Allowed] = []
    for index, entry in enumerate(document):
        where = f"{path}: entry {index}"
        if not isinstance(entry, dict) or set(entry) != _KEYS:
            keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise AllowlistError(f"{where}: expected exactly the keys file, task, why; found {keys}")
        if not all(isinstance(entry[key], str) and entry[key].strip() for key in _KEYS):
            raise AllowlistError(f"{where}: file, task and why must be non-empty strings")
        if entry["why"].strip().startswith(FILL_IN):
            raise AllowlistError(f"{where} ({entry['task']}): say why the task cannot run here in `why`")
        entries.append(Allowed(file=entry["file"], task=entry["task"], why=" ".join(entry["why"].split())))
    return entries


@dataclass
class Verdict:
    """What a complete session's coverage says against the allowlist."""

    missing: list[tuple[Task, Outcome]] = field(default_factory=list)  # neither ran nor listed
    stale: list[Allowed] = field(default_factory=list)  # listed, yet it ran
    unknown: list[Allowed] = field(default_factory=list)  # listed, no such task
    allowed: int = 0  # listed and did not run, as expected

    @property
    def ok(self) -> bool:
        return not (self.missing or self.stale or self.unknown)

    def report(self, allowlist: Path = ALLOWLIST) -> str:
        if self.ok:
            listed = f"{self.allowed} in {allowlist.name}"
            return f"task coverage guard: passed (every production task ran, or is one of the {listed})"
        lines = [f"task coverage guard: FAILED ({allowlist})"]
        if self.missing:
            lines += [
                f"{len(self.missing)} production task(s) neither ran nor are listed. Make a test run each; where no",
                f"test can here, add its entry to {allowlist.name} with why (the reason below is what this session",
                "saw):",
                "",
            ]
            for task, outcome in self.missing:
                lines += [
                    f"- file: {task.path.split('/', 1)[1]}",
                    f"  task: {_quoted(task.name)}",
                    f"  why: {_quoted(f'{FILL_IN}: {outcome.why_not()}')}",
                ]
            lines.append("")
        if self.stale:
            lines.append(
                f"{len(self.stale)} listed task(s) ran in this session: remove their entries from {allowlist.name}:"
            )
            lines += [f"  {entry.file}: {entry.task}" for entry in self.stale]
        if self.unknown:
            lines.append(
                f"{len(self.unknown)} entry(ies) name no task of playbooks/ (renamed, moved or removed): fix or remove:"
            )
            lines += [f"  {entry.file}: {entry.task}" for entry in self.unknown]
        return "\n".join(lines).rstrip()


def _quoted(text: str) -> str:
    return yaml.safe_dump(text, default_style='"', width=1_000_000).strip()


def judge(coverage: Coverage, allowlist: list[Allowed], root: Path = PLAYBOOKS) -> Verdict:
    verdict = Verdict()
    listed: dict[Task, Allowed] = {}
    for entry in allowlist:
        tasks = [task for task in coverage.outcomes if entry.names(task, root)]
        if not tasks:
            verdict.unknown.append(entry)
        for task in tasks:
            listed[task] = entry
    for task, outcome in coverage.outcomes.items():
        if task in listed and outcome.ran:
            verdict.stale.append(listed[task])
        elif task in listed:
            verdict.allowed += 1
        elif not outcome.ran:
            verdict.missing.append((task, outcome))
    return verdict
