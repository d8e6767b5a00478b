"""A site login host on its controller host (a head node, issue 28 item 1): valid with a warning (a spec check of
level warning), shown by `gpuforge validate` and `gpuforge plan`, the advisory redundancy-slurm-head-node in the
plan, and the host in both the controller's and the login nodes' plays, whose slurm.conf is one file. The plan is
tests/fixtures/stacks/Pulumi.onprem-head.yaml (onprem-lab with login on slurm-01)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.nodes.bake import PLAYBOOKS_DIR
from gpuforge.nodes.inventory import build_inventory
from gpuforge.plan.stacks import load_stack
from gpuforge.review.report import markdown_plan
from gpuforge.spec import SpecError, resolve
from gpuforge.spec.registry import REGISTRY
from tests.support import REPO, planned

HEAD = str(REPO / "tests" / "fixtures" / "stacks" / "Pulumi.onprem-head.yaml")
CHECK = "spec-scheduler-login-on-controller"


def _lab() -> dict[str, Any]:
    return copy.deepcopy(load_stack("onprem-lab").cluster)


def test_the_check_is_registered_as_a_warning() -> None:
    assert REGISTRY[CHECK].level == "warning"


def test_login_on_the_controller_host_is_valid_with_one_warning() -> None:
    data = _lab()
    data["scheduler"]["login"]["hosts"] = {"slurm-01": "10.64.1.6"}
    resolved = resolve(data, "head")
    assert resolved.scheduler is not None and resolved.scheduler.login_hosts == {"slurm-01": "10.64.1.6"}
    (warning,) = resolved.warnings
    assert (warning.check, warning.path) == (CHECK, "cluster.scheduler.login.hosts[slurm-01]")
    assert "slurmctld" in warning.message and warning.fix
    assert resolve(_lab(), "lab").warnings == ()  # login-01 of its own: no warning


def test_at_another_address_it_is_an_error() -> None:
    data = _lab()
    data["scheduler"]["login"]["hosts"] = {"slurm-01": "10.64.1.9"}
    with pytest.raises(SpecError) as err:
        resolve(data, "head")
    (issue,) = err.value.issues
    assert issue.path == "cluster.scheduler.login.hosts[slurm-01]" and "10.64.1.6" in issue.message


def test_while_errors_refuse_the_spec_only_errors_are_reported() -> None:
    data = _lab()
    data["scheduler"]["login"]["hosts"] = {"slurm-01": "10.64.1.6"}
    data["scheduler"]["partitions"]["batch"]["max_time"] = "forever"
    with pytest.raises(SpecError) as err:
        resolve(data, "head")
    assert err.value.issues and all(i.check != CHECK for i in err.value.issues)


def test_validate_prints_the_warning_and_lists_it_in_json() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["validate", HEAD, "--spec-only"])
    assert result.exit_code == 0, result.output
    assert f"warning ({CHECK})" in result.output and "slurm-01 is also a controller host" in result.output
    result = runner.invoke(app, ["validate", HEAD, "--json"])
    document = json.loads(result.stdout)
    warnings = [(w["check"], w["path"]) for w in document["warnings"]]
    assert warnings == [(CHECK, "cluster.scheduler.login.hosts[slurm-01]")]
    assert document["valid"] is True


def test_the_plan_shows_the_warning_and_the_advisory_rule() -> None:
    plan = planned(HEAD)
    assert [w.check for w in plan.resolved.warnings] == [CHECK]
    assert plan.policy is not None and not plan.policy.blocking
    advisory = [f for f in plan.policy.by_level("advisory") if f.rule == "redundancy-slurm-head-node"]
    assert len(advisory) == 1 and "slurm-01" in advisory[0].message
    text = markdown_plan(plan)
    assert "Spec warnings" in text and f"`{CHECK}`" in text
    lab = planned("onprem-lab")
    assert lab.policy is not None and not [f for f in lab.policy.findings if f.rule == "redundancy-slurm-head-node"]
    assert "Spec warnings" not in markdown_plan(lab)


def test_the_head_node_is_in_both_plays_and_both_roles_write_one_slurm_conf() -> None:
    children = build_inventory(HEAD, source="plan")["all"]["children"]
    assert "slurm-01" in children["slurm_controller"]["hosts"]
    assert children["slurm_login"]["hosts"] == {"slurm-01": {"ansible_host": "10.64.1.6"}}
    login = yaml.safe_load((PLAYBOOKS_DIR / "roles/slurm_login/defaults/main.yml").read_text())
    controller = yaml.safe_load((PLAYBOOKS_DIR / "roles/slurm_controller/defaults/main.yml").read_text())
    assert login["slurm_login_templates_dir"] == controller["slurm_controller_templates_dir"]
    assert login["slurm_login_config_dir"] == controller["slurm_controller_config_dir"]
