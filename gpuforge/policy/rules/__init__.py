"""The rules as plain functions, registered by id. Importing this package registers every rule."""

from __future__ import annotations

from . import (
    power,
    redundancy,
    security,
    security_aws,
    wiring_aws,
    wiring_eks_iam,
    wiring_flows,
    wiring_jobs,
    wiring_k8s,
    wiring_slurm,
    wiring_ssm,
)
from .base import (
    PACKS,
    REGISTRY,
    UNKNOWN,
    Level,
    Resource,
    Rule,
    RuleContext,
    Stack,
    Violation,
    is_unknown,
)

__all__ = [
    "PACKS",
    "REGISTRY",
    "UNKNOWN",
    "Level",
    "Resource",
    "Rule",
    "RuleContext",
    "Stack",
    "Violation",
    "is_unknown",
    "power",
    "redundancy",
    "rules_for",
    "security",
    "security_aws",
    "wiring_aws",
    "wiring_eks_iam",
    "wiring_flows",
    "wiring_jobs",
    "wiring_k8s",
    "wiring_slurm",
    "wiring_ssm",
]


def rules_for(pack: str) -> list[Rule]:
    """The pack's rules, in id order."""
    if pack not in PACKS:
        raise KeyError(f"no policy pack {pack!r}; packs: {', '.join(PACKS)}")
    return sorted((r for r in REGISTRY.values() if r.pack == pack), key=lambda r: r.id)
