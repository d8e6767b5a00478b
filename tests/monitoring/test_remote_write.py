"""monitoring.remote_write: {kind: amp}: an AMP workspace in the plan, aps:RemoteWrite on it for the monitoring
group's role alone, and a prometheus.yml whose remote write the prometheus role's own task completes into a file
the real promtool accepts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.infra.aws.metrics_archive import remote_write_url
from gpuforge.plan.engine import plan_stack
from gpuforge.plan.stacks import load_stack
from gpuforge.render.monitoring import REMOTE_WRITE_URL_PLACEHOLDER, MonitoringBundle, Paths, render_monitoring
from gpuforge.spec import ResolvedSpec, resolve
from gpuforge.spec.errors import SpecError
from tests.monitoring.test_rules import tool

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "gpuforge" / "assets" / "playbooks" / "roles" / "prometheus"
WORKSPACE_URL = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef/"


def prod_with_remote_write() -> dict[str, Any]:
    document = yaml.safe_load(load_stack("prod").path.read_text())
    document["config"]["gpuforge:cluster"]["monitoring"]["remote_write"] = {"kind": "amp"}
    return dict(document)


def test_the_plan_declares_the_workspace_and_lets_only_the_monitoring_role_write(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.prod-amp.yaml"
    path.write_text(yaml.safe_dump(prod_with_remote_write()))
    plan = plan_stack(path)
    (workspace,) = plan.by_type("aws:amp/workspace:Workspace")
    assert workspace.inputs["alias"] == "gpuforge-forge-prod" and workspace.protect
    writers = [r for r in plan.by_type("aws:iam/rolePolicy:RolePolicy") if "aps:RemoteWrite" in r.inputs["policy"]]
    assert [w.name for w in writers] == ["forge-prod-metrics-archive-remote-write"]
    urn = "urn:pulumi:prod-amp::gpuforge::gpuforge:aws:"
    assert writers[0].dependencies["role"] == [f"{urn}GpuNodeGroup$aws:iam/role:Role::forge-prod-services-role"]
    (statement,) = json.loads(writers[0].inputs["policy"])["Statement"]
    assert statement["Action"] == ["aps:RemoteWrite"] and "*" not in statement["Resource"]
    assert "remoteWrite" in json.dumps(plan.outputs)


def test_remote_write_needs_prometheus_on_an_aws_node_group() -> None:
    data = load_stack("staging").cluster
    data["monitoring"]["remote_write"] = {"kind": "amp"}
    with pytest.raises(SpecError) as error:
        resolve(data)
    assert "cluster.monitoring.remote_write: kind amp needs Prometheus on a node group" in error.value.report()


def rendered_into(resolved: ResolvedSpec, tmp_path: Path) -> tuple[Paths, MonitoringBundle, Path]:
    """What `gpuforge render monitoring --output tmp_path/files` writes, its paths under tmp_path/etc/prometheus."""
    paths = Paths(root=str(tmp_path / "etc" / "prometheus"))
    bundle = render_monitoring(resolved, paths=paths)
    files = tmp_path / "files"
    for name, text in bundle.files.items():
        target = files / name.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return paths, bundle, files


def test_the_role_fills_in_the_workspace_and_promtool_accepts_it(tmp_path: Path) -> None:
    """The role's own assert and template tasks (module and arguments), run by ansible-playbook here, on prod's
    rendering: without the URL the run stops with the fix; with it, promtool check config passes."""
    resolved = resolve(prod_with_remote_write()["config"]["gpuforge:cluster"])
    paths, bundle, files = rendered_into(resolved, tmp_path)
    rendered = yaml.safe_load(bundle.files[paths.config])
    (remote,) = rendered["remote_write"]
    assert remote["url"] == REMOTE_WRITE_URL_PLACEHOLDER and remote["sigv4"] == {"region": "us-east-1"}
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    wanted = ("Check that a remote write URL is given", "Write the Prometheus configuration")
    picked = [t for t in tasks if t["name"].startswith(wanted)]
    assert len(picked) == 2
    template = picked[1]["ansible.builtin.template"]
    picked[1] = {
        "name": picked[1]["name"],
        "ansible.builtin.template": {k: v for k, v in template.items() if k not in ("owner", "group")},
    }
    out = tmp_path / "etc" / "prometheus" / "prometheus.yml"
    (out.parent / "rules").mkdir(parents=True)
    (out.parent / "rules" / "gpuforge.yml").write_text(bundle.files[paths.rules])  # the role's task before
    tool("promtool")

    def play(url: str) -> subprocess.CompletedProcess[str]:
        variables = {
            "ansible_python_interpreter": sys.executable,
            "prometheus_files_dir": str(files),
            "prometheus_config_dir": str(tmp_path / "etc" / "prometheus"),
            "prometheus_remote_write_url": url,
            "__prometheus_rendered_config": str(files / paths.config.lstrip("/")),
        }
        book = [{"hosts": "localhost", "connection": "local", "gather_facts": False, "vars": variables,
                 "handlers": [{"name": "Reload prometheus", "ansible.builtin.debug": {"msg": "reload"}}],
                 "tasks": picked}]  # fmt: skip
        (tmp_path / "play.yml").write_text(yaml.safe_dump(book))
        return subprocess.run(
            [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(tmp_path / "play.yml")],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )  # fmt: skip

    missing = play("")
    assert missing.returncode != 0 and "set prometheus_remote_write_url" in missing.stdout
    done = play(remote_write_url(WORKSPACE_URL))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    written = yaml.safe_load(out.read_text())
    assert written["remote_write"][0]["url"] == WORKSPACE_URL + "api/v1/remote_write"
    check = subprocess.run([tool("promtool"), "check", "config", str(out)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
