"""gpuforge diff on plan pairs derived from the real stacks: each fixture under
tests/fixtures/stacks/diff/<case>/ is a copy of stacks/Pulumi.<env>.yaml with one change (same
file name, so the URNs match). Markdown goes to golden files: GPUFORGE_UPDATE_GOLDEN=1 rewrites them.
"""

from __future__ import annotations

import copy
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gpuforge.plan.engine import plan_stack
from gpuforge.review.diff import PlanDiff, diff_plans, load_triggers, render_markdown

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "stacks" / "diff"
GOLDEN = ROOT / "tests" / "golden" / "diff"


@cache
def _plan(stack: str) -> str:
    # JSON text, so every test gets a fresh copy to edit
    return json.dumps(plan_stack(stack if "/" not in stack else ROOT / stack).to_json())


def plan_json(stack: str) -> dict[str, Any]:
    return dict(json.loads(_plan(stack)))


def fixture(case: str, env: str) -> dict[str, Any]:
    return plan_json(f"tests/fixtures/stacks/diff/{case}/Pulumi.{env}.yaml")


def check_golden(name: str, result: PlanDiff) -> None:
    text = render_markdown(result)
    path = GOLDEN / f"{name}.md"
    if os.environ.get("GPUFORGE_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with GPUFORGE_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path} is stale; rerun with GPUFORGE_UPDATE_GOLDEN=1 and review the diff"


def test_identical_plans_have_no_changes() -> None:
    result = diff_plans(plan_json("prod"), plan_json("prod"))
    assert result.changes == [] and result.risks == [] and result.groups == []
    assert result.totals["gpus"]["delta"] == 0
    assert result.totals["monthly_cost_usd"]["delta"] == 0


def test_scale_up_adds_gpus_power_and_cost_without_rolling_nodes() -> None:
    result = diff_plans(plan_json("prod"), fixture("prod-scale-up", "prod"), "main", "scale-up")
    train = next(g for g in result.groups if g.name == "train")
    assert (train.nodes_base, train.nodes_head) == (66, 74)
    assert (train.gpus_base, train.gpus_head) == (512, 576)
    assert train.nodes_rolling == 0  # only the ASG size changes; user data must not depend on count
    assert result.totals["gpus"]["delta"] == 64
    assert result.totals["nodes"]["delta"] == 8
    power = result.totals["power_kw"]["delta"]
    assert power is not None and power == pytest.approx(8 * 10.2 * 1.14, rel=0.01)
    train_cost = next(line for line in result.cost["lines"] if line["name"] == "train")["delta"]
    assert train_cost == pytest.approx(8 * 55.04 * 730, rel=1e-6)
    # Lustre is sized from the workload (MB/s per GPU), so it grows with the GPUs
    assert "file system `forge-prod-lustre` capacityGib: 28800 GiB -> 33600 GiB" in result.storage
    cost = result.totals["monthly_cost_usd"]["delta"]
    assert cost is not None and cost > train_cost
    asg = [c for c in result.changes if c.type == "aws:autoscaling/group:Group"]
    assert [(c.name, c.action) for c in asg] == [("forge-prod-train-asg", "update")]
    assert {"desiredCapacity", "maxSize", "minSize"} <= set(asg[0].properties)
    assert result.risks == [] and result.by_action("replace") == [] and result.by_action("delete") == []
    check_golden("scale-up", result)


def test_instance_type_change_rolls_nodes_through_the_launch_template() -> None:
    result = diff_plans(plan_json("dev"), fixture("dev-instance-type", "dev"), "main", "g5.48xlarge")
    lt = next(c for c in result.changes if c.name == "forge-dev-train-lt")
    assert lt.action == "update" and lt.rolls
    assert "instanceType" in lt.properties
    train = next(g for g in result.groups if g.name == "train")
    assert (train.instance_base, train.instance_head) == ("g5.12xlarge", "g5.48xlarge")
    assert train.nodes_rolling == 2
    # dev's train group is a Slurm group: its nodes are drained, their jobs finish, then they are replaced.
    assert "drain then replace" in train.roll and "no job is killed" in train.roll
    assert result.totals["gpus"]["delta"] == 8  # 2 nodes x (8 - 4) A10G
    # g5.48xlarge has no row in the price table: said, and no fake delta for the group
    assert "train" in result.cost["head"]["unpriced"] and "train" not in result.cost["base"]["unpriced"]
    assert result.totals["monthly_cost_usd"]["delta"] is None  # priced on one side only: no honest delta
    assert next(line for line in result.cost["lines"] if line["name"] == "train")["delta"] is None
    assert result.risks == []
    check_golden("instance-type", result)


def test_slurm_partition_change_shows_the_rendered_slurm_conf_diff() -> None:
    """A pull request that edits only the scheduler section changes no cloud resource and no node; the
    review still shows what every node receives differently: slurm.conf's partition lines."""
    result = diff_plans(plan_json("dev"), fixture("dev-slurm-partitions", "dev"), "main", "partitions")
    assert result.groups == [] and result.risks == []
    assert [(c.kind, c.name, c.status) for c in result.configs] == [("slurm", "slurm.conf", "changed")]
    diff = result.configs[0].diff
    removed = [line for line in diff.splitlines() if line.startswith("-PartitionName=")]
    added = [line for line in diff.splitlines() if line.startswith("+PartitionName=")]
    assert len(removed) == len(added) == 2 and (result.configs[0].added, result.configs[0].removed) == (2, 2)
    assert "OverSubscribe=EXCLUSIVE" in added[0] and "MaxTime=60 " in added[1]
    text = render_markdown(result)
    assert "### Slurm configuration" in text and "```diff" in text and "+PartitionName=gpu" in text
    check_golden("slurm-partitions", result)


def test_passed_through_slurm_settings_show_in_the_slurm_conf_diff() -> None:
    """scheduler.extra_settings and a partition's extra_options reach the review as the lines slurm.conf gains
    (docs/slurm.md, "Settings gpuforge does not set"); no cloud resource or node changes."""
    result = diff_plans(plan_json("dev"), fixture("dev-slurm-settings", "dev"), "main", "settings")
    assert result.groups == [] and result.risks == []
    assert [(c.kind, c.name, c.status) for c in result.configs] == [("slurm", "slurm.conf", "changed")]
    lines = result.configs[0].diff.splitlines()
    added = [line for line in lines if line.startswith("+") and not line.startswith("+++")]
    removed = [line for line in lines if line.startswith("-") and not line.startswith("---")]
    assert "+JobCompType=jobcomp/filetxt" in added and "+JobCompLoc=/var/log/slurm/jobcomp.log" in added
    assert "-SchedulerParameters=nohold_on_prolog_fail" in removed
    assert "+SchedulerParameters=nohold_on_prolog_fail,bf_continue" in added
    debug = [line for line in added if line.startswith("+PartitionName=debug ")]
    assert len(debug) == 1 and debug[0].endswith(" State=UP Hidden=YES")


def test_a_tenancy_change_shows_what_slurmdbd_keeps() -> None:
    """A new team under an organisation with its own QOS, and a user removed: no resource and no node file
    changes, and the review shows the accounts, users and QOS the slurm_dbd role will keep in slurmdbd."""
    result = diff_plans(plan_json("dev"), fixture("dev-tenancy", "dev"), "main", "vision")
    assert result.groups == [] and result.changes == []
    assert [(c.kind, c.name, c.status) for c in result.configs] == [("slurmdbd", "tenancy", "changed")]
    body = [line for line in result.configs[0].diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert sorted(body) == sorted([
        "+QOS - 'vision-short':Description='Vision's short jobs':Priority=0:MaxTRESPerUser=gres/gpu=2"
        ":MaxWall=04:00:00",
        "+Account - 'labs':Parent='root':Description='The labs organisation':Fairshare=60",
        "+Account - 'vision':Parent='labs':Description='Vision team':Fairshare=1:QOS='vision-short'",
        "-User - 'alice':Account='research':DefaultAccount='research'",
        "+User - 'bob':Account='vision':DefaultAccount='vision'",
    ]), body
    assert "### Slurm tenancy" in render_markdown(result)


def test_a_reservation_change_shows_what_slurmctld_keeps() -> None:
    """A weekly maintenance window and a booking: no resource and no node file changes, and the review shows the
    reservations the slurm_controller role will keep in slurmctld, one a line."""
    result = diff_plans(plan_json("dev"), fixture("dev-reservations", "dev"), "main", "windows")
    assert result.groups == [] and result.changes == []
    assert [(c.kind, c.name, c.status) for c in result.configs] == [("slurmctld", "reservations", "changed")]
    body = [line for line in result.configs[0].diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert body == [
        "+ReservationName=gpuforge-driver-updates StartTime=2026-12-06T02:00:00Z EndTime=2026-12-06T06:00:00Z "
        "Duration=04:00:00 Flags=MAINT,IGNORE_JOBS,WEEKLY NodeGroups=train Users=root Accounts=(null)",
        "+ReservationName=gpuforge-research-demo StartTime=2026-12-03T08:00:00Z EndTime=2026-12-03T18:00:00Z "
        "Duration=10:00:00 Flags=IGNORE_JOBS NodeCnt=1 PartitionName=gpu Users=(null) Accounts=research",
    ], body
    assert "### Slurm reservations" in render_markdown(result)


def test_instance_type_change_shows_new_node_facts_in_slurm_conf() -> None:
    """g5.12xlarge -> g5.48xlarge: the cloud group's registration line (slurmd -Z --conf) carries the new
    CPUs, memory and GPUs, in slurm.conf's comment and in the group's /etc/default/slurmd."""
    result = diff_plans(plan_json("dev"), fixture("dev-instance-type", "dev"), "main", "g5.48xlarge")
    changed = {c.name: c for c in result.configs}
    assert set(changed) == {"slurm.conf", "slurmd.train"}
    assert "Gres=gpu:a10g:8" in changed["slurmd.train"].diff
    assert any(line.startswith("+") and "g5.48xlarge" in line for line in changed["slurm.conf"].diff.splitlines())


def test_plans_without_rendered_configs_say_so() -> None:
    old = plan_json("dev")
    del old["rendered"]
    result = diff_plans(old, fixture("dev-slurm-partitions", "dev"))
    assert result.configs == []
    assert any("rendered configuration" in note for note in result.notes)


def test_file_system_growth_is_an_update_and_shrink_replaces_scratch_loudly() -> None:
    grow = diff_plans(plan_json("dev"), fixture("dev-fs-2400", "dev"), "1200", "2400")
    fs = next(c for c in grow.changes if c.type == "aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs.action == "update" and fs.properties == ["storageCapacity"]
    assert grow.risks == []
    assert "file system `forge-dev-lustre` capacityGib: 1200 GiB -> 2400 GiB" in grow.storage

    shrink = diff_plans(fixture("dev-fs-2400", "dev"), plan_json("dev"), "2400", "1200")
    fs = next(c for c in shrink.changes if c.type == "aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs.action == "replace"
    assert fs.reasons == ["storageCapacity decreased 2400 -> 1200"]
    assert "CustomizeDiff" in fs.sources[0]
    assert [r.name for r in shrink.risks] == ["forge-dev-lustre-fs"]
    assert "SCRATCH" in shrink.risks[0].message and "REPLACED" in shrink.risks[0].message
    text = render_markdown(shrink)
    assert "[!CAUTION]" in text and "DATA LOSS RISK" in text
    check_golden("fs-shrink", shrink)


def test_bucket_rename_is_flagged_as_data_loss() -> None:
    result = diff_plans(plan_json("dev"), fixture("dev-bucket-rename", "dev"), "main", "rename")
    deleted = {c.name for c in result.by_action("delete")}
    created = {c.name for c in result.by_action("create")}
    assert "forge-dev-data-bucket" in deleted and "forge-dev-datasets-bucket" in created
    risk = next(r for r in result.risks if r.name == "forge-dev-data-bucket")
    assert risk.action == "delete" and "rename" in risk.message and "aliases=" in risk.message
    # the DRA follows the bucket: same URN, new data repository path
    assert "object store `forge-dev-datasets` added (data)" in result.storage
    check_golden("bucket-rename", result)


def test_protected_prod_bucket_replacement_says_protected_and_retained() -> None:
    base = plan_json("prod")
    head = copy.deepcopy(base)
    bucket = next(r for r in head["resources"] if r["name"] == "forge-prod-checkpoints-bucket")
    bucket["inputs"]["bucket"] = "forge-prod-ckpt"  # an explicit name: ForceNew
    result = diff_plans(base, head)
    change = next(c for c in result.changes if c.name == "forge-prod-checkpoints-bucket")
    assert change.action == "replace" and change.reasons == ["bucket unset -> forge-prod-ckpt"]
    risk = result.risks[0]
    assert "protected" in risk.message and "retainOnDelete" in risk.message


def test_placement_group_strategy_change_replaces_it() -> None:
    base = plan_json("dev")  # dev's EFA group has a cluster placement group (prod's sits in its reservation's)
    head = copy.deepcopy(base)
    next(r for r in head["resources"] if r["name"] == "forge-dev-train-pg")["inputs"]["strategy"] = "spread"
    result = diff_plans(base, head)
    assert [(c.name, c.action) for c in result.by_action("replace")] == [("forge-dev-train-pg", "replace")]
    assert result.risks == []  # not stateful


def test_new_and_fixed_policy_violations() -> None:
    base, head = plan_json("dev"), plan_json("dev")
    fixed = {
        "pack": "security",
        "rule": "security-bucket-versioning",
        "level": "mandatory",
        "urn": "urn:x:bucket",
        "message": "bucket versioning is off",
    }
    new = {
        "pack": "power",
        "rule": "power-cluster-budget",
        "level": "mandatory",
        "urn": "urn:x:cluster",
        "message": "7.4 kW exceeds the 5 kW budget",
    }
    base["policies"] = [fixed]
    head["policies"] = [new]
    result = diff_plans(base, head, "main", "pr")
    assert [v["rule"] for v in result.policies_new] == ["power-cluster-budget"]
    assert [v["rule"] for v in result.policies_fixed] == ["security-bucket-versioning"]
    text = render_markdown(result)
    assert ":x: new **mandatory** `power-cluster-budget`" in text
    assert ":white_check_mark: fixed `security-bucket-versioning`" in text
    check_golden("policy", result)


def test_plans_without_policies_or_cost_still_diff() -> None:
    base, head = plan_json("dev"), plan_json("dev")
    for p in (base, head):
        p.pop("policies", None)
        p.pop("cost", None)
    result = diff_plans(base, head)
    assert result.totals["monthly_cost_usd"]["base"] == result.totals["monthly_cost_usd"]["head"] > 0
    assert any("carries none" in n for n in result.notes)


def test_trigger_table_cites_a_source_for_every_row() -> None:
    triggers = load_triggers()
    assert {
        "aws:fsx/lustreFileSystem:LustreFileSystem",
        "aws:ec2/placementGroup:PlacementGroup",
        "aws:s3/bucket:Bucket",
        "aws:ec2/subnet:Subnet",
        "aws:ec2/launchTemplate:LaunchTemplate",
    } <= set(triggers)
    for rows in triggers.values():
        for t in rows:
            assert (
                t.source.strip()
                and t.effect in ("replace", "roll")
                and t.when in ("changed", "decreased", "changed_if")
            )


def test_renaming_a_node_group_terminates_its_nodes_loudly_and_names_the_fix() -> None:
    result = diff_plans(plan_json("dev"), fixture("dev-group-rename", "dev"), "main", "rename")
    assert result.totals["gpus"]["delta"] == 0 and result.totals["nodes"]["delta"] == 0  # what hid it before
    assert (result.nodes_terminated, result.gpus_terminated) == (2, 8)
    train = next(g for g in result.groups if g.name == "train")
    assert (train.nodes_terminated, train.gpus_terminated, train.instance_head) == (2, 8, None)
    assert any("renamed_from: train" in line for line in result.compute_loss)
    text = render_markdown(result)
    assert "COMPUTE LOSS" in text and "**2 nodes (8 GPUs) terminated**" in text
    check_golden("group-rename", result)


def test_renamed_from_keeps_the_nodes_the_way_the_engine_follows_aliases() -> None:
    head = fixture("dev-group-renamed-from", "dev")
    component = next(r for r in head["resources"] if r["type"] == "gpuforge:aws:GpuNodeGroup" and r.get("aliases"))
    assert component["aliases"] == ["forge-dev-train"]  # the alias the program registers
    result = diff_plans(plan_json("dev"), head, "main", "renamed")
    assert result.nodes_terminated == 0 and result.risks == []
    assert result.by_action("delete") == [] and result.by_action("replace") == []
    asg = next(c for c in result.changes if c.type == "aws:autoscaling/group:Group")
    assert asg.urn.endswith("::forge-dev-trainer-asg") and asg.action == "update"  # tags name the new key
    trainer = next(g for g in result.groups if g.name == "trainer")
    assert trainer.renamed_from == "train" and trainer.nodes_base == trainer.nodes_head == 2


def test_a_gpu_model_change_is_named() -> None:
    result = diff_plans(plan_json("dev"), fixture("dev-gpu-model", "dev"), "main", "l40s")
    train = next(g for g in result.groups if g.name == "train")
    assert (train.gpu_model_base, train.gpu_model_head) == ("A10G", "L40S")
    assert "**A10G → L40S**" in render_markdown(result)


def test_plans_of_two_different_stacks_get_a_warning() -> None:
    result = diff_plans(plan_json("dev"), plan_json("prod"), "dev", "prod")
    assert "two different stacks" in result.other_stack
    assert "[!WARNING]" in render_markdown(result)
    assert result.to_json()["warnings"] == [result.other_stack]
