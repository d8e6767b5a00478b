"""The Pulumi program: stack config -> ClusterSpec -> TrainingCluster -> stack outputs.

`pulumi up --stack <env>` runs this with the real engine; `gpuforge plan <env>` runs the
same file under Pulumi's mock monitor.
"""

import pulumi

from components.cluster import TrainingCluster
from components.spec import SpecError, resolve

config = pulumi.Config("gpuforge")
try:
    resolved = resolve(config.require_object("cluster"), source=f"stack {pulumi.get_stack()}")
except SpecError as error:
    # A bad spec declares nothing: stop before any resource is registered.
    raise pulumi.RunError(error.report()) from None

cluster = TrainingCluster(resolved.spec.name, resolved)
for key, value in cluster.outputs.items():
    pulumi.export(key, value)
