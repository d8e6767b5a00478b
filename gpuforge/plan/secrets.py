"""The secrets a stack needs before `pulumi up`, by config key: who reads each, the command that sets it,
and whether the stack file holds it as a secure value. Never a value: only whether one is there.

The program reads each with `require_secret` (or, for the site's kubeconfig, `get_secret` into the
Kubernetes provider), so a missing one fails `pulumi up`, not the offline plan, which reads a
placeholder: this list is how the plan tells the user before the deploy does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpuforge.spec import ResolvedSpec
from gpuforge.spec.config_keys import NAMESPACE, SITE_S3_ACCESS_KEY, SITE_S3_SECRET_KEY
from gpuforge.spec.monitoring import SECRET_FILES

State = Literal["set", "missing", "clear text"]


@dataclass(frozen=True)
class StackSecret:
    key: str  # the config key in the gpuforge namespace
    used_by: str  # the spec field that makes the program read it
    purpose: str
    state: State  # set: {secure: ...} in the stack file; clear text: a plain value there (move it)
    from_file: str = ""  # a value read from a file (a kubeconfig): the command reads it on stdin

    @property
    def config_key(self) -> str:
        return f"{NAMESPACE}:{self.key}"

    def command(self, stack: str) -> str:
        source = f" < {self.from_file}" if self.from_file else " '<value>'"
        return f"pulumi config set --stack {stack} --secret {self.config_key}{source}"

    def to_json(self, stack: str) -> dict[str, Any]:
        return {
            "key": self.config_key,
            "used_by": self.used_by,
            "purpose": self.purpose,
            "state": self.state,
            "set": self.state == "set",
            "command": self.command(stack),
        }


def stack_secrets(resolved: ResolvedSpec, config: Mapping[str, Any]) -> list[StackSecret]:
    """Every secret the program reads for this spec, in the order the spec names them."""
    wanted: list[tuple[str, str, str, str]] = []  # key, used_by, purpose, from_file
    spec = resolved.spec
    if spec.monitoring is not None:
        for name, receiver in sorted(spec.monitoring.receivers.items()):
            for field, what in SECRET_FILES.items():
                key = getattr(receiver, field, None)
                if key is not None:
                    path = f"cluster.monitoring.receivers[{name}].{field}"
                    wanted.append((key, path, f"Alertmanager {receiver.type} {what} of receiver {name}", ""))
    site = resolved.site
    if site is not None and site.spec.kubernetes is not None:
        kube = site.spec.kubernetes
        wanted.append(
            (kube.kubeconfig_secret, "cluster.site.kubernetes.kubeconfig_secret",
             f"kubeconfig of the site cluster at {kube.api_server}", "kubeconfig")
        )
    hybrid = spec.hybrid
    if hybrid is not None and hybrid.object_sync is not None and site is not None and site.spec.storage.object_store:
        for key, what in ((SITE_S3_ACCESS_KEY, "access key"), (SITE_S3_SECRET_KEY, "secret key")):
            purpose = f"{what} of the site's S3-compatible store (DataSync)"
            wanted.append((key, "cluster.hybrid.object_sync", purpose, ""))
    secrets: dict[str, StackSecret] = {}
    for key, used_by, purpose, from_file in wanted:
        if key not in secrets:  # two receivers may share one key
            secrets[key] = StackSecret(key, used_by, purpose, _state(config.get(f"{NAMESPACE}:{key}")), from_file)
    return list(secrets.values())


def _state(value: Any) -> State:
    if isinstance(value, Mapping) and set(value) == {"secure"}:
        return "set"
    return "missing" if value is None else "clear text"
