"""Every series an alert, recording rule or dashboard reads, per stack, is (a) a real metric of its exporter
and (b) exported as that stack configures the exporter. Nothing here is a hand-written list of names:

- dcgm-exporter: go-dcgm's field list (`dcgmFields`, `legacyDCGMFields` in pkg/dcgm/const_fields.go at the
  commit dcgm-exporter's go.mod requires) and dcgm-exporter's own metrics (internal/pkg/counters/const.go),
  verbatim in tests/fixtures/monitoring/, for the release each placement runs (the dcgm_exporter role's
  version on hosts, the GPU Operator's on Kubernetes); configured = the counters file the role writes (its
  template rendered with its defaults), or the GPU Operator values' ConfigMap data, parsed as dcgm-exporter
  parses it (encoding/csv with '#' comments, three fields, a known Prometheus type);
- node_exporter: upstream v1.7.0's end-to-end output, its mixin and its infiniband collector (verbatim);
  enabled = the collectors README lists as enabled by default, as the node_exporter role's flags (or
  kube-prometheus-stack's values) leave them, the textfile collector only where a directory is set;
- gpuforge's textfile collectors: the names their scripts write when run;
- Prometheus and Alertmanager themselves: the names the installed binaries serve on /metrics.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import promql_parser
import pytest
import yaml

from gpuforge.catalog.charts import load_charts
from gpuforge.infra.k8s.platform import gpu_operator_values
from gpuforge.plan.stacks import load_stack
from gpuforge.render.dashboards import GRAFANA_DEFAULTS
from gpuforge.render.exporters import DCGM_EXPORTER_ROLE, SOURCES
from gpuforge.render.monitoring import GRAFANA_DASHBOARDS_DIR, Paths, render_monitoring, rule_params
from gpuforge.spec import ResolvedSpec, resolve
from tests.monitoring.test_collectors import (
    fake_lctl,
    fake_slurm,
    lustre_client_root,
    run_collector,
    sysfs_device,
)
from tests.monitoring.test_rules import monitored_stacks, tool
from tests.standins.dcgm_exporter import counter_records

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "monitoring"
NODE_EXPORTER = FIXTURES / "node_exporter-v1.7.0"
KUBE_PROMETHEUS_STACK = FIXTURES / "kube-prometheus-stack-88.5.3" / "values.yaml"
PROMETHEUS_OWN = {"up", "ALERTS", "ALERTS_FOR_STATE", "scrape_duration_seconds", "scrape_samples_scraped"}
# dcgm-exporter's Prometheus types (promMetricType in internal/pkg/counters); a line of another type stops it.
PROM_TYPES = {"gauge", "counter", "histogram", "summary", "label"}
# node_exporter metric subsystem -> its collector (collector/<name>*.go registers each).
NODE_COLLECTOR = {"filesystem": "filesystem", "cpu": "cpu", "memory": "meminfo", "network": "netdev", "load": "loadavg",
                  "disk": "diskstats", "infiniband": "infiniband", "textfile": "textfile"}  # fmt: skip


# --- dcgm-exporter -------------------------------------------------------------------------------


def _source_for(directory: Path, text: str) -> Path:
    (path,) = [p for p in directory.glob("*/*.source") if text in p.read_text()]
    return path.with_suffix("")


@lru_cache
def dcgm_known(version: str) -> frozenset[str]:
    """Field names go-dcgm maps (current and legacy) plus dcgm-exporter's own metrics, for that release."""
    fields = _source_for(FIXTURES / "go-dcgm", f"NVIDIA/dcgm-exporter {version})").read_text()
    maps = re.findall(r"var (?:dcgmFields|legacyDCGMFields) = map\[string\]Short\{(.*?)\n\}", fields, re.DOTALL)
    assert len(maps) == 2, "go-dcgm's field maps moved"
    names = {n for block in maps for n in re.findall(r'"(DCGM_FI_\w+)":', block)}
    const = (FIXTURES / "dcgm-exporter" / version / "const.go").read_text()
    return frozenset(names | set(re.findall(r'= "(DCGM_EXP_\w+)"', const)))


def parse_counters(text: str, version: str) -> set[str]:
    """A counters file as dcgm-exporter reads it (ReadCSVFile, ExtractCounters): every problem it would stop
    at fails here."""
    try:
        records = counter_records(text)
    except ValueError as error:
        raise AssertionError(str(error)) from None
    names = set()
    for name, kind, _ in records:
        assert name in dcgm_known(version), f"dcgm-exporter {version} stops at {name}: could not find DCGM field"
        assert kind in PROM_TYPES, f"{name}: dcgm-exporter knows no Prometheus type {kind!r}"
        names.add(name)
    return names


def role_counters_file() -> str:
    """The counters file the dcgm_exporter role writes, its template rendered with its defaults."""
    defaults = yaml.safe_load((DCGM_EXPORTER_ROLE / "defaults" / "main.yml").read_text())
    template = (DCGM_EXPORTER_ROLE / "templates" / "default-counters.csv.j2").read_text()
    return jinja2.Environment(trim_blocks=True, keep_trailing_newline=True).from_string(template).render(defaults)


def host_dcgm_version() -> str:
    return str(yaml.safe_load((DCGM_EXPORTER_ROLE / "defaults" / "main.yml").read_text())["dcgm_exporter_version"])


def operator_dcgm_version() -> str:
    return load_charts().chart("gpu_operator").operands["dcgm_exporter"]


def test_the_roles_and_the_operators_counters_files_load_in_their_dcgm_exporter() -> None:
    assert parse_counters(role_counters_file(), host_dcgm_version())
    config = gpu_operator_values_for_staging()["dcgmExporter"]["config"]
    assert config["create"] is True and config["name"]
    assert parse_counters(config["data"], operator_dcgm_version())


def test_a_field_dcgm_exporter_does_not_know_fails() -> None:
    with pytest.raises(AssertionError, match="could not find DCGM field"):
        parse_counters("DCGM_FI_DEV_THROTTLE_SECONDS, counter, made up\n", host_dcgm_version())
    with pytest.raises(AssertionError, match="expected 3 fields"):
        parse_counters("DCGM_FI_DEV_GPU_TEMP, gauge, a help, with a comma\n", host_dcgm_version())


def test_the_upstream_defaults_lack_what_the_issue_found_missing() -> None:
    """Why gpuforge writes its own counters: upstream's default files (both releases) leave out fields the
    GPU alerts read."""
    for version in (host_dcgm_version(), operator_dcgm_version()):
        for name in ("default-counters.csv", "dcp-metrics-included.csv"):
            upstream = parse_counters((FIXTURES / "dcgm-exporter" / version / name).read_text(), version)
            assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" not in upstream and "DCGM_EXP_XID_ERRORS_COUNT" not in upstream


def gpu_operator_values_for_staging() -> dict[str, Any]:
    resolved = resolve(load_stack("staging").cluster)
    assert resolved.spec.kubernetes is not None
    return gpu_operator_values(resolved.spec.kubernetes.platform, [])


# --- node_exporter ---------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def node_metric_names() -> frozenset[str]:
    """Names upstream's e2e output and mixin use, and the infiniband collector's (node_infiniband_<literal>)."""
    names: set[str] = set()
    for name in ("e2e-output.txt", "alerts.libsonnet", "prom-mixin.libsonnet", "rules.libsonnet"):
        names |= set(re.findall(r"\bnode_[A-Za-z0-9_]+", (NODE_EXPORTER / name).read_text()))
    infiniband = (NODE_EXPORTER / "infiniband_linux.go").read_text()
    names |= {f"node_infiniband_{n}" for n in re.findall(r'"([a-z_]+)"', infiniband)}
    return frozenset(names)


@lru_cache(maxsize=1)
def default_collectors() -> frozenset[str]:
    readme = (NODE_EXPORTER / "README.md").read_text()
    table = readme.split("### Enabled by default", 1)[1].split("###", 1)[0]
    rows = [[cell.strip() for cell in row.split("|")] for row in table.splitlines() if row.count("|") == 2]
    return frozenset(name for name, _, systems in rows if {"Linux", "_any_"} & set(systems.split(", ")))


def enabled_collectors(args: list[str], textfile_dir: bool) -> set[str]:
    enabled = set(default_collectors())
    for arg in args:
        if match := re.fullmatch(r"--no-collector\.(\w+)", arg):
            enabled.discard(match.group(1))
        elif match := re.fullmatch(r"--collector\.(\w+)", arg):
            enabled.add(match.group(1))
    if not textfile_dir:
        enabled.discard("textfile")  # enabled, but reads nothing: no node_textfile_mtime_seconds
    return enabled


def host_node_collectors() -> set[str]:
    role = ROOT / "gpuforge" / "assets" / "playbooks" / "roles" / "node_exporter"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    args = jinja2.Template((role / "templates" / "defaults.j2").read_text()).render(defaults)
    flags = args.split('"')[1].split()
    return enabled_collectors(flags, any(f.startswith("--collector.textfile.directory=") for f in flags))


def kube_prometheus_stack_collectors() -> set[str]:
    values = yaml.safe_load(KUBE_PROMETHEUS_STACK.read_text())["prometheus-node-exporter"]
    flags = [a.split("=", 1)[0] for a in values.get("extraArgs", [])]
    return enabled_collectors(flags, any(a.startswith("--collector.textfile.directory") for a in flags))


# --- gpuforge's textfile collectors, run ---------------------------------------------------------


@pytest.fixture(scope="module")
def textfile_names(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Collector (its source) -> metric names its script writes, and the file it writes."""
    tmp = tmp_path_factory.mktemp("textfile")
    sysfs = tmp / "sys"
    sysfs_device(sysfs, "rdmap16s27", "efa", {"rx_drops": "5", "rdma_read_wr_err": "0"})
    efa = run_collector("efa-counters", tmp / "efa", str(sysfs))
    slurm = run_collector("slurm-textfile-collector", tmp / "slurm", env=fake_slurm(tmp / "bin"))
    root = tmp / "node"
    lustre_client_root(root, ["10.0.0.5@tcp:/abcdefgh /fsx lustre rw 0 0"], {"proc/fs/lustre/llite": "abcdefgh-1"})
    lustre = run_collector("lustre-client", tmp / "lustre", "/fsx", "--root", str(root), env=fake_lctl(tmp / "l", "ok"))
    files = {source: sorted(p.name for p in (tmp / d).glob("*.prom")) for source, d in
             (("efa_counters", "efa"), ("slurm_collector", "slurm"), ("lustre", "lustre"))}  # fmt: skip
    assert files == {"efa_counters": ["efa.prom"], "slurm_collector": ["slurm.prom"], "lustre": ["lustre.prom"]}

    def names(text: str) -> set[str]:
        return {line.split("{")[0].split()[0] for line in text.splitlines() if line and not line.startswith("#")}

    return {"efa_counters": names(efa), "slurm_collector": names(slurm), "lustre": names(lustre)}


def test_the_stale_textfile_alert_watches_the_files_the_collectors_write() -> None:
    from gpuforge.render.monitoring import TEXTFILE_COLLECTOR_FILES

    scripts = ROOT / "gpuforge" / "assets" / "playbooks" / "roles" / "node_textfile_collectors" / "files"
    written = {m for p in scripts.iterdir() for m in re.findall(r'"(\w+)\.prom"', p.read_text())}
    assert written == set(TEXTFILE_COLLECTOR_FILES)


# --- Prometheus and Alertmanager themselves --------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(command: list[str], port: int, ready: str) -> Iterator[str]:
    """The /metrics text of *command* once it shows *ready* (Prometheus serves its rule groups' series only
    after the rule manager has loaded them)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            text = ""
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                    text = response.read().decode()
            except OSError:
                if process.poll() is not None:
                    raise
            if ready in text:
                yield text
                return
            assert time.monotonic() < deadline, f"{command[0]} never served {ready}"
            time.sleep(0.3)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def self_metric_names(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """What Debian's Prometheus (with gpuforge's rules loaded) and Alertmanager serve on /metrics."""
    prometheus, alertmanager = shutil.which("prometheus"), shutil.which("prometheus-alertmanager")
    if prometheus is None or alertmanager is None:
        tool("prometheus-alertmanager" if prometheus else "prometheus")  # skips, or fails in CI
    assert prometheus is not None and alertmanager is not None
    tmp = tmp_path_factory.mktemp("self")
    paths = Paths(root=str(tmp / "etc"))
    bundle = render_monitoring(resolve(load_stack("prod").cluster), paths=paths)
    (tmp / "rules.yml").write_text(bundle.files[paths.rules])
    (tmp / "prometheus.yml").write_text(yaml.safe_dump({"rule_files": [str(tmp / "rules.yml")]}))
    (tmp / "am.yml").write_text(yaml.safe_dump({"route": {"receiver": "x"}, "receivers": [{"name": "x"}]}))
    names: set[str] = set()
    port = _free_port()
    command = [prometheus, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
               f"--web.listen-address=127.0.0.1:{port}"]  # fmt: skip
    with serving(command, port, ready="prometheus_rule_group_rules{") as text:
        names |= {line.split("{")[0].split()[0] for line in text.splitlines() if line and line[0] != "#"}
    port = _free_port()
    command = [alertmanager, f"--config.file={tmp / 'am.yml'}", f"--storage.path={tmp / 'am'}",
               f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="]  # fmt: skip
    with serving(command, port, ready="alertmanager_notifications_failed_total{") as text:
        names |= {line.split("{")[0].split()[0] for line in text.splitlines() if line and line[0] != "#"}
    return names


# --- per stack -----------------------------------------------------------------------------------


def metric_names(expr: str) -> set[str]:
    found: set[str] = set()

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                found.add(node.name)
            else:
                found.update(m.value for m in node.matchers.matchers if m.name == "__name__")

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def rendered_queries(resolved: ResolvedSpec) -> tuple[set[str], list[tuple[str, str]]]:
    """(names the rules record, [(where, expr)] of every alert, recording rule and dashboard query)."""
    bundle = render_monitoring(resolved)
    if bundle.placement == "kubernetes":
        groups = yaml.safe_load(bundle.files["kubernetes/prometheusrule.yaml"])["spec"]["groups"]
        boards = [json.loads(text) for cm in yaml.safe_load_all(bundle.files["kubernetes/dashboards.yaml"])
                  for text in cm["data"].values()]  # fmt: skip
    else:
        groups = yaml.safe_load(bundle.files[Paths().rules])["groups"]
        boards = [json.loads(t) for n, t in bundle.files.items() if n.startswith(GRAFANA_DASHBOARDS_DIR)]
    recorded = {r["record"] for g in groups for r in g["rules"] if "record" in r}
    queries = [(r.get("alert") or r["record"], r["expr"]) for g in groups for r in g["rules"]]
    for board in boards:
        exprs = [(p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]]
        exprs += [(v["name"], v["query"]["query"].removeprefix("label_values(").rsplit(",", 1)[0])
                  for v in board["templating"]["list"]]  # fmt: skip
        for where, expr in exprs:
            for variable, value in GRAFANA_DEFAULTS.items():
                expr = expr.replace(variable, value)
            queries.append((f"{board['title']} / {where}", expr))
    return recorded, queries


@pytest.mark.parametrize("stack", monitored_stacks())
def test_every_series_read_is_real_and_exported_as_configured(
    stack: str, textfile_names: dict[str, set[str]], self_metric_names: set[str]
) -> None:
    resolved = resolve(load_stack(stack).cluster)
    on_k8s = render_monitoring(resolved).placement == "kubernetes"
    sources = rule_params(resolved).sources
    if on_k8s:
        version = operator_dcgm_version()
        dcgm = parse_counters(gpu_operator_values_for_staging()["dcgmExporter"]["config"]["data"], version)
        collectors = kube_prometheus_stack_collectors()
    else:
        version = host_dcgm_version()
        dcgm = parse_counters(role_counters_file(), version)
        collectors = host_node_collectors()
    recorded, queries = rendered_queries(resolved)
    problems = []
    for where, expr in queries:
        for name in sorted(metric_names(expr) - recorded - PROMETHEUS_OWN):
            if name.startswith("DCGM_"):
                if name not in dcgm_known(version):
                    problems.append(f"{where}: {name} is no field or metric of dcgm-exporter {version}")
                elif name not in dcgm:
                    problems.append(f"{where}: {name} is not in the counters dcgm-exporter is given")
            elif name.startswith("node_"):
                prefixes = [k for k in NODE_COLLECTOR if name.startswith(f"node_{k}")]
                collector = NODE_COLLECTOR[prefixes[0]] if prefixes else name.split("_")[1]
                if name not in node_metric_names():
                    problems.append(f"{where}: {name} is no node_exporter v1.7.0 metric")
                elif collector != "scrape" and collector not in collectors:  # scrape: node_exporter's own
                    problems.append(f"{where}: {name} needs node_exporter's {collector} collector, not enabled")
            elif name.startswith("gpuforge_"):
                writers = [s for s, names in textfile_names.items() if name in names]
                if not writers:
                    problems.append(f"{where}: {name} is written by no textfile collector")
                elif not any(sources.has(w) for w in writers) or not sources.has("textfile"):
                    problems.append(f"{where}: {name}'s collector ({', '.join(writers)}) does not run on {stack}")
            elif name.split("_")[0] in ("prometheus", "alertmanager"):
                if name not in self_metric_names:
                    problems.append(f"{where}: {name} is not served by Prometheus or Alertmanager")
            else:
                problems.append(f"{where}: {name} comes from no exporter gpuforge configures")
    assert not problems, f"{stack}:\n" + "\n".join(problems)


def test_kube_prometheus_stack_creates_the_job_and_data_source_the_dashboards_use() -> None:
    """Read from the chart's values, verbatim: the node-exporter Service's jobLabel label (which its
    ServiceMonitor's jobLabel: jobLabel makes the job), the Grafana sidecar's data source uid, and that it
    scrapes its own Prometheus and Alertmanager (the meta-monitoring alerts read them)."""
    from gpuforge.render.monitoring import KUBE_PROMETHEUS_STACK_DATASOURCE_UID, KUBE_PROMETHEUS_STACK_NODE_JOB

    values = yaml.safe_load(KUBE_PROMETHEUS_STACK.read_text())
    node = values["prometheus-node-exporter"]
    assert node["prometheus"]["monitor"]["jobLabel"] == "jobLabel"
    assert node["service"]["labels"]["jobLabel"] == KUBE_PROMETHEUS_STACK_NODE_JOB
    assert values["grafana"]["sidecar"]["datasources"]["uid"] == KUBE_PROMETHEUS_STACK_DATASOURCE_UID
    assert values["prometheus"]["serviceMonitor"]["selfMonitor"] is True
    assert values["alertmanager"]["serviceMonitor"]["selfMonitor"] is True
    boards = [json.loads(t) for cm in yaml.safe_load_all(
        render_monitoring(resolve(load_stack("staging").cluster)).files["kubernetes/dashboards.yaml"])
        for t in cm["data"].values()]  # fmt: skip
    text = json.dumps(boards)
    assert 'job=\\"node\\"' not in text and '"uid": "gpuforge-prometheus"' not in text
    assert f'job=\\"{KUBE_PROMETHEUS_STACK_NODE_JOB}\\"' in text


def test_every_source_names_what_produces_it() -> None:
    assert all(SOURCES.values())


def test_staging_gets_no_alert_for_series_that_cannot_exist_there_and_says_why() -> None:
    bundle = render_monitoring(resolve(load_stack("staging").cluster))
    rule = yaml.safe_load(bundle.files["kubernetes/prometheusrule.yaml"])
    alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
    gone = {"EfaErrorsRising", "LustreMountMissing", "LustreClientUnhealthy", "SlurmNodeUnavailable",
            "SlurmJobPendingTooLong", "SlurmControllerUnreachable", "FabricErrorsRising",
            "TextfileCollectorStale"}  # fmt: skip
    # MonitoringReplicaDown: one Prometheus of gpuforge's own per stack (monitoring.replicas is 1).
    assert not alerts & gone and set(bundle.left_out) == gone | {"MonitoringReplicaDown"}
    assert "kube-prometheus-stack's node-exporter reads no textfile directory" in bundle.left_out["EfaErrorsRising"]
    assert {"GpuXidCritical", "FabricLinkDown", "NodeDown", "Watchdog", "NodeGroupTargetsMissing"} <= alerts
