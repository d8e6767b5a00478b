"""Secrets in stack config: refused in clear text wherever they sit in the stack file, recognised by the
key that holds them and by their shape.

Pulumi stores a value set with `pulumi config set --secret` as `{secure: <ciphertext>}`; anything
else is readable by whoever reads the repository, and would flow into plans and state unmarked. A
config key is a credential by its name (siteS3SecretKey, anything saying password or token) or because
the spec names it as one (a receiver's url_secret, the site's kubeconfig_secret); any string anywhere
in the file is one by its shape (a private key, a Slack or other webhook URL, a PagerDuty integration
key, a token). Every problem says where and what kind of secret, never the value; and the values
found are withheld from every other message of the same report.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .cluster import ClusterSpec
from .config_keys import CLUSTER_KEY, NAMESPACE, POLICY_KEY, SECRET_KEYS
from .errors import SpecIssue, walk
from .keys import private_key_kind
from .monitoring import declared_secrets

# A config key whose name says it holds a credential, whoever reads it.
CREDENTIAL_NAME = re.compile(
    r"secret|password|passwd|token|credential|kubeconfig|access_?key|private_?key|api_?key", re.I
)
# Shapes of secrets, from the issuers' own formats. Searched in every string of the file.
SECRET_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # api.slack.com/messaging/webhooks: https://hooks.slack.com/services/T.../B.../<secret>; workflow triggers.
    ("a Slack webhook URL", re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/\S+")),
    # api.slack.com/authentication/token-types: xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, xoxe- and app tokens xapp-.
    ("a Slack token", re.compile(r"\bxox[abeoprs]-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}")),
    ("a Discord webhook URL", re.compile(r"https://(?:\w+\.)?discord(?:app)?\.com/api/webhooks/\d+/[\w-]+")),
    ("a Microsoft Teams webhook URL",
     re.compile(r"https://[\w.-]+\.webhook\.office\.com/webhookb2/\S+|https://[\w.-]+\.logic\.azure\.com\S*sig=\S+")),
    ("a Google Chat webhook URL", re.compile(r"https://chat\.googleapis\.com/v1/spaces/\S+[?&](?:key|token)=\S+")),
    ("a URL with a user and password", re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@", re.I)),
    ("a URL with a credential in its query",
     re.compile(r"https?://\S+[?&](?:token|key|sig|signature|secret|access_token|api_?key|password)=[^&\s]{8,}", re.I)),
    # GitHub: gh[pousr]_ + 36, github_pat_; GitLab: glpat-; AWS access key ids (AKIA long-lived, ASIA session).
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    # RFC 7519 JWS compact form: a Kubernetes service-account or OIDC bearer token.
    ("a bearer token (JWT)", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("a bearer token", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/-]{16,}=*")),
    ("a kubeconfig with credentials",
     re.compile(r"(?s)\busers:.*\b(?:token|client-key-data|password):\s*\S{8,}")),
)
# PagerDuty Events API v2: the routing (integration) key is a 32-character string; judged on a whole value.
PAGERDUTY_KEY = re.compile(r"^(?=[A-Za-z0-9]*[0-9])(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{32}$")
WITHHELD = "[secret withheld]"


@dataclass(frozen=True)
class ClearTextSecret:
    issue: SpecIssue
    value: str  # kept to withhold it from other messages; never shown


def secret_shape(value: str) -> str | None:
    """What kind of secret a string is, by its shape; None for anything else."""
    key = private_key_kind(value)
    if key is not None:
        return key
    if PAGERDUTY_KEY.match(value.strip()):
        return "a PagerDuty integration key"
    for kind, pattern in SECRET_SHAPES:
        if pattern.search(value):
            return kind
    return None


def _is_secure(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"secure"}


def secret_key_names(cluster: object) -> set[str]:
    """The Pulumi config keys (without namespace) the spec names as secrets: receiver secrets and the
    site's kubeconfig."""
    names = set(declared_secrets(cluster))
    site = cluster.get("site") if isinstance(cluster, Mapping) else None
    kube = site.get("kubernetes") if isinstance(site, Mapping) else None
    if isinstance(kube, Mapping):
        names.add(str(kube.get("kubeconfig_secret") or "siteKubeconfig"))
    return names


def clear_text_secrets(config: Mapping[str, Any]) -> list[ClearTextSecret]:
    """Every clear-text secret of a stack's config: by key (name, or named by the spec) and by shape."""
    found: list[ClearTextSecret] = []
    named = secret_key_names(config.get(CLUSTER_KEY))
    for full_key, value in config.items():
        namespace, _, key = str(full_key).rpartition(":")
        if value is None or _is_secure(value):
            continue
        ours = namespace in ("", NAMESPACE)
        by_name = (ours and (key in SECRET_KEYS or key in named)) or CREDENTIAL_NAME.search(key)
        if by_name and not isinstance(value, Mapping | list):
            found.append(_found(f"config.{full_key}", "a credential", str(value), f"config {full_key}"))
            continue
        for path, text in _strings(value, full_key):
            kind = secret_shape(text)
            if kind is not None:
                found.append(_found(path, kind, text, f"config {full_key}" if path.startswith("config.") else ""))
    return found


def _found(path: str, kind: str, value: str, config_key: str) -> ClearTextSecret:
    if config_key:
        key = config_key.removeprefix("config ")
        fix = (f"remove it from the file and run `pulumi config set --secret {key} <value>` "
               "(stored encrypted as {secure: ...})")
    elif kind.endswith("private key") or "private key (" in kind:
        fix = ("remove it: a stack file holds certificates and public keys only; pass the key as a Pulumi secret "
               "(`pulumi config set --secret gpuforge:<name> < key.pem`) or keep it in the site's secret store")
    else:
        fix = ("remove it: store it with `pulumi config set --secret gpuforge:<aKeyName> <value>` and name that key "
               "in the field that takes a Pulumi config key (url_secret, token_secret, routing_key_secret, ...)")
    return ClearTextSecret(SpecIssue(path, f"{kind} in clear text in the stack file", fix), value)


def _strings(value: Any, full_key: str) -> Iterator[tuple[str, str]]:
    """(path in the report's notation, text) of every string in a config value, keys included."""
    root, model = (("cluster", ClusterSpec) if full_key == CLUSTER_KEY
                   else ("policy", None) if full_key == POLICY_KEY else (f"config.{full_key}", None))
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        loc, item = stack.pop()
        if isinstance(item, str):
            yield walk(loc, value, root, model).path, item
        elif _is_secure(item):
            continue
        elif isinstance(item, Mapping):
            for key, child in item.items():
                if isinstance(key, str) and secret_shape(key):
                    yield walk((*loc, key), value, root, model).path, key
                stack.append(((*loc, key), child))
        elif isinstance(item, list):
            stack.extend(((*loc, i), child) for i, child in enumerate(item))


def withheld(issues: list[SpecIssue], secrets: list[ClearTextSecret]) -> list[SpecIssue]:
    """The report with the secrets' own problems first, and no other problem quoting a secret: one at
    a secret's path is dropped (the secret's problem says what is wrong there), one elsewhere is withheld."""
    values = [s.value for s in secrets]
    paths = {s.issue.path for s in secrets}
    out = [s.issue for s in secrets]
    for issue in issues:
        if not any(_quotes(f"{issue.message} {issue.fix}", v) for v in values):
            out.append(issue)
        elif issue.path not in paths:
            out.append(replace(issue, message=f"a problem whose message would quote a secret {WITHHELD}", fix=""))
    return out


def _quotes(text: str, secret: str, window: int = 12) -> bool:
    """Whether the text holds the secret or any `window` characters of it (messages cut long values)."""
    if len(secret) <= window:
        return secret in text
    return any(secret[i : i + window] in text for i in range(len(secret) - window + 1))
