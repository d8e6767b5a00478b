"""Taints and tolerations, with Kubernetes' matching rule, shared by the platform (which writes the
tolerations) and the wiring pack (which checks them against the taints nodes register with).

Matching, as the scheduler does it (kubernetes.io, "Taints and Tolerations"): a toleration matches
a taint when the effects match (an empty effect matches all) and either the operator is Exists
(an empty key then matches every key) or the keys and values are equal (operator Equal, the
default). Only NoSchedule and NoExecute keep a pod off a node; PreferNoSchedule is a preference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# aws.eks.NodeGroup spells effects in the EKS API's enum.
EKS_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    @property
    def blocks(self) -> bool:
        return self.effect in BLOCKING_EFFECTS

    def toleration(self) -> dict[str, str]:
        """The narrowest toleration of this taint: the key and effect, any value."""
        return {"key": self.key, "operator": "Exists", "effect": self.effect}

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


def taint_from(data: Mapping[str, Any]) -> Taint:
    effect = str(data.get("effect") or "")
    return Taint(str(data.get("key") or ""), str(data.get("value") or ""), EKS_EFFECTS.get(effect, effect))


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    operator = toleration.get("operator") or "Equal"
    key = toleration.get("key") or ""
    if operator == "Exists":
        return not key or key == taint.key
    return key == taint.key and str(toleration.get("value") or "") == taint.value


def untolerated(tolerations: Iterable[Mapping[str, Any]], taints: Iterable[Taint]) -> list[Taint]:
    """The blocking taints no toleration matches."""
    tols = list(tolerations)
    return [t for t in taints if t.blocks and not any(tolerates(tol, t) for tol in tols)]


def tolerations_for(taints: Iterable[Taint], base: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """`base` (a chart's defaults: a Helm list value replaces the default whole) plus a toleration
    for each blocking taint it does not already tolerate, in a stable order."""
    out = [dict(t) for t in base]
    for taint in sorted(set(taints), key=str):
        if taint.blocks and not any(tolerates(tol, taint) for tol in out):
            out.append(taint.toleration())
    return out
