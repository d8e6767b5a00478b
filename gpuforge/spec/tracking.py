"""`cluster.tracking`: an MLflow tracking server teams log their runs to, on the cluster's own services.

Off by default (the section absent). Turned on, the mlflow_server role runs `mlflow server` on the services node
(a services node group on AWS, a site host on premises), with
- its backend store in the cluster's database service: a database and a user of its own on slurmdbd's MariaDB
  (Amazon RDS where scheduler.accounting.database is managed, the controller's MariaDB otherwise), the user's
  password a secret (Secrets Manager on AWS, an Ansible vault variable on a site);
- its artifacts in the cluster's bucket under a prefix, proxied by the server (`--artifacts-destination`), so
  clients need no S3 credentials: on AWS the services node's instance role may touch that prefix and nothing else;
- no anonymous access: MLflow's basic-auth app (`--app-name basic-auth`), its admin password a secret, every
  other user created by the admin; the server answers only the ranges in allowed_cidrs (the unit's IP filter,
  and the services group's security group on AWS), over TLS with the certificate the role makes.
docs/tracking.md says why each of these, and what is not done yet.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, Field

from .base import SpecModel
from .errors import SpecIssue
from .fields import Name, parse_cidr
from .monitoring import NodeGroupServer, SiteHost

if TYPE_CHECKING:
    from .cluster import ClusterSpec

SECTION = "cluster.tracking"
EXAMPLE = "10.20.0.0/16"
# An S3 key prefix: path segments of letters, digits, '.', '_' and '-', no leading or trailing '/'.
PREFIX = r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$"
Permission = Literal["NO_PERMISSIONS", "READ", "EDIT", "MANAGE"]


def _a_client_range(value: str) -> str:
    network = parse_cidr(value, example=EXAMPLE)
    if network.prefixlen == 0:
        raise ValueError(
            f"{value} is every address: the tracking server holds every team's runs and models, so only the "
            f"networks your jobs and notebooks run in may reach it; name those, e.g. {EXAMPLE}"
        )
    return value


ClientRange = Annotated[str, AfterValidator(_a_client_range)]


class NodeGroupTrackingServer(SpecModel):
    kind: Literal["node_group"] = Field(description="Run on the node of a services node group (aws).")
    node_group: Name = Field(description="Key of a non-training group in node_groups, e.g. services.")


class SiteHostTrackingServer(SiteHost):
    kind: Literal["site_host"] = Field(description="Run on the primary Slurm controller's host (onprem), beside the "
                                       "MariaDB it keeps its runs in (which listens on 127.0.0.1 only).")
    host: Name = Field(description="The primary controller's host name (scheduler.controller.hosts), e.g. slurm-01.")


TrackingServer = Annotated[NodeGroupTrackingServer | SiteHostTrackingServer, Field(discriminator="kind")]


class Artifacts(SpecModel):
    bucket: Name = Field(
        description="The bucket artifacts go to: a key of storage.object_stores (aws) or of "
        "site.storage.object_store.buckets (onprem)."
    )
    prefix: str = Field(
        default="mlflow",
        pattern=PREFIX,
        description="Key prefix in that bucket, e.g. mlflow: the server writes under it and, on AWS, its node may "
        "touch nothing else in the bucket.",
    )


class Tracking(SpecModel):
    server: TrackingServer = Field(description="Where `mlflow server` runs: a services node group or a site host.")
    artifacts: Artifacts = Field(description="The bucket and prefix the server proxies artifacts to.")
    allowed_cidrs: list[ClientRange] = Field(
        min_length=1,
        description="IPv4 ranges allowed to reach the server (where jobs, notebooks and people run); never "
        "0.0.0.0/0.",
    )
    default_permission: Permission = Field(
        default="NO_PERMISSIONS",
        description="What a user may do with another user's experiments and models unless granted more (MLflow "
        "basic-auth's default_permission): NO_PERMISSIONS keeps each team's runs to itself.",
    )


def check_tracking(spec: ClusterSpec) -> list[SpecIssue]:
    """The server runs where the placement can run it, next to the cluster's database, over a bucket the stack
    declares."""
    tracking = spec.tracking
    if tracking is None:
        return []
    return [*_server_issues(spec, tracking), *_bucket_issues(spec, tracking), *_database_issues(spec)]


def _server_issues(spec: ClusterSpec, tracking: Tracking) -> list[SpecIssue]:
    server, kind, where = tracking.server, spec.placement.kind, f"{SECTION}.server"
    if kind == "hybrid":
        # A hybrid burst keeps slurmdbd's MariaDB on the site's controller, listening on 127.0.0.1 only, and
        # declares no AWS control plane to open the server's port: a cloud node could reach neither.
        return [SpecIssue(f"{where}.kind", "a hybrid placement keeps the cluster's database on the site controller, "
                          "which listens on 127.0.0.1 only: a cloud node group cannot reach it",
                          "remove tracking from the hybrid stack (an onprem stack runs it on its controller, an aws "
                          "stack on a services group)")]
    if isinstance(server, SiteHostTrackingServer):
        if kind != "onprem" or spec.site is None:
            # A site host has no AWS role to write S3 with.
            return [SpecIssue(f"{where}.kind", f"a site host serves an onprem placement's tracking; this one is {kind}",
                              "use kind: node_group with a services group")]
        if not any(ipaddress.ip_address(server.address) in ipaddress.ip_network(c) for c in spec.site.cidrs):
            return [SpecIssue(f"{where}.address", f"{server.address} lies in none of site.cidrs "
                              f"({', '.join(spec.site.cidrs)})", "give the host's management address")]
        return _database_host_issues(spec, server)
    if kind == "onprem":
        return [SpecIssue(f"{where}.kind", "onprem placement has no cloud node groups", "use kind: site_host")]
    group = spec.node_groups.get(server.node_group)
    if group is None:
        known = ", ".join(spec.node_groups) or "none"
        return [SpecIssue(f"{where}.node_group", f"{server.node_group} is not a node group (groups: {known})",
                          "name a services group")]
    if group.role == "training":
        return [SpecIssue(f"{where}.node_group", f"{server.node_group} is a training group: the server would "
                          "take its memory and go with its nodes", "name a services group")]
    if group.role == "login":
        # Its node gets a security group of its own (flows.yaml role tracking), which a login node cannot
        # trade for the management group its Slurm flows open.
        return [SpecIssue(f"{where}.node_group", f"{server.node_group} is a login group: the server's node gets a "
                          "security group of its own, apart from the login nodes'", "name a services group")]
    monitoring = spec.monitoring.server if spec.monitoring is not None else None
    if isinstance(monitoring, NodeGroupServer) and monitoring.node_group == server.node_group:
        return [SpecIssue(f"{where}.node_group", f"{server.node_group} also runs Prometheus "
                          "(monitoring.server.node_group): each has a security group of its own, and a node carries "
                          "one", "give the tracking server a services group of its own")]
    return []


def _database_host_issues(spec: ClusterSpec, server: SiteHostTrackingServer) -> list[SpecIssue]:
    """On a site the database is slurmdbd's MariaDB on the primary controller, which listens on 127.0.0.1 only
    (slurm_dbd_mariadb_bind_address, gpuforge/assets/playbooks/roles/slurm_dbd/defaults/main.yml): the server runs
    there. Opening MariaDB to the management network for another host is not something gpuforge does."""
    hosts = spec.scheduler.controller.hosts if spec.scheduler is not None else {}
    if not hosts:
        return []  # no controller host: check_scheduler names that
    name, address = next(iter(hosts.items()))
    if (server.host, server.address) == (name, address):
        return []
    return [SpecIssue(f"{SECTION}.server", f"host {server.host} ({server.address}) is not the database host: the "
                      f"cluster's MariaDB runs on the primary controller {name} ({address}) and listens on "
                      "127.0.0.1 only (slurm_dbd_mariadb_bind_address), so no other host reaches it",
                      f"run the server on the controller: server: {{kind: site_host, host: {name}, "
                      f"address: {address}}}")]


def _bucket_issues(spec: ClusterSpec, tracking: Tracking) -> list[SpecIssue]:
    where, bucket = f"{SECTION}.artifacts.bucket", tracking.artifacts.bucket
    if spec.placement.kind == "onprem":
        store = spec.site.storage.object_store if spec.site is not None else None
        buckets = list(store.buckets) if store is not None else []
        if bucket not in buckets:
            return [SpecIssue(where, f"{bucket} is not a bucket of site.storage.object_store "
                              f"(buckets: {', '.join(buckets) or 'none'})",
                              "declare it in site.storage.object_store.buckets, or name one there")]
        if store is not None and not store.cidrs:
            # The server's IP filter holds both directions: it must know the store's addresses to reach it.
            return [SpecIssue("cluster.site.storage.object_store.cidrs", "empty, and the tracking server writes "
                              "artifacts to the store: its IP filter must know the store's addresses",
                              "list the addresses the endpoint resolves to, e.g. [10.64.8.30/32]")]
        return []
    if bucket not in spec.storage.object_stores:
        known = ", ".join(spec.storage.object_stores) or "none"
        return [SpecIssue(where, f"{bucket} is not in storage.object_stores (stores: {known})",
                          "declare it, e.g. storage.object_stores.artifacts: {purpose: artifacts}, or name one")]
    return []


def _database_issues(spec: ClusterSpec) -> list[SpecIssue]:
    if spec.scheduler is None:
        return [SpecIssue(SECTION, "the tracking server keeps its runs in the cluster's database service "
                          "(slurmdbd's MariaDB), and this stack has no scheduler section",
                          "add scheduler (its accounting database holds the tracking database too), or remove "
                          "tracking")]
    return []


def tracking_secret_names(cluster: str) -> dict[str, str]:
    """Secrets Manager names of the tracking server's secrets (AWS): the program creates them, the services node
    reads them, the rendered variables name them. Never the values."""
    return {
        "db_password": f"gpuforge/{cluster}/mlflow/db-password",
        "admin_password": f"gpuforge/{cluster}/mlflow/admin-password",
        # MLflow's basic-auth app refuses to start without a static key for its CSRF tokens
        # (MLFLOW_FLASK_SERVER_SECRET_KEY, mlflow/server/auth/__init__.py get_flask_server_secret_key).
        "flask_secret_key": f"gpuforge/{cluster}/mlflow/flask-secret-key",
    }


# The Ansible vault variables holding the same secrets on a site.
VAULT_VARIABLES = {
    "db_password": "vault_mlflow_db_password",
    "admin_password": "vault_mlflow_admin_password",
    "flask_secret_key": "vault_mlflow_flask_secret_key",
}
