"""gpuforge:policy: validation with field paths, levels, params, waivers; and the stack-file schema."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from gpuforge.plan.schema import stack_file_schema
from gpuforge.policy.rules import REGISTRY, Violation
from gpuforge.policy.settings import Settings, parse_policy, settings_from_config
from gpuforge.spec import SpecError

ROOT = Path(__file__).resolve().parents[2]


def issues(data: object) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_policy(data, "stack.yaml")
    return [str(i) for i in caught.value.issues]


def test_valid_settings_parse() -> None:
    settings = parse_policy(
        {
            "levels": {"security": "advisory", "power-cluster-budget": "mandatory"},
            "params": {"redundancy-nodegroup-spares": {"nodes_per_spare": 16}},
            "waivers": [
                {
                    "rule": "security-bucket-versioning",
                    "resource": "b",
                    "reason": "migrating (OPS-1)",
                    "expires": "2030-01-01",
                }
            ],
        }
    )
    s = Settings("prod", settings)
    assert s.level(REGISTRY["security-bucket-versioning"]) == "advisory"
    assert s.level(REGISTRY["redundancy-nodegroup-spares"]) == "mandatory"
    assert s.params(REGISTRY["redundancy-nodegroup-spares"]) == {"nodes_per_spare": 16, "min_spares_prod": 1}
    assert settings.waivers[0].expires == date(2030, 1, 1)


def test_every_problem_named_by_field_path() -> None:
    found = issues(
        {
            "levels": {"power-cluster-budget": "blocking"},
            "waivers": [{"rule": "security-bucket-versioning", "resource": "b", "reason": "short", "expires": "soon"}],
            "extra": 1,
        }
    )
    joined = "\n".join(found)
    assert any(
        "policy.levels[security-no-such-rule]: unknown rule or pack 'security-no-such-rule'" in i
        for i in issues({"levels": {"security-no-such-rule": "advisory"}})
    )
    assert "policy.levels[power-cluster-budget]" in joined and "mandatory, advisory, disabled" in joined
    assert "policy.waivers[0].reason" in joined
    assert "policy.waivers[0].expires" in joined and "YYYY-MM-DD" in joined
    assert "policy.extra: unknown field 'extra'" in joined


def test_params_checked_against_the_rule() -> None:
    assert any(
        "has no parameter 'per_node'" in i for i in issues({"params": {"redundancy-nodegroup-spares": {"per_node": 3}}})
    )
    assert any(
        "policy.params[redundancy-nodegroup-spares].nodes_per_spare: got 'x'; expected a whole number" in i
        for i in issues({"params": {"redundancy-nodegroup-spares": {"nodes_per_spare": "x"}}})
    )
    assert any(
        "unknown rule" in i
        for i in issues(
            {
                "waivers": [
                    {"rule": "security-nope-nope", "resource": "r", "reason": "0123456789", "expires": "2030-01-01"}
                ]
            }
        )
    )


def test_waiver_matches_name_or_urn_and_expires_after_its_day() -> None:
    settings = parse_policy(
        {
            "waivers": [
                {
                    "rule": "security-lustre-kms",
                    "resource": "fs",
                    "reason": "scratch in prod (OPS-9)",
                    "expires": "2026-03-31",
                }
            ]
        }
    )
    v = Violation(
        "security-lustre-kms", "urn:pulumi:prod::gpuforge::aws:fsx/lustreFileSystem:LustreFileSystem::fs", "m"
    )
    waiver = Settings("prod", settings).waiver_for(v)
    assert waiver is not None
    assert not waiver.expired(date(2026, 3, 31)) and waiver.expired(date(2026, 4, 1))
    assert Settings("prod", settings).waiver_for(Violation("security-bucket-versioning", v.urn, "m")) is None


def test_environment_comes_from_the_cluster_spec() -> None:
    assert settings_from_config({"gpuforge:cluster": {"environment": "dev"}}).environment == "dev"
    assert settings_from_config({}).environment == "prod"  # fail closed


def test_stack_file_schema_has_policy_key_and_is_committed() -> None:
    schema = stack_file_schema()
    assert schema["properties"]["config"]["properties"]["gpuforge:policy"] == {"$ref": "#/$defs/PolicySettings"}
    assert set(schema["$defs"]["Waiver"]["properties"]["rule"]["enum"]) == set(REGISTRY)
    committed = json.loads((ROOT / "schemas" / "cluster.schema.json").read_text())
    assert committed["$defs"]["PolicySettings"] == schema["$defs"]["PolicySettings"]
    assert committed["$defs"]["Waiver"] == schema["$defs"]["Waiver"]


def test_params_checked_against_each_rules_own_schema() -> None:
    """Range and item type: values that would pass a type check and crash a rule in plan."""
    found = issues(
        {
            "params": {
                "redundancy-nodegroup-spares": {"nodes_per_spare": 0},
                "security-securitygroup-open-ingress": {"ports": ["ssh"]},
                "power-cluster-budget": {"min_headroom_fraction": 0.95},
            }
        }
    )
    assert any(i.startswith("policy.params[redundancy-nodegroup-spares].nodes_per_spare: got 0; expected at least 1")
               for i in found)
    assert any(i.startswith("policy.params[security-securitygroup-open-ingress].ports: item 0: got 'ssh'")
               for i in found)
    assert any(i.startswith("policy.params[power-cluster-budget].min_headroom_fraction: got 0.95; expected at most 0.9")
               for i in found)


def test_misspelled_rule_ids_get_a_suggestion() -> None:
    found = issues(
        {
            "levels": {"secruity": "advisory"},
            "waivers": [
                {"rule": "security-bucket-versoning", "resource": "b", "reason": "0123456789", "expires": "2030-01-01"}
            ],
        }
    )
    assert "policy.levels[secruity]: unknown rule or pack 'secruity'; fix: did you mean security?" in found
    assert any("policy.waivers[0].rule" in i and "did you mean security-bucket-versioning" in i for i in found)


def test_waiver_dates_are_checked_not_crashed_on() -> None:
    found = issues(
        {"waivers": [{"rule": "security-bucket-versioning", "resource": "b", "reason": "0123456789",
                      "expires": "2026-02-30"}]}
    )
    assert any(i.startswith("policy.waivers[0].expires: got '2026-02-30', which is not a real date") for i in found)
