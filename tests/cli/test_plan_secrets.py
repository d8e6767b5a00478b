"""The plan tells the user which secrets `pulumi up` reads, by config key, with the command that sets
each and whether the stack file holds it (as a secure value): in the console, Markdown and JSON, never
a value."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.spec.loader import parse_yaml

ROOT = Path(__file__).resolve().parents[2]
CIPHERTEXT = "v1:Zm9yZ2Utc2VjcmV0LWNpcGhlcnRleHQ="
CLEAR = "https://hooks.slack.com/services/T000/B000/forge-clear-text"
runner = CliRunner()


def prod_with_one_secret_set(tmp_path: Path) -> Path:
    document = parse_yaml((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    config = json.loads(json.dumps(document["config"]))
    config["gpuforge:alertPagerdutyKey"] = {"secure": CIPHERTEXT}
    config.pop("gpuforge:alertSlackUrl", None)  # not set yet
    stack = tmp_path / "Pulumi.prod.yaml"
    stack.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return stack


def test_plan_lists_each_secret_with_its_command_and_state(tmp_path: Path) -> None:
    stack = prod_with_one_secret_set(tmp_path)
    json_file, markdown = tmp_path / "plan.json", tmp_path / "plan.md"
    result = runner.invoke(
        app, ["plan", str(stack), "--no-tree", "--json", str(json_file), "--markdown", str(markdown)],
        env={"COLUMNS": "250"},
    )
    assert result.exit_code == 0, result.output
    secrets = {s["key"]: s for s in json.loads(json_file.read_text())["secrets"]}
    assert set(secrets) == {"gpuforge:alertPagerdutyKey", "gpuforge:alertSlackUrl"}
    pager, slack = secrets["gpuforge:alertPagerdutyKey"], secrets["gpuforge:alertSlackUrl"]
    assert (pager["state"], pager["set"]) == ("set", True)
    assert (slack["state"], slack["set"]) == ("missing", False)
    assert pager["used_by"] == "cluster.monitoring.receivers[oncall].routing_key_secret"
    assert slack["command"] == "pulumi config set --stack prod --secret gpuforge:alertSlackUrl '<value>'"
    text = markdown.read_text()
    row = "| `gpuforge:alertPagerdutyKey` | `cluster.monitoring.receivers[oncall].routing_key_secret` | set (secure)"
    assert row in text
    assert "pulumi config set --stack prod --secret gpuforge:alertSlackUrl '<value>'" in result.output
    for output in (result.output, text, json_file.read_text()):
        assert CIPHERTEXT not in output and CLEAR not in output


def test_a_secret_pasted_in_clear_text_is_refused_and_never_echoed(tmp_path: Path) -> None:
    stack = prod_with_one_secret_set(tmp_path)
    document = yaml.safe_load(stack.read_text())
    document["config"]["gpuforge:alertSlackUrl"] = CLEAR  # someone pasted the value
    stack.write_text(yaml.safe_dump(document, sort_keys=False))
    result = runner.invoke(app, ["plan", str(stack), "--no-tree"], env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output
    assert "config.gpuforge:alertSlackUrl" in result.output and "pulumi config set --secret" in result.output
    assert CLEAR not in result.output and CIPHERTEXT not in result.output


def test_validate_says_which_secrets_up_still_needs() -> None:
    result = runner.invoke(app, ["validate", "prod"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "before up: gpuforge:alertSlackUrl is missing in the stack file" in result.output
    assert "once the 2 secret(s) above are set" in result.output


def test_a_kubeconfig_secret_is_set_from_its_file() -> None:
    stack = ROOT / "tests" / "fixtures" / "stacks" / "Pulumi.onprem-k8s.yaml"
    result = runner.invoke(app, ["plan", str(stack), "--json", "-"])
    secrets = json.loads(result.stdout)["secrets"]
    assert [s["command"] for s in secrets if s["key"] == "gpuforge:siteKubeconfig"] == [
        "pulumi config set --stack onprem-k8s --secret gpuforge:siteKubeconfig < kubeconfig"
    ]


def test_validate_json_names_the_unset_secrets_without_values() -> None:
    result = runner.invoke(app, ["validate", "prod", "--json"])
    assert result.exit_code == 0, result.output
    unset = json.loads(result.stdout)["secrets_unset"]
    assert [s["key"] for s in unset] == ["gpuforge:alertPagerdutyKey", "gpuforge:alertSlackUrl"]
    assert all(s["state"] == "missing" and s["command"].startswith("pulumi config set --stack prod") for s in unset)
