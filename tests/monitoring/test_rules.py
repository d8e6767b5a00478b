"""The alert rules, proven with Prometheus' own tools.

- every alert has a `promtool test rules` case that fires it from synthetic series and one that keeps
  it quiet (gpuforge/assets/monitoring/tests/<Alert>.yaml), and promtool runs them against the rules as rendered;
- what every stack gets passes `promtool check rules`, `promtool check config` and `amtool check-config`;
- PrometheusRule objects validate against the real prometheus-operator CRD and carry the labels
  kube-prometheus-stack's default rule selector picks.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gpuforge.plan.stacks import load_stack
from gpuforge.render.labels import NODE_LABEL_GROUP
from gpuforge.render.monitoring import (
    GroupFacts,
    Paths,
    RuleParams,
    alert_groups,
    alert_names,
    alertmanager_yaml,
    critical_xids,
    render_monitoring,
    role_vars,
    rule_file,
)
from gpuforge.spec import resolve
from gpuforge.spec.errors import SpecError
from tests.monitoring.test_alertmanager_versions import with_placeholders_filled
from tests.support import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "gpuforge" / "assets" / "monitoring" / "tests"
CASES = sorted(p for p in TESTS.glob("*.yaml") if p.name != "params.yaml")
CRDS = ROOT / "tests" / "fixtures" / "k8s" / "crds"  # verbatim upstream CRDs (tests/fixtures/k8s/SOURCES.md)
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        skip_or_fail(f"{name} is not installed (Debian: prometheus, prometheus-alertmanager)")
    assert path is not None
    return path


def unit_params() -> RuleParams:
    data = yaml.safe_load((TESTS / "params.yaml").read_text())
    groups = {name: GroupFacts(**facts) for name, facts in data.pop("groups").items()}
    return RuleParams(groups=groups, **data)


def monitored_stacks() -> list[str]:
    return [s for s in STACKS if load_stack(s).cluster.get("monitoring")]


# --- every alert has a firing and a quiet case -------------------------------------------------


def cases_by_alert() -> dict[str, dict[str, list[str]]]:
    """alert -> {"fires": [test names], "quiet": [test names]} across gpuforge/assets/monitoring/tests/."""
    out: dict[str, dict[str, list[str]]] = {}
    for path in CASES:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for check in test.get("alert_rule_test", []):
                kind = "fires" if check.get("exp_alerts") else "quiet"
                out.setdefault(check["alertname"], {"fires": [], "quiet": []})[kind].append(
                    f"{path.name}: {test['name']}"
                )
    return out


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    cases = cases_by_alert()
    missing = [
        f"{alert}: no {kind} case"
        for alert in alert_names()
        for kind in ("fires", "quiet")
        if not cases.get(alert, {}).get(kind) and not (kind == "quiet" and alert in ALWAYS_FIRING)
    ]
    assert not missing, "a rule no test can fire is a defect:\n" + "\n".join(missing)
    assert not set(cases) - set(alert_names()), "tests for alerts that do not exist"
    assert {p.stem for p in CASES} == set(alert_names()), "one test file per alert, named after it"


# The dead man's switch fires always: it has no quiet case.
ALWAYS_FIRING = {"Watchdog"}
# About the cluster, a node group or the monitoring itself, not one node.
CLUSTER_WIDE = {"ClusterPowerOverBudget", "SlurmJobPendingTooLong", "Watchdog", "NodeGroupTargetsMissing"}


def test_each_alert_names_its_runbook_section_and_the_node() -> None:
    doc = (ROOT / "docs" / "monitoring.md").read_text()
    for group in alert_groups():
        for alert in group.alerts:
            assert f'<a id="{alert.name.lower()}"></a>' in doc or f"### {alert.name}" in doc, alert.name
            if alert.name not in CLUSTER_WIDE:
                named = "{{ $labels.instance }}" in alert.summary or "{{ $labels.slurm_node }}" in alert.summary
                assert named, f"{alert.name}: the summary must name the node"
            if alert.name.startswith("Gpu") and alert.name not in ("GpuMissing", "GpuExporterDown"):
                assert "{{ $labels.gpu }}" in alert.summary, f"{alert.name}: the summary must name the GPU"


def test_the_critical_xids_are_the_ones_named() -> None:
    assert sorted(critical_xids()) == [48, 63, 64, 74, 79, 94, 95, 119, 120]


def _expected_annotations(rules: dict[str, Any]) -> dict[str, dict[str, str]]:
    """description and runbook_url per alert as rendered: the cases write the summary, the rest is static."""
    return {
        r["alert"]: {k: v for k, v in r["annotations"].items() if k != "summary"}
        for g in rules["groups"]
        for r in g["rules"]
        if "alert" in r
    }


@pytest.fixture(scope="module")
def unit_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rules rendered with the test parameters, and every case beside them (annotations completed)."""
    out = tmp_path_factory.mktemp("promtool")
    rules = rule_file(unit_params())
    (out / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    static = _expected_annotations(rules)
    for path in CASES:
        data = yaml.safe_load(path.read_text())
        for test in data["tests"]:
            for check in test.get("alert_rule_test", []):
                for alert in check.get("exp_alerts") or []:
                    alert["exp_annotations"] = {**static[check["alertname"]], **alert["exp_annotations"]}
        (out / path.name).write_text(yaml.safe_dump(data, sort_keys=False))
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_promtool_fires_and_keeps_quiet(unit_dir: Path, case: Path) -> None:
    run = subprocess.run(
        [tool("promtool"), "test", "rules", case.name], cwd=unit_dir, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_broken_expectation_fails(unit_dir: Path) -> None:
    """The harness can fail: a firing case that expects the wrong node must not pass."""
    data = yaml.safe_load((unit_dir / "NodeDown.yaml").read_text())
    data["tests"][0]["alert_rule_test"][0]["exp_alerts"][0]["exp_labels"]["instance"] = "gpu-z99"
    (unit_dir / "broken.yaml").write_text(yaml.safe_dump(data))
    run = subprocess.run(
        [tool("promtool"), "test", "rules", "broken.yaml"], cwd=unit_dir, capture_output=True, text=True, timeout=60
    )
    assert run.returncode != 0


# --- what every stack gets -------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["prod", "onprem-lab", "staging"])
def test_the_stacks_declare_monitoring(stack: str) -> None:
    assert stack in monitored_stacks()


def _write(files: dict[str, str], root: Path) -> None:
    for name, text in files.items():
        path = root / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_renders_what_promtool_and_amtool_accept(stack: str, tmp_path: Path) -> None:
    data = load_stack(stack).cluster
    if not data.get("monitoring"):
        pytest.skip(f"{stack} declares no monitoring")
    resolved = resolve(data)
    paths = Paths(root=str(tmp_path / "etc" / "prometheus"))
    bundle = render_monitoring(resolved, paths=paths)
    for name, text in bundle.files.items():
        target = Path(name) if name.startswith("/") else tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    if bundle.placement == "kubernetes":
        rule = yaml.safe_load(bundle.files["kubernetes/prometheusrule.yaml"])
        (tmp_path / "rules.yml").write_text(yaml.safe_dump(rule["spec"]))
        # The routes the AlertmanagerConfig carries, in their file form (tests/monitoring/test_k8s_alerting.py
        # checks that the object says the same and passes the CRD).
        rules, alertmanager = tmp_path / "rules.yml", tmp_path / "alertmanager.yml"
        alertmanager.write_text(alertmanager_yaml(resolved.spec.monitoring, paths=paths))
    else:
        rules, alertmanager = Path(paths.rules), Path(paths.alertmanager)
        # Inline secrets (the production release reads some only inline) as the alertmanager role fills them.
        alertmanager.write_text(with_placeholders_filled(alertmanager.read_text(), resolved.spec.monitoring))
        check = subprocess.run(
            [tool("promtool"), "check", "config", paths.config], capture_output=True, text=True, timeout=60
        )
        assert check.returncode == 0, check.stdout + check.stderr
        assert "SUCCESS" in check.stdout
    check = subprocess.run([tool("promtool"), "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    check = subprocess.run(
        [tool("amtool"), "check-config", str(alertmanager)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_on_premises_targets_come_from_the_inventory() -> None:
    resolved = resolve(load_stack("onprem-lab").cluster)
    bundle = render_monitoring(resolved)
    node = yaml.safe_load(bundle.files["/etc/prometheus/file_sd/node.json"])
    names = {g["labels"]["instance"]: g["targets"] for g in node}
    assert set(resolved.site.hosts) | {"mon-01", "slurm-01"} == set(names) if resolved.site else False
    assert names["slurm-01"] == ["10.64.1.6:9100"], "the controller: the Slurm collector's series"
    assert names["dgx-a01"] == ["10.64.1.11:9100"]
    assert names["slurm-01"] == ["10.64.1.6:9100"]
    dcgm = yaml.safe_load(bundle.files["/etc/prometheus/file_sd/dcgm.json"])
    assert {g["labels"]["instance"] for g in dcgm} == set(resolved.site.hosts) if resolved.site else False


def test_aws_targets_are_found_by_the_stable_node_group_tag() -> None:
    bundle = render_monitoring(resolve(load_stack("prod").cluster))
    config = yaml.safe_load(bundle.files["/etc/prometheus/prometheus.yml"])
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    filters = {f["name"]: f["values"] for f in jobs["dcgm"]["ec2_sd_configs"][0]["filters"]}
    assert filters["tag:gpuforge:node-group"] == ["train"]
    assert filters["tag:gpuforge:cluster"] == ["forge-prod"]
    node_filters = {f["name"]: f["values"] for f in jobs["node"]["ec2_sd_configs"][0]["filters"]}
    # The Slurm controllers carry their own value of the tag (gpuforge/infra/aws/slurm.py; issue 23).
    assert node_filters["tag:gpuforge:node-group"] == ["login", "services", "train", "slurm_controllers"]


def test_alertmanager_routes_each_severity_to_the_receivers_that_asked() -> None:
    resolved = resolve(load_stack("prod").cluster)
    text = render_monitoring(resolved).files["/etc/prometheus/alertmanager.yml"]
    routes = yaml.safe_load(with_placeholders_filled(text, resolved.spec.monitoring))["route"]["routes"]
    assert {r["receiver"]: r["matchers"] for r in routes} == {
        "gpuforge-watchdog": ['alertname="Watchdog"'],
        "oncall": ['severity=~"critical"'],
        "platform-channel": ['severity=~"critical|warning"'],
    }
    assert routes[0]["receiver"] == "gpuforge-watchdog" and "continue" not in routes[0], "Watchdog first, and final"


def test_the_dead_mans_switch_hears_watchdog_alone_every_minute(tmp_path: Path) -> None:
    """monitoring.dead_mans_switch names a receiver: Watchdog goes there every minute, and nothing else does;
    amtool routes a Watchdog and a critical alert to prove it."""
    data = load_stack("prod").cluster
    data["monitoring"]["receivers"]["dms"] = {"type": "webhook", "url": "https://hc-ping.example.com/gpuforge"}
    data["monitoring"]["dead_mans_switch"] = "dms"
    resolved = resolve(data)
    text = with_placeholders_filled(
        render_monitoring(resolved).files["/etc/prometheus/alertmanager.yml"], resolved.spec.monitoring
    )
    config = yaml.safe_load(text)
    first = config["route"]["routes"][0]
    assert (first["receiver"], first["repeat_interval"]) == ("dms", "1m")
    path = tmp_path / "alertmanager.yml"
    path.write_text(text)

    def receivers(*labels: str) -> str:
        run = subprocess.run(
            [tool("amtool"), "config", "routes", "test", "--config.file", str(path), *labels],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return run.stdout.strip()

    assert receivers("alertname=Watchdog", "severity=none") == "dms"
    assert "dms" not in receivers("alertname=NodeDown", "severity=critical").split(",")


def test_a_dead_mans_switch_must_be_a_receiver() -> None:
    data = load_stack("prod").cluster
    data["monitoring"]["dead_mans_switch"] = "healthchecks"
    with pytest.raises(SpecError) as error:
        resolve(data)
    assert "cluster.monitoring.dead_mans_switch: healthchecks is not a receiver" in error.value.report()


def test_secrets_are_files_or_placeholders_never_values() -> None:
    """The receivers' secrets appear as file paths, or (fields the production release reads only inline) as
    the alertmanager role's placeholders, and config keys; the output never holds a value."""
    resolved = resolve(load_stack("prod").cluster)
    bundle = render_monitoring(resolved)
    text = bundle.files["/etc/prometheus/alertmanager.yml"]
    assert "  - routing_key: [[ alertmanager_secrets['oncall-routing-key'] | to_json ]]\n" in text
    am = yaml.safe_load(with_placeholders_filled(text, resolved.spec.monitoring))
    slack = next(r for r in am["receivers"] if r["name"] == "platform-channel")["slack_configs"][0]
    assert slack["api_url_file"] == "/etc/prometheus/alertmanager-secrets/platform-channel-url"
    assert bundle.secret_keys == {
        "/etc/prometheus/alertmanager-secrets/oncall-routing-key": "alertPagerdutyKey",
        "/etc/prometheus/alertmanager-secrets/platform-channel-url": "alertSlackUrl",
    }


# --- the Prometheus operator -------------------------------------------------------------------


def crd_validator(name: str) -> jsonschema.Draft7Validator:
    """The CRD's v1 openAPIV3Schema. Not meta-checked: its Go patterns (`^(?i)(abort|warn)?$`) are not
    Python regexes; they only matter for fields gpuforge does not set."""
    crd = yaml.safe_load((CRDS / f"monitoring.coreos.com_{name}.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


def test_prometheus_rules_validate_against_the_real_crd() -> None:
    bundle = render_monitoring(resolve(load_stack("staging").cluster))
    rule = yaml.safe_load(bundle.files["kubernetes/prometheusrule.yaml"])
    crd_validator("prometheusrules").validate(rule)
    # kube-prometheus-stack's default ruleSelector: matchLabels {release: <the Helm release>}
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r} >= {"NodeDown"}
    for monitor in yaml.safe_load_all(bundle.files["kubernetes/servicemonitors.yaml"]):
        crd_validator("servicemonitors").validate(monitor)
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_a_malformed_prometheus_rule_fails_the_crd() -> None:
    bundle = render_monitoring(resolve(load_stack("staging").cluster))
    rule = yaml.safe_load(bundle.files["kubernetes/prometheusrule.yaml"])
    rule["spec"]["groups"][0]["rules"][0]["for"] = "five minutes"
    with pytest.raises(jsonschema.ValidationError):
        crd_validator("prometheusrules").validate(rule)


def test_rule_labels_are_configurable() -> None:
    data = load_stack("staging").cluster
    data["monitoring"]["server"]["rule_labels"] = {"prometheus": "gpu"}
    rule = yaml.safe_load(render_monitoring(resolve(data)).files["kubernetes/prometheusrule.yaml"])
    assert rule["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpuforge", "prometheus": "gpu"}


def test_gpu_missing_works_on_kubernetes_with_the_node_group_the_service_monitor_copies(tmp_path: Path) -> None:
    """On Kubernetes the dcgm-exporter series get node_group from the node's gpuforge.dev/node-group label
    (attachMetadata + relabeling); staging's rendered PrometheusRule then fires GpuMissing under promtool
    for a node missing a GPU, and stays quiet for a full one."""
    bundle = render_monitoring(resolve(load_stack("staging").cluster))
    (monitor,) = yaml.safe_load_all(bundle.files["kubernetes/servicemonitors.yaml"])
    assert monitor["spec"]["attachMetadata"] == {"node": True}
    copied = {r["targetLabel"]: r["sourceLabels"] for r in monitor["spec"]["endpoints"][0]["relabelings"]}
    # Kubernetes SD's name for the label every gpuforge node carries (EKS node groups and on-prem hosts)
    sanitised = NODE_LABEL_GROUP.replace(".", "_").replace("/", "_").replace("-", "_")
    assert copied["node_group"] == [f"__meta_kubernetes_node_label_{sanitised}"]
    job = monitor["spec"]["selector"]["matchLabels"]["app"]  # jobLabel: app
    rule = yaml.safe_load(bundle.files["kubernetes/prometheusrule.yaml"])
    rules = {"groups": rule["spec"]["groups"]}
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    expected = {
        r["labels"]["node_group"]: int(r["expr"].removeprefix("vector(").removesuffix(")"))
        for g in rules["groups"]
        for r in g["rules"]
        if r.get("record") == "gpuforge:node_group_expected_gpus" and r["expr"] != "vector(0)"
    }
    group, gpus = sorted(expected.items())[0]
    node = {"job": job, "instance": "ip-10-1-2-3.ec2.internal", "node_group": group}
    labels = ", ".join(f'{k}="{v}"' for k, v in node.items())
    up = {"series": f"up{{{labels}}}", "values": "1x15"}
    temps = [{"series": f'DCGM_FI_DEV_GPU_TEMP{{{labels}, gpu="{i}"}}', "values": "40x15"} for i in range(gpus)]
    annotations = _expected_annotations(rules)["GpuMissing"]
    cases = {
        "tests": [
            {
                "interval": "1m",
                "input_series": [up, *temps[1:]],
                "alert_rule_test": [
                    {
                        "eval_time": "10m",
                        "alertname": "GpuMissing",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "critical", "instance": node["instance"],
                                               "node_group": group, "namespace": "monitoring"},
                                "exp_annotations": {
                                    **annotations,
                                    "summary": f"{node['instance']} shows 1 fewer GPUs than its node group's "
                                    "catalog count",
                                },
                            }
                        ],
                    }
                ],
            },
            {
                "interval": "1m",
                "input_series": [up, *temps],
                "alert_rule_test": [{"eval_time": "10m", "alertname": "GpuMissing", "exp_alerts": []}],
            },
        ],
        "rule_files": ["rules.yml"],
    }
    (tmp_path / "k8s.yaml").write_text(yaml.safe_dump(cases, sort_keys=False))
    run = subprocess.run(
        [tool("promtool"), "test", "rules", "k8s.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_prometheus_sends_alerts_where_the_alertmanager_role_listens(tmp_path: Path) -> None:
    """Prometheus' alerting target is the address the alertmanager role binds (a site host's own address
    included): a fixed 127.0.0.1 there delivered nothing on the booted machines."""
    resolved = resolve(load_stack("onprem-lab").cluster)
    paths = Paths(prometheus="10.64.1.5:9090", alertmanager_address="10.64.1.5:9093")
    config = yaml.safe_load(render_monitoring(resolved, paths=paths).files[paths.config])
    (targets,) = [c["targets"] for am in config["alerting"]["alertmanagers"] for c in am["static_configs"]]
    assert targets == [role_vars(resolved, tmp_path, paths)["alertmanager_listen"]] == ["10.64.1.5:9093"]


def _fabric_link_down_expr(stack: str) -> str:
    files = render_monitoring(resolve(load_stack(stack).cluster)).files
    rules = yaml.safe_load(files["/etc/prometheus/rules/gpuforge.yml"])
    return str(next(r["expr"] for g in rules["groups"] for r in g["rules"] if r.get("alert") == "FabricLinkDown"))


def test_fabric_link_down_leaves_the_dgx_storage_and_management_ports_to_the_storage_alerts() -> None:
    """onprem-lab's DGX H100s: the catalog's port table names Slot1/2 P1 (storage) and P2 (management); the
    rendered rule skips exactly those, so the eight compute ports (mlx5_0, 3-6, 9-11) stay watched."""
    expr = _fabric_link_down_expr("onprem-lab")
    assert expr == 'node_infiniband_state_id{device!~"mlx5_1|mlx5_2|mlx5_7|mlx5_8"} != 4'
    resolved = resolve(load_stack("onprem-lab").cluster)
    server = next(iter(resolved.site.hosts.values())).server if resolved.site else None
    assert server is not None
    compute = {"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"}
    assert set(server.compute_hcas) == compute


def test_fabric_link_down_watches_every_efa_device_on_aws() -> None:
    assert _fabric_link_down_expr("prod") == 'node_infiniband_state_id{device!~""} != 4', "no device skipped"
