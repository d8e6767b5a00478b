"""Numbers that tell the truth: cost caveats shown where the total is, unpriced groups never dropped
silently, the PUE that fits the placement with its source, and policy fixes in spec keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpuforge.plan.engine import plan_stack
from gpuforge.policy.rules import REGISTRY
from gpuforge.review.report import markdown_plan, summary_rows
from gpuforge.spec import SpecError, resolve
from tests.support import REPO as SOURCE_ROOT
from tests.support import planned

SCHEMA = json.loads((SOURCE_ROOT / "schemas" / "cluster.schema.json").read_text())


def dev_spec() -> dict:
    return dict(yaml.safe_load((SOURCE_ROOT / "stacks" / "Pulumi.dev.yaml").read_text())["config"]["gpuforge:cluster"])


def test_an_unpriced_group_is_named_beside_the_total_and_in_the_markdown() -> None:
    plan = plan_stack(SOURCE_ROOT / "tests/fixtures/stacks/diff/dev-instance-type/Pulumi.dev.yaml")
    # g5.48xlarge has no row; nor has the accounting database's class (no sourced RDS row yet)
    assert plan.cost is not None and plan.cost.unpriced == ["forge-dev-slurm-db", "train"]
    cost = dict(summary_rows(plan))["monthly cost (on-demand)"]
    assert "not priced: forge-dev-slurm-db, train" in cost
    text = markdown_plan(plan)
    assert "Cost caveats:" in text and "no price for: forge-dev-slurm-db, train" in text


def test_unverified_rows_are_a_caveat_in_every_view() -> None:
    plan = planned("prod")
    assert plan.cost is not None
    caveat = next(c for c in plan.cost.caveats if c.startswith("unverified price rows"))
    assert "train" in caveat
    assert caveat in markdown_plan(plan) and caveat in plan.to_json()["cost"]["caveats"]


def test_the_cloud_uses_the_providers_pue_and_a_site_its_own() -> None:
    cloud, site = planned("dev").policy, planned("onprem-lab").policy
    assert cloud is not None and site is not None
    assert cloud.power.pue == pytest.approx(1.14) and "AWS" in cloud.power.pue_source
    assert "site" in site.power.pue_source and site.power.pue != pytest.approx(1.14)


def test_backup_retention_is_a_spec_key_the_lustre_rule_names() -> None:
    rule = REGISTRY["redundancy-lustre-backup"]
    assert "storage.parallel_fs.backup_retention_days" in rule.fix
    lustre = next(d for d in SCHEMA["$defs"].values() if d.get("title") == "FsxLustre")
    assert "backup_retention_days" in lustre["properties"]


def test_backups_on_scratch_are_rejected_with_the_path(tmp_path: Path) -> None:
    spec = dev_spec()
    spec["storage"]["parallel_fs"]["backup_retention_days"] = 7  # dev is SCRATCH_2
    with pytest.raises(SpecError) as raised:
        resolve(spec)
    assert "cluster.storage.parallel_fs" in raised.value.report() and "PERSISTENT_2" in raised.value.report()
