"""Secrets in stack config: the keys gpuforge reads as secrets, and the check that none of them (nor
any key whose name says it is a credential) sits in a stack file in clear text.

Pulumi stores a value set with `pulumi config set --secret` as `{secure: <ciphertext>}`; anything
else is readable by whoever reads the repository, and would flow into plans and state unmarked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import SpecIssue

NAMESPACE = "gpuforge"
# Credentials of the site's S3-compatible store, for DataSync (gpuforge/infra/hybrid/object_sync.py).
SITE_S3_ACCESS_KEY = "siteS3AccessKey"
SITE_S3_SECRET_KEY = "siteS3SecretKey"
# The site's BMC user and password, for `gpuforge metal` (site.bmc's defaults; gpuforge/nodes/metal.py).
BMC_USERNAME = "bmcUsername"
BMC_PASSWORD = "bmcPassword"
SECRET_KEYS = (SITE_S3_ACCESS_KEY, SITE_S3_SECRET_KEY, BMC_USERNAME, BMC_PASSWORD)
# A config key whose name says it holds a credential, whoever reads it.
CREDENTIAL_NAME = re.compile(
    r"secret|password|passwd|token|credential|kubeconfig|access_?key|private_?key|api_?key", re.I
)


def _is_secure(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"secure"}


def clear_text_secrets(config: Mapping[str, Any]) -> list[SpecIssue]:
    """Every stack config key that holds a credential in clear text, with the command that fixes it."""
    issues = []
    for full_key, value in config.items():
        namespace, _, key = str(full_key).rpartition(":")
        if not (key in SECRET_KEYS and namespace in ("", NAMESPACE)) and not CREDENTIAL_NAME.search(key):
            continue
        if value is None or _is_secure(value):
            continue
        issues.append(
            SpecIssue(
                f"config.{full_key}",
                "a credential in clear text in the stack file",
                f"remove it from the file and run `pulumi config set --secret {full_key} <value>` "
                "(stored encrypted as {secure: ...})",
            )
        )
    return issues
