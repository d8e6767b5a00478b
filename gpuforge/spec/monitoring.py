"""The monitoring section: where Prometheus and Alertmanager run, how long they keep data, who is paged.

Placement-neutral like the rest of the spec: `server` says where the stack's Prometheus and
Alertmanager live (a services group on AWS, a site host on premises, the Prometheus operator on
Kubernetes); scrape discovery, rules and routes are derived from it by gpuforge/render/monitoring.py.

Receiver credentials (Slack and PagerDuty URLs, SMTP passwords, webhook tokens) are never written
here: a receiver names the Pulumi config key holding the secret (`pulumi config set --secret
gpuforge:<key> ...`), the program reads it with `require_secret`, and the rendered Alertmanager
configuration points at a file the alertmanager role writes, never at the value.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, field_validator, model_validator

from .base import SpecModel
from .errors import SpecIssue, described_pattern
from .fields import Name
from .limits import (
    email_problem,
    kubernetes_label_problem,
    port_problem,
    refusing,
    slack_channel_problem,
    smarthost_problem,
)

if TYPE_CHECKING:
    from .cluster import ClusterSpec

Severity = Literal["critical", "warning"]
SEVERITIES: tuple[Severity, ...] = ("critical", "warning")
CONFIG_KEY = described_pattern(
    r"^[A-Za-z][A-Za-z0-9_]{0,63}$",
    "a Pulumi config key: a letter, then up to 63 letters, digits or _",
    "alertPagerdutyKey",
)
ConfigKey = Annotated[str, Field(pattern=CONFIG_KEY)]
Mailbox = Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+$"), AfterValidator(refusing(email_problem))]
SECTION = "cluster.monitoring"


# --- where Prometheus and Alertmanager run ---------------------------------------------------


class NodeGroupServer(SpecModel):
    kind: Literal["node_group"] = Field(description="Run on the nodes of a services or login node group (aws, hybrid).")
    node_group: Name = Field(description="Key of a non-training group in node_groups, e.g. services.")


class SiteHost(SpecModel):
    host: Name = Field(description="The monitoring host's name, e.g. mon-01.")
    address: str = Field(description="Its management address; must lie in one of site.cidrs.")

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an IP address; write it like 10.64.1.5") from None
        return value


class SiteHostServer(SiteHost):
    kind: Literal["site_host"] = Field(description="Run on a site host outside the GPU hosts (onprem, hybrid).")
    replica: SiteHost | None = Field(
        default=None,
        description="The second monitoring host where monitoring.replicas is 2, e.g. {host: mon-02, address: "
        "10.64.1.6}: another host, ideally in another rack and on another power feed.",
    )


class KubernetesServer(SpecModel):
    kind: Literal["kubernetes"] = Field(
        description="The Prometheus operator in the cluster's Kubernetes (kubernetes.platform.prometheus_operator)."
    )
    namespace: Name = Field(
        default="monitoring",
        description="Namespace of kube-prometheus-stack's Alertmanager: the PrometheusRule, the AlertmanagerConfig "
        "and the Secret of the receivers' secrets go there (the chart's Alertmanager reads AlertmanagerConfigs of "
        "its own namespace by default).",
    )
    rule_labels: dict[str, str] = Field(
        default_factory=lambda: {"release": "kube-prometheus-stack"},
        description="Labels on PrometheusRule, ServiceMonitor and PodMonitor objects so the operator's selectors "
        "pick them up. kube-prometheus-stack selects release: <its Helm release name> by default.",
    )
    alertmanager_config_labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels on the AlertmanagerConfig so the Alertmanager's alertmanagerConfigSelector picks it "
        "up. kube-prometheus-stack's default selector is empty (every AlertmanagerConfig in its namespace); set "
        "the labels your alertmanagerSpec.alertmanagerConfigSelector matches.",
    )

    @field_validator("rule_labels", "alertmanager_config_labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        # They land on PrometheusRule, ServiceMonitor and AlertmanagerConfig objects, whose selectors the
        # operator matches: a label the API server refuses would fail the deploy.
        for key, text in value.items():
            problem = kubernetes_label_problem(key, text)
            if problem:
                raise ValueError(problem)
        return value


MonitoringServer = Annotated[NodeGroupServer | SiteHostServer | KubernetesServer, Field(discriminator="kind")]


# --- receivers -------------------------------------------------------------------------------


class ReceiverBase(SpecModel):
    severities: list[Severity] = Field(
        default_factory=lambda: list(SEVERITIES),
        min_length=1,
        description="Severities routed to this receiver: critical, warning.",
    )
    teams: list[Name] = Field(
        default_factory=list,
        description="Only alerts of these teams (keys of kubernetes.platform.teams or of monitoring.slurm_teams): "
        "those on a GPU a team's pod or Slurm job holds carry its team. Empty: every alert of the severities.",
    )


class WebhookReceiver(ReceiverBase):
    type: Literal["webhook"] = Field(description="POST alerts as JSON to a URL (Alertmanager webhook_config).")
    url: str = Field(description="The endpoint, without credentials (they would be in the plan): use token_secret.")
    token_secret: ConfigKey | None = Field(
        default=None, description="Pulumi config key of a bearer token sent in the Authorization header."
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not an http(s) URL; write it like https://hooks.example.com/alerts")
        try:
            port = parts.port
        except ValueError:
            port = int(parts.netloc.rsplit(":", 1)[1]) if parts.netloc.rsplit(":", 1)[-1].isdigit() else 0
        problem = port_problem(port, "webhook URL")
        if problem:
            raise ValueError(problem)
        if parts.username or parts.password or parts.query:
            raise ValueError(
                f"{parts.scheme}://{parts.hostname}/...: credentials in the URL would be in the plan; "
                "drop them and set token_secret"
            )
        return value


class EmailReceiver(ReceiverBase):
    type: Literal["email"] = Field(description="Send alerts by email (Alertmanager email_config).")
    to: Mailbox = Field(description="Recipient address, e.g. oncall@example.com.")
    from_address: Mailbox = Field(description="Sender address.")
    smarthost: Annotated[str, AfterValidator(refusing(smarthost_problem))] = Field(
        pattern=r"^[A-Za-z0-9.-]+:\d+$", description="SMTP relay host:port, e.g. smtp.example.com:587."
    )
    username: str | None = Field(default=None, description="SMTP user, when the relay needs authentication.")
    password_secret: ConfigKey | None = Field(
        default=None, description="Pulumi config key of the SMTP password; needs username."
    )

    @model_validator(mode="after")
    def _password_needs_a_user(self) -> EmailReceiver:
        # Alertmanager authenticates (auth_username/auth_password) only with a user; the password would be
        # a secret delivered to the host and never used.
        if self.password_secret is not None and not self.username:
            raise ValueError("password_secret without username: the relay login needs both; add username")
        return self


class SlackReceiver(ReceiverBase):
    type: Literal["slack"] = Field(description="Post alerts to Slack (incoming webhook).")
    url_secret: ConfigKey = Field(description="Pulumi config key holding the Slack incoming-webhook URL.")
    channel: Annotated[str, AfterValidator(refusing(slack_channel_problem))] = Field(
        pattern=r"^[#@][A-Za-z0-9._-]+$", description="Channel, e.g. #gpu-oncall."
    )


class PagerDutyReceiver(ReceiverBase):
    type: Literal["pagerduty"] = Field(description="Page through PagerDuty (Events API v2).")
    routing_key_secret: ConfigKey = Field(description="Pulumi config key holding the integration's routing key.")


Receiver = Annotated[WebhookReceiver | EmailReceiver | SlackReceiver | PagerDutyReceiver, Field(discriminator="type")]


# The file each secret field becomes on the monitoring host (alertmanager-secrets/<receiver>-<suffix>).
SECRET_FILES = {"token_secret": "token", "password_secret": "password", "url_secret": "url",
                "routing_key_secret": "routing-key"}  # fmt: skip


def secret_file_name(receiver: str, field: str) -> str:
    return f"{receiver}-{SECRET_FILES[field]}"


def receiver_secret_names(monitoring: Monitoring) -> dict[str, str]:
    """Secret file name (oncall-routing-key) -> the Pulumi config key that holds its value."""
    out: dict[str, str] = {}
    for name, receiver in sorted(monitoring.receivers.items()):
        for field in SECRET_FILES:
            key = getattr(receiver, field, None)
            if key is not None:
                out[secret_file_name(name, field)] = key
    return out


# --- durability ------------------------------------------------------------------------------


class RemoteWrite(SpecModel):
    kind: Literal["amp"] = Field(
        description="amp: an Amazon Managed Service for Prometheus workspace the program declares; Prometheus "
        "writes every sample there, signed with SigV4 as its node's instance role (granted aps:RemoteWrite on "
        "that workspace only), so a lost services node loses no history."
    )


# --- the section -----------------------------------------------------------------------------


class Monitoring(SpecModel):
    server: MonitoringServer = Field(description="Where Prometheus and Alertmanager run.")
    retention_days: int = Field(default=30, ge=1, le=3650, description="Days Prometheus keeps samples.")
    storage_gib: int = Field(
        default=200, ge=10, le=65536, description="Size of Prometheus' data volume, GiB; retention also stops at 90 %."
    )
    scrape_interval_s: int = Field(default=30, ge=5, le=300, description="Scrape and rule evaluation interval, s.")
    receivers: dict[Name, Receiver] = Field(
        min_length=1, description="Who is told, keyed by name: webhook, email, slack or pagerduty."
    )
    replicas: Literal[1, 2] = Field(
        default=1,
        description="2: two Prometheus servers with the same rules and targets (external label replica names "
        "each; Prometheus drops it from the alerts it sends, so both send the same alerts) and two Alertmanagers "
        "gossiping as one cluster (--cluster.peer, port 9094 between the monitoring hosts only); each Prometheus "
        "sends to both Alertmanagers and the cluster notifies once. Losing one host loses neither history nor "
        "alerting. On premises (server.kind site_host) with server.replica naming the second host. Default 1.",
    )
    remote_write: RemoteWrite | None = Field(
        default=None,
        description="Write the samples beyond the monitoring node as well: {kind: amp} on the aws placement, "
        "where Prometheus runs on a node group (server.kind node_group). Default: none, history lives on the "
        "data volume only.",
    )
    dead_mans_switch: Name | None = Field(
        default=None,
        description="Key of a receiver in receivers that gets the always-firing Watchdog alert, and nothing else "
        "(a webhook to a dead man's switch service, e.g. healthchecks.io or PagerDuty's): when it stops "
        "arriving, Prometheus, Alertmanager or the path between them is down. Without one Watchdog goes to a "
        "receiver that sends nothing.",
    )
    slurm_teams: dict[Name, list[Name]] = Field(
        default_factory=dict,
        description="Team -> the Slurm accounts (scheduler.accounts) whose jobs are the team's, e.g. "
        "{llm: [llm-pretrain, llm-eval]}. A team's GPU-hours and GPU energy are its accounts' (team:gpu_hours:1h, "
        "team:gpu_energy_kwh:1h; gpuforge usage's teams), and an alert "
        "on a GPU one of their jobs holds carries team and goes to the receivers of that team. An account is in one "
        "team at most; an account in none carries no team. Default: no Slurm job carries a team.",
    )
    power_budget_kw: float | None = Field(
        default=None,
        gt=0,
        description="Facility power the measured draw is held against, kW; default power.budget_kw or "
        "site.power.budget_kw. Without any budget there is no power alert.",
    )
    power_alert_fraction: float = Field(
        default=0.95, gt=0, le=1, description="Alert when measured facility power exceeds this share of the budget."
    )
    node_down_minutes: int = Field(
        default=2, ge=1, le=60, description="Minutes a node's exporter must stay unreachable before NodeDown pages."
    )
    job_pending_minutes: int = Field(
        default=60, ge=1, le=10080, description="Alert when a Slurm job has been pending longer than this."
    )
    disk_full_percent: int = Field(default=90, ge=50, le=99, description="Alert when root or scratch is this full.")
    scratch_path: str = Field(
        default="/scratch", pattern=r"^/[A-Za-z0-9_./-]*$", description="Node-local scratch mount watched for space."
    )


def check_monitoring(spec: ClusterSpec) -> list[SpecIssue]:
    """Cross-section rules: the server exists where the placement can run it; a budget is known."""
    mon = spec.monitoring
    if mon is None:
        return []
    server, kind = mon.server, spec.placement.kind
    where = f"{SECTION}.server"
    issues: list[SpecIssue] = []
    if isinstance(server, NodeGroupServer):
        group = spec.node_groups.get(server.node_group)
        if kind == "onprem":
            issues.append(
                SpecIssue(f"{where}.kind", "onprem placement has no cloud node groups", "use kind: site_host")
            )
        elif group is None:
            known = ", ".join(spec.node_groups) or "none"
            issues.append(
                SpecIssue(
                    f"{where}.node_group",
                    f"{server.node_group} is not a node group (groups: {known})",
                    "name a services or login group",
                )
            )
        elif group.role == "training":
            issues.append(
                SpecIssue(
                    f"{where}.node_group",
                    f"{server.node_group} is a training group: Prometheus would take "
                    "its memory and be replaced with its nodes",
                    "name a services or login group",
                )
            )
    elif isinstance(server, SiteHostServer):
        if spec.site is None:
            issues.append(SpecIssue(f"{where}.kind", f"{kind} placement has no site", "use kind: node_group"))
        else:
            issues += _site_host_issues(spec, server, where)
            if server.replica is not None:
                issues += _site_host_issues(spec, server.replica, f"{where}.replica")
    elif spec.kubernetes is None or not spec.kubernetes.platform.prometheus_operator:
        issues.append(
            SpecIssue(
                f"{where}.kind",
                "kubernetes needs the Prometheus operator in the cluster",
                "set kubernetes.platform.prometheus_operator: true, or run Prometheus on a node group",
            )
        )
    issues += _replica_issues(mon)
    if mon.remote_write is not None and (kind != "aws" or not isinstance(server, NodeGroupServer)):
        issues.append(
            SpecIssue(
                f"{SECTION}.remote_write",
                f"kind {mon.remote_write.kind} needs Prometheus on a node group of an AWS placement (its instance "
                f"role signs the writes); this stack has placement {kind} and server kind {server.kind}",
                "set monitoring.server to {kind: node_group, node_group: <a services group>}, or remove remote_write",
            )
        )
    issues += _slurm_team_issues(spec, mon)
    declared = set(spec.kubernetes.platform.teams) if spec.kubernetes is not None else set()
    declared |= set(mon.slurm_teams)
    for name, receiver in mon.receivers.items():
        unknown = [t for t in receiver.teams if t not in declared]
        if unknown:
            issues.append(
                SpecIssue(
                    f"{SECTION}.receivers.{name}.teams",
                    f"{', '.join(unknown)} is not a team "
                    f"(kubernetes.platform.teams and monitoring.slurm_teams: {', '.join(sorted(declared)) or 'none'})",
                    "name a declared team, or remove teams to route every alert of the severities",
                )
            )
    if mon.dead_mans_switch is not None and mon.dead_mans_switch not in mon.receivers:
        issues.append(
            SpecIssue(
                f"{SECTION}.dead_mans_switch",
                f"{mon.dead_mans_switch} is not a receiver (receivers: {', '.join(mon.receivers)})",
                "name a receiver declared under monitoring.receivers, e.g. a webhook to the dead man's switch service",
            )
        )
    return issues


def _site_host_issues(spec: ClusterSpec, server: SiteHost, where: str) -> list[SpecIssue]:
    assert spec.site is not None
    issues: list[SpecIssue] = []
    address = ipaddress.ip_address(server.address)
    if not any(address in ipaddress.ip_network(c) for c in spec.site.cidrs):
        issues.append(
            SpecIssue(
                f"{where}.address",
                f"{server.address} is in none of site.cidrs ({', '.join(spec.site.cidrs)})",
                "use a management address the site routes",
            )
        )
    if server.host in spec.site.hosts:
        issues.append(
            SpecIssue(
                f"{where}.host",
                f"{server.host} is a GPU host in site.hosts",
                "run monitoring on a host that no training job can take down",
            )
        )
    return issues


def _replica_issues(mon: Monitoring) -> list[SpecIssue]:
    """Two replicas need a second site host; a second host needs replicas: 2. Node groups and Kubernetes: not
    built (docs/monitoring.md, Durability)."""
    server = mon.server
    if mon.replicas == 1:
        if isinstance(server, SiteHostServer) and server.replica is not None:
            return [
                SpecIssue(
                    f"{SECTION}.server.replica",
                    f"{server.replica.host} is declared but monitoring.replicas is 1, so nothing would run there",
                    "set monitoring.replicas: 2, or remove server.replica",
                )
            ]
        return []
    if not isinstance(server, SiteHostServer):
        return [
            SpecIssue(
                f"{SECTION}.replicas",
                f"2 replicas run on site hosts only; server.kind is {server.kind}. On a node group gpuforge does not "
                "yet place two instances in two zones, find the Alertmanager peers or open their cluster port "
                "between the monitoring nodes (they have a security group of their own for it); on "
                "Kubernetes the chart runs them (kube-prometheus-stack: prometheus.prometheusSpec.replicas, "
                "alertmanager.alertmanagerSpec.replicas)",
                "set replicas: 1 (remote_write: {kind: amp} keeps the history on AWS), or run monitoring on site hosts",
            )
        ]
    issues: list[SpecIssue] = []
    if server.replica is None:
        issues.append(
            SpecIssue(
                f"{SECTION}.server.replica",
                "monitoring.replicas is 2 but the server names one host",
                "add server.replica: {host: mon-02, address: <its management address>}",
            )
        )
    elif server.replica.host == server.host or server.replica.address == server.address:
        issues.append(
            SpecIssue(
                f"{SECTION}.server.replica",
                f"{server.replica.host} ({server.replica.address}) is the server itself "
                f"({server.host}, {server.address}): one host lost would take both replicas",
                "name a second host with its own address",
            )
        )
    return issues


def monitoring_hosts(mon: Monitoring) -> dict[str, str]:
    """The site hosts Prometheus and Alertmanager run on, name -> management address (empty off site hosts)."""
    server = mon.server
    if not isinstance(server, SiteHostServer):
        return {}
    hosts = {server.host: server.address}
    if mon.replicas == 2 and server.replica is not None:
        hosts[server.replica.host] = server.replica.address
    return hosts


def _slurm_team_issues(spec: ClusterSpec, mon: Monitoring) -> list[SpecIssue]:
    """Every mapped account is a declared Slurm account, in one team only."""
    if not mon.slurm_teams:
        return []
    where = f"{SECTION}.slurm_teams"
    if spec.scheduler is None or spec.scheduler.kind != "slurm":
        return [SpecIssue(where, "the stack has no Slurm scheduler, so no job carries an account", "remove it")]
    accounts = spec.scheduler.accounts
    issues: list[SpecIssue] = []
    owner: dict[str, str] = {}
    for team, team_accounts in sorted(mon.slurm_teams.items()):
        unknown = [a for a in team_accounts if a not in accounts]
        if unknown:
            issues.append(
                SpecIssue(
                    f"{where}.{team}",
                    f"{', '.join(unknown)} is not a Slurm account "
                    f"(scheduler.accounts: {', '.join(accounts) or 'none'})",
                    "name accounts declared under scheduler.accounts",
                )
            )
        for account in team_accounts:
            if account in owner and owner[account] != team:
                issues.append(
                    SpecIssue(
                        f"{where}.{team}",
                        f"account {account} is in team {owner[account]} too: a job's GPU-hours and alerts would count "
                        "for two teams",
                        "keep each account in one team",
                    )
                )
            owner.setdefault(account, team)
    return issues


def slurm_account_teams(mon: Monitoring) -> dict[str, str]:
    """Slurm account -> its team (monitoring.slurm_teams turned around)."""
    return {account: team for team, accounts in sorted(mon.slurm_teams.items()) for account in accounts}


def power_budget_kw(spec: ClusterSpec) -> float | None:
    """The budget the measured draw is held against: the section's own, the cluster's, the site's."""
    if spec.monitoring is not None and spec.monitoring.power_budget_kw is not None:
        return spec.monitoring.power_budget_kw
    if spec.power.budget_kw is not None:
        return spec.power.budget_kw
    return spec.site.power.budget_kw if spec.site is not None else None


def declared_secrets(cluster: object) -> list[str]:
    """The Pulumi config keys a raw spec names as receiver secrets (empty when it has none or is malformed)."""
    if not isinstance(cluster, dict) or not isinstance(cluster.get("monitoring"), dict):
        return []
    receivers = cluster["monitoring"].get("receivers")
    if not isinstance(receivers, dict):
        return []
    return sorted(
        {
            str(r[f])
            for r in receivers.values()
            if isinstance(r, dict)
            for f in SECRET_FILES
            if isinstance(r.get(f), str)
        }
    )
