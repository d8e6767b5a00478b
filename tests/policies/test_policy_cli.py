"""The packs in `gpuforge plan` (exit codes, grouping, JSON, Markdown) and `gpuforge policies`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.plan.model import Plan
from gpuforge.policy.rules import PACKS, REGISTRY

ROOT = Path(__file__).resolve().parents[2]
STACKS = ROOT / "tests" / "fixtures" / "stacks"
BROKEN = STACKS / "Pulumi.prod-broken.yaml"
WAIVED = STACKS / "Pulumi.prod-waived.yaml"
runner = CliRunner()

BROKEN_RULES = {
    "redundancy-nodegroup-spares",  # spares: 0
    "redundancy-lustre-persistent",  # SCRATCH_2
    "security-lustre-kms",  # SCRATCH_2 takes no customer key
    "redundancy-bucket-checkpoint-replication",  # replication_region removed
    "power-cluster-budget",  # budget_kw 800 < ~1,014 kW
    "security-securitygroup-open-ingress",  # 0.0.0.0/0 on 22
}


def plan_json(stack: Path | str, tmp_path: Path) -> tuple[int, dict]:
    out = tmp_path / "plan.json"
    result = runner.invoke(app, ["plan", str(stack), "--no-tree", "--json", str(out)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(out.read_text())


def test_prod_passes_every_mandatory_rule(prod_plan: Plan) -> None:
    report = prod_plan.policy
    assert report is not None and report.environment == "prod"
    assert report.findings == []
    assert not report.blocking
    mandatory = {rule for rule, level in report.levels.items() if level == "mandatory"}
    assert mandatory == set(REGISTRY)


def test_plan_prod_exits_0_and_shows_headroom(tmp_path: Path) -> None:
    md = tmp_path / "plan.md"
    result = runner.invoke(app, ["plan", "prod", "--no-tree", "--markdown", str(md)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "headroom" in result.output and "1,100.0 kW" in result.output
    assert "no violations" in result.output
    text = md.read_text()
    assert "### Power" in text and "headroom" in text and f"All {len(REGISTRY)} rules pass." in text


def test_broken_prod_exits_1_naming_the_rules(tmp_path: Path) -> None:
    code, data = plan_json(BROKEN, tmp_path)
    assert code == 1
    assert {p["rule"] for p in data["policies"]} == BROKEN_RULES
    assert {p["level"] for p in data["policies"]} == {"mandatory"}
    for p in data["policies"]:
        assert set(p) == {"pack", "rule", "level", "urn", "message"}
        assert p["pack"] == p["rule"].split("-")[0]
    assert data["power"]["budget"]["headroomKw"] < 0
    result = runner.invoke(app, ["plan", str(BROKEN), "--no-tree"], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    assert "mandatory (6)" in result.output
    for rule in BROKEN_RULES:
        assert rule in result.output


def test_broken_prod_json_to_stdout_also_exits_1() -> None:
    result = runner.invoke(app, ["plan", str(BROKEN), "--json", "-"])
    assert result.exit_code == 1
    assert {p["rule"] for p in json.loads(result.stdout)["policies"]} == BROKEN_RULES


def test_dev_shows_only_advisories(tmp_path: Path) -> None:
    code, data = plan_json("dev", tmp_path)
    assert code == 0
    assert data["policies"], "dev has a known advisory (SCRATCH Lustre)"
    assert {p["level"] for p in data["policies"]} == {"advisory"}
    # dev's train group is elastic (0-2): it asks for no spares, so only the Lustre key advisory remains.
    assert {p["rule"] for p in data["policies"]} == {"security-lustre-kms"}


def test_waiver_shown_as_waived(tmp_path: Path) -> None:
    code, data = plan_json(WAIVED, tmp_path)
    assert code == 0
    assert [(p["rule"], p["level"]) for p in data["policies"]] == [("security-securitygroup-open-ingress", "waived")]
    assert "waived until 2099-12-31" in data["policies"][0]["message"]
    md = tmp_path / "plan.md"
    runner.invoke(app, ["plan", str(WAIVED), "--no-tree", "--markdown", str(md)])
    assert "**waived** (1)" in md.read_text()


def test_expired_waiver_is_a_violation(tmp_path: Path) -> None:
    expired = tmp_path / "Pulumi.prod-expired.yaml"
    expired.write_text(WAIVED.read_text().replace("expires: 2099-12-31", "expires: 2020-01-01"))
    code, data = plan_json(expired, tmp_path)
    assert code == 1
    [finding] = data["policies"]
    assert finding["level"] == "mandatory"
    assert "waiver expired 2020-01-01" in finding["message"]


def test_invalid_policy_settings_exit_2_with_field_path(tmp_path: Path) -> None:
    bad = tmp_path / "Pulumi.prod-bad-policy.yaml"
    bad.write_text(WAIVED.read_text().replace("expires: 2099-12-31", "expires: someday"))
    result = runner.invoke(app, ["plan", str(bad), "--no-tree"], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "policy.waivers[0].expires" in result.output


def test_policies_command_lists_every_rule() -> None:
    result = runner.invoke(app, ["policies", "--json"])
    assert result.exit_code == 0
    rules = json.loads(result.stdout)
    assert {r["id"] for r in rules} == set(REGISTRY)
    for r in rules:
        assert r["pack"] in PACKS and r["why"] and r["levels"]["prod"] == "mandatory"
    table = runner.invoke(app, ["policies"], env={"COLUMNS": "250"})
    assert table.exit_code == 0
    for rule_id in REGISTRY:
        assert rule_id in table.output
