"""The Pulumi program: stack config -> ClusterSpec -> TrainingCluster -> stack outputs.

A project's __main__.py calls `main()` (this repository's does, and so does the one `gpuforge
init` writes): `pulumi up --stack <env>` runs it with the real engine, `gpuforge plan <env>` under
Pulumi's mock monitor.
"""

import pulumi

from gpuforge.infra.cluster import TrainingCluster
from gpuforge.spec import SpecError, resolve


def main() -> None:
    config = pulumi.Config("gpuforge")
    try:
        resolved = resolve(config.require_object("cluster"), source=f"stack {pulumi.get_stack()}")
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
