"""GPU-aware diff of two plans: what the engine will create, update, replace or delete, and what
that means for a training cluster (GPUs, nodes that roll, power, cost, storage, data at risk).

Each side is a plan JSON file (`gpuforge plan STACK --json F`) or a git revision, planned in a
temporary `git worktree` by that revision's own program and components with the current venv.
The offline plan knows inputs, not provider state: a replacement is predicted from the
replace-trigger table (replace_triggers.yaml, with its sources); `pulumi preview` is authoritative.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from gpuforge.catalog import load_catalog
from gpuforge.catalog.tokens import ASG, EKS_NODE_GROUP, LAUNCH_TEMPLATE
from gpuforge.plan.cost import LUSTRE, NODE_GROUP, OBJECT_STORE, SIZE_UNKNOWN, estimate_cost
from gpuforge.plan.stacks import find_project
from gpuforge.review.windows import block_windows
from gpuforge.spec.capacity import MAINTENANCE_ON_DEMAND, MAINTENANCE_RESERVED
from gpuforge.spec.node_group import RESERVED_CAPACITY

TRIGGERS_FILE = Path(__file__).resolve().parent / "replace_triggers.yaml"
NODE_CARRIERS = (ASG, EKS_NODE_GROUP)  # deleting or replacing one terminates every node it runs
STATEFUL = {
    "aws:s3/bucket:Bucket": "bucket",
    "aws:fsx/lustreFileSystem:LustreFileSystem": "file system",
    "aws:kms/key:Key": "KMS key",
}


class DiffError(Exception):
    """A side could not be loaded or planned; the message says which and why."""


# --- replace triggers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trigger:
    type: str
    property: str
    source: str
    effect: str = "replace"  # replace | roll
    when: str = "changed"  # changed | decreased | changed_if
    if_property: str | None = None
    if_value: Any = None


@lru_cache(maxsize=1)
def load_triggers(path: Path = TRIGGERS_FILE) -> dict[str, tuple[Trigger, ...]]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {
        type_: tuple(Trigger(type=type_, **row) for row in rows)
        for type_, rows in doc.items()
        if not type_.startswith("_")
    }


def triggers_source() -> str:
    return str(yaml.safe_load(TRIGGERS_FILE.read_text(encoding="utf-8")).get("_source", "")).strip()


_MISSING = object()


def get_path(tree: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(tree, Mapping) or part not in tree:
            return _MISSING
        tree = tree[part]
    return tree


def changed_paths(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Leaf paths whose values differ (maps recurse; lists compare whole)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            p = f"{prefix}.{key}" if prefix else str(key)
            out += changed_paths(old.get(key, _MISSING), new.get(key, _MISSING), p)
        return out
    return [] if old == new else [prefix or "<root>"]


def _fmt(value: Any) -> str:
    if value is _MISSING or value is None:
        return "unset"
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def _fires(trigger: Trigger, old: dict[str, Any], new: dict[str, Any], changed: list[str]) -> str | None:
    """The reason this trigger fires for the change, or None."""
    if trigger.property == "*":
        hit = changed
    else:
        hit = [p for p in changed if p == trigger.property or p.startswith(trigger.property + ".")]
    if not hit:
        return None
    if trigger.property == "*":
        return f"{', '.join(hit[:6])}{' ...' if len(hit) > 6 else ''} changed"
    before, after = get_path(old, trigger.property), get_path(new, trigger.property)
    if trigger.when == "decreased":
        if not (isinstance(before, int | float) and isinstance(after, int | float) and after < before):
            return None
        return f"{trigger.property} decreased {_fmt(before)} -> {_fmt(after)}"
    if trigger.when == "changed_if" and get_path(new, trigger.if_property or "") != trigger.if_value:
        return None
    return f"{trigger.property} {_fmt(before)} -> {_fmt(after)}"


# --- the diff ----------------------------------------------------------------------------------------


@dataclass
class ResourceChange:
    urn: str
    type: str
    name: str
    action: str  # create | update | replace | delete
    properties: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    rolls: bool = False
    protect: bool = False
    retain_on_delete: bool = False


@dataclass
class GroupImpact:
    name: str
    instance_base: str | None
    instance_head: str | None
    nodes_base: int  # count + spares
    nodes_head: int
    gpus_base: int  # active GPUs (count x GPUs per node)
    gpus_head: int
    nodes_rolling: int = 0
    roll: str = ""
    gpu_model_base: str | None = None
    gpu_model_head: str | None = None
    nodes_terminated: int = 0  # by this change: a group removed, or its Auto Scaling/EKS node group replaced
    gpus_terminated: int = 0
    renamed_from: str | None = None
    size_base: str = ""  # as printed: the node count, or min-max of an elastic group
    size_head: str = ""


def how_nodes_roll(inputs: dict[str, Any], running: int) -> str:
    """What replaces a group's running nodes after its launch template changes, by update strategy."""
    strategy = inputs.get("updateStrategy", "instance_refresh")
    if strategy == "drain":
        return (
            f"drain then replace: each of the {running} nodes is drained in Slurm, its running jobs finish, "
            "then it is terminated and the Auto Scaling group launches its replacement from the new version "
            "(ParallelCluster's DRAIN strategy; no job is killed)"
        )
    if strategy == "eks_managed":
        text = (
            f"EKS rolls the managed node group to the new version: the {running} nodes are cordoned, drained and "
            "replaced, one unavailable at a time"
        )
        if inputs.get("capacity") in RESERVED_CAPACITY:
            text += (
                ", terminate then launch (update strategy MINIMAL: a full reservation or Capacity Block has no "
                "room for the extra node EKS's default launches first); the group runs one node short while each "
                "is replaced, so roll a block's group between its jobs"
            )
        else:
            text += ", launch then terminate (update strategy DEFAULT)"
        return text
    if inputs.get("capacity") in RESERVED_CAPACITY:
        low, high = MAINTENANCE_RESERVED
        policy = f"terminate then launch (min healthy {low} %, max {high} %: the reservation has no room for more)"
    else:
        low, high = MAINTENANCE_ON_DEMAND
        policy = f"launch then terminate (min healthy {low} %, max {high} %)"
    return f"instance refresh: the Auto Scaling group replaces the {running} running nodes, {policy}"


def group_size(inputs: dict[str, Any]) -> str:
    """A group's size for the diff: count + spares, or "0-4" for an elastic group (scaling min-max)."""
    scaling = inputs.get("scaling")
    if isinstance(scaling, dict):
        return f"{scaling.get('min', 0)}-{scaling.get('max', 0)}"
    return str(int(inputs.get("count", 0)) + int(inputs.get("spares", 0))) if inputs else "0"


@dataclass
class Risk:
    urn: str
    type: str
    name: str
    action: str
    message: str


@dataclass
class ConfigChange:
    """One rendered configuration file (e.g. Slurm's slurm.conf) that differs between the sides."""

    kind: str  # slurm
    name: str  # slurm.conf
    status: str  # added | removed | changed
    added: int  # lines
    removed: int
    diff: str  # unified diff, base -> head


@dataclass
class PlanDiff:
    stack: str
    base: str
    head: str
    changes: list[ResourceChange]
    groups: list[GroupImpact]
    risks: list[Risk]
    totals: dict[str, dict[str, float | None]]  # metric -> {base, head, delta}
    storage: list[str]
    cost: dict[str, Any]
    policies_new: list[dict[str, Any]]
    policies_fixed: list[dict[str, Any]]
    notes: list[str]
    other_stack: str = ""  # a warning when the two plans are of different stacks
    configs: list[ConfigChange] = field(default_factory=list)  # rendered node configuration that changes
    capacity_windows: list[str] = field(default_factory=list)  # the head's Capacity Blocks, with warnings

    def by_action(self, action: str) -> list[ResourceChange]:
        return [c for c in self.changes if c.action == action]

    @property
    def nodes_rolling(self) -> int:
        return sum(g.nodes_rolling for g in self.groups)

    @property
    def nodes_terminated(self) -> int:
        return sum(g.nodes_terminated for g in self.groups)

    @property
    def gpus_terminated(self) -> int:
        return sum(g.gpus_terminated for g in self.groups)

    @property
    def compute_loss(self) -> list[str]:
        """What the change terminates, group by group, and how to keep a renamed group's nodes."""
        lines = [g.roll for g in self.groups if g.nodes_terminated]
        removed = [g for g in self.groups if g.instance_head is None and g.nodes_terminated]
        added = [g for g in self.groups if g.instance_base is None]
        for old in removed:
            for new in added:
                if new.instance_head == old.instance_base:
                    lines.append(
                        f"if `{old.name}` was renamed to `{new.name}`, set `node_groups[{new.name}].renamed_from: "
                        f"{old.name}`: its resources keep their identity and no node is terminated"
                    )
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "base": self.base,
            "head": self.head,
            "counts": {a: len(self.by_action(a)) for a in ("create", "update", "replace", "delete")},
            "impact": {
                "totals": self.totals,
                "nodes_rolling": self.nodes_rolling,
                "nodes_terminated": self.nodes_terminated,
                "gpus_terminated": self.gpus_terminated,
                "compute_loss": self.compute_loss,
                "node_groups": [asdict(g) for g in self.groups],
                "storage": self.storage,
                "data_loss_risks": [asdict(r) for r in self.risks],
                "policies": {"new": self.policies_new, "fixed": self.policies_fixed},
                "configs": [asdict(c) for c in self.configs],
            },
            "cost": self.cost,
            "changes": [asdict(c) for c in self.changes],
            "notes": self.notes,
            "warnings": [self.other_stack] if self.other_stack else [],
            "replace_triggers_source": triggers_source(),
        }


def _resources(plan: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["urn"]: r for r in plan.get("resources", [])}


def _components(plan: Mapping[str, Any], type_: str, key: str) -> dict[str, dict[str, Any]]:
    return {str(r["inputs"].get(key, r["name"])): r for r in plan.get("resources", []) if r["type"] == type_}


def _urn_named(urn: str, name: str) -> str:
    return urn[: urn.rfind("::") + 2] + name


def previous_urns(resources: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Head URN -> the URN the resource had before, for resources with an alias and their children:
    as the engine does, a child named `{parent}-...` follows its parent's previous name."""
    names: dict[str, str] = {}

    def name_before(urn: str) -> str:
        if urn not in names:
            r = resources[urn]
            name = str(r["name"])
            parent = resources.get(str(r.get("parent") or ""))
            if r.get("aliases"):
                name = str(r["aliases"][0])
            elif parent is not None and name.startswith(str(parent["name"])):
                name = name_before(str(parent["urn"])) + name[len(str(parent["name"])) :]
            names[urn] = name
        return names[urn]

    return {urn: _urn_named(urn, name_before(urn)) for urn in resources if name_before(urn) != resources[urn]["name"]}


def _follow_aliases(old_res: dict[str, dict[str, Any]], new_res: Mapping[str, Mapping[str, Any]]) -> None:
    """Key the base's resources by the URN they continue as in head, so an aliased rename diffs as
    the engine applies it: updates in place, not delete + create."""
    for urn, before in previous_urns(new_res).items():
        if before in old_res and urn not in old_res:
            old_res[urn] = {**old_res.pop(before), "urn": urn}


def _classify(old: dict[str, Any], new: dict[str, Any]) -> ResourceChange | None:
    changed = changed_paths(old.get("inputs", {}), new.get("inputs", {}))
    change = ResourceChange(
        new["urn"],
        new["type"],
        new["name"],
        "update",
        properties=changed,
        protect=bool(old.get("protect")),
        retain_on_delete=bool(old.get("retainOnDelete")),
    )
    if not changed:
        return None
    for trigger in load_triggers().get(new["type"], ()):
        reason = _fires(trigger, old.get("inputs", {}), new.get("inputs", {}), changed)
        if reason is None:
            continue
        change.reasons.append(reason)
        change.sources.append(trigger.source)
        if trigger.effect == "replace":
            change.action = "replace"
        elif trigger.effect == "roll":
            change.rolls = True
    return change


def _cost_of(plan: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    if plan.get("cost"):
        return dict(plan["cost"]), "the plan's own price table"

    prices = load_catalog().prices
    if prices is None:
        return None, "no price table"
    return estimate_cost(plan.get("resources", []), prices).to_json(), "the current default price table"


def _unpriced(cost: Mapping[str, Any] | None) -> list[str]:
    lines = (cost or {}).get("lines", [])
    return [
        str(line["name"]) for line in lines if line.get("monthly_usd") is None and line.get("kind") not in SIZE_UNKNOWN
    ]


def _policy_key(v: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(v.get("pack", "")), str(v.get("rule", "")), str(v.get("urn", "")))


def diff_plans(
    base: Mapping[str, Any], head: Mapping[str, Any], base_label: str = "base", head_label: str = "head"
) -> PlanDiff:
    old_res, new_res = _resources(base), _resources(head)
    _follow_aliases(old_res, new_res)
    changes: list[ResourceChange] = []
    for urn, r in new_res.items():
        if not r.get("custom", True):
            continue
        if urn not in old_res:
            changes.append(ResourceChange(urn, r["type"], r["name"], "create", protect=bool(r.get("protect"))))
        else:
            change = _classify(old_res[urn], r)
            if change:
                changes.append(change)
    for urn, r in old_res.items():
        if r.get("custom", True) and urn not in new_res:
            changes.append(
                ResourceChange(
                    urn,
                    r["type"],
                    r["name"],
                    "delete",
                    protect=bool(r.get("protect")),
                    retain_on_delete=bool(r.get("retainOnDelete")),
                )
            )
    notes: list[str] = []
    groups = _group_impact(base, head, changes, old_res, new_res)
    risks = _risks(changes, old_res, new_res)
    if any(c.action == "replace" for c in changes):
        notes.append(
            "Replacements are predicted from replace_triggers.yaml; resources that reference a replaced "
            "resource's ID are updated too. `pulumi preview` is authoritative."
        )
    base_cost, base_cost_src = _cost_of(base)
    head_cost, head_cost_src = _cost_of(head)
    if base_cost_src != head_cost_src:
        notes.append(f"cost: base priced with {base_cost_src}, head with {head_cost_src}")
    base_s, head_s = base.get("summary", {}), head.get("summary", {})
    totals: dict[str, dict[str, float | None]] = {}
    for metric in (
        "gpus",
        "nodes",
        "spare_nodes",
        "efa_interfaces",
        "power_kw",
        "parallel_fs_tib",
        "parallel_fs_throughput_mbps",
    ):
        b, h = base_s.get(metric), head_s.get(metric)
        totals[metric] = {"base": b, "head": h, "delta": round(h - b, 3) if b is not None and h is not None else None}
    b_total = base_cost["total_monthly_usd"] if base_cost else None
    h_total = head_cost["total_monthly_usd"] if head_cost else None
    base_unpriced, head_unpriced = set(_unpriced(base_cost)), set(_unpriced(head_cost))
    # Both totals leaving out the same items compare like for like; an item priced on one side only would
    # make the delta its price, so that delta is not given.
    comparable = b_total is not None and h_total is not None and base_unpriced == head_unpriced
    totals["monthly_cost_usd"] = {
        "base": b_total,
        "head": h_total,
        "delta": round(h_total - b_total, 2) if comparable and b_total is not None and h_total is not None else None,
    }
    if base_unpriced != head_unpriced:
        one_side = sorted(base_unpriced ^ head_unpriced)
        notes.append(f"cost: not priced on one side only: {', '.join(one_side)}, so no total delta")
    elif base_unpriced:
        notes.append(f"cost: both totals leave out {', '.join(sorted(base_unpriced))} (not priced)")
    base_pol = {_policy_key(v): dict(v) for v in base.get("policies") or []}
    head_pol = {_policy_key(v): dict(v) for v in head.get("policies") or []}
    other_stack = ""
    if base.get("stack") != head.get("stack") and base.get("resources"):
        other_stack = (
            f"these are plans of two different stacks ({base.get('stack')} -> {head.get('stack')}): every "
            "resource shows as deleted and created; compare two plans of the same stack to review a change"
        )
    if "policies" not in base or "policies" not in head:
        notes.append("policy results: at least one plan carries none (planned before policies were wired)")
    if ("rendered" in base) != ("rendered" in head) and base.get("resources"):
        notes.append(
            "rendered configuration (slurm.conf, ...): one plan carries none (planned before plans carried it), "
            "so its changes are not shown"
        )
    return PlanDiff(
        stack=str(head.get("stack") or base.get("stack") or "?"),
        base=base_label,
        head=head_label,
        changes=sorted(
            changes, key=lambda c: (("replace", "delete", "update", "create").index(c.action), c.type, c.name)
        ),
        groups=groups,
        risks=risks,
        totals=totals,
        storage=_storage(base, head),
        cost={"base": base_cost, "head": head_cost, "lines": _cost_lines(base_cost, head_cost)},
        policies_new=[v for k, v in head_pol.items() if k not in base_pol],
        policies_fixed=[v for k, v in base_pol.items() if k not in head_pol],
        notes=notes,
        other_stack=other_stack,
        configs=config_changes(base, head) if ("rendered" in base) == ("rendered" in head) else [],
        capacity_windows=[
            w.text()
            for w in block_windows(
                r.get("inputs", {}) for r in head.get("resources", []) if r.get("type") == NODE_GROUP
            )
        ],
    )


def config_changes(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[ConfigChange]:
    """The rendered files (plan["rendered"][kind][name]) that differ, with a unified diff each. A file
    only one side has (the scheduler added or removed, topology.conf appearing) diffs against nothing."""
    old, new = base.get("rendered") or {}, head.get("rendered") or {}
    changes = []
    for kind in sorted(set(old) | set(new)):
        old_files, new_files = old.get(kind) or {}, new.get(kind) or {}
        for name in sorted(set(old_files) | set(new_files)):
            before, after = old_files.get(name), new_files.get(name)
            if before == after:
                continue
            lines = list(
                difflib.unified_diff(
                    (before or "").splitlines(keepends=True),
                    (after or "").splitlines(keepends=True),
                    fromfile=f"base/{name}" if before is not None else "/dev/null",
                    tofile=f"head/{name}" if after is not None else "/dev/null",
                )
            )
            body = [line for line in lines[2:] if not line.startswith("@@")]
            status = "added" if before is None else "removed" if after is None else "changed"
            changes.append(
                ConfigChange(
                    kind=kind,
                    name=name,
                    status=status,
                    added=sum(line.startswith("+") for line in body),
                    removed=sum(line.startswith("-") for line in body),
                    diff="".join(line if line.endswith("\n") else line + "\n" for line in lines),
                )
            )
    return changes


def _group_impact(
    base: Mapping[str, Any],
    head: Mapping[str, Any],
    changes: list[ResourceChange],
    old_res: dict[str, dict[str, Any]],
    new_res: dict[str, dict[str, Any]],
) -> list[GroupImpact]:
    old_g, new_g = _components(base, NODE_GROUP, "nodeGroup"), _components(head, NODE_GROUP, "nodeGroup")
    for name, group in new_g.items():  # a renamed group continues its old one
        previous = group["inputs"].get("renamedFrom")
        if previous in old_g and previous not in new_g:
            old_g[name] = old_g.pop(previous)
    by_parent: dict[str, list[ResourceChange]] = {}
    for c in changes:
        res = new_res.get(c.urn) or old_res.get(c.urn) or {}
        if res.get("parent"):
            by_parent.setdefault(str(res["parent"]), []).append(c)
    out: list[GroupImpact] = []
    for name in list(old_g) + [n for n in new_g if n not in old_g]:
        o, n = old_g.get(name, {}).get("inputs", {}), new_g.get(name, {}).get("inputs", {})
        g = GroupImpact(
            name,
            o.get("instanceType"),
            n.get("instanceType"),
            int(o.get("count", 0)) + int(o.get("spares", 0)),
            int(n.get("count", 0)) + int(n.get("spares", 0)),
            int(o.get("count", 0)) * int(o.get("gpusPerNode", 0)),
            int(n.get("count", 0)) * int(n.get("gpusPerNode", 0)),
            gpu_model_base=o.get("gpuModel"),
            gpu_model_head=n.get("gpuModel"),
            renamed_from=n.get("renamedFrom") if o and n.get("renamedFrom") != name else None,
            size_base=group_size(o),
            size_head=group_size(n),
        )
        urn = (new_g.get(name) or old_g.get(name) or {}).get("urn", "")
        kids = by_parent.get(urn, [])
        asg = next((c for c in kids if c.type in NODE_CARRIERS and c.action in ("replace", "delete")), None)
        lt = next((c for c in kids if c.type == LAUNCH_TEMPLATE and (c.rolls or c.action == "replace")), None)
        running = min(g.nodes_base, g.nodes_head) if o and n else 0
        per_node = int(o.get("gpusPerNode", 0))
        if o and not n and g.nodes_base:
            g.nodes_terminated, g.gpus_terminated = g.nodes_base, g.nodes_base * per_node
            g.roll = (
                f"`{name}` is removed: its {g.nodes_base} nodes ({g.gpus_terminated} GPUs, {g.instance_base}) "
                "are terminated"
            )
        elif asg is not None and running:
            carrier = "Auto Scaling group" if asg.type == ASG else "EKS node group"
            g.nodes_rolling = g.nodes_base
            g.nodes_terminated, g.gpus_terminated = g.nodes_base, g.nodes_base * per_node
            g.roll = (
                f"`{name}`: {carrier} {asg.action}d: all {g.nodes_base} nodes ({g.gpus_terminated} GPUs) are "
                "terminated and relaunched, with the jobs on them"
            )
        elif lt is not None and running:
            g.nodes_rolling = running
            what = (
                f"instance type {g.instance_base} -> {g.instance_head}"
                if g.instance_base != g.instance_head
                else "launch template " + ", ".join(p for p in lt.properties[:4])
            )
            g.roll = f"{what}: the launch template gets a new version; " + how_nodes_roll(n, running)
        if (
            g.nodes_base != g.nodes_head
            or g.size_base != g.size_head
            or g.gpus_base != g.gpus_head
            or g.nodes_rolling
            or g.instance_base != g.instance_head
            or g.renamed_from
        ):
            out.append(g)
    return out


def _risks(
    changes: list[ResourceChange], old_res: dict[str, dict[str, Any]], new_res: dict[str, dict[str, Any]]
) -> list[Risk]:
    risks: list[Risk] = []
    created = {c.type for c in changes if c.action == "create"}
    for c in changes:
        kind = STATEFUL.get(c.type)
        if kind is None or c.action not in ("delete", "replace"):
            continue
        old_inputs = old_res.get(c.urn, {}).get("inputs", {})
        parts = [
            f"{kind} `{c.name}` will be "
            + ("DELETED" if c.action == "delete" else "REPLACED (deleted and recreated empty)")
        ]
        if c.reasons:
            parts.append("because " + "; ".join(c.reasons))
        if c.type == "aws:fsx/lustreFileSystem:LustreFileSystem":
            if str(old_inputs.get("deploymentType", "")).startswith("SCRATCH"):
                parts.append(
                    "SCRATCH file system: not replicated and no backups, so anything not exported to S3 is lost"
                )
            else:
                parts.append("restore from an FSx backup or re-import from the linked buckets")
        if c.type == "aws:kms/key:Key":
            parts.append("data encrypted under this key becomes unreadable once its deletion window ends")
        if c.type == "aws:s3/bucket:Bucket" and c.action == "delete" and c.type in created:
            parts.append(
                "a bucket is created in the same change: if this is a rename, add `aliases=` to keep the old one"
            )
        if c.retain_on_delete:
            parts.append("retainOnDelete: the old resource stays in the account but leaves the stack (orphaned)")
        if c.protect:
            parts.append("protected: `pulumi up` refuses until it is unprotected, which is the point")
        risks.append(Risk(c.urn, c.type, c.name, c.action, "; ".join(parts)))
    return risks


def _storage(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    old_fs, new_fs = _components(base, LUSTRE, "__name__"), _components(head, LUSTRE, "__name__")
    for name in sorted(set(old_fs) | set(new_fs)):
        o, n = old_fs.get(name, {}).get("inputs"), new_fs.get(name, {}).get("inputs")
        if o is None and n is not None:
            lines.append(f"file system `{name}` added: {n.get('capacityGib')} GiB {n.get('deploymentType')}")
        elif n is None and o is not None:
            lines.append(f"file system `{name}` removed: {o.get('capacityGib')} GiB {o.get('deploymentType')}")
        elif o is not None and n is not None:
            for key, unit in (
                ("deploymentType", ""),
                ("capacityGib", " GiB"),
                ("perUnitStorageThroughput", " MB/s/TiB"),
                ("throughputMbps", " MB/s"),
                ("efa", ""),
            ):
                if o.get(key) != n.get(key):
                    lines.append(f"file system `{name}` {key}: {_fmt(o.get(key))}{unit} -> {_fmt(n.get(key))}{unit}")
    old_b, new_b = _components(base, OBJECT_STORE, "__name__"), _components(head, OBJECT_STORE, "__name__")
    lines += [
        f"object store `{n}` added ({new_b[n]['inputs'].get('purpose')})" for n in sorted(set(new_b) - set(old_b))
    ]
    lines += [
        f"object store `{n}` removed ({old_b[n]['inputs'].get('purpose')})" for n in sorted(set(old_b) - set(new_b))
    ]
    return lines


def _cost_lines(base: Mapping[str, Any] | None, head: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    def index(c: Mapping[str, Any] | None) -> dict[tuple[str, str], Mapping[str, Any]]:
        return {(line["kind"], line["name"]): line for line in (c or {}).get("lines", [])}

    old, new = index(base), index(head)
    order = {"node_group": 0, "instance": 1, "database": 2, "file_system": 3, "efs": 4, "bucket": 5}
    out = []
    for key in sorted(set(old) | set(new), key=lambda k: (order.get(k[0], 9), k[1])):
        b = old.get(key, {}).get("monthly_usd")
        h = new.get(key, {}).get("monthly_usd")
        out.append(
            {
                "kind": key[0],
                "name": key[1],
                "detail_base": old[key].get("detail") if key in old else None,
                "detail_head": new[key].get("detail") if key in new else None,
                "base": b,
                "head": h,
                # Unpriced on a side where the item exists: no delta rather than a misleading one.
                "delta": None
                if (key in old and b is None) or (key in new and h is None)
                else round((h or 0) - (b or 0), 2),
            }
        )
    return out


# --- loading sides -----------------------------------------------------------------------------------

_PLAN_AT_REVISION = (
    "import json, sys\n"
    "from gpuforge.spec import SpecError\n"
    "try:\n"
    "    from gpuforge.plan.engine import plan_stack\n"
    "except ImportError:  # a revision from before gpuforge/ was regrouped by the user's day\n"
    "    from gpuforge.plan import plan_stack\n"
    "try:\n"
    "    plan = plan_stack(sys.argv[1])\n"
    "except SpecError as error:\n"
    "    sys.stderr.write(error.report() + '\\n')\n"
    "    raise SystemExit(2)\n"
    "with open(sys.argv[2], 'w') as f:\n"
    "    json.dump(plan.to_json(), f)\n"
)


def _git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise DiffError(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout.strip()


def plan_revision(revision: str, stack: str, repo: Path) -> dict[str, Any]:
    """Plan `stack` as it is at `revision`: that revision's program, components and stack file,
    evaluated by the current interpreter in a temporary worktree (removed afterwards)."""
    sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    with tempfile.TemporaryDirectory(prefix="gpuforge-diff-") as tmp:
        tree = Path(tmp) / "tree"
        _git(repo, "worktree", "add", "--detach", "--quiet", str(tree), sha)
        try:
            out = Path(tmp) / "plan.json"
            # The worktree first on the path: its gpuforge package wins over the editable install.
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
            result = subprocess.run(
                [sys.executable, "-c", _PLAN_AT_REVISION, stack, str(out)],
                cwd=tree,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
                raise DiffError(f"planning stack {stack!r} at {revision} ({sha[:12]}) failed:\n{tail}")
            plan: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
            return plan
        finally:
            subprocess.run(
                ["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], capture_output=True, check=False
            )
            subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True, check=False)


def empty_plan(stack: str) -> dict[str, Any]:
    """The plan of a stack that does not exist yet: a new stack diffs against nothing."""
    return {"stack": stack, "placement": None, "summary": {}, "outputs": {}, "cost": None, "resources": []}


def _stack_at(revision: str, stack: str, repo: Path) -> bool:
    """Whether the stack's file exists at `revision` (a stack new in a pull request does not)."""
    stack_file = find_project(repo).stack_dir / f"Pulumi.{stack}.yaml"
    top = Path(_git(repo, "rev-parse", "--show-toplevel")).resolve()
    spec = f"{revision}:{stack_file.resolve().relative_to(top).as_posix()}"
    return subprocess.run(["git", "-C", str(repo), "cat-file", "-e", spec], capture_output=True).returncode == 0


def load_side(ref: str, stack: str | None, repo: Path | None = None) -> tuple[dict[str, Any], str]:
    """A plan JSON file, or a git revision of the project's repository planned for `stack`.
    Returns (plan, label)."""
    path = Path(ref)
    if path.is_file():
        try:
            plan = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DiffError(f"{ref}: not a plan JSON file ({exc})") from None
        if not isinstance(plan, dict) or "resources" not in plan:
            raise DiffError(
                f"{ref}: not a plan JSON file (no 'resources'); write one with `gpuforge plan STACK --json F`"
            )
        if stack and plan.get("stack") and plan["stack"] != stack:
            raise DiffError(f"{ref}: a plan of stack {plan['stack']!r}, not {stack!r}")
        return plan, path.name
    if stack is None:
        raise DiffError(f"{ref}: not a file, so a git revision; pass --stack to say which stack to plan at it")
    repo = repo or find_project().root
    try:
        sha = _git(repo, "rev-parse", "--short=12", "--verify", "--quiet", f"{ref}^{{commit}}")
    except DiffError:
        raise DiffError(f"{ref}: neither a plan JSON file nor a git revision of {repo}") from None
    if not _stack_at(ref, stack, repo):
        return empty_plan(stack), f"{ref} ({sha}, no stack {stack!r} yet)"
    return plan_revision(ref, stack, repo), f"{ref} ({sha})"


# --- Markdown ------------------------------------------------------------------------------------------


def _num(value: float | None, unit: str = "", money: bool = False, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    sign = "+" if signed and value > 0 else ""
    if money:
        return f"{sign}{'-' if value < 0 else ''}${abs(value):,.0f}"
    text = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
    return f"{sign}{text}{unit}"


def _change(before: str | None, after: str | None) -> str:
    """`x`, or `x → y` when a side differs (— for a side that has none)."""
    if before == after:
        return before or "—"
    if before is not None and after is not None and before != after:
        return f"**{before} → {after}**"
    return f"{before or '—'} → {after or '—'}"


def render_markdown(d: PlanDiff) -> str:
    counts = {a: len(d.by_action(a)) for a in ("create", "update", "replace", "delete")}
    lines = [f"## gpuforge diff: `{d.stack}`", "", f"`{d.base}` → `{d.head}`", ""]
    if d.other_stack:
        lines += ["> [!WARNING]", f"> **{d.other_stack}**", ""]
    if d.nodes_terminated:
        lines += [
            "> [!CAUTION]",
            f"> **COMPUTE LOSS: this change terminates {d.nodes_terminated} nodes ({d.gpus_terminated} GPUs) "
            "and the jobs running on them.**",
            ">",
        ]
        lines += [f"> - {line}" for line in d.compute_loss]
        lines.append("")
    if d.risks:
        lines += ["> [!CAUTION]", "> **DATA LOSS RISK: this change deletes or replaces stateful resources.**", ">"]
        lines += [f"> - {r.message}" for r in d.risks]
        lines.append("")
    t = d.totals
    gpus, nodes, power, cost = t["gpus"], t["nodes"], t["power_kw"], t["monthly_cost_usd"]
    headline = [
        *([f"**{d.nodes_terminated} nodes ({d.gpus_terminated} GPUs) terminated**"] if d.nodes_terminated else []),
        f"**GPUs {_num(gpus['delta'], signed=True)}**",
        f"nodes {_num(nodes['delta'], signed=True)}",
        f"**{d.nodes_rolling} nodes roll**" if d.nodes_rolling else "no nodes roll",
        f"power {_num(power['delta'], ' kW', signed=True)}",
        f"cost {_num(cost['delta'], money=True, signed=True)}/month",
    ]
    lines += [" · ".join(headline), ""]
    lines += [
        f"Resources: {counts['create']} to create, {counts['update']} to update, "
        f"**{counts['replace']} to replace**, **{counts['delete']} to delete**.",
        "",
    ]
    lines += ["| | base | head | Δ |", "|---|---:|---:|---:|"]
    rows = [
        ("GPUs (active)", "gpus", ""),
        ("nodes (active)", "nodes", ""),
        ("spare nodes", "spare_nodes", ""),
        ("EFA interfaces", "efa_interfaces", ""),
        ("power, kW (with PUE)", "power_kw", ""),
        ("parallel FS, TiB", "parallel_fs_tib", ""),
        ("parallel FS, MB/s", "parallel_fs_throughput_mbps", ""),
    ]
    for label, key, unit in rows:
        v = t[key]
        lines.append(
            f"| {label} | {_num(v['base'], unit)} | {_num(v['head'], unit)} | {_num(v['delta'], unit, signed=True)} |"
        )
    lines.append(
        f"| monthly cost (on-demand estimate) | {_num(cost['base'], money=True)} | "
        f"{_num(cost['head'], money=True)} | {_num(cost['delta'], money=True, signed=True)} |"
    )
    if d.groups:
        lines += [
            "",
            "### Node groups",
            "",
            "| group | instance | GPU model | nodes (incl. spares) | GPUs | rolling | terminated |",
            "|---|---|---|---:|---:|---:|---:|",
        ]
        for g in d.groups:
            name = f"{g.name} (was {g.renamed_from})" if g.renamed_from else g.name
            lines.append(
                f"| {name} | {_change(g.instance_base, g.instance_head)} | "
                f"{_change(g.gpu_model_base, g.gpu_model_head)} | {g.size_base} → {g.size_head} | "
                f"{g.gpus_base} → {g.gpus_head} | {g.nodes_rolling} | {g.nodes_terminated} |"
            )
        rolls = [g for g in d.groups if g.roll]
        if rolls:
            lines += ["", "How nodes roll:", ""] + [f"- **{g.name}**: {g.roll}" for g in rolls]
    if d.capacity_windows:
        lines += ["", "### Capacity Blocks", ""] + [f"- {w}" for w in d.capacity_windows]
    if d.storage:
        lines += ["", "### Storage", ""] + [f"- {s}" for s in d.storage]
    if d.policies_new or d.policies_fixed:
        lines += ["", "### Policies", ""]
        lines += [
            f"- :x: new **{v.get('level', '')}** `{v.get('rule')}` ({v.get('pack')}): {v.get('message')}"
            for v in d.policies_new
        ]
        lines += [
            f"- :white_check_mark: fixed `{v.get('rule')}` ({v.get('pack')}): {v.get('message')}"
            for v in d.policies_fixed
        ]
    if d.configs:
        lines += ["", *_configs_markdown(d.configs)[:-1]]
    for action, title in (("replace", "Replaced"), ("delete", "Deleted"), ("update", "Updated"), ("create", "Created")):
        items = d.by_action(action)
        if not items:
            continue
        lines += ["", f"### {title} ({len(items)})", ""]
        if action in ("replace", "update"):
            lines += ["| resource | type | why |", "|---|---|---|"]
            for c in items:
                why = (
                    "; ".join(c.reasons)
                    if c.reasons
                    else ", ".join(c.properties[:6]) + (" ..." if len(c.properties) > 6 else "")
                )
                mark = " (nodes roll)" if c.rolls else ""
                lines.append(f"| `{c.name}` | `{c.type}` | {why}{mark} |")
        else:
            listed = [f"- `{c.name}` (`{c.type}`){' protected' if c.protect else ''}" for c in items]
            lines += (
                listed if len(listed) <= 15 else ["<details><summary>list</summary>", "", *listed, "", "</details>"]
            )
    lines += _cost_markdown(d)
    if d.notes:
        lines += ["", "<sub>" + " ".join(d.notes) + "</sub>"]
    return "\n".join(lines) + "\n"


CONFIG_TITLES = {
    "slurm": "Slurm configuration (what the nodes receive: `gpuforge render slurm`)",
    "slurmdbd": "Slurm tenancy (the accounts, users and QOS the slurm_dbd role keeps in slurmdbd)",
    "slurmctld": "Slurm reservations (the maintenance windows and bookings the slurm_controller role keeps)",
}


def _configs_markdown(configs: list[ConfigChange]) -> list[str]:
    out: list[str] = []
    for kind in dict.fromkeys(c.kind for c in configs):
        out += [f"### {CONFIG_TITLES.get(kind, kind)}", ""]
        for c in (c for c in configs if c.kind == kind):
            what = {"added": "new file", "removed": "removed", "changed": "changed"}[c.status]
            out += [
                f"<details><summary><code>{c.name}</code>: {what}, +{c.added} -{c.removed} lines</summary>",
                "",
                "```diff",
                c.diff.rstrip("\n"),
                "```",
                "",
                "</details>",
                "",
            ]
    return out


def _cost_markdown(d: PlanDiff) -> list[str]:
    head = d.cost.get("head") or d.cost.get("base")
    if not head:
        return []
    out = [
        "",
        "<details><summary>Cost estimate (monthly, on-demand list prices)</summary>",
        "",
        "| item | detail | base | head | Δ |",
        "|---|---|---:|---:|---:|",
    ]
    for line in d.cost["lines"]:
        detail = _change(line["detail_base"], line["detail_head"])
        if line["base"] is None and line["head"] is None:
            why = "size unknown" if line["kind"] in SIZE_UNKNOWN else "not priced"
            out.append(f"| {line['name']} | {detail} | {why} | {why} | |")
            continue
        out.append(
            f"| {line['name']} | {detail} | {_num(line['base'], money=True)} | "
            f"{_num(line['head'], money=True)} | {_num(line['delta'], money=True, signed=True)} |"
        )
    out += [
        "",
        f"Prices: {head['price_region']} {head['currency']} list prices"
        + (f", {head['discount_fraction']:.0%} discount" if head.get("discount_fraction") else "")
        + " (gpuforge/catalog/data/prices.yaml; rows marked unverified there need checking).",
        "",
    ]
    out += ["Not counted: " + "; ".join(head.get("not_counted", [])) + "."]
    if head.get("not_priced_resources"):
        out += ["", "Billed by AWS, not priced here: " + "; ".join(head["not_priced_resources"]) + "."]
    out += [f"- {w}" for w in head.get("warnings", [])]
    out += ["", "</details>"]
    return out
