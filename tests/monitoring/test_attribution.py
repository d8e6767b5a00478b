"""Which job and team a GPU belongs to: the Slurm prolog/epilog's GPU-to-job mapping in the form dcgm-exporter
reads, the recording rules for GPUs, utilisation and GPU-hours by Slurm account/partition/user and by team
(promtool), the team label the ServiceMonitor gives GPU series on Kubernetes, and routing to a team's receiver
(amtool)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.plan.stacks import load_stack
from gpuforge.render.monitoring import alertmanager_yaml, render_monitoring
from gpuforge.spec import resolve
from gpuforge.spec.errors import SpecError
from tests.monitoring.test_rules import crd_validator, tool, unit_dir  # noqa: F401 (the fixture)

ROOT = Path(__file__).resolve().parents[2]
JOB_GPUS = ROOT / "gpuforge" / "assets" / "playbooks" / "roles" / "slurm_compute" / "files" / "gpuforge-job-gpus"
DCGM_ROLE = ROOT / "gpuforge" / "assets" / "playbooks" / "roles" / "dcgm_exporter"


def run_job_gpus(mapping: Path, links: Path, job: str, gpus: str) -> subprocess.CompletedProcess[str]:
    """As slurmd runs it: through a link in prolog.d or epilog.d (*links*), the job's variables in the environment."""
    links.mkdir(exist_ok=True)
    link = links / "60-gpuforge-job-gpus"
    if not link.exists():
        link.symlink_to(JOB_GPUS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env |= {"SLURM_JOB_ID": job, "SLURM_JOB_GPUS": gpus, "GPUFORGE_JOB_MAPPING_DIR": str(mapping)}
    return subprocess.run([str(link)], env=env, capture_output=True, text=True, timeout=30, check=True)


def as_dcgm_exporter_reads(mapping: Path) -> dict[str, list[str]]:
    """NVIDIA/dcgm-exporter internal/pkg/transformation/hpc.go: files whose name is a GPU index, a job a line."""
    return {p.name: p.read_text().splitlines() for p in sorted(mapping.iterdir()) if p.is_file() and p.name.isdigit()}


def test_the_prolog_maps_a_jobs_gpus_and_the_epilog_clears_them(tmp_path: Path) -> None:
    mapping, prolog, epilog = tmp_path / "job-mapping", tmp_path / "prolog.d", tmp_path / "epilog.d"
    run_job_gpus(mapping, prolog, "4240", "0,1")
    run_job_gpus(mapping, prolog, "4241", "2-3")
    assert as_dcgm_exporter_reads(mapping) == {"0": ["4240"], "1": ["4240"], "2": ["4241"], "3": ["4241"]}
    run_job_gpus(mapping, prolog, "4240", "0,1")  # a requeued job's prolog again: still one line
    run_job_gpus(mapping, epilog, "4240", "0,1")
    assert as_dcgm_exporter_reads(mapping) == {"2": ["4241"], "3": ["4241"]}
    assert not [p for p in mapping.iterdir() if p.name.startswith(".") and p.name != ".lock"], "temporary files"


def test_a_mapping_failure_never_fails_the_prolog(tmp_path: Path) -> None:
    """A failing prolog drains the node: the mapping reports and exits 0."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    run = run_job_gpus(blocker / "job-mapping", tmp_path / "prolog.d", "4240", "0")
    assert run.returncode == 0 and "job 4240" in run.stderr


def test_dcgm_exporter_reads_the_directory_the_prolog_writes() -> None:
    defaults = yaml.safe_load((DCGM_ROLE / "defaults" / "main.yml").read_text())
    directory = defaults["dcgm_exporter_hpc_job_mapping_dir"]
    assert f'MAPPING_DIR = "{directory}"' in JOB_GPUS.read_text()
    unit = (DCGM_ROLE / "templates" / "dcgm-exporter.service.j2").read_text()
    assert "--hpc-job-mapping-dir {{ dcgm_exporter_hpc_job_mapping_dir }}" in unit
    tasks = (ROOT / "gpuforge" / "assets" / "playbooks" / "roles" / "slurm_compute" / "tasks" / "main.yml").read_text()
    assert "/etc/slurm/prolog.d/60-gpuforge-job-gpus" in tasks and "/etc/slurm/epilog.d/40-gpuforge-job-gpus" in tasks


@pytest.mark.parametrize("case_name", ["attribution.yaml", "energy.yaml"])
def test_promtool_attributes_gpus_gpu_hours_and_energy(unit_dir: Path, case_name: str) -> None:  # noqa: F811
    case = ROOT / "gpuforge" / "assets" / "monitoring" / "tests" / "recording" / case_name
    (unit_dir / case.name).write_text(case.read_text())
    run = subprocess.run(
        [tool("promtool"), "test", "rules", case.name], cwd=unit_dir, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_slurm_attribution_is_rendered_where_the_collector_is_scraped_only() -> None:
    def records(stack: str) -> set[str]:
        bundle = render_monitoring(resolve(load_stack(stack).cluster))
        if bundle.placement == "kubernetes":
            groups = yaml.safe_load(bundle.files["kubernetes/prometheusrule.yaml"])["spec"]["groups"]
        else:
            groups = yaml.safe_load(bundle.files["/etc/prometheus/rules/gpuforge.yml"])["groups"]
        return {r["record"] for g in groups for r in g["rules"] if "record" in r}

    assert "slurm_account_partition_user:gpu_hours:1h" in records("onprem-lab")
    # AWS controllers are ec2_sd targets by their gpuforge:node-group tag, admitted on 9100 by the flow model.
    assert "slurm_account_partition_user:gpu_hours:1h" in records("prod")
    assert "slurm_account_partition_user:gpu_hours:1h" not in records("staging")  # Kubernetes, no Slurm
    assert {"team:gpu_hours:1h", "team:gpus:count"} <= records("staging")
    assert "team:gpus:count" not in records("onprem-lab")


def test_gpu_series_of_a_teams_pod_carry_the_team() -> None:
    resolved = resolve(load_stack("staging").cluster)
    (monitor,) = yaml.safe_load_all(render_monitoring(resolved).files["kubernetes/servicemonitors.yaml"])
    crd_validator("servicemonitors").validate(monitor)
    relabel = monitor["spec"]["endpoints"][0]["metricRelabelings"]
    assert {(r["regex"], r["replacement"]) for r in relabel} == {("llm\\-pretrain", "llm"), ("research", "research")}
    assert all(r["sourceLabels"] == ["exported_namespace"] and r["targetLabel"] == "team" for r in relabel)


def routes_of(data: dict[str, Any], tmp_path: Path) -> Callable[..., list[str]]:
    """The receivers `amtool config routes test` finds for an alert's labels, in the stack's rendered routes."""
    monitoring = resolve(data).spec.monitoring
    assert monitoring is not None
    path = tmp_path / "alertmanager.yml"
    path.write_text(alertmanager_yaml(monitoring))

    def receivers(*labels: str) -> list[str]:
        run = subprocess.run(
            [tool("amtool"), "config", "routes", "test", "--config.file", str(path), *labels],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return run.stdout.strip().split(",")

    return receivers


def test_a_teams_receiver_hears_that_teams_alerts_only(tmp_path: Path) -> None:
    data = load_stack("staging").cluster
    data["monitoring"]["receivers"]["llm-oncall"] = {
        "type": "webhook", "url": "https://alerts.example.com/llm", "teams": ["llm"]
    }  # fmt: skip
    receivers = routes_of(data, tmp_path)
    assert "llm-oncall" in receivers("alertname=GpuXidCritical", "severity=critical", "team=llm")
    assert "staging-hook" in receivers("alertname=GpuXidCritical", "severity=critical", "team=llm")
    assert "llm-oncall" not in receivers("alertname=GpuXidCritical", "severity=critical", "team=research")
    assert "llm-oncall" not in receivers("alertname=NodeDown", "severity=critical")


def test_a_receivers_team_must_be_declared() -> None:
    data = load_stack("staging").cluster
    data["monitoring"]["receivers"]["staging-hook"]["teams"] = ["llm", "vison"]
    with pytest.raises(SpecError) as error:
        resolve(data)
    assert "cluster.monitoring.receivers.staging-hook.teams: vison is not a team" in error.value.report()


def onprem_with_slurm_teams() -> dict[str, Any]:
    """onprem-lab with its Slurm accounts mapped to teams and a receiver for team llm."""
    data = load_stack("onprem-lab").cluster
    data["monitoring"]["slurm_teams"] = {"llm": ["llm"], "vision": ["vision"]}
    data["monitoring"]["receivers"]["llm-oncall"] = {
        "type": "webhook", "url": "https://alerts.example.com/llm", "teams": ["llm"]
    }  # fmt: skip
    return data


def test_slurm_accounts_map_to_teams_in_the_rendered_rules(tmp_path: Path) -> None:
    bundle = render_monitoring(resolve(onprem_with_slurm_teams()))
    rules = tmp_path / "rules.yml"
    rules.write_text(bundle.files["/etc/prometheus/rules/gpuforge.yml"])
    check = subprocess.run([tool("promtool"), "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    groups = yaml.safe_load(rules.read_text())["groups"]
    by_name = {r.get("alert") or r["record"]: r for g in groups for r in g["rules"]}
    mapping = [r["labels"] for r in groups[0]["rules"] if r["record"] == "gpuforge:slurm_account_team:info"]
    assert mapping == [{"account": "llm", "team": "llm"}, {"account": "vision", "team": "vision"}]
    assert {"slurm_job:team:info", "team:gpus:count", "team:gpu_hours:1h"} <= set(by_name)
    # Energy by job, account and team, with the stack's PUE filled in (onprem-lab's site PUE).
    energy = {
        "slurm_job:gpu_energy_joules:1h",
        "slurm_account_partition_user:gpu_energy_kwh:1h",
        "team:gpu_energy_kwh:1h",
    }
    assert energy <= set(by_name)
    assert (
        by_name["team:facility_energy_kwh:1h"]["expr"]
        == f"team:gpu_energy_kwh:1h * {resolve(onprem_with_slurm_teams()).pue:g}"
    )
    assert "group_left(team) slurm_job:team:info" in by_name["GpuXidCritical"]["expr"]
    assert "on(account) group_left(team) gpuforge:slurm_account_team:info" in by_name["SlurmJobPendingTooLong"]["expr"]
    assert "team" not in by_name["NodeDown"]["expr"]  # a node's alert is no job's
    # Without the mapping: no team rules, and the GPU alerts are as written.
    plain = render_monitoring(resolve(load_stack("onprem-lab").cluster))
    assert "team:" not in plain.files["/etc/prometheus/rules/gpuforge.yml"]
    teams_dashboard = bundle.files["/var/lib/grafana/dashboards/gpuforge/gpuforge-teams.json"]
    assert "team:gpu_hours:1h" in teams_dashboard and "team:gpu_energy_kwh:1h" in teams_dashboard


def test_a_slurm_teams_receiver_hears_that_teams_alerts_only(tmp_path: Path) -> None:
    receivers = routes_of(onprem_with_slurm_teams(), tmp_path)
    xid = ("alertname=GpuXidCritical", "severity=critical", "hpc_job=4240")
    assert receivers(*xid, "team=llm") == ["lab-oncall", "llm-oncall"]
    assert receivers(*xid, "team=vision") == ["lab-oncall"]
    assert receivers(*xid) == ["lab-oncall"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"llm": ["llm", "nlp"]},
            "cluster.monitoring.slurm_teams.llm: nlp is not a Slurm account (scheduler.accounts: vision, llm)",
        ),
        (
            {"llm": ["llm"], "lm": ["llm"]},
            "cluster.monitoring.slurm_teams.lm: account llm is in team llm too",
        ),
    ],
)
def test_slurm_teams_name_declared_accounts_once(change: dict[str, list[str]], expected: str) -> None:
    data = onprem_with_slurm_teams()
    data["monitoring"]["slurm_teams"] = change
    with pytest.raises(SpecError) as error:
        resolve(data)
    assert expected in error.value.report()


def test_slurm_teams_need_a_slurm_scheduler() -> None:
    data = load_stack("staging").cluster
    data["monitoring"]["slurm_teams"] = {"llm": ["llm"]}
    with pytest.raises(SpecError) as error:
        resolve(data)
    assert "cluster.monitoring.slurm_teams: the stack has no Slurm scheduler" in error.value.report()
