#!/usr/bin/env python3
"""A stand-in for sacctmgr(1) over a small slurmdbd held in a JSON file, for the slurm_dbd role's accounting tasks.

It answers the `--noheader --parsable2 list` calls the role makes in sacctmgr's own output shape (fields joined
by "|", no header, no trailing "|", an unset limit empty, a QOS list comma-joined in name order, MaxWall as
mins2time_str prints it, an account's coordinators including its ancestors'), and applies the add, modify,
delete and coordinator calls to the file as slurmdbd would, including its refusals the role relies on:
removing an association whose jobs are active (" Error with request: Job(s) active, cancel job(s) before
remove" on stderr, the jobs after it, exit 1; sacctmgr's ESLURM_JOBS_RUNNING_ON_ASSOC path), and " Nothing
deleted" for an association already gone. Every call is appended to the log file as one JSON list.

Environment: SACCTMGR_STATE (the JSON file), SACCTMGR_LOG (the call log). EMPTY_SLURMDBD is a new slurmdbd's
state (the QOS normal only); a test adds active jobs to "jobs" ({id, account, user}).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

State = dict[str, Any]
EMPTY_SLURMDBD: State = {
    "cluster": "", "assocs": [], "defaults": {}, "coords": {}, "jobs": [],
    "qos": {"normal": {"priority": 0, "grptres": "", "maxtresperuser": "", "maxjobsperuser": "", "maxwall": "",
                       "preempt": [], "preemptmode": "cluster", "gracetime_s": 0}},
}


def _load() -> State:
    return json.loads(Path(os.environ["SACCTMGR_STATE"]).read_text())


def _save(state: State) -> None:
    Path(os.environ["SACCTMGR_STATE"]).write_text(json.dumps(state, indent=1))


def _pairs(words: list[str]) -> dict[str, str]:
    return {k.lower(): v for k, _, v in (w.partition("=") for w in words if "=" in w)}


def _mins(value: str) -> str:
    minutes = int(value)
    days, rest = divmod(minutes, 1440)
    clock = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{clock}" if days else clock


def _clock(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _wall_minutes(value: str) -> str:
    if value == "-1":
        return ""
    days, _, clock = value.rpartition("-")
    h, m, _s = ([0, 0, 0] + [int(p) for p in clock.split(":")])[-3:]
    return str(int(days or 0) * 1440 + h * 60 + m)


def _tres(current: str, change: str) -> str:
    """GrpTRES-style update: gres/gpu=N sets it, gres/gpu=-1 clears it."""
    items = dict(p.split("=", 1) for p in current.split(",") if p)
    for part in change.split(","):
        key, _, val = part.partition("=")
        if val == "-1":
            items.pop(key, None)
        else:
            items[key] = val
    return ",".join(f"{k}={v}" for k, v in sorted(items.items()))


def _ancestors(state: State, account: str) -> list[str]:
    out = []
    row = next((a for a in state["assocs"] if a["account"] == account and not a["user"]), None)
    while row is not None and row["parent"]:
        out.append(row["parent"])
        row = next((a for a in state["assocs"] if a["account"] == row["parent"] and not a["user"]), None)
    return out


def _list(state: State, what: str, opts: dict[str, str]) -> None:
    fields = opts["format"].lower().split(",")
    rows: list[list[str]] = []
    if what.startswith("assoc"):
        for a in state["assocs"]:
            value = {"cluster": state["cluster"], "account": a["account"], "user": a["user"],
                     "fairshare": str(a["fairshare"]), "grptres": a["grptres"], "parentname": a["parent"],
                     "qos": ",".join(sorted(a["qos"]))}
            rows.append([value[f] for f in fields])
    elif what == "users":
        rows = [[{"user": u, "defaultaccount": d}[f] for f in fields] for u, d in state["defaults"].items()]
    elif what == "accounts":
        for acct in dict.fromkeys(a["account"] for a in state["assocs"]):
            coords = list(state["coords"].get(acct, []))
            coords += [c for anc in _ancestors(state, acct) for c in state["coords"].get(anc, []) if c not in coords]
            rows.append([{"account": acct, "coordinators": ",".join(coords)}[f] for f in fields])
    elif what == "qos":
        for name, q in state["qos"].items():
            value = {"name": name, "priority": str(q["priority"]), "grptres": q["grptres"],
                     "maxtresperuser": q["maxtresperuser"], "maxjobsperuser": q["maxjobsperuser"],
                     "maxwall": _mins(q["maxwall"]) if q["maxwall"] else "", "preempt": ",".join(q["preempt"]),
                     "preemptmode": q["preemptmode"], "gracetime": _clock(q["gracetime_s"])}
            rows.append([value[f] for f in fields])
    print("\n".join("|".join(r) for r in rows))


def _assoc(state: State, account: str, user: str) -> dict[str, Any] | None:
    return next((a for a in state["assocs"] if a["account"] == account and a["user"] == user), None)


def _new_assoc(state: State, account: str, user: str, parent: str, fairshare: str = "1") -> dict[str, Any]:
    parent_row = _assoc(state, parent if not user else account, "")
    qos = list(parent_row["qos"]) if parent_row else ["normal"]
    row = {"account": account, "user": user, "parent": "" if user else parent, "fairshare": int(fairshare),
           "grptres": "", "qos": qos}
    state["assocs"].append(row)
    return row


def _set_assoc(row: dict[str, Any], sets: dict[str, str]) -> None:
    for key, val in sets.items():
        if key == "fairshare":
            row["fairshare"] = int(val)
        elif key == "grptres":
            row["grptres"] = _tres(row["grptres"], val)
        elif key == "parent":
            row["parent"] = val
        elif key == "qos":
            row["qos"] = sorted(val.split(","))
        elif key == "qos+":
            row["qos"] = sorted(set(row["qos"]) | set(val.split(",")))
        elif key == "defaultaccount":
            pass
        else:
            sys.exit(f"stand-in sacctmgr: cannot set {key}")


def _active(state: State, rows: list[dict[str, Any]]) -> list[str]:
    accounts = {r["account"] for r in rows if not r["user"]}
    for acct in list(accounts):
        accounts |= {a["account"] for a in state["assocs"] if not a["user"] and acct in _ancestors(state, a["account"])}
    return [f"JobId = {j['id']}  C = {state['cluster']}  A = {j['account']}  U = {j['user']}"
            for j in state["jobs"]
            if j["account"] in accounts or any(r["user"] == j["user"] and r["account"] == j["account"] for r in rows)]


def _delete(state: State, kind: str, where: dict[str, str]) -> int:
    if kind == "user":
        rows = [a for a in state["assocs"] if a["user"] == where["name"] and a["account"] == where["account"]]
    else:
        below = {a["account"] for a in state["assocs"] if where["name"] in _ancestors(state, a["account"])}
        subtree = {where["name"]} | below
        rows = [a for a in state["assocs"] if a["account"] in subtree]
    if not rows:
        print(" Nothing deleted")
        return 0
    jobs = _active(state, rows)
    if jobs:
        print(" Error with request: Job(s) active, cancel job(s) before remove", file=sys.stderr)
        for job in jobs:
            print(f"  {job}", file=sys.stderr)
        return 1
    print(" Deleting user associations..." if kind == "user" else " Deleting accounts...")
    for row in rows:
        print(f"  C = {state['cluster']:<10} A = {row['account']:<10} U = {row['user']:<9}")
        state["assocs"].remove(row)
    for user in list(state["defaults"]):
        if not any(a["user"] == user for a in state["assocs"]):
            del state["defaults"][user]
    _save(state)
    return 0


def main(argv: list[str]) -> int:
    with open(os.environ["SACCTMGR_LOG"], "a") as log:
        log.write(json.dumps(argv) + "\n")
    words = [w for w in argv if not w.startswith("--")]
    verb, kind, rest = words[0], words[1].lower(), words[2:]
    state = _load()
    if verb == "list":
        _list(state, kind, _pairs(rest))
        return 0
    if verb == "add":
        opts = _pairs(rest)
        if kind == "cluster":  # slurmdbd gives a new cluster the root account and root's association
            state["cluster"] = rest[0]
            state["assocs"] += [{"account": "root", "user": "", "parent": "", "fairshare": 1, "grptres": "",
                                 "qos": ["normal"]},
                                {"account": "root", "user": "root", "parent": "", "fairshare": 1, "grptres": "",
                                 "qos": ["normal"]}]
            state["defaults"]["root"] = "root"
        elif kind == "account":
            _new_assoc(state, rest[0], "", opts.get("parent", "root"), opts.get("fairshare", "1"))
        elif kind == "user":
            _new_assoc(state, opts["account"], rest[0], opts["account"])
            state["defaults"].setdefault(rest[0], opts.get("defaultaccount", opts["account"]))
        elif kind == "qos":
            state["qos"][rest[0]] = {"priority": 0, "grptres": "", "maxtresperuser": "", "maxjobsperuser": "",
                                     "maxwall": "", "preempt": [], "preemptmode": "cluster", "gracetime_s": 0}
        elif kind == "coordinator":
            for name in opts["names"].split(","):
                state["coords"].setdefault(opts["account"], []).append(name)
        _save(state)
        return 0
    if verb in ("remove", "delete") and kind == "coordinator":
        opts = _pairs(rest)
        names = opts["names"].split(",")
        state["coords"][opts["account"]] = [c for c in state["coords"].get(opts["account"], []) if c not in names]
        _save(state)
        return 0
    where_words, _, set_words = " ".join(rest).partition(" set ")
    where, sets = _pairs(where_words.split()), _pairs(set_words.split())
    if verb == "delete":
        return _delete(state, kind, where)
    if verb == "modify" and kind == "qos":
        q = state["qos"][where["name"]]
        for key, val in sets.items():
            if key in ("grptres", "maxtresperuser"):
                q[key] = _tres(q[key], val)
            elif key == "maxjobsperuser":
                q[key] = "" if val == "-1" else val
            elif key == "maxwall":
                q[key] = _wall_minutes(val)
            elif key == "priority":
                q[key] = int(val)
            elif key == "gracetime":
                q["gracetime_s"] = int(val)
            elif key == "preemptmode":
                q[key] = val
            elif key == "preempt":
                q[key] = val.split(",")
            # description: kept nowhere the role lists
        _save(state)
        return 0
    if verb == "modify" and kind in ("account", "user"):
        if kind == "user" and "defaultaccount" in sets:
            state["defaults"][where["name"]] = sets["defaultaccount"]
        if kind == "user":
            rows = [a for a in state["assocs"]
                    if a["user"] == where["name"] and a["account"] == where.get("account", a["account"])]
        else:
            rows = [a for a in state["assocs"] if not a["user"] and a["account"] == where["name"]]
        for row in rows:
            _set_assoc(row, sets)
        _save(state)
        return 0
    sys.exit(f"stand-in sacctmgr: no {verb} {kind}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
