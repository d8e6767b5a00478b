"""The Pulumi program: stack config -> ClusterSpec -> TrainingCluster -> stack outputs.

A project's __main__.py calls `main()` (this repository's does, and so does the one `gpuforge
init` writes): `pulumi up --stack <env>` runs it with the real engine, `gpuforge plan <env>` under
Pulumi's mock monitor.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import pulumi

from gpuforge.infra.cluster import TrainingCluster
from gpuforge.spec import ResolvedSpec, SpecError, resolve

# The spec `gpuforge plan` has already checked and resolved, with the cluster config it came from: resolving
# the 100,000-GPU example again in the program took a tenth of its plan. Used only while the config is equal.
_CHECKED: ContextVar[tuple[Any, ResolvedSpec] | None] = ContextVar("gpuforge_checked_spec", default=None)


@contextmanager
def checked_spec(cluster: Any, resolved: ResolvedSpec) -> Iterator[None]:
    """While the program runs in this context, a cluster config equal to *cluster* resolves to *resolved*."""
    token = _CHECKED.set((cluster, resolved))
    try:
        yield
    finally:
        _CHECKED.reset(token)


def _resolve(cluster: Any) -> ResolvedSpec:
    checked = _CHECKED.get()
    if checked is not None and checked[0] == cluster:
        return checked[1]
    return resolve(cluster, source=f"stack {pulumi.get_stack()}")


def main() -> None:
    config = pulumi.Config("gpuforge")
    try:
        resolved = _resolve(config.require_object("cluster"))
    except SpecError as error:
        # A bad spec declares nothing: stop before any resource is registered.
        raise pulumi.RunError(error.report()) from None

    try:
        cluster = TrainingCluster(resolved.spec.name, resolved)
    except SpecError as error:
        # What only the deploy reveals (the identity running it): the same report, no traceback.
        raise pulumi.RunError(error.report()) from None
    for key, value in cluster.outputs.items():
        pulumi.export(key, value)
