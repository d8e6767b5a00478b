"""Wiring pack, training jobs: the job template each team gets (`gpuforge render job`) must be admitted by
Kueue and placed on the GPU nodes, judged on the plan's own objects (gpuforge/policy/training_job.py).
Every object can pass its schema while no team's job runs: a resource no ClusterQueue covers, a job API
nothing installs, a taint nothing tolerates."""

from __future__ import annotations

from collections.abc import Iterator

from gpuforge.render.labels import TEAM_LABEL
from gpuforge.render.training_job import training_jobset

# The module, not its names: training_job reads the rules' helpers (rules.base, rules.wiring_k8s), so importing
# it first loads this package, which loads this module while training_job is still half-initialised.
from .. import training_job
from .base import RuleContext, Stack, Violation, stack_rule
from .wiring_k8s import NAMESPACE, RELEASE, multikueue_checks


@stack_rule(
    "wiring-kueue-training-job",
    why="A team's multi-node job (GPUs, fabric devices, huge pages) that Kueue never admits, or admits to nodes "
    "whose labels or taints keep its pods off, waits forever: Kueue refuses a request no resource group covers "
    "(kubernetes-sigs/kueue v0.14.4 pkg/scheduler/flavorassigner/flavorassigner.go) and the scheduler a pod "
    "no node fits.",
    fix="cover every resource the job requests in the team's ClusterQueue (or exclude it by Kueue's "
    "resources.excludeResourcePrefixes), install the job API, and align the flavors' labels and tolerations "
    "with the GPU nodes (`gpuforge render job STACK --team T` prints the job and the reasons)",
)
def kueue_training_job(stack: Stack, ctx: RuleContext) -> Iterator[Violation]:
    if multikueue_checks(stack):
        return  # a MultiKueue manager: its jobs run on the worker clusters, checked in their own stacks
    if not any(r.get("chart") == training_job.KUEUE_CHART for r in stack.of_type(RELEASE)):
        return  # no Kueue on this cluster: nothing admits or refuses a job
    for namespace in stack.of_type(NAMESPACE):
        team = (namespace.get("metadata", "labels") or {}).get(TEAM_LABEL)
        if not isinstance(team, str):
            continue
        try:
            problems = training_job.job_problems(stack, training_jobset(training_job.team_job_inputs(stack, team)))
        except training_job.TrainingJobError as error:
            problems = [str(error)]
        if problems:
            yield Violation(
                "wiring-kueue-training-job",
                namespace.urn,
                f"{namespace.name}: team {team}'s training job would not run: {'; '.join(problems)}; cover or "
                f"exclude each resource, install the job API and align flavors with the GPU nodes "
                f"(`gpuforge render job STACK --team {team}` prints the job and the reasons)",
            )
