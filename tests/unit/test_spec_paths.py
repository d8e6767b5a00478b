"""The typed path helper: paths in the one notation of spec problems, each step checked against the models."""

from __future__ import annotations

import pytest

from gpuforge.spec.paths import CLUSTER, NODE_GROUPS


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
