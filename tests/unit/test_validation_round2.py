"""Issue 27: mistakes that `validate` and `plan` used to accept, each refused with exit 2, its field path,
what was expected with its source, and the fix, beside every other problem of the file, declaring
nothing, and never quoting a secret."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuforge.cli import app
from gpuforge.nodes.slurm_inventory import slurm_inventory
from gpuforge.plan import engine
from gpuforge.plan.stacks import load_stack
from gpuforge.plan.validation import check_stack
from gpuforge.spec import SpecError
from tests.crypto_material import ca_certificate, ca_private_key, ssh_private_key, ssh_public_key

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
Mutation = Callable[[dict[str, Any]], None]


def _document(stack: str) -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text()))


def _write(tmp_path: Path, document: dict[str, Any], name: str = "case") -> Path:
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, default_flow_style=False))
    return path


def _problems(path: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        check_stack(load_stack(path))
    return [str(issue) for issue in caught.value.issues]


def _cluster(mutate: Mutation) -> Callable[[dict[str, Any]], None]:
    return lambda document: mutate(document["config"]["gpuforge:cluster"])


def _set(*keys: Any, value: Any) -> Mutation:
    def mutate(cluster: dict[str, Any]) -> None:
        node = cluster
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return mutate


def _both(*mutations: Mutation) -> Mutation:
    def mutate(cluster: dict[str, Any]) -> None:
        for m in mutations:
            m(cluster)

    return mutate


def _dup_uid_by_merge_key(tmp_path: Path) -> Path:
    """bob: {<<: *alice, ...}: YAML's merge key copies alice's uid into bob."""
    text = (ROOT / "stacks" / "Pulumi.prod.yaml").read_text()
    text = text.replace("alice: {uid: 2001,", "alice: &alice {uid: 2001,", 1)
    text = text.replace("bob: {uid: 2002, account: research}", "bob: {<<: *alice, account: research}", 1)
    path = tmp_path / "Pulumi.merge.yaml"
    path.write_text(text)
    return path


_PUBLIC_CIDRS = [f"203.0.{i}.0/24" for i in range(41)]
SCHED = ("scheduler",)
MON = ("monitoring", "receivers")
BLOCK = ("node_groups", "train", "capacity")
LINK = ("hybrid", "link", "customer_gateway")

# (id, stack, mutation of the cluster spec, the path it must be refused at, words of the message)
CASES: list[tuple[str, str, Mutation, str, str]] = [
    # Slurm identities
    ("partition-named-default", "dev",
     lambda c: c["scheduler"]["partitions"].update(default=c["scheduler"]["partitions"].pop("debug")),
     "cluster.scheduler.partitions[default]", "slurm.conf(5)"),
    ("duplicate-uid", "prod", _set(*SCHED, "users", "bob", "uid", value=2001),
     "cluster.scheduler.users[bob].uid", "2001 is already users[alice]'s"),
    ("root-as-a-user", "dev", lambda c: c["scheduler"]["users"].update(root=c["scheduler"]["users"].pop("alice")),
     "cluster.scheduler.users[root]", "system account"),
    ("slurm-as-a-user", "dev", lambda c: c["scheduler"]["users"].update(slurm=c["scheduler"]["users"].pop("alice")),
     "cluster.scheduler.users[slurm]", "base-passwd"),
    ("private-key-as-ssh-key", "dev", _set(*SCHED, "users", "alice", "ssh_public_keys", value=[ssh_private_key()]),
     "cluster.scheduler.users[alice].ssh_public_keys[0]", "OpenSSH private key"),
    ("ssh-key-without-type", "dev",
     _set(*SCHED, "users", "alice", "ssh_public_keys", value=[ssh_public_key("alice").split(" ", 1)[1]]),
     "cluster.scheduler.users[alice].ssh_public_keys[0]", "no key type"),
    ("ssh-key-truncated", "dev",
     _set(*SCHED, "users", "alice", "ssh_public_keys", value=[ssh_public_key("alice")[:40]]),
     "cluster.scheduler.users[alice].ssh_public_keys[0]", "ssh-ed25519"),
    ("rds-class-without-db", "prod", _set(*SCHED, "accounting", "instance_class", value="m7g.large"),
     "cluster.scheduler.accounting.instance_class", "db.m7g.large"),
    # two hosts at one address
    ("login-at-the-controllers-address", "onprem-lab", _set(*SCHED, "login", "hosts", value={"login-01": "10.64.1.6"}),
     "cluster.scheduler.login.hosts[login-01]", "10.64.1.6 is already slurm-01"),
    ("monitoring-at-a-gpu-hosts-address", "onprem-lab", _set("monitoring", "server", "address", value="10.64.1.11"),
     "cluster.monitoring.server.address", "10.64.1.11 is already dgx-a01"),
    ("nfs-server-at-a-bmc", "onprem-lab", _set("site", "storage", "mounts", "home", "server", value="10.64.0.12"),
     "cluster.site.storage.mounts[home].server", "dgx-a02's BMC"),
    # certificates
    ("private-key-after-the-directory-ca", "onprem-lab",
     _set(*SCHED, "directory", "ca_certificate", value=ca_certificate() + ca_private_key()),
     "cluster.scheduler.directory.ca_certificate", "PEM private key (PRIVATE KEY)"),
    ("truncated-directory-ca", "onprem-lab",
     _set(*SCHED, "directory", "ca_certificate", value=ca_certificate()[:200] + "\n-----END CERTIFICATE-----\n"),
     "cluster.scheduler.directory.ca_certificate", "does not parse"),
    ("base64-not-a-certificate", "hybrid",
     _set("hybrid", "burst", "scaler_ca_certificate",
          value="-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n"),
     "cluster.hybrid.burst.scaler_ca_certificate", "does not parse"),
    ("kubeconfig-token-inline", "hybrid", lambda c: None, "", ""),  # replaced below (needs a site kubernetes)
    # monitoring strings
    ("smtp-port-out-of-range", "onprem-lab", _set(*MON, "lab-oncall", "smarthost", value="smtp.example.com:70000"),
     "cluster.monitoring.receivers[lab-oncall].smarthost", "outside 1-65535"),
    ("email-local-part-too-long", "onprem-lab", _set(*MON, "lab-oncall", "to", value="a" * 65 + "@example.com"),
     "cluster.monitoring.receivers[lab-oncall].to", "RFC 5321"),
    ("smtp-password-without-user", "onprem-lab", lambda c: c["monitoring"]["receivers"]["lab-oncall"].pop("username"),
     "cluster.monitoring.receivers[lab-oncall]", "password_secret without username"),
    ("slack-channel-uppercase", "prod", _set(*MON, "platform-channel", "channel", value="#ML.Platform"),
     "cluster.monitoring.receivers[platform-channel].channel", "conversations.create"),
    ("label-name-refused", "staging", _set("monitoring", "server", "rule_labels", value={"-release": "x"}),
     "cluster.monitoring.server.rule_labels", "Labels and Selectors"),
    ("webhook-port-out-of-range", "staging",
     _set(*MON, "staging-hook", "url", value="https://alerts.example.com:0/x"),
     "cluster.monitoring.receivers[staging-hook].url", "outside 1-65535"),
    # AWS formats and limits
    ("reserved-bgp-asn", "hybrid", _set(*LINK, "bgp_asn", value=7224),
     "cluster.hybrid.link.customer_gateway.bgp_asn", "reserved by AWS in us-east-1"),
    ("customer-gateway-at-a-private-address", "hybrid", _set(*LINK, "ip_address", value="192.168.10.1"),
     "cluster.hybrid.link.customer_gateway.ip_address", "not an Internet-routable address"),
    ("datasync-every-15-minutes", "hybrid", _set("hybrid", "object_sync", "schedule", value="rate(15 minutes)"),
     "cluster.hybrid.object_sync.schedule", "at most hourly"),
    ("datasync-not-a-schedule", "hybrid", _set("hybrid", "object_sync", "schedule", value="hourly"),
     "cluster.hybrid.object_sync.schedule", "not a schedule expression"),
    ("eks-41-public-cidrs", "staging",
     _both(_set("kubernetes", "endpoint", value="public"),
           _set("kubernetes", "public_access_cidrs", value=_PUBLIC_CIDRS)),
     "cluster.kubernetes.public_access_cidrs", "at most 40"),
    ("eks-private-public-cidr", "staging",
     _both(_set("kubernetes", "endpoint", value="public"),
           _set("kubernetes", "public_access_cidrs", value=["203.0.113.0/24", "10.0.0.0/8"])),
     "cluster.kubernetes.public_access_cidrs", "10.0.0.0/8 is a private or reserved range"),
    ("capacity-block-of-15-days", "staging", _set(*BLOCK, "end", value="2026-12-16T11:30:00Z"),
     "cluster.node_groups[train].capacity.end", "7-day steps up to 182"),
    ("capacity-block-ending-at-noon", "staging", _set(*BLOCK, "end", value="2026-12-15T12:00:00Z"),
     "cluster.node_groups[train].capacity.end", "11:30 UTC, when every Capacity Block ends"),
    ("capacity-block-of-17-days", "staging",
     _both(_set(*BLOCK, "start", value="2026-11-28T04:55:00Z"), _set(*BLOCK, "end", value="2026-12-15T11:30:00Z")),
     "cluster.node_groups[train].capacity.end", "7-day steps up to 182"),
    ("cron-both-days", "staging", _set("image_pipeline", "schedule", value="cron(0 4 1 * SUN *)"),
     "cluster.image_pipeline.schedule", "exactly one of them"),
    ("cron-hour-25", "staging", _set("image_pipeline", "schedule", value="cron(0 25 ? * SUN *)"),
     "cluster.image_pipeline.schedule", "hours 25 is outside 0-23"),
    ("ssm-parameter-16-levels", "staging", _set("image_pipeline", "ssm_parameter", value="/a" * 16),
     "cluster.image_pipeline.ssm_parameter", "16 levels"),
    ("ssm-parameter-empty-level", "staging", _set("image_pipeline", "ssm_parameter", value="/gpuforge//ami"),
     "cluster.image_pipeline.ssm_parameter", "empty level"),
]
CASES = [c for c in CASES if c[3]]


@pytest.mark.parametrize(("stack", "mutate", "path", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_mistake_is_refused_at_its_path_with_its_source(
    tmp_path: Path, stack: str, mutate: Mutation, path: str, words: str
) -> None:
    document = _document(stack)
    _cluster(mutate)(document)
    stack_path = _write(tmp_path, document)
    found = _problems(stack_path)
    assert any(p.startswith(f"{path}: ") and words in p for p in found), found
    assert all("; fix: " in p for p in found if p.startswith(f"{path}: ")), found
    for command in (["validate", str(stack_path)], ["plan", str(stack_path), "--no-tree"]):
        result = runner.invoke(app, command, env={"COLUMNS": "250"})
        assert result.exit_code == 2 and path in result.output, result.output


def test_inventory_refuses_a_key_pasted_after_the_directory_ca(tmp_path: Path) -> None:
    """`gpuforge inventory` printed such a key, and the sssd role wrote it world-readable on every node."""
    document = _document("onprem-lab")
    _cluster(_set(*SCHED, "directory", "ca_certificate", value=ca_certificate() + ca_private_key()))(document)
    with pytest.raises(SpecError) as caught:
        slurm_inventory(str(_write(tmp_path, document)), {}, None)
    assert any(i.path == "cluster.scheduler.directory.ca_certificate" for i in caught.value.issues)
    assert ca_private_key()[30:70] not in caught.value.report()


def test_a_duplicate_uid_made_by_a_merge_key_is_refused(tmp_path: Path) -> None:
    found = _problems(_dup_uid_by_merge_key(tmp_path))
    assert any(p.startswith("cluster.scheduler.users[bob].uid: 2001 is already users[alice]'s") for p in found)


def test_an_inline_kubeconfig_token_is_refused_as_a_credential_field(tmp_path: Path) -> None:
    document = yaml.safe_load((ROOT / "tests" / "fixtures" / "stacks" / "Pulumi.onprem-k8s.yaml").read_text())
    token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJlLXZhbHVl"
    document["config"]["gpuforge:cluster"]["site"]["kubernetes"]["kubeconfig_secret"] = token
    found = _problems(_write(tmp_path, document))
    jwt = "cluster.site.kubernetes.kubeconfig_secret: a bearer token (JWT) in clear text"
    assert any(p.startswith(jwt) for p in found), found
    assert not any(token[:12] in p for p in found), found


# --- secrets by shape --------------------------------------------------------------------------------

SLACK = "https://hooks.slack.com/services/T01ABCDEF/B02GHIJKL/q1w2e3r4t5y6u7i8o9p0asdf"
SHAPES: list[tuple[str, str, Mutation | None, str]] = [
    # (id, secret, where in the cluster spec (None: a top-level config key of its own), kind named)
    ("slack-webhook-as-a-webhook-url", SLACK, _set(*MON, "staging-hook", "url", value=SLACK), "Slack webhook URL"),
    ("slack-webhook-as-a-config-key-name", SLACK, _set(*MON, "staging-hook", "token_secret", value=SLACK),
     "Slack webhook URL"),
    ("pagerduty-key-as-a-config-key-name", "e93facc04764012d7bfb002500d5d1a6",
     _set(*MON, "staging-hook", "token_secret", value="e93facc04764012d7bfb002500d5d1a6"), "PagerDuty integration key"),
    ("github-token-in-extra-vars", "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
     _set("image_pipeline", "extra_vars", value={"git_token": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"}),
     "GitHub token"),
    ("private-key-in-a-tag", ca_private_key(), _set("tags", value={"team": ca_private_key()}), "PEM private key"),
    ("slack-webhook-under-an-innocent-config-key", SLACK, None, "Slack webhook URL"),
    ("declared-receiver-secret-in-clear", "not-shaped-but-named", None, "a credential"),
]


@pytest.mark.parametrize(("secret", "mutate", "kind"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_clear_text_secrets_are_refused_by_shape_without_printing_them(
    tmp_path: Path, secret: str, mutate: Mutation | None, kind: str
) -> None:
    document = _document("staging")
    if mutate is not None:
        _cluster(mutate)(document)
    elif kind == "a credential":
        document["config"]["gpuforge:alertWebhookToken"] = secret  # the key staging-hook names as its token_secret
    else:
        document["config"]["gpuforge:chatUrl"] = secret
    document["config"]["gpuforge:cluster"]["node_groups"]["train"]["count"] = "eight"  # and another problem
    stack_path = _write(tmp_path, document)
    found = _problems(stack_path)
    assert any(f"{kind}" in p and "in clear text" in p for p in found), found
    assert any(p.startswith("cluster.node_groups[train].count: ") for p in found), "the secret hid other problems"
    result = runner.invoke(app, ["validate", str(stack_path), "--json"])
    outputs = [result.output, "\n".join(found)]
    for text in outputs:
        for i in range(len(secret) - 11):
            assert secret[i : i + 12] not in text, f"the report quotes the secret: ...{secret[i : i + 12]}..."
    assert result.exit_code == 2 and json.loads(result.output)["valid"] is False


def test_a_secret_set_with_pulumi_config_set_secret_is_accepted(tmp_path: Path) -> None:
    document = _document("staging")
    document["config"]["gpuforge:alertWebhookToken"] = {"secure": "v1:AAAABBBBCCCC"}
    document["config"]["gpuforge:chatUrl"] = {"secure": "v1:DDDDEEEEFFFF"}
    check_stack(load_stack(_write(tmp_path, document)))


def test_a_refused_file_declares_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    document = _document("staging")
    _cluster(_set(*MON, "staging-hook", "url", value=SLACK))(document)
    evaluated: list[object] = []
    monkeypatch.setattr(engine, "run_program", lambda *args: evaluated.append(args) or ([], {}))
    with pytest.raises(SpecError):
        engine.plan_stack(_write(tmp_path, document))
    assert evaluated == []


# --- no cascades ---------------------------------------------------------------------------------


def test_one_mistake_in_a_node_group_adds_no_quota_problem(tmp_path: Path) -> None:
    document = _document("staging")
    document["config"]["gpuforge:cluster"]["node_groups"]["train"]["instance_type"] = "p5.48xlarg"
    found = _problems(_write(tmp_path, document))
    assert [p.split(":")[0] for p in found] == ["cluster.node_groups[train].instance_type"], found


def test_one_duplicate_principal_is_one_problem(tmp_path: Path) -> None:
    document = _document("staging")
    entries = document["config"]["gpuforge:cluster"]["kubernetes"]["access_entries"]
    entries["again"] = dict(entries["platform-admins"])
    found = _problems(_write(tmp_path, document))
    assert len(found) == 1 and "already has access_entries[platform-admins]" in found[0], found


# One made-up value of every shape gpuforge/spec/secrets.py knows (a new shape without a sample fails).
SAMPLES = {
    "a Slack webhook URL": SLACK,
    "a Slack token": "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "a Discord webhook URL": "https://discord.com/api/webhooks/123456789012345678/AbCdEf-GhIjKlMnOpQrStUvWxYz0123",
    "a Microsoft Teams webhook URL": "https://contoso.webhook.office.com/webhookb2/a1b2c3d4-0000/IncomingWebhook/xyz",
    "a Google Chat webhook URL": "https://chat.googleapis.com/v1/spaces/AAAA1234/messages?key=AIzaSyDdI0hCZtE6vySjMm",
    "a URL with a user and password": "https://alertbot:Sup3rS3cretPass@alerts.example.com/hook",
    "a URL with a credential in its query": "https://alerts.example.com/hook?token=9f8e7d6c5b4a39281706",
    "a GitHub token": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "a GitLab token": "glpat-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn",
    "an AWS access key id": "AKIA" + "IOSFODNN7EXAMPLE",
    "a bearer token (JWT)": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJlLXZhbHVl",
    "a bearer token": "Bearer " + "q1w2e3r4t5y6u7i8o9p0a1s2d3f4",
    "a kubeconfig with credentials":
        "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: abcd1234efgh5678\n",
    "a PagerDuty integration key": "e93facc04764012d7bfb002500d5d1a6",
    "a PEM private key (PRIVATE KEY)": ca_private_key(),
    "an OpenSSH private key": ssh_private_key(),
}


def test_every_secret_shape_has_a_sample() -> None:
    from gpuforge.spec.secrets import SECRET_SHAPES

    assert {kind for kind, _ in SECRET_SHAPES} <= set(SAMPLES)


@pytest.mark.parametrize(("kind", "secret"), list(SAMPLES.items()), ids=list(SAMPLES))
def test_each_secret_shape_is_refused_and_never_printed(tmp_path: Path, kind: str, secret: str) -> None:
    document = _document("staging")
    document["config"]["gpuforge:cluster"]["tags"]["note"] = secret  # a field whose name says nothing
    document["config"]["gpuforge:someUrl"] = secret  # a config key whose name says nothing
    stack_path = _write(tmp_path, document)
    found = _problems(stack_path)
    assert f"cluster.tags[note]: {kind} in clear text in the stack file" in [p.split("; fix")[0] for p in found]
    assert any(p.startswith(f"config.gpuforge:someUrl: {kind} in clear text") for p in found), found
    result = runner.invoke(app, ["validate", str(stack_path)], env={"COLUMNS": "250"})
    assert result.exit_code == 2
    for text in (result.output, "\n".join(found)):
        for line in secret.splitlines():
            for i in range(max(1, len(line) - 11)):
                assert line[i : i + 12] not in text or len(line) < 12, f"the report quotes the secret: {line[i:i+12]}"


# Valid but unusual: each must still pass (the checks above refuse mistakes, not rare forms).
CONTROLS: list[tuple[str, str, Mutation]] = [
    ("cron-nth-weekday-and-ranges", "staging", _set("image_pipeline", "schedule", value="cron(0 8 ? JAN-JUN 3#1 *)")),
    ("cron-last-day-of-month", "staging", _set("image_pipeline", "schedule", value="cron(30 2 L * ? 2026-2030)")),
    ("datasync-every-2-hours-by-cron", "hybrid",
     _set("hybrid", "object_sync", "schedule", value="cron(0 */2 * * ? *)")),
    ("datasync-daily", "hybrid", _set("hybrid", "object_sync", "schedule", value="rate(1 day)")),
    ("capacity-block-starting-mid-morning", "staging",
     _both(_set(*BLOCK, "start", value="2026-12-01T04:55:00Z"), _set(*BLOCK, "end", value="2026-12-15T11:30:00Z"))),
    ("capacity-block-of-28-days", "staging", _set(*BLOCK, "end", value="2026-12-29T11:30:00Z")),
    ("two-certificates-in-a-chain", "onprem-lab",
     _set(*SCHED, "directory", "ca_certificate", value=ca_certificate() + ca_certificate())),
    ("slack-direct-message", "prod", _set(*MON, "platform-channel", "channel", value="@ml-oncall")),
    ("email-with-plus-and-subdomain", "onprem-lab", _set(*MON, "lab-oncall", "to", value="gpu+alerts@ops.example.com")),
    ("prefixed-kubernetes-label", "staging",
     _set("monitoring", "server", "rule_labels", value={"example.com/team": "ml-platform", "release": "kps"})),
    ("ssh-key-with-spaces-in-comment", "dev",
     _set(*SCHED, "users", "alice", "ssh_public_keys", value=[ssh_public_key("alice on her laptop")])),
    ("monitoring-on-the-controller-host", "onprem-lab",
     _both(_set("monitoring", "server", "host", value="slurm-01"),
           _set("monitoring", "server", "address", value="10.64.1.6"))),
]


@pytest.mark.parametrize(("stack", "mutate"), [c[1:] for c in CONTROLS], ids=[c[0] for c in CONTROLS])
def test_valid_but_unusual_values_pass(tmp_path: Path, stack: str, mutate: Mutation) -> None:
    document = _document(stack)
    _cluster(mutate)(document)
    check_stack(load_stack(_write(tmp_path, document)))
