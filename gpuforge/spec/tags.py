"""The cluster's tags, checked against AWS's tag limits."""

from __future__ import annotations

import re

from gpuforge.catalog.tokens import CLUSTER_TAG, ENVIRONMENT_TAG

# AWS tag limits (Tagging AWS resources, "Tag naming limits and requirements").
TAG_KEY_MAX, TAG_VALUE_MAX, TAGS_MAX = 128, 256, 50
GPUFORGE_TAGS = (CLUSTER_TAG, ENVIRONMENT_TAG)  # set on every resource (gpuforge/infra/aws/placement.py)
_TAG_CHARS = re.compile(r"^[\w .:/=+\-@]*$")


def check_tags(tags: dict[str, str]) -> dict[str, str]:
    problems = []
    for key, value in tags.items():
        if key.lower().startswith("aws:"):
            problems.append(f"{key!r}: keys starting with aws: are reserved for AWS; drop the prefix")
        elif key in GPUFORGE_TAGS:
            problems.append(f"{key!r}: gpuforge sets this tag itself; remove it")
        if not 1 <= len(key) <= TAG_KEY_MAX:
            problems.append(f"{key[:40]!r}...: a key is 1 to {TAG_KEY_MAX} characters; shorten it")
        if len(value) > TAG_VALUE_MAX:
            problems.append(f"{key!r}: the value has {len(value)} characters; AWS allows {TAG_VALUE_MAX}")
        for text in (key, value):
            if not _TAG_CHARS.match(text):
                bad = sorted({c for c in text if not _TAG_CHARS.match(c)})
                problems.append(f"{key!r}: {', '.join(map(repr, bad))} is not allowed in AWS tags "
                                "(letters, digits, spaces and _ . : / = + - @)")
    if len(tags) > TAGS_MAX - len(GPUFORGE_TAGS) - 1:
        problems.append(f"{len(tags)} tags; AWS allows {TAGS_MAX} per resource and gpuforge sets 3 (with Name); "
                        f"keep at most {TAGS_MAX - len(GPUFORGE_TAGS) - 1}")
    if problems:
        raise ValueError("; ".join(problems))
    return tags
