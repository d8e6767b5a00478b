"""The typed path helper: paths in the one notation of spec problems, each step checked against the models."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpuforge.spec.paths import CLUSTER, NODE_GROUPS

PACKAGE = Path(__file__).resolve().parents[2] / "gpuforge"


def test_paths_read_as_every_problem_writes_them() -> None:
    assert NODE_GROUPS.key("train").field("capacity", "reservation_id") == (
        "cluster.node_groups[train].capacity.reservation_id"
    )
    assert CLUSTER.field("storage", "object_stores").key("ckpt").field("lifecycle", "expiration_days") == (
        "cluster.storage.object_stores[ckpt].lifecycle.expiration_days"
    )
    teams = CLUSTER.field("kubernetes", "platform", "teams")
    quota = teams.key("vision").field("gpu_quota").key("H100")
    assert quota == "cluster.kubernetes.platform.teams[vision].gpu_quota[H100]"


def test_a_union_field_takes_the_fields_of_any_member() -> None:
    # capacity is on_demand | capacity_reservation | capacity_block | spot: each member's fields are paths.
    assert NODE_GROUPS.key("a").field("capacity", "placement_group").endswith("capacity.placement_group")
    assert NODE_GROUPS.key("a").field("capacity", "start").endswith("capacity.start")
    assert CLUSTER.field("placement", "site") == "cluster.placement.site"


def test_a_misspelt_field_or_a_key_into_a_model_fails_where_the_path_is_built() -> None:
    with pytest.raises(AttributeError, match=r"cluster.node_groups\[train\] \(NodeGroup\) has no field 'cout'"):
        NODE_GROUPS.key("train").field("cout")
    with pytest.raises(TypeError, match="not a map or list"):
        CLUSTER.field("network").key("cidr")
    with pytest.raises(AttributeError, match="no model"):
        NODE_GROUPS.key("train").field("instance_type", "family")


def _chain(node: ast.expr) -> list[tuple[str, list[ast.expr]]] | None:
    """The steps of CLUSTER/NODE_GROUPS.field(..).key(..) as written, innermost first; None if not rooted there."""
    steps: list[tuple[str, list[ast.expr]]] = []
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("field", "key"):
        steps.append((node.func.attr, list(node.args)))
        node = node.func.value
    if not steps or not (isinstance(node, ast.Name) and node.id in ROOTS):
        return None
    return [(node.id, []), *reversed(steps)]


ROOTS = {"CLUSTER": CLUSTER, "NODE_GROUPS": NODE_GROUPS}


def test_every_path_written_in_the_package_names_real_fields() -> None:
    """Each literal path chain in gpuforge/ is built here, so a branch no other test reaches cannot hold a
    misspelt field (it would raise in a user's report instead of naming the problem)."""
    checked = 0
    for file in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            steps = _chain(node) if isinstance(node, ast.Call) else None
            if steps is None:
                continue
            path = ROOTS[steps[0][0]]
            for step, args in steps[1:]:
                if step == "key":
                    path = path.key("k")
                elif all(isinstance(a, ast.Constant) for a in args):
                    path = path.field(*(str(a.value) for a in args if isinstance(a, ast.Constant)))
                else:  # a field named by a variable: its values are the test of that check's own business
                    break
            checked += 1
    assert checked >= 20
