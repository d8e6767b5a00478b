"""Which production tasks ran in the tests: every task of gpuforge/assets/playbooks/ and
gpuforge/assets/playbooks/roles/, matched by file
and line with the results the gpuforge_task_log callback recorded (callback/gpuforge_task_log.py).

A task counts as run when some host reported it ok or changed outside check mode (or, for a task whose job
is to fail, `fail` or `assert`, failed: that is its check doing its work). The others are
reported with why: only skipped (and the condition that skipped it), only failed, only in check mode, or
never reached (no result at all: a handler never notified, a role no test played).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "gpuforge" / "assets" / "playbooks"

# Entries of a task list that Ansible reports no result for: static imports (what they import is listed
# where it is) and meta tasks. Dynamic includes are tasks: they run, or are skipped on a condition.
_NOT_TASKS = {"meta", "import_role", "import_tasks", "import_playbook"}
# Results recorded for no listed task, on purpose: what Ansible adds itself at the play's or the role's place
# (the argument validation of a role with meta/argument_specs.yml, a play's fact gathering), and the meta
# tasks the lister leaves out (Ansible reports a flush_handlers that has handlers to run).
_UNLISTED_ACTIONS = {"validate_argument_spec", "gather_facts", "setup", "meta"}
# Modules whose failure is their check's verdict: a failed result means the task ran.
_VERDICT_ACTIONS = {"fail", "assert"}
_BLOCK_KEYS = ("block", "rescue", "always")
_PLAY_KEYS = ("pre_tasks", "tasks", "post_tasks", "handlers")


@dataclass(frozen=True)
class Task:
    path: str  # relative to the repository, e.g. gpuforge/assets/playbooks/roles/efa/tasks/main.yml
    line: int  # the line of the task's first key, as Ansible's Task.get_path() gives it
    name: str

    @property
    def key(self) -> tuple[str, int]:
        return self.path, self.line

    @property
    def role(self) -> str:
        parts = Path(self.path).parts
        return parts[2] if len(parts) > 3 and parts[1] == "roles" else "-"


@dataclass
class Outcome:
    """Every result recorded for one task."""

    statuses: set[str] = field(default_factory=set)  # ok, changed, skipped, failed, unreachable
    check_only: bool = True
    conditions: set[str] = field(default_factory=set)
    verdict: bool = False  # a fail or assert task: failing is what it does

    @property
    def ran(self) -> bool:
        done = {"ok", "changed", "failed"} if self.verdict else {"ok", "changed"}
        return not self.check_only and bool(self.statuses & done)

    def why_not(self) -> str:
        if not self.statuses:
            return "never reached"
        if self.check_only and self.statuses & {"ok", "changed"}:
            return "ran in check mode only"
        if "failed" in self.statuses:
            return "failed, never ok"
        return "skipped: " + " | ".join(sorted(self.conditions))


def production_tasks(root: Path = PLAYBOOKS) -> list[Task]:
    """Every task of the playbooks and roles under *root*, in file order (paths relative to its parent)."""
    tasks: list[Task] = []
    for path in sorted(root.glob("*.yml")):
        for play in _sequence(path):
            if isinstance(play, yaml.MappingNode):
                for key in _PLAY_KEYS:
                    tasks += _tasks(path, root.parent, _value(play, key))
    for path in sorted([*root.glob("roles/*/tasks/*.yml"), *root.glob("roles/*/handlers/*.yml")]):
        tasks += _tasks(path, root.parent, _root_node(path))
    return tasks


def _root_node(path: Path) -> yaml.Node | None:
    return yaml.compose(path.read_text(), Loader=yaml.SafeLoader)


def _sequence(path: Path) -> list[yaml.Node]:
    node = _root_node(path)
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _value(mapping: yaml.MappingNode, key: str) -> yaml.Node | None:
    return next((v for k, v in mapping.value if k.value == key), None)


def _tasks(path: Path, base: Path, node: yaml.Node | None) -> list[Task]:
    if not isinstance(node, yaml.SequenceNode):
        return []
    found: list[Task] = []
    for entry in node.value:
        if not isinstance(entry, yaml.MappingNode):
            continue
        keys = {k.value for k, _ in entry.value}
        if keys & set(_BLOCK_KEYS):
            for key in _BLOCK_KEYS:
                found += _tasks(path, base, _value(entry, key))
            continue
        if {key.rpartition(".")[2] for key in keys} & _NOT_TASKS:
            continue
        name = _value(entry, "name")
        found.append(
            Task(
                path=str(path.relative_to(base)),
                line=entry.start_mark.line + 1,
                name=str(name.value) if isinstance(name, yaml.ScalarNode) else "(unnamed)",
            )
        )
    return found


def read_log(paths: Iterable[Path]) -> Iterator[dict[str, object]]:
    for path in paths:
        if path.is_file():
            for line in path.read_text().splitlines():
                if line.strip():
                    yield json.loads(line)


def _relative(path: str, root: Path) -> str | None:
    """A recorded absolute path under *root* (or under the playbooks/ of another checkout: a worktree, a
    clean clone) as a path relative to *root*'s parent; None for files outside any playbooks/, and for the
    test playbooks under another checkout's tests/ (tests/playbooks/*.yml play production roles, but are
    not production playbooks themselves)."""
    try:
        return str(Path(path).resolve().relative_to(root.parent))
    except ValueError:
        prefix, marker, rest = path.partition(f"/{root.name}/")
        return f"{root.name}/{rest}" if marker and "tests" not in Path(prefix).parts else None


def outcomes(
    tasks: Iterable[Task], events: Iterable[dict[str, object]], root: Path = PLAYBOOKS
) -> tuple[dict[Task, Outcome], set[str]]:
    """Each task's outcome, and the recorded places under *root* that match no listed task (the lister and
    Ansible disagree: a gap in this report, so it says so)."""
    by_key = {task.key: task for task in tasks}
    result = {task: Outcome() for task in by_key.values()}
    unmatched: set[str] = set()
    for event in events:
        path = _relative(str(event["path"]), root)
        if path is None or not path.startswith(f"{root.name}/"):
            continue
        task = by_key.get((path, int(str(event["line"]))))
        if task is None and str(event.get("action", "")).rpartition(".")[2] in _UNLISTED_ACTIONS:
            continue
        if task is None:
            unmatched.add(f"{path}:{event['line']} {event['task']}")
            continue
        outcome = result[task]
        outcome.statuses.add(str(event["status"]))
        outcome.verdict = str(event.get("action", "")).rpartition(".")[2] in _VERDICT_ACTIONS
        if not event.get("check_mode"):
            outcome.check_only = False
        if event["status"] == "skipped" and event.get("condition"):
            outcome.conditions.add(" ".join(str(event["condition"]).split()))
    return result, unmatched


@dataclass
class Coverage:
    outcomes: dict[Task, Outcome]
    unmatched: set[str] = field(default_factory=set)

    @property
    def not_run(self) -> list[tuple[Task, Outcome]]:
        return [(task, o) for task, o in self.outcomes.items() if not o.ran]

    def summary(self) -> str:
        ran = sum(o.ran for o in self.outcomes.values())
        return f"production tasks: {len(self.outcomes)} counted, {ran} ran, {len(self.outcomes) - ran} did not"

    def table(self) -> str:
        rows = [("role", "task", "where", "why it did not run")]
        rows += [(t.role, t.name, f"{t.path.split('/', 1)[1]}:{t.line}", o.why_not()) for t, o in self.not_run]
        widths = [min(max(len(row[i]) for row in rows), cap) for i, cap in enumerate((24, 60, 48, 200))]
        lines = ["  ".join(cell[: widths[i]].ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
        lines += [f"recorded but not listed (the lister missed it): {place}" for place in sorted(self.unmatched)]
        return "\n".join(lines)


def coverage(logs: Iterable[Path], root: Path = PLAYBOOKS) -> Coverage:
    return Coverage(*outcomes(production_tasks(root), read_log(logs), root))
