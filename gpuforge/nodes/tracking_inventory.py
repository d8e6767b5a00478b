"""The tracking server's part of the Ansible inventory: the `mlflow_server` group (playbooks/tracking.yml) and its
variables, rendered from the stack file's cluster.tracking (gpuforge/render/tracking.py, what `gpuforge render
tracking` prints) and completed with what only the deployed stack knows: the RDS endpoint (output
slurm.databaseEndpoint) and the bucket's generated name (output tracking.artifactsDestination)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpuforge.plan.stacks import find_stack, load_stack
from gpuforge.plan.validation import check_stack
from gpuforge.render.tracking import tracking_vars
from gpuforge.spec import SpecError
from gpuforge.spec.tracking import SiteHostTrackingServer


def tracking_inventory(
    stack: str, outputs: Mapping[str, Any], group_name: Callable[[str, str], str]
) -> dict[str, Any]:
    """{"mlflow_server": ...} for a stack with a tracking section; {} without one (or without a stack file)."""
    try:
        find_stack(stack)
    except SpecError:
        return {}
    resolved = check_stack(load_stack(stack)).resolved
    tracking = resolved.spec.tracking
    variables = tracking_vars(resolved)
    if tracking is None or not variables:
        return {}
    endpoint = (outputs.get("slurm") or {}).get("databaseEndpoint")
    if endpoint and variables["mlflow_server_database"]["kind"] == "managed":
        variables["mlflow_server_database"]["host"] = endpoint
    destination = (outputs.get("tracking") or {}).get("artifactsDestination")
    if destination:
        variables["mlflow_server_artifacts_destination"] = destination
    server = tracking.server
    if isinstance(server, SiteHostTrackingServer):
        return {"mlflow_server": {"hosts": {server.host: {"ansible_host": server.address}}, "vars": variables}}
    return {"mlflow_server": {"children": {group_name("ng", server.node_group): {}}, "vars": variables}}
