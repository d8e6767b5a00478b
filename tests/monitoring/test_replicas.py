"""monitoring.replicas: 2 on site hosts: two Prometheus servers with the same rules and targets, each naming
itself in the external label replica and dropping it from the alerts it sends, both sending to both
Alertmanagers, which gossip as one cluster (--cluster.peer). The roles' own template tasks, run here by
ansible-playbook for two inventory hosts, give each host its own addresses and the other as its peer; promtool
and amtool accept what they write; Debian's Alertmanager, started twice with the command lines the role wrote,
forms one cluster that notifies once, and notifies with either member stopped. Prometheus' configuration docs
(<alert_relabel_configs>: "ensuring a HA pair of Prometheus servers with different external labels send
identical alerts") and Alertmanager's README ("High Availability": point Prometheus to a list of all
Alertmanagers, never a load balancer)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuforge.plan.stacks import load_stack
from gpuforge.render.monitoring import (
    MonitoringBundle,
    Paths,
    RouteTiming,
    alertmanager_yaml,
    render_monitoring,
    role_vars,
)
from gpuforge.spec import ResolvedSpec, resolve
from gpuforge.spec.errors import SpecError
from gpuforge.spec.monitoring import monitoring_hosts
from tests.monitoring.test_alertmanager_versions import with_placeholders_filled
from tests.monitoring.test_booted import Webhook
from tests.monitoring.test_remote_write import rendered_into
from tests.monitoring.test_rules import tool

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "gpuforge" / "assets" / "playbooks" / "roles"
HOSTS = {"mon-01": "10.64.1.5", "mon-02": "10.64.1.6"}
# Two loopback addresses stand for the two hosts where the Alertmanagers really run here (no other daemon binds
# them: booted machines use 127.0.1.0/24).
LOOPBACK_HOSTS = {"mon-01": "127.0.24.1", "mon-02": "127.0.24.2"}


def onprem_with_replicas(hosts: dict[str, str] = HOSTS) -> dict[str, Any]:
    data = load_stack("onprem-lab").cluster
    data["monitoring"]["replicas"] = 2
    data["monitoring"]["server"]["address"] = hosts["mon-01"]
    data["monitoring"]["server"]["replica"] = {"host": "mon-02", "address": hosts["mon-02"]}
    return data


def task(role: str, name: str) -> dict[str, Any]:
    (found,) = [t for t in yaml.safe_load((ROLES / role / "tasks" / "main.yml").read_text()) if t["name"] == name]
    return found


def without_ownership(found: dict[str, Any], **changes: str) -> dict[str, Any]:
    """The task as the role runs it, less owner and group (no root here), *changes* to its arguments."""
    args = {k: v for k, v in found["ansible.builtin.template"].items() if k not in ("owner", "group")}
    return {"name": found["name"], "ansible.builtin.template": {**args, **changes}}


def run_the_roles(resolved: ResolvedSpec, tmp_path: Path) -> tuple[Paths, MonitoringBundle]:
    """The prometheus and alertmanager roles' template tasks for the two hosts (inventory names as in the spec):
    tmp_path/<host>/prometheus.yml and alertmanager.defaults."""
    hosts = list(monitoring_hosts(resolved.spec.monitoring)) if resolved.spec.monitoring else []
    paths, bundle, files = rendered_into(resolved, tmp_path)
    (tmp_path / "etc" / "prometheus" / "rules").mkdir(parents=True)
    (tmp_path / "etc" / "prometheus" / "rules" / "gpuforge.yml").write_text(bundle.files[paths.rules])
    variables = {
        **role_vars(resolved, files, paths),
        "ansible_python_interpreter": sys.executable,
        "prometheus_replica": "{{ inventory_hostname }}",  # the role's default
        "alertmanager_storage_path": str(tmp_path / "{{ inventory_hostname }}" / "alertmanager"),
        "alertmanager_config_file": paths.alertmanager,
        "prometheus_config_dir": str(tmp_path / "{{ inventory_hostname }}"),
        "__prometheus_rendered_config": str(files / paths.config.lstrip("/")),
        "__alertmanager_defaults_file": str(tmp_path / "{{ inventory_hostname }}" / "alertmanager.defaults"),
    }
    tasks = [
        without_ownership(task("prometheus", "Write the Prometheus configuration")),
        without_ownership(
            task("alertmanager", "Set the listen address and storage"),
            src=str(ROLES / "alertmanager" / "templates" / "defaults.j2"),
        ),
    ]
    for host in hosts:
        (tmp_path / host).mkdir()
    book = [{"hosts": "all", "connection": "local", "gather_facts": False, "vars": variables,
             "handlers": [{"name": n, "ansible.builtin.debug": {"msg": n}}
                          for n in ("Reload prometheus", "Restart alertmanager")],
             "tasks": tasks}]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(book))
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", ",".join(hosts) + ",", "play.yml"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return paths, bundle


def alertmanager_args(tmp_path: Path, host: str) -> list[str]:
    """The command line the role's defaults file gives the host's Alertmanager (ARGS="...")."""
    (line,) = (tmp_path / host / "alertmanager.defaults").read_text().splitlines()[1:]
    return shlex.split(line.removeprefix("ARGS="))[0].split()


def test_each_host_gets_its_replica_label_addresses_and_peer(tmp_path: Path) -> None:
    resolved = resolve(onprem_with_replicas())
    tool("promtool")
    paths, bundle = run_the_roles(resolved, tmp_path)
    for host, address in HOSTS.items():
        (other,) = [a for h, a in HOSTS.items() if h != host]
        config = yaml.safe_load((tmp_path / host / "prometheus.yml").read_text())
        assert config["global"]["external_labels"]["replica"] == host
        assert config["alerting"]["alert_relabel_configs"] == [{"action": "labeldrop", "regex": "replica"}]
        assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == [
            "10.64.1.5:9093", "10.64.1.6:9093"
        ]  # fmt: skip
        check = subprocess.run(
            [tool("promtool"), "check", "config", str(tmp_path / host / "prometheus.yml")],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr
        args = alertmanager_args(tmp_path, host)
        assert f"--web.listen-address={address}:9093" in args
        assert f"--cluster.listen-address={address}:9094" in args
        assert [a for a in args if a.startswith("--cluster.peer=")] == [f"--cluster.peer={other}:9094"]
    # Both replicas hold the same rules and scrape the same targets: only the replica label tells them apart.
    one, two = ((tmp_path / h / "prometheus.yml").read_text() for h in HOSTS)
    assert one.replace("mon-01", "mon-02") == two
    # The routes are the single Alertmanager's: the cluster, not the configuration, makes the two notify once.
    assert resolved.spec.monitoring is not None
    alertmanager = tmp_path / "alertmanager.yml"
    alertmanager.write_text(with_placeholders_filled(bundle.files[paths.alertmanager], resolved.spec.monitoring))
    amtool = subprocess.run(
        [tool("amtool"), "check-config", str(alertmanager)], capture_output=True, text=True, timeout=60
    )
    assert amtool.returncode == 0, amtool.stdout + amtool.stderr


def test_one_replica_renders_as_before() -> None:
    resolved = resolve(load_stack("onprem-lab").cluster)
    config = yaml.safe_load(render_monitoring(resolved).files["/etc/prometheus/prometheus.yml"])
    assert "replica" not in config["global"]["external_labels"]
    assert config["alerting"] == {"alertmanagers": [{"static_configs": [{"targets": ["127.0.0.1:9093"]}]}]}
    assert "alertmanager_cluster_peers" not in role_vars(resolved, "/tmp/files")


def test_both_monitoring_hosts_are_scraped_and_grafana_reads_its_own() -> None:
    bundle = render_monitoring(resolve(onprem_with_replicas()))
    node = yaml.safe_load(bundle.files["/etc/prometheus/file_sd/node.json"])
    monitoring = [g["labels"]["instance"] for g in node if g["labels"]["node_group"] == "monitoring"]
    assert monitoring == ["mon-01", "mon-02"]
    assert "url: http://[[ prometheus_listen ]]" in bundle.files["/etc/grafana/provisioning/datasources/gpuforge.yaml"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"replica": None},
            "cluster.monitoring.server.replica: monitoring.replicas is 2 but the server names one host",
        ),
        (
            {"replica": {"host": "mon-02", "address": "10.64.1.5"}},
            "cluster.monitoring.server.replica: mon-02 (10.64.1.5) is the server itself",
        ),
        (
            {"replica": {"host": "mon-02", "address": "192.0.2.7"}},
            "cluster.monitoring.server.replica.address: 192.0.2.7 is in none of site.cidrs",
        ),
        (
            {"replicas": 1},
            "cluster.monitoring.server.replica: mon-02 is declared but monitoring.replicas is 1",
        ),
    ],
)
def test_a_replica_must_be_a_second_site_host(change: dict[str, Any], expected: str) -> None:
    data = onprem_with_replicas()
    if "replicas" in change:
        data["monitoring"]["replicas"] = change["replicas"]
    else:
        data["monitoring"]["server"]["replica"] = change["replica"]
        if change["replica"] is None:
            del data["monitoring"]["server"]["replica"]
    with pytest.raises(SpecError) as error:
        resolve(data)
    assert expected in error.value.report()


@pytest.mark.parametrize("stack", ["prod", "staging"])
def test_two_replicas_are_refused_off_site_hosts(stack: str) -> None:
    data = load_stack(stack).cluster
    data["monitoring"]["replicas"] = 2
    with pytest.raises(SpecError) as error:
        resolve(data)
    assert "cluster.monitoring.replicas: 2 replicas run on site hosts only" in error.value.report()


# Alertmanager's --cluster.peer-timeout (15 s): the second member waits this long for the first's notification log
# before it notifies itself; a duplicate would arrive within it, plus gossip.
PEER_TIMEOUT_S = 15


def post_alert(address: str, port: int, labels: dict[str, str]) -> bool:
    """As a Prometheus replica sends a firing alert (Alertmanager API v2); False when nothing listens."""
    body = json.dumps([{"labels": labels, "annotations": {"summary": "replica probe"}}]).encode()
    request = urllib.request.Request(
        f"http://{address}:{port}/api/v2/alerts", data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5):
            return True
    except OSError:
        return False


def status_peers(address: str) -> int:
    try:
        with urllib.request.urlopen(f"http://{address}:9093/api/v2/status", timeout=5) as response:
            return len(json.loads(response.read())["cluster"].get("peers") or [])
    except OSError:
        return 0


def firing(webhook: Webhook, alertname: str) -> int:
    with webhook.arrived:
        return sum(
            1
            for _, body in webhook.received
            for alert in body.get("alerts", [])
            if alert["labels"].get("alertname") == alertname and alert.get("status") == "firing"
        )


def test_the_two_alertmanagers_the_role_configures_notify_once(tmp_path: Path) -> None:
    """Debian's Alertmanager, twice, each started with the command line the role wrote for its host (loopback
    addresses stand for the two hosts): they form one cluster; an alert both receive, as from two Prometheus
    replicas, is delivered once; with one stopped, the other delivers it, once."""
    binary = tool("prometheus-alertmanager")
    hook = Webhook()
    hook.thread.start()
    data = onprem_with_replicas(LOOPBACK_HOSTS)
    data["site"]["cidrs"].append("127.0.24.0/24")
    data["monitoring"]["receivers"] = {"hook": {"type": "webhook", "url": hook.url}}
    resolved = resolve(data)
    paths, _ = run_the_roles(resolved, tmp_path)
    assert resolved.spec.monitoring is not None
    # The stack's routes with the booted test's timing: a group's first notification after 1 s, not 30.
    timing = RouteTiming(group_wait="1s", group_interval="10s", repeat_interval="1h")
    Path(paths.alertmanager).write_text(alertmanager_yaml(resolved.spec.monitoring, timing, paths))
    daemons = {
        host: subprocess.Popen([binary, *alertmanager_args(tmp_path, host)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.STDOUT)
        for host in LOOPBACK_HOSTS
    }  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and min(map(status_peers, LOOPBACK_HOSTS.values())) < 2:
            time.sleep(0.5)
        assert [status_peers(a) for a in LOOPBACK_HOSTS.values()] == [2, 2]
        both = {"alertname": "ReplicaProbeBoth", "severity": "critical", "instance": "probe"}
        assert all(post_alert(address, 9093, both) for address in LOOPBACK_HOSTS.values())
        assert hook.wait_for("ReplicaProbeBoth", "probe", 60) is not None
        time.sleep(PEER_TIMEOUT_S + 5)  # the second member's wait for the first's log, then its own send
        assert firing(hook, "ReplicaProbeBoth") == 1
        daemons["mon-01"].terminate()
        daemons["mon-01"].wait(timeout=30)
        alone = {"alertname": "ReplicaProbeAlone", "severity": "critical", "instance": "probe"}
        assert [post_alert(a, 9093, alone) for a in LOOPBACK_HOSTS.values()] == [False, True]
        assert hook.wait_for("ReplicaProbeAlone", "probe", 60) is not None
        time.sleep(5)
        assert firing(hook, "ReplicaProbeAlone") == 1
    finally:
        for daemon in daemons.values():
            daemon.terminate()
            daemon.wait(timeout=30)
        hook.server.shutdown()
        hook.server.server_close()
