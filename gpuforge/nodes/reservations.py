"""Keep slurmctld's reservations named gpuforge-* as slurm_config.reservations says (scheduler.reservations):
create the missing, change the ones that differ, delete the ones the spec no longer has. A reservation with
another name (made by hand, by ParallelCluster's capacity blocks, ...) is never touched.

Run on the primary controller by the slurm_controller role (tasks/reservations.yml) after the accounts exist:
`python3 reservations.py /etc/gpuforge/reservations.json [--check]`. It reads `scontrol show reservation` (the
multi-line form of 22.05 and the one of 24.11, which has no Watts and may end in a Comment) and `sinfo` for the
nodes of each node group (feature group_<group>), decides in :func:`plan` (pure, unit-tested), runs the scontrol
commands, and prints one JSON line: {"changed": bool, "commands": [...], "notes": [...]}. A second run changes
nothing. Standard library only.

Times: the spec's are UTC; scontrol reads and prints the controller's local time, so they are converted.
A window already under way is created from now to its end; a recurring one (DAILY/WEEKLY) that is under way
when first created begins at its next occurrence, so its time of day stays the spec's.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

PREFIX = "gpuforge-"
# The flags whose presence means something to the spec; Slurm adds its own (SPEC_NODES, ALL_NODES, PART_NODES),
# and IGNORE_JOBS only matters when a reservation is made, so neither is compared.
COMPARED_FLAGS = frozenset({"MAINT", "DAILY", "WEEKLY"})
PERIODS = {"DAILY": timedelta(days=1), "WEEKLY": timedelta(days=7)}
NULL = "(null)"
_KEY = re.compile(r"(?:^|\s)([A-Za-z]+)=")


@dataclass(frozen=True)
class Observed:
    """A reservation as `scontrol show reservation` prints it."""

    name: str
    start: datetime
    end: datetime
    flags: frozenset[str]
    users: frozenset[str]
    accounts: frozenset[str]
    nodes: frozenset[str]
    node_count: int
    partition: str


@dataclass
class Plan:
    commands: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def parse_key_values(record: str) -> dict[str, str]:
    """scontrol's `Key=value` words of one record, in any line layout; Comment= runs to the end of its line."""
    found: dict[str, str] = {}
    keys = list(_KEY.finditer(record))
    comment_end = -1
    for i, match in enumerate(keys):
        if match.start() < comment_end:
            continue  # a word inside a comment
        key = match.group(1)
        stop = keys[i + 1].start() if i + 1 < len(keys) else len(record)
        if key == "Comment":
            line_end = record.find("\n", match.end())
            stop = comment_end = line_end if line_end >= 0 else len(record)
        found.setdefault(key, record[match.end():stop].strip())
    return found


def parse_reservations(text: str, tz: tzinfo) -> dict[str, Observed]:
    """Every reservation in `scontrol show reservation`'s output ("No reservations in the system" is none)."""
    records = [r for r in re.split(r"(?=^\s*ReservationName=)", text, flags=re.MULTILINE) if "ReservationName=" in r]
    found: dict[str, Observed] = {}
    for record in records:
        words = parse_key_values(record)
        name = words["ReservationName"]
        found[name] = Observed(
            name=name,
            start=_local_time(words["StartTime"], tz),
            end=_local_time(words["EndTime"], tz),
            flags=_items(words.get("Flags", "")),
            users=_items(words.get("Users", "")),
            accounts=_items(words.get("Accounts", "")),
            nodes=frozenset(expand_hostlist(words.get("Nodes", ""))),
            node_count=int(words.get("NodeCnt", "0") or 0),
            partition="" if words.get("PartitionName", NULL) == NULL else words["PartitionName"],
        )
    return found


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list (`gpu-[1-3,07],login1`) as names; zero padding kept."""
    if text in ("", NULL):
        return []
    names: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text):
        names += _expand_one(part)
    return names


def _expand_one(name: str) -> list[str]:
    match = re.search(r"\[([^\]]*)\]", name)
    if match is None:
        return [name]
    head, tail = name[: match.start()], name[match.end():]
    names: list[str] = []
    for piece in match.group(1).split(","):
        low, _, high = piece.partition("-")
        width = len(low)
        for number in range(int(low), int(high or low) + 1):
            names += _expand_one(f"{head}{number:0{width}d}{tail}")
    return names


def nodes_by_feature(sinfo_output: str) -> dict[str, set[str]]:
    """`sinfo --noheader --Node --format='%N %f'`: each feature's nodes (a node in two partitions is listed twice)."""
    found: dict[str, set[str]] = {}
    for line in sinfo_output.splitlines():
        words = line.split()
        if len(words) < 2:
            continue
        node, features = words[0], words[1]
        for feature in _items(features):
            found.setdefault(feature, set()).add(node)
    return found


@dataclass(frozen=True)
class Wanted:
    """One window of a reservation as the spec wants it now."""

    name: str
    start: datetime
    end: datetime
    under_way: bool  # start is past: scontrol is given StartTime=now
    flags: frozenset[str]
    create_flags: tuple[str, ...]
    users: frozenset[str]
    accounts: frozenset[str]
    nodes: frozenset[str]
    node_count: int
    partition: str
    period: timedelta | None
    first_start: datetime


def wanted(entry: Mapping[str, Any], features: Mapping[str, set[str]], now: datetime) -> Wanted | str:
    """The window *entry* (a slurm_config.reservations item) wants at *now*, or why none is wanted."""
    first_start, first_end = _utc(entry["start"]), _utc(entry["end"])
    period = next((PERIODS[f] for f in entry["flags"] if f in PERIODS), None)
    start, end = first_start, first_end
    if period is not None and end <= now:
        skip = -(-(now - end) // period)  # windows that have ended, rounded up
        start, end = start + skip * period, end + skip * period
        if end <= now:
            start, end = start + period, end + period
    if end <= now:
        return f"{entry['name']}: its window ended at {entry['end']}; Slurm removes an ended reservation itself"
    under_way = start <= now
    if under_way and period is not None:
        # scontrol would take StartTime=now and repeat from there: begin at the next occurrence instead.
        start, end, under_way = start + period, end + period, False
    nodes: set[str] = set()
    for feature in entry["node_features"]:
        nodes |= set(features.get(feature, set()))
    if entry["node_features"] and not nodes:
        groups = ", ".join(f.removeprefix("group_") for f in entry["node_features"])
        return f"{entry['name']}: node group(s) {groups} have no nodes in Slurm yet; not made this run"
    return Wanted(
        name=entry["name"], start=start, end=end, under_way=under_way,
        flags=frozenset(entry["flags"]) & COMPARED_FLAGS, create_flags=tuple(entry["flags"]),
        users=frozenset(entry["users"]), accounts=frozenset(entry["accounts"]), nodes=frozenset(nodes),
        node_count=int(entry["node_count"]), partition=entry["partition"], period=period, first_start=first_start,
    )


def plan(entries: Sequence[Mapping[str, Any]], observed: Mapping[str, Observed], features: Mapping[str, set[str]],
         now: datetime, tz: tzinfo) -> Plan:
    """The scontrol commands that make slurmctld's gpuforge-* reservations what *entries* say."""
    result = Plan()
    names = {e["name"] for e in entries}
    for name in sorted(observed):
        if name.startswith(PREFIX) and name not in names:
            result.commands.append(["scontrol", "delete", f"ReservationName={name}"])
    for entry in entries:
        want = wanted(entry, features, now)
        if isinstance(want, str):
            result.notes.append(want)
            continue
        have = observed.get(want.name)
        if have is None:
            result.commands.append(_create(want, tz))
        elif _recreate(want, have):
            result.notes.append(f"{want.name}: flags, partition or who may use it changed: deleted and made again")
            result.commands += [["scontrol", "delete", f"ReservationName={want.name}"], _create(want, tz)]
        else:
            update = _update(want, have, now, tz)
            if update:
                result.commands.append(["scontrol", "update", f"ReservationName={want.name}", *update])
    return result


def _recreate(want: Wanted, have: Observed) -> bool:
    return (
        want.flags != have.flags & COMPARED_FLAGS
        or want.partition != have.partition
        or bool(want.users) != bool(have.users)
        or bool(want.accounts) != bool(have.accounts)
    )


def _update(want: Wanted, have: Observed, now: datetime, tz: tzinfo) -> list[str]:
    words: list[str] = []
    if not _same_window(want, have, now):
        words += _times(want, tz)
    if want.users and want.users != have.users:
        words.append("Users=" + ",".join(sorted(want.users)))
    if want.accounts and want.accounts != have.accounts:
        words.append("Accounts=" + ",".join(sorted(want.accounts)))
    if want.nodes and want.nodes != have.nodes:
        words.append("Nodes=" + ",".join(sorted(want.nodes)))
    if want.node_count and want.node_count != have.node_count:
        words.append(f"NodeCnt={want.node_count}")
    return words


def _same_window(want: Wanted, have: Observed, now: datetime) -> bool:
    if want.period is not None:
        # Slurm moves a recurring reservation on by itself: any occurrence of the spec's window is the same.
        offset = have.start - want.first_start
        return offset % want.period == timedelta(0) and have.end - have.start == want.end - want.start \
            and have.end > now
    if want.under_way:
        return have.end == want.end and have.start <= now
    return have.start == want.start and have.end == want.end


def _times(want: Wanted, tz: tzinfo) -> list[str]:
    start = "now" if want.under_way else _scontrol_time(want.start, tz)
    return [f"StartTime={start}", f"EndTime={_scontrol_time(want.end, tz)}"]


def _create(want: Wanted, tz: tzinfo) -> list[str]:
    words = ["scontrol", "create", "reservation", f"ReservationName={want.name}", *_times(want, tz),
             "Flags=" + ",".join(want.create_flags)]
    if want.users:
        words.append("Users=" + ",".join(sorted(want.users)))
    if want.accounts:
        words.append("Accounts=" + ",".join(sorted(want.accounts)))
    if want.nodes:
        words.append("Nodes=" + ",".join(sorted(want.nodes)))
    if want.node_count:
        words.append(f"NodeCnt={want.node_count}")
    if want.partition:
        words.append(f"PartitionName={want.partition}")
    return words


def _items(text: str) -> frozenset[str]:
    return frozenset() if text in ("", NULL) else frozenset(t for t in text.split(",") if t)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.removesuffix("Z")).replace(tzinfo=UTC)


def _local_time(text: str, tz: tzinfo) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=tz).astimezone(UTC)


def _scontrol_time(moment: datetime, tz: tzinfo) -> str:
    return moment.astimezone(tz).strftime("%Y-%m-%dT%H:%M:%S")


def run(config_path: str, check: bool, command: Callable[[list[str]], str] | None = None) -> dict[str, Any]:
    """Read slurmctld, plan, and (unless *check*) apply; what changed, for the role."""
    call = command or _scontrol
    with open(config_path, encoding="utf-8") as handle:
        entries = json.load(handle)
    tz = datetime.now().astimezone().tzinfo or UTC
    observed = parse_reservations(call(["scontrol", "show", "reservation"]), tz)
    features = nodes_by_feature(call(["sinfo", "--noheader", "--Node", "--format=%N %f"]))
    result = plan(entries, observed, features, datetime.now(UTC), tz)
    if not check:
        for argv in result.commands:
            call(argv)
    return {"changed": bool(result.commands), "commands": [" ".join(c) for c in result.commands],
            "notes": result.notes}


def _scontrol(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {(done.stderr or done.stdout).strip()}")
    return done.stdout


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("config", help="slurm_config.reservations as JSON")
    parser.add_argument("--check", action="store_true", help="say what would change, change nothing")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.config, args.check)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
