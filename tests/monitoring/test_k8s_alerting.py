"""The spec's receivers and routes on Kubernetes: a Secret of the receivers' secrets and an AlertmanagerConfig
in the operator's Alertmanager namespace, declared by the program, checked against the upstream CRD and
against the file-based alertmanager.yml they are rendered from."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import jsonschema
import pulumi
import pytest
import yaml
from pulumi.runtime import rpc

from gpuforge.infra.k8s.alerting import declare_alert_routing
from gpuforge.plan import engine
from gpuforge.plan.engine import SECRET
from gpuforge.plan.model import Plan, PlanResource
from gpuforge.plan.stacks import load_stack
from gpuforge.render.monitoring import alertmanager_config, alertmanager_config_object, render_monitoring
from gpuforge.review.report import markdown_plan
from gpuforge.spec import resolve
from gpuforge.spec.monitoring import receiver_secret_names
from tests.k8s_objects import manifests, validate
from tests.support import planned

CONFIG = "kubernetes:monitoring.coreos.com/v1alpha1:AlertmanagerConfig"
SECRET_TYPE = "kubernetes:core/v1:Secret"
TOKEN = "s3cr3t-w3bh00k-t0ken"
SIG_KEY, SECRET_SIG = rpc._special_sig_key, rpc._special_secret_sig  # pulumi/runtime/rpc.py


def _one(plan: Plan, type_: str) -> PlanResource:
    (resource,) = plan.by_type(type_)
    return resource


def _selectors(node: Any) -> list[dict[str, str]]:
    """Every secretKeySelector ({name, key}) in an AlertmanagerConfig spec."""
    if isinstance(node, list):
        return [s for item in node for s in _selectors(item)]
    if not isinstance(node, dict):
        return []
    if set(node) == {"name", "key"}:
        return [node]
    return [s for value in node.values() for s in _selectors(value)]


def _matcher(m: dict[str, str]) -> str:
    return f'{m["name"]}{m["matchType"]}"{m["value"]}"'


def test_staging_declares_the_receivers_secret_and_alertmanager_config() -> None:
    plan = planned("staging")
    secret, config = _one(plan, SECRET_TYPE), _one(plan, CONFIG)
    assert secret.inputs["metadata"]["namespace"] == config.inputs["metadata"]["namespace"] == "monitoring"
    assert secret.inputs["stringData"] == SECRET  # read with require_secret: a secret in the plan
    assert secret.urn in config.depends_on  # the operator skips a config whose Secret is missing
    assert secret.provider == config.provider and config.provider is not None and "eks" in config.provider
    # Every credential the config names is a key of that Secret, one per secret the receivers declare.
    selectors = _selectors(config.inputs["spec"])
    assert {s["name"] for s in selectors} == {secret.inputs["metadata"]["name"]}
    assert {s["key"] for s in selectors} == {"staging-hook-token"}
    (hook,) = [r for r in config.inputs["spec"]["receivers"] if r["name"] == "staging-hook"]
    assert hook["webhookConfigs"][0]["httpConfig"]["authorization"]["credentials"]["key"] == "staging-hook-token"
    # What `gpuforge render monitoring staging` prints is what the program declares.
    rendered = yaml.safe_load(
        render_monitoring(resolve(load_stack("staging").cluster)).files["kubernetes/alertmanagerconfig.yaml"]
    )
    assert {k: config.inputs[k] for k in ("metadata", "spec")} == {k: rendered[k] for k in ("metadata", "spec")}


def test_staging_declares_the_rules_monitors_and_dashboards_it_renders() -> None:
    """`pulumi up` applies what `gpuforge render monitoring` prints: the PrometheusRule, the ServiceMonitor
    and the dashboards' ConfigMaps, through the EKS provider, each passing its upstream schema."""
    plan = planned("staging")
    files = render_monitoring(resolve(load_stack("staging").cluster)).files
    rendered = [
        obj
        for file in ("prometheusrule", "servicemonitors", "dashboards")
        for obj in yaml.safe_load_all(files[f"kubernetes/{file}.yaml"])
    ]
    assert {o["kind"] for o in rendered} == {"PrometheusRule", "ServiceMonitor", "ConfigMap"}
    for obj in rendered:
        kind = obj["kind"]
        type_ = "kubernetes:core/v1:ConfigMap" if kind == "ConfigMap" else f"kubernetes:{obj['apiVersion']}:{kind}"
        (declared,) = [r for r in plan.by_type(type_) if r.inputs["metadata"]["name"] == obj["metadata"]["name"]]
        body = "data" if kind == "ConfigMap" else "spec"
        assert {k: declared.inputs[k] for k in ("metadata", body)} == {k: obj[k] for k in ("metadata", body)}
        assert declared.provider is not None and "eks" in declared.provider
    # The platform's unlabelled dcgm ServiceMonitor is off beside this one: GPUs are scraped once.
    assert len(plan.by_type("kubernetes:monitoring.coreos.com/v1:ServiceMonitor")) == 1
    rule = _one(plan, "kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    validate({"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", **rule.inputs})


def test_the_plans_alertmanager_config_passes_the_upstream_crd() -> None:
    (obj,) = [m for m in manifests(planned("staging")) if m["kind"] == "AlertmanagerConfig"]
    validate(obj)
    # The CRD keeps nested routes as raw JSON (the operator checks them): the validator bites elsewhere.
    bad = json.loads(json.dumps(obj))
    bad["spec"]["inhibitRules"][0]["sourceMatch"][0]["matchType"] = "~="
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)


def _every_receiver_type() -> dict[str, Any]:
    data = load_stack("staging").cluster
    data["monitoring"]["receivers"] |= {
        "mail": {"type": "email", "to": "oncall@example.com", "from_address": "am@example.com",
                 "smarthost": "smtp.example.com:587", "username": "am", "password_secret": "alertSmtpPassword",
                 "severities": ["critical"]},
        "chat": {"type": "slack", "url_secret": "alertSlackUrl", "channel": "#gpu-oncall"},
        "pager": {"type": "pagerduty", "routing_key_secret": "alertPagerdutyKey", "severities": ["critical"]},
    }  # fmt: skip
    return data


def test_every_receiver_type_agrees_with_the_file_render_and_the_crd() -> None:
    """Routes, grouping, timing, inhibition and each receiver's fields are alertmanager.yml's, with every
    *_file secret a key of the one Secret; the object passes the upstream CRD for all four receiver types."""
    resolved = resolve(_every_receiver_type())
    mon = resolved.spec.monitoring
    assert mon is not None and mon.server.kind == "kubernetes"
    obj = alertmanager_config_object(mon, mon.server, resolved.spec.name)
    validate(obj)
    spec, file = obj["spec"], alertmanager_config(mon)
    route, file_route = spec["route"], file["route"]
    assert route["receiver"] == file_route["receiver"]
    assert route["groupBy"] == file_route["group_by"]
    assert (route["groupWait"], route["groupInterval"], route["repeatInterval"]) == (
        file_route["group_wait"], file_route["group_interval"], file_route["repeat_interval"],
    )  # fmt: skip
    assert [(r["receiver"], [_matcher(m) for m in r["matchers"]], r.get("continue")) for r in route["routes"]] == [
        (r["receiver"], r["matchers"], r.get("continue")) for r in file_route["routes"]
    ]
    (inhibit,) = spec["inhibitRules"]
    (file_inhibit,) = file["inhibit_rules"]
    assert [_matcher(m) for m in inhibit["sourceMatch"]] == file_inhibit["source_matchers"]
    assert [_matcher(m) for m in inhibit["targetMatch"]] == file_inhibit["target_matchers"]
    receivers = {r["name"]: r for r in spec["receivers"]}
    files = {r["name"]: r for r in file["receivers"]}
    names = {"gpuforge-unrouted", "gpuforge-watchdog", "staging-hook", "mail", "chat", "pager"}
    assert set(receivers) == set(files) == names
    key = {f"{name}-{suffix}" for name, suffix in
           (("staging-hook", "token"), ("mail", "password"), ("chat", "url"), ("pager", "routing-key"))}  # fmt: skip
    assert key == set(receiver_secret_names(mon))
    secret = f"gpuforge-{resolved.spec.name}-alert-receivers"
    assert receivers["staging-hook"]["webhookConfigs"][0]["url"] == files["staging-hook"]["webhook_configs"][0]["url"]
    mail, file_mail = receivers["mail"]["emailConfigs"][0], files["mail"]["email_configs"][0]
    assert (mail["to"], mail["from"], mail["smarthost"], mail["authUsername"], mail["requireTLS"]) == (
        file_mail["to"], file_mail["from"], file_mail["smarthost"], file_mail["auth_username"], True,
    )  # fmt: skip
    assert mail["authPassword"] == {"name": secret, "key": "mail-password"}
    chat = receivers["chat"]["slackConfigs"][0]
    assert chat["apiURL"] == {"name": secret, "key": "chat-url"}
    assert chat["channel"] == "#gpu-oncall"
    assert receivers["pager"]["pagerdutyConfigs"][0]["routingKey"] == {"name": secret, "key": "pager-routing-key"}
    assert {s["key"] for s in _selectors(spec)} == key


def test_a_set_token_reaches_the_secret_but_never_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The token as `pulumi config set --secret` hands it to the program (decrypted; a stack file refuses it
    in clear text, so it is put into the loaded config): the Secret gets it, the plan only [secret]."""
    stack = load_stack("staging")
    with_token = replace(stack, config={**stack.config, "gpuforge:alertWebhookToken": TOKEN})
    monkeypatch.setattr(engine, "load_stack", lambda *_: with_token)
    plan = engine.plan_stack("staging")
    assert _one(plan, SECRET_TYPE).inputs["stringData"] == SECRET
    for text in (json.dumps(plan.to_json()), markdown_plan(plan), json.dumps(plan.outputs, default=str)):
        assert TOKEN not in text


def test_alerts_carry_the_namespace_the_operator_routes_on() -> None:
    """The operator's default matcher strategy (OnNamespace) adds namespace="<the config's namespace>" to the
    AlertmanagerConfig's route: every gpuforge alert carries that namespace, or nothing would reach a receiver."""
    bundle = render_monitoring(resolve(load_stack("staging").cluster))
    rule = yaml.safe_load(bundle.files["kubernetes/prometheusrule.yaml"])
    config = yaml.safe_load(bundle.files["kubernetes/alertmanagerconfig.yaml"])
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert alerts and {r["labels"]["namespace"] for r in alerts} == {config["metadata"]["namespace"]}
    assert not any("namespace" in r.get("labels", {}) for g in rule["spec"]["groups"] for r in g["rules"]
                   if "record" in r)  # fmt: skip


def test_alertmanager_config_labels_are_configurable() -> None:
    data = load_stack("staging").cluster
    data["monitoring"]["server"]["alertmanager_config_labels"] = {"alertmanagerConfig": "gpuforge"}
    config = yaml.safe_load(render_monitoring(resolve(data)).files["kubernetes/alertmanagerconfig.yaml"])
    labels = {"app.kubernetes.io/managed-by": "gpuforge", "alertmanagerConfig": "gpuforge"}
    assert config["metadata"]["labels"] == labels


class _Mocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.created: dict[str, dict[str, Any]] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.created[args.name] = args.inputs
        return f"{args.name}-id", args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


@pytest.fixture
def token_mocks() -> _Mocks:
    mocks = _Mocks()
    pulumi.runtime.set_mocks(mocks, project="gpuforge", stack="unit", preview=False)
    pulumi.runtime.set_all_config({"gpuforge:alertWebhookToken": TOKEN}, secret_keys=["gpuforge:alertWebhookToken"])
    return mocks


@pulumi.runtime.test
def test_the_secret_holds_the_configured_token_under_the_key_the_config_selects(token_mocks: _Mocks) -> Any:
    """Under Pulumi's mocks: the value `pulumi config set --secret` stored is what the Secret holds, under the
    key the AlertmanagerConfig's credentials select; the Secret comes first."""
    routing = declare_alert_routing("unit-alerts", resolve(load_stack("staging").cluster), pulumi.ResourceOptions())
    assert routing is not None and routing.secret is not None

    def check(_: Any) -> None:
        secret = token_mocks.created["unit-alerts-secrets"]
        # The engine receives it as a secret (Pulumi's wire encoding: signature key -> secret signature).
        assert secret["stringData"] == {SIG_KEY: SECRET_SIG, "value": {"staging-hook-token": TOKEN}}
        config = token_mocks.created["unit-alerts-config"]
        (hook,) = [r for r in config["spec"]["receivers"] if r["name"] == "staging-hook"]
        credentials = hook["webhookConfigs"][0]["httpConfig"]["authorization"]["credentials"]
        assert credentials == {"name": secret["metadata"]["name"], "key": "staging-hook-token"}

    return pulumi.Output.all(routing.secret.id, routing.config.id).apply(check)
