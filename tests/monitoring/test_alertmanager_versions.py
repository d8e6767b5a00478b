"""Alertmanager releases as data: what gpuforge renders and the alertmanager role passes is valid for the
catalog's production release (Ubuntu 22.04's 0.23.0, checked against its source at that tag: the fields
its strict parser accepts and its flags) and for the release the tests run (Debian 12's 0.25, the real
binary: `--help` and `amtool check-config` on what the role's own template task writes)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from gpuforge.catalog import load_catalog
from gpuforge.plan.stacks import load_stack
from gpuforge.render.monitoring import (
    SecretFields,
    alertmanager_yaml,
    inline_secret_placeholder,
    render_monitoring,
)
from gpuforge.spec import resolve
from gpuforge.spec.monitoring import Monitoring, receiver_secret_names
from tests.support import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
V023 = ROOT / "tests" / "fixtures" / "monitoring" / "alertmanager-v0.23.0"
ROLE = ROOT / "gpuforge" / "assets" / "playbooks" / "roles" / "alertmanager"
CONFIG = "/etc/prometheus/alertmanager.yml"


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        skip_or_fail(f"{name} is not installed (Debian: prometheus-alertmanager)")
    assert path is not None
    return path


def yaml_tags(*files: str) -> set[str]:
    return {m for f in files for m in re.findall(r'yaml:"([a-z_0-9]+)[,"]', (V023 / f).read_text())}


def config_keys(config: dict[str, Any]) -> set[str]:
    """Every key of the receivers' *_configs entries (not http_config's: prometheus/common's), the
    receivers', the route's and the inhibit rules'."""
    keys: set[str] = set(config["route"]) | {k for rule in config["inhibit_rules"] for k in rule}
    for route in config["route"].get("routes", []):
        keys |= set(route)
    for receiver in config["receivers"]:
        keys |= set(receiver)
        for kind, entries in receiver.items():
            if kind.endswith("_configs"):
                keys |= {k for entry in entries for k in entry}
    return keys


def with_placeholders_filled(text: str, monitoring: Monitoring) -> str:
    """What the role's template makes of the placeholders, for a check without Ansible (a dummy value)."""
    for name in receiver_secret_names(monitoring):
        text = text.replace(inline_secret_placeholder(name), json.dumps(f"dummy-{name}"))
    return text


def prod_config(fields: SecretFields | None) -> dict[str, Any]:
    monitoring = resolve(load_stack("prod").cluster).spec.monitoring
    assert monitoring is not None
    return dict(yaml.safe_load(with_placeholders_filled(alertmanager_yaml(monitoring, fields=fields), monitoring)))


def test_the_catalog_names_production_and_test_releases() -> None:
    facts = load_catalog().alertmanager
    assert (facts.production.version, facts.test.version) == ("0.23.0", "0.25.0")
    run = subprocess.run([tool("prometheus-alertmanager"), "--version"], capture_output=True, text=True, timeout=30)
    assert f"version {facts.test.version} " in run.stdout + run.stderr


def test_what_prod_renders_uses_only_fields_the_production_release_knows() -> None:
    known = yaml_tags("config/config.go", "config/notifiers.go")
    facts = load_catalog().alertmanager
    production = prod_config(SecretFields(facts.production.version, facts))
    assert config_keys(production) <= known, config_keys(production) - known
    pagerduty = next(r for r in production["receivers"] if r["name"] == "oncall")["pagerduty_configs"][0]
    assert set(pagerduty) == {"routing_key"}  # inline: 0.23 has no routing_key_file
    slack = next(r for r in production["receivers"] if r["name"] == "platform-channel")["slack_configs"][0]
    assert "api_url_file" in slack  # 0.22+ reads the Slack URL from a file
    # The check bites: rendered for the newest release, the PagerDuty key is a file 0.23 would refuse.
    newest = prod_config(None)
    assert config_keys(newest) - known == {"routing_key_file"}


def test_the_role_flags_exist_in_the_production_and_test_releases() -> None:
    args = (ROLE / "templates" / "defaults.j2").read_text()
    flags = set(re.findall(r"--([a-z][a-z.-]+)=", args))
    assert flags == {"config.file", "web.listen-address", "cluster.listen-address", "cluster.peer", "storage.path"}
    v023 = set(re.findall(r'Flag\("([a-z.-]+)"', (V023 / "cmd" / "alertmanager" / "main.go").read_text()))
    assert flags <= v023, flags - v023
    run = subprocess.run([tool("prometheus-alertmanager"), "--help"], capture_output=True, text=True, timeout=30)
    test_release = set(re.findall(r"--([a-z][a-z.-]+)=", run.stdout + run.stderr))
    assert flags <= test_release, flags - test_release


def test_the_role_template_fills_inline_secrets_and_amtool_accepts_the_result(tmp_path: Path) -> None:
    """The role's own task (its module and arguments, run by ansible-playbook on this machine) turns prod's
    production rendering into a file the real amtool accepts, the secret JSON-quoted, Alertmanager's own
    templates untouched."""
    bundle = render_monitoring(resolve(load_stack("prod").cluster))
    source = tmp_path / "alertmanager.yml"
    source.write_text(bundle.files[CONFIG])
    assert inline_secret_placeholder("oncall-routing-key") in source.read_text()
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    task = next(t for t in tasks if t["name"] == "Write the routes and receivers")
    args = {k: v for k, v in task["ansible.builtin.template"].items() if k not in ("owner", "group")}
    assert args["validate"] == "amtool check-config %s"
    tool("amtool")
    out = tmp_path / "out.yml"
    args |= {"src": str(source), "dest": str(out)}
    secret = 'k3y"with: a quote'
    play = {
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars": {
            "ansible_python_interpreter": sys.executable,
            "alertmanager_secrets": {"oncall-routing-key": secret, "platform-channel-url": "https://hooks.example"},
        },
        "tasks": [{"name": task["name"], "ansible.builtin.template": args, "no_log": task["no_log"]}],
    }
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play]))
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(tmp_path / "play.yml")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert secret not in run.stdout + run.stderr, "no_log keeps the value out of the output"
    written = yaml.safe_load(out.read_text())
    receivers = {r["name"]: r for r in written["receivers"]}
    assert receivers["oncall"]["pagerduty_configs"][0]["routing_key"] == secret
    assert receivers["platform-channel"]["slack_configs"][0]["title"] == "{{ .CommonAnnotations.summary }}"
    check = subprocess.run([tool("amtool"), "check-config", str(out)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
