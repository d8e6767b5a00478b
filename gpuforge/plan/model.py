"""The plan's data model: what the offline engine records and everything downstream reads
(summary, policy run, report, diff). Kept apart so those modules import it, not the engine."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from gpuforge.render.slurm import render_slurm, slurm_config
from gpuforge.render.slurm_reservations import reservations_listing
from gpuforge.render.slurm_tenancy import tenancy_listing

if TYPE_CHECKING:
    from gpuforge.plan.cost import CostEstimate
    from gpuforge.plan.policy_check import PolicyReport
    from gpuforge.plan.secrets import StackSecret
    from gpuforge.plan.summary import Summary
    from gpuforge.spec import ResolvedSpec

COMPUTED = "<computed>"  # a value only the real engine knows
SECRET = "[secret]"  # a secret's value, which no plan output carries


@dataclass
class PlanResource:
    urn: str
    type: str
    name: str
    parent: str | None
    inputs: dict[str, Any]
    protect: bool
    custom: bool
    retain_on_delete: bool = False
    outputs: dict[str, Any] = field(default_factory=dict)
    dependencies: dict[str, list[str]] = field(default_factory=dict)  # input name -> URNs it came from
    depends_on: list[str] = field(default_factory=list)  # every URN it waits for (depends_on and inputs)
    provider: str | None = None  # URN of the provider resource it is created through
    aliases: list[str] = field(default_factory=list)  # previous names (Pulumi aliases): the same resource
    ignore_changes: list[str] = field(default_factory=list)  # inputs `pulumi up` leaves as they are


@dataclass
class Plan:
    stack: str
    placement: str
    resources: list[PlanResource]
    outputs: dict[str, Any]
    summary: Summary
    resolved: ResolvedSpec
    cost: CostEstimate | None = None
    policy: PolicyReport | None = None  # gpuforge.policy_check: the packs run on this plan
    secrets: list[StackSecret] = field(default_factory=list)  # what `pulumi up` reads; never values

    def by_type(self, type_: str) -> list[PlanResource]:
        return [r for r in self.resources if r.type == type_]

    def rendered(self) -> dict[str, dict[str, str]]:
        """The configuration files gpuforge renders for the nodes, by kind then file name (today Slurm's:
        what `gpuforge render slurm` prints, and the accounts, users and QOS the slurm_dbd role keeps in
        slurmdbd, and the reservations the slurm_controller role keeps in slurmctld), so `gpuforge diff` shows a
        pull request's changes to them."""
        if self.resolved.scheduler is None:
            return {}
        config = slurm_config(self.resolved)
        return {"slurm": render_slurm(config), "slurmdbd": {"tenancy": tenancy_listing(config)},
                "slurmctld": {"reservations": reservations_listing(config)}}

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "placement": self.placement,
            "summary": asdict(self.summary),
            "outputs": self.outputs,
            "cost": self.cost.to_json() if self.cost else None,
            "secrets": [secret.to_json(self.stack) for secret in self.secrets],
            **(self.policy.to_json() if self.policy else {}),
            "rendered": self.rendered(),
            "resources": [
                {
                    "urn": r.urn,
                    "type": r.type,
                    "name": r.name,
                    "parent": r.parent,
                    "custom": r.custom,
                    "inputs": r.inputs,
                    "protect": r.protect,
                    "retainOnDelete": r.retain_on_delete,
                    "dependsOn": r.depends_on,
                    **({"aliases": r.aliases} if r.aliases else {}),
                    **({"ignoreChanges": r.ignore_changes} if r.ignore_changes else {}),
                }
                for r in self.resources
            ],
        }
