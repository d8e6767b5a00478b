"""Checks of the `scheduler` section against the node groups, the site and the catalog; every problem at once.

`check_scheduler` returns a `ResolvedScheduler`: each partition with the node groups it holds, the
controllers with their names and addresses, and where accounting's database and /home live, so the
rendered Slurm configuration, the AWS components and the inventory read one set of facts.

Slurm node groups are AWS node groups with `orchestrator: slurm` (nodes register dynamically) and, on
a site, host pools whose hosts have `orchestrator: slurm` (static nodes, listed in slurm.conf).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from gpuforge.catalog import Catalog, CatalogError
from gpuforge.catalog.mounts import HOME_MOUNT_POINT

from .errors import SpecIssue
from .models import ClusterSpec
from .paths import NODE_GROUPS
from .reservation_checks import check_reservations
from .resolved_scheduler import ResolvedScheduler, SlurmController, SlurmGroup
from .resolved_site import ResolvedHost, ResolvedSite
from .scheduler import SchedulerSpec
from .slurm_time import slurm_time_minutes
from .subnets import Subnets
from .tenancy_checks import check_tenancy

PATH = "cluster.scheduler"
# The controller takes this host number in its management subnet (AWS reserves .0-.3 and the last).
CONTROLLER_HOST_NUMBER = 10



# The gpuforge:node-group tag value the AWS controllers carry, so Prometheus' ec2_sd selects them beside the node
# groups (gpuforge/infra/aws/slurm.py, gpuforge/render/monitoring.py). A node group's name cannot take it: names
# have no underscore (fields.NAME_PATTERN).
CONTROLLER_NODE_GROUP = "slurm_controllers"


def secret_names(cluster: str) -> dict[str, str]:
    """Secrets Manager names of the Slurm secrets: the AWS program creates them, nodes read them, the
    rendered configuration names them. Never the values."""
    return {"munge_key": f"gpuforge/{cluster}/slurm/munge-key", "db_password": f"gpuforge/{cluster}/slurm/db-password"}


def _site_pools(site: ResolvedSite | None) -> dict[str, list[ResolvedHost]]:
    return site.pools() if site is not None else {}


def _slurm_group_names(spec: ClusterSpec, site: ResolvedSite | None) -> set[str]:
    names = {n for n, g in spec.node_groups.items() if g.orchestrator == "slurm"}
    for pool, hosts in _site_pools(site).items():
        if any(h.spec.orchestrator == "slurm" for h in hosts):
            names.add(pool)
    return names


def check_scheduler(
    spec: ClusterSpec, catalog: Catalog, subnets: Subnets, site: ResolvedSite | None
) -> tuple[ResolvedScheduler | None, list[SpecIssue]]:
    sched = spec.scheduler
    slurm_groups = _slurm_group_names(spec, site)
    if sched is None:
        return None, _without_scheduler(spec, site)
    issues: list[SpecIssue] = []
    pools = _site_pools(site)
    known = set(spec.node_groups) | set(pools)

    def group_issue(path: str, name: str, purpose: str) -> list[SpecIssue]:
        if name not in known:
            return [
                SpecIssue(path, f"no node group or site host pool named {name!r}",
                          f"use one of {', '.join(sorted(known)) or '(none declared)'}")
            ]
        if name not in slurm_groups:
            where = "node group" if name in spec.node_groups else "site pool's hosts"
            return [
                SpecIssue(path, f"{name} is {purpose}, but its {where} do not run Slurm",
                          f"set orchestrator: slurm on {name}")
            ]
        return []

    groups: dict[str, SlurmGroup] = {}
    defaults = [name for name, p in sched.partitions.items() if p.default]
    if len(defaults) > 1:
        issues.append(SpecIssue(f"{PATH}.partitions", f"{len(defaults)} default partitions ({', '.join(defaults)})",
                                "mark exactly one partition default: true"))
    elif not defaults and len(sched.partitions) > 1:
        issues.append(SpecIssue(f"{PATH}.partitions", "several partitions and none is the default",
                                "mark one partition default: true (where jobs without --partition land)"))
    for pname, partition in sched.partitions.items():
        ppath = f"{PATH}.partitions[{pname}]"
        if not partition.node_groups:
            issues.append(SpecIssue(f"{ppath}.node_groups", "a partition with no nodes",
                                    "list the node groups (or site pools) it holds"))
            continue
        nodes = 0
        for i, gname in enumerate(partition.node_groups):
            found = group_issue(f"{ppath}.node_groups[{i}]", gname, "in a partition")
            issues += found
            if found:
                continue
            group = _slurm_group(spec, gname, pools)
            groups[gname] = group
            nodes += group.count
        if nodes == 0 and not any(i.path.startswith(ppath) for i in issues):
            issues.append(SpecIssue(f"{ppath}.node_groups", "a partition with no nodes: its groups have count 0",
                                    "give a group nodes, or remove the partition"))
        default_time, max_time = partition.default_time, partition.max_time
        if default_time is not None and slurm_time_minutes(default_time) > slurm_time_minutes(max_time):
            issues.append(SpecIssue(f"{ppath}.default_time", f"{partition.default_time} exceeds max_time "
                                    f"{partition.max_time}", "lower default_time or raise max_time"))

    login: list[str] = []
    for i, gname in enumerate(sched.login.node_groups):
        lpath = f"{PATH}.login.node_groups[{i}]"
        found = group_issue(lpath, gname, "a login group")
        issues += found
        if found:
            continue
        if gname in spec.node_groups and spec.node_groups[gname].role != "login":
            issues.append(SpecIssue(lpath, f"{gname} has role {spec.node_groups[gname].role}",
                                    f"set role: login on node group {gname}"))
        if gname in groups:
            issues.append(SpecIssue(lpath, f"{gname} is both a login group and in a partition",
                                    "keep login nodes out of partitions: jobs must not land where users log in"))
        login.append(gname)
    for gname in sorted(slurm_groups - set(groups) - set(login)):
        where = NODE_GROUPS.key(gname) if gname in spec.node_groups else f"cluster.site (pool {gname})"
        issues.append(SpecIssue(where, f"{gname} runs Slurm but sits in no partition and is no login group",
                                "add it to a partition's node_groups or to scheduler.login.node_groups"))
    issues += _bastion(spec, catalog)

    issues += duplicate_uids({name: user.uid for name, user in sched.users.items()})
    for uname, user in sched.users.items():
        if user.account not in sched.accounts:
            issues.append(SpecIssue(f"{PATH}.users[{uname}].account", f"no account named {user.account!r}",
                                    f"use one of {', '.join(sched.accounts) or '(none)'}, or declare it in accounts"))
        issues += _unknown_accounts(f"{PATH}.users[{uname}].further_accounts", user.further_accounts, sched)
    for pname, partition in sched.partitions.items():
        issues += _unknown_accounts(f"{PATH}.partitions[{pname}].allow_accounts", partition.allow_accounts, sched)
    issues += check_tenancy(sched)
    issues += check_reservations(sched, {g for p in sched.partitions.values() for g in p.node_groups})
    issues += _directory(spec)
    controllers, ctl_issues = _controllers(spec, catalog, subnets, site)
    issues += ctl_issues
    issues += _login_hosts(spec, site, {c.name for c in controllers})
    database, db_issues = _database(spec)
    issues += db_issues
    home, home_issues = _home(spec)
    issues += home_issues
    if issues:
        return None, issues
    return (
        ResolvedScheduler(
            spec=sched,
            controllers=controllers,
            groups=groups,
            login_groups=tuple(login),
            login_hosts=dict(sched.login.hosts),
            database=database,
            home=home,
            state_shared=len(controllers) > 1,
        ),
        [],
    )


def _without_scheduler(spec: ClusterSpec, site: ResolvedSite | None) -> list[SpecIssue]:
    issues = []
    for name, group in spec.node_groups.items():
        if group.orchestrator == "slurm":
            what = "a login group" if group.role == "login" else "a Slurm node group"
            issues.append(SpecIssue(NODE_GROUPS.key(name).field("orchestrator"), f"{what} without a scheduler",
                                    "add a scheduler: section (kind: slurm, controller, partitions), or use "
                                    "orchestrator: none"))
    for pool, hosts in sorted(_site_pools(site).items()):
        slurm_hosts = sorted(h.name for h in hosts if h.spec.orchestrator == "slurm")
        if slurm_hosts:
            issues.append(SpecIssue(f"cluster.site.hosts[{slurm_hosts[0]}].orchestrator",
                                    f"pool {pool} runs Slurm ({len(slurm_hosts)} hosts) without a scheduler",
                                    "add a scheduler: section, or set another orchestrator"))
    return issues


def _slurm_group(spec: ClusterSpec, name: str, pools: dict[str, list[ResolvedHost]]) -> SlurmGroup:
    if name in spec.node_groups:
        g = spec.node_groups[name]
        return SlurmGroup(name=name, cloud=True, instance_type=g.instance_type, hosts=(), count=g.active_nodes)
    hosts = tuple(sorted((h for h in pools[name] if h.spec.orchestrator == "slurm"), key=lambda h: h.name))
    return SlurmGroup(name=name, cloud=False, instance_type=None, hosts=hosts, count=len(hosts))


def _controllers(
    spec: ClusterSpec, catalog: Catalog, subnets: Subnets, site: ResolvedSite | None
) -> tuple[tuple[SlurmController, ...], list[SpecIssue]]:
    assert spec.scheduler is not None
    ctl = spec.scheduler.controller
    path = f"{PATH}.controller"
    issues: list[SpecIssue] = []
    on_site = spec.placement.kind in ("onprem", "hybrid")
    if on_site:
        if ctl.instance_type is not None or ctl.backup:
            issues.append(SpecIssue(path, "instance_type and backup place the controller on AWS; this cluster's "
                                    "controller runs on the site", "list the site hosts in controller.hosts "
                                    "(a second host is the backup)"))
        if not ctl.hosts:
            return (), [*issues, SpecIssue(f"{path}.hosts", "no controller host", "name a site host (site.hosts)")]
        issues += _service_hosts(f"{path}.hosts", ctl.hosts, spec, site, "the controller")
        found = [SlurmController(name=host, address=address) for host, address in ctl.hosts.items()]
        if len(ctl.hosts) == 2:
            mounts = spec.site.storage.mounts if spec.site is not None else {}
            if ctl.state_mount is None:
                issues.append(SpecIssue(f"{path}.state_mount", "two controllers need a shared state directory",
                                        f"name the site mount that holds it: one of {', '.join(mounts) or '(none)'}"))
            elif ctl.state_mount not in mounts:
                issues.append(SpecIssue(f"{path}.state_mount", f"no site mount named {ctl.state_mount!r}",
                                        f"use one of {', '.join(mounts) or '(none declared)'}"))
            elif mounts[ctl.state_mount].mount_point == HOME_MOUNT_POINT:
                # The controllers mount it at StateSaveLocation and make its root slurm's, 0750: the users'
                # homes would become slurmctld's state directory.
                issues.append(SpecIssue(f"{path}.state_mount", f"{ctl.state_mount!r} is the users' /home",
                                        "declare a separate export for the controllers' state in "
                                        "site.storage.mounts, e.g. slurm-state: {kind: nfs, server: ..., "
                                        "export: /export/slurm-state, mount_point: /srv/slurm-state}"))
        return tuple(found), issues
    if ctl.hosts or ctl.state_mount:
        issues.append(SpecIssue(path, "hosts and state_mount name site hosts; this is an AWS cluster",
                                "set controller.instance_type (and backup: true for a second controller)"))
    if ctl.instance_type is None:
        return (), [*issues, SpecIssue(f"{path}.instance_type", "missing", "add it, e.g. m7i.2xlarge")]
    try:
        instance = catalog.instance_type(ctl.instance_type)
    except CatalogError as exc:
        return (), [*issues, SpecIssue(f"{path}.instance_type", str(exc), "use a type from the catalog")]
    if spec.network is None:  # reported by the placement check (cluster.network: missing)
        return (), issues
    azs = [az for az in sorted(spec.network.availability_zones) if az in instance.azs_offering(spec.region or "")]
    wanted = 2 if ctl.backup else 1
    if len(azs) < wanted:
        return (), [*issues, SpecIssue(f"{path}.instance_type",
                                       f"{ctl.instance_type} is offered in {len(azs)} of the network's AZs; "
                                       f"{wanted} controller(s) need {wanted}",
                                       "pick another type, add an AZ, or drop backup")]
    found = []
    for i, az in enumerate(azs[:wanted]):
        subnet = subnets.get(("management", az))
        if subnet is None:
            continue
        address = str(ipaddress.IPv4Network(subnet)[CONTROLLER_HOST_NUMBER])
        found.append(
            SlurmController(name=f"{spec.name}-ctl-{i}", address=address, availability_zone=az, subnet=str(subnet))
        )
    return tuple(found), issues


def _service_hosts(
    path: str, hosts: dict[str, str], spec: ClusterSpec, site: ResolvedSite | None, what: str
) -> list[SpecIssue]:
    """Site service hosts (controller, login): not a compute host, and on the site's management network:
    the address is inside site.cidrs (what the site routes, and a hybrid link carries to the VPC)."""
    issues = []
    site_hosts = site.hosts if site is not None else {}
    cidrs = [ipaddress.ip_network(c) for c in spec.site.cidrs] if spec.site is not None else []
    for host, address in hosts.items():
        if host in site_hosts:
            issues.append(SpecIssue(f"{path}[{host}]", f"{host} is a compute host in site.hosts",
                                    f"run {what} on a service host, not on a node jobs run on"))
        if cidrs and not any(ipaddress.ip_address(address) in cidr for cidr in cidrs):
            issues.append(SpecIssue(f"{path}[{host}]", f"{address} is outside the site's cidrs "
                                    f"({', '.join(map(str, cidrs))})",
                                    "give the host its management address in site.cidrs, or add its range there"))
    return issues


def _login_hosts(spec: ClusterSpec, site: ResolvedSite | None, controllers: set[str]) -> list[SpecIssue]:
    assert spec.scheduler is not None
    hosts = spec.scheduler.login.hosts
    path = f"{PATH}.login.hosts"
    if not hosts:
        return []
    if spec.placement.kind == "aws":
        return [SpecIssue(path, "login hosts are site service hosts; this is an AWS cluster",
                          "declare a node group with role: login and list it in login.node_groups")]
    issues = _service_hosts(path, hosts, spec, site, "the login service")
    for host in sorted(set(hosts) & controllers):
        issues.append(SpecIssue(f"{path}[{host}]", f"{host} is also the controller",
                                "log users in on their own host: a user's load must not starve slurmctld"))
    return issues


def _bastion(spec: ClusterSpec, catalog: Catalog) -> list[SpecIssue]:
    assert spec.scheduler is not None
    login = spec.scheduler.login
    path = f"{PATH}.login"
    if not login.bastion:
        return []
    if spec.placement.kind != "aws":
        return [SpecIssue(f"{path}.bastion", "a bastion is an AWS instance; this cluster's login hosts are on the "
                          "site", "reach the site's login hosts through the site's network (bastion: false)")]
    if spec.network is None or not any(22 in rule.ports for rule in spec.network.allowed_ingress):
        return [SpecIssue(f"{path}.bastion", "a bastion needs a network.allowed_ingress rule with port 22 (who may "
                          "reach it)", "list the office/VPN ranges with ports: [22] in network.allowed_ingress, or "
                          "keep SSM (bastion: false)")]
    try:
        instance = catalog.instance_type(login.bastion_instance_type)
    except CatalogError as exc:
        return [SpecIssue(f"{path}.bastion_instance_type", str(exc), "use a type from the catalog, e.g. t3.micro")]
    first_az = sorted(spec.network.availability_zones)[0]
    if first_az not in instance.azs_offering(spec.region or ""):
        return [SpecIssue(f"{path}.bastion_instance_type", f"{login.bastion_instance_type} is not offered in "
                          f"{first_az}, where the bastion runs", "pick a type offered there, e.g. t3.micro")]
    return []


def _directory(spec: ClusterSpec) -> list[SpecIssue]:
    """A directory is the site's (SSSD reads it with a bind password from the site's secret store), and its
    users are not created locally: keys declared for them would never be installed."""
    assert spec.scheduler is not None
    if spec.scheduler.directory is None:
        return []
    if spec.placement.kind == "aws":
        return [SpecIssue(f"{PATH}.directory", "an existing LDAP directory is a site's (onprem or hybrid placement); "
                          "this is an AWS cluster", "declare the cluster's users in scheduler.users instead")]
    return [
        SpecIssue(f"{PATH}.users[{uname}].ssh_public_keys", "keys of a directory user: with a directory no user is "
                  "created locally, so these keys would never be installed",
                  "keep the user's keys in the directory or in ~/.ssh/authorized_keys on the shared /home")
        for uname, user in spec.scheduler.users.items()
        if user.ssh_public_keys
    ]


def _database(spec: ClusterSpec) -> tuple[str, list[SpecIssue]]:
    assert spec.scheduler is not None
    wanted = spec.scheduler.accounting.database
    if spec.placement.kind == "aws":
        issues = []
        if wanted == "controller":
            # Never both: the AWS control plane declares RDS for accounting, and a MariaDB on the controller
            # would share the instance's fate with no backup of its own (docs/slurm.md, "Accounting database").
            issues.append(SpecIssue(f"{PATH}.accounting.database", "controller: MariaDB on the controller is for a "
                                    "site; on AWS accounting runs on Amazon RDS, which outlives a controller's "
                                    "replacement", "remove database (managed is AWS's default) or set database: "
                                    "managed"))
        azs = spec.network.availability_zones if spec.network is not None else []
        if len(set(azs)) < 2:
            # An RDS DB subnet group must cover at least two AZs, Multi-AZ or not (RDS User Guide, "Working with
            # a DB instance in a VPC": "Each DB subnet group must have subnets in at least two Availability Zones").
            issues.append(SpecIssue("cluster.network.availability_zones", f"{len(set(azs))} availability zone: "
                                    "the Slurm accounting database (RDS) needs a DB subnet group with subnets in at "
                                    "least two availability zones", "list a second AZ of the region in "
                                    "network.availability_zones (node groups may stay pinned to one with "
                                    "availability_zone)"))
        return "managed", issues
    if wanted == "managed":
        return "managed", [SpecIssue(f"{PATH}.accounting.database", "a managed (RDS) database is for AWS placement; "
                                     "this cluster's controller runs on the site", "use database: controller")]
    return "controller", []


def _home(spec: ClusterSpec) -> tuple[str, list[SpecIssue]]:
    if spec.placement.kind == "aws":
        return "efs", []
    mounts = spec.site.storage.mounts if spec.site is not None else {}
    for key, mount in mounts.items():
        if mount.mount_point == HOME_MOUNT_POINT:
            return key, []
    return "", [SpecIssue("cluster.site.storage.mounts", "a Slurm cluster on a site needs the shared /home",
                          "add the site's NFS export: mounts: {home: {kind: nfs, server: ..., export: ..., "
                          "mount_point: /home}}")]


def duplicate_uids(uids: Mapping[str, object]) -> list[SpecIssue]:
    """Users sharing a uid. A YAML merge key (<<: *alice) copies a uid as easily as a typo does. Judged on
    the uids alone, so a spec with other problems in its users still hears of this one."""
    first: dict[int, str] = {}
    issues = []
    for name, uid in uids.items():
        if not isinstance(uid, int) or isinstance(uid, bool):
            continue
        if uid in first:
            issues.append(SpecIssue(f"{PATH}.users[{name}].uid", f"{uid} is already users[{first[uid]}]'s: both "
                                    "logins would be one Unix user, sharing files and jobs",
                                    "give each user its own uid"))
        first.setdefault(uid, name)
    return issues


def raw_duplicate_uids(cluster: object) -> list[SpecIssue]:
    """duplicate_uids on a spec that did not parse (its users as the file gives them)."""
    scheduler = cluster.get("scheduler") if isinstance(cluster, Mapping) else None
    users = scheduler.get("users") if isinstance(scheduler, Mapping) else None
    if not isinstance(users, Mapping):
        return []
    return duplicate_uids({str(n): u.get("uid") for n, u in users.items() if isinstance(u, Mapping)})


def _unknown_accounts(path: str, names: list[str], sched: SchedulerSpec) -> list[SpecIssue]:
    """Accounts a user or a partition names that scheduler.accounts does not declare (sacctmgr would refuse
    the association, slurmctld would refuse every job of the partition)."""
    return [
        SpecIssue(f"{path}[{i}]", f"no account named {name!r}",
                  f"use one of {', '.join(sched.accounts) or '(none)'}, or declare it in accounts")
        for i, name in enumerate(names) if name not in sched.accounts
    ]
