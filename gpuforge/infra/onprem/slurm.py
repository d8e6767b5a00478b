"""The Slurm control plane on a site, as the plan shows it: which service hosts run slurmctld and
slurmdbd, where users log in, where the accounting database, the controller state and /home live.

Site hosts are not cloud resources: nothing here is created by `pulumi up` (gpuforge/assets/playbooks/slurm.yml
configures the hosts). The component records the facts in the plan, so a reviewer sees them and the
policies read them (`redundancy-slurm-backup-controller` counts `controllers` as it does on AWS).
"""

from __future__ import annotations

from typing import Any

import pulumi

from gpuforge.spec import ResolvedSpec
from gpuforge.spec.resolved_scheduler import ResolvedScheduler
from gpuforge.spec.site import NfsMount


def site_slurm_props(resolved: ResolvedSpec, sched: ResolvedScheduler) -> dict[str, Any]:
    site = resolved.spec.site
    assert site is not None  # a site placement
    home = site.storage.mounts[sched.home]
    state_mount = sched.spec.controller.state_mount
    return {
        "controllers": len(sched.controllers),
        "controllerHosts": {c.name: c.address for c in sched.controllers},
        "loginHosts": dict(sched.login_hosts),
        # MariaDB on the primary controller host; the slurm_dbd role dumps it nightly (docs/slurm.md).
        "database": {"kind": sched.database, "host": sched.controllers[0].name},
        # With a backup controller both read the state directory from a site mount; else the controller's disk.
        "stateSaveLocation": f"site mount {state_mount}" if state_mount else "controller's local disk",
        "home": f"{home.kind} {home.server}:{home.export}" if isinstance(home, NfsMount) else home.kind,
        "partitions": {name: list(p.node_groups) for name, p in sched.spec.partitions.items()},
        "directory": sched.spec.directory.uri if sched.spec.directory else None,
    }


class SlurmControlPlane(pulumi.ComponentResource):
    """`gpuforge:onprem:SlurmControlPlane`: the site's Slurm controller, login hosts and accounting."""

    props: dict[str, Any]

    def __init__(
        self, name: str, resolved: ResolvedSpec, sched: ResolvedScheduler, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        self.props = site_slurm_props(resolved, sched)
        super().__init__("gpuforge:onprem:SlurmControlPlane", name, self.props, opts)
        self.register_outputs({"slurm": self.props})
