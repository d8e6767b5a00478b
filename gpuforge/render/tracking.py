"""The mlflow_server role's variables (gpuforge/assets/playbooks/tracking.yml) from cluster.tracking and the catalog.

Never a secret: the passwords are named by where they live ({store, id}), and the role reads them on the node.
What only a deployment knows (the RDS endpoint, the bucket's generated name on AWS) is left empty here and filled
from the stack's outputs, as the Slurm accounting database's host is (gpuforge/render/slurm.py).
"""

from __future__ import annotations

from typing import Any

from gpuforge.catalog.flows import load_flows
from gpuforge.catalog.tracking import load_tracking
from gpuforge.spec.resolved import ResolvedSpec
from gpuforge.spec.scheduler_checks import secret_names
from gpuforge.spec.tracking import VAULT_VARIABLES, SiteHostTrackingServer, tracking_secret_names

# The server's own address on a node group's node: known once the node runs, from its facts.
NODE_ADDRESS = "{{ ansible_facts['default_ipv4']['address'] }}"
LOOPBACK = "127.0.0.1"


def tracking_vars(resolved: ResolvedSpec) -> dict[str, Any]:
    """mlflow_server_* for the stack's tracking server; {} when the section is absent."""
    spec, sched = resolved.spec, resolved.scheduler
    tracking = spec.tracking
    if tracking is None or sched is None:
        return {}
    pin = load_tracking().mlflow
    # check_tracking holds a site host to an onprem placement and its site's store, a node group to S3.
    server = tracking.server
    site_address = server.address if isinstance(server, SiteHostTrackingServer) else None
    on_site = site_address is not None
    controller = sched.controllers[0]
    managed = sched.database == "managed"
    # A site's MariaDB listens on 127.0.0.1 only (slurm_dbd_mariadb_bind_address), and check_tracking holds a site
    # host to the primary controller it runs on: the server reaches it over loopback, as that user's only host.
    database_host = "" if managed else LOOPBACK
    store = spec.site.storage.object_store if on_site and spec.site is not None else None
    bucket = tracking.artifacts.bucket if store is not None else ""  # AWS: the bucket's name, from the outputs
    aws = not on_site
    return {
        "mlflow_server_requirements": list(pin.requirements),
        "mlflow_server_listen_address": site_address or NODE_ADDRESS,
        "mlflow_server_port": pin.port,
        "mlflow_server_allowed_cidrs": list(tracking.allowed_cidrs),
        # A site's addresses are all known (the database host, the store's gateways): the unit's IP filter holds
        # the server to them. AWS's S3 addresses are not: the services group's security group admits instead.
        "mlflow_server_ip_filter": not aws,
        "mlflow_server_egress_cidrs": [] if aws else list(store.cidrs if store else []),
        "mlflow_server_database": {
            "kind": sched.database,
            "host": database_host,
            "port": load_flows().ports["mariadb"].ports[0],
            "name": pin.database.name,
            "auth_name": pin.database.auth_name,
            "user": pin.database.user,
            # Loopback on a site (the server runs beside MariaDB); a node group's node has no fixed address, and
            # only the security groups the flow model opens reach RDS.
            "client_host": LOOPBACK if on_site else "%",
        },
        "mlflow_server_database_admin_host": controller.name,
        "mlflow_server_database_master_ref": (
            {"store": "aws_secretsmanager", "id": secret_names(spec.name)["db_password"]} if managed else {}
        ),
        "mlflow_server_database_master_user": resolved.catalog.slurm.accounting_database.user if managed else "",
        "mlflow_server_secrets": {
            key: {"store": "aws_secretsmanager", "id": name} if aws else {"store": "ansible_vault",
                                                                          "id": VAULT_VARIABLES[key]}
            for key, name in tracking_secret_names(spec.name).items()
        },
        "mlflow_server_artifacts_destination": f"s3://{bucket}/{tracking.artifacts.prefix}" if bucket else "",
        "mlflow_server_s3_endpoint_url": store.endpoint if store is not None else "",
        "mlflow_server_default_permission": tracking.default_permission,
    }
