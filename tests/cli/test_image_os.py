"""Images the playbooks cannot configure are refused at validate, with the reason and the supported list
read from the roles' vars/ files."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.spec.image_os_checks import playbook_distributions
from gpuforge.spec.loader import parse_yaml

ROOT = Path(__file__).resolve().parents[2]
AL2_DLAMI = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-amazon-linux-2/latest/ami-id"
AL2023 = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
runner = CliRunner()


def stack_with(tmp_path: Path, stack: str, edit: dict[str, str]) -> Path:
    document = parse_yaml((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    config = json.loads(json.dumps(document["config"]))
    cluster = config["gpuforge:cluster"]
    for where, parameter in edit.items():
        if where == "pipeline":
            cluster["image_pipeline"]["parent_image_ssm_parameter"] = parameter
        else:
            cluster["node_groups"][where]["image"] = {"ssm_parameter": parameter}
    path = tmp_path / f"Pulumi.{stack}-os.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return path


def test_amazon_linux_2_on_a_slurm_group_is_refused_with_the_supported_list(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(stack_with(tmp_path, "prod", {"train": AL2_DLAMI})), "--json"])
    assert result.exit_code == 2, result.output
    (problem,) = [p for p in json.loads(result.stdout)["problems"] if p["path"].endswith("image.ssm_parameter")]
    assert problem["path"] == "cluster.node_groups[train].image.ssm_parameter"
    assert f"{AL2_DLAMI} boots Amazon Linux 2, which the playbooks do not configure" in problem["message"]
    assert "none has Amazon-2.yml (supported: Debian 12, Ubuntu 22, Ubuntu 24)" in problem["message"]
    assert "ubuntu-24.04" in problem["fix"] and problem["line"]


def test_an_image_pipeline_on_amazon_linux_2023_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(stack_with(tmp_path, "staging", {"pipeline": AL2023})), "--json"])
    assert result.exit_code == 2, result.output
    paths = [p["path"] for p in json.loads(result.stdout)["problems"]]
    assert paths == ["cluster.image_pipeline.parent_image_ssm_parameter"]


def test_the_supported_list_is_what_every_role_has_vars_for(tmp_path: Path) -> None:
    for role, files in {"a": ["Ubuntu-24", "Debian-12", "Amazon-2"], "b": ["Ubuntu-24", "Amazon-2"], "c": []}.items():
        (tmp_path / "roles" / role / "vars").mkdir(parents=True)
        (tmp_path / "roles" / role / "vars" / "main.yml").write_text("---\n")
        for name in files:
            (tmp_path / "roles" / role / "vars" / f"{name}.yml").write_text("---\n")
    assert playbook_distributions(tmp_path) == {("Ubuntu", "24"), ("Amazon", "2")}
    assert playbook_distributions() >= {("Ubuntu", "24")}  # the shipped roles
