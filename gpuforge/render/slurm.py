"""The Slurm configuration of a cluster: resolved spec + catalog -> one JSON-able dict -> the files nodes get.

One template, two renderers: ``slurm_contract`` builds the typed contract (gpuforge/render/slurm_contract.py),
``slurm_config`` its plain dict, ``render_slurm`` renders ``gpuforge/assets/playbooks/templates/slurm/*.j2`` from it
(the files its ``files`` lists), and the Ansible roles render the same templates from the same dict, delivered
through the inventory as the variable ``slurm_config`` (docs/slurm.md's table and the roles' argument specs
are generated from the model). Nothing here talks to a node.

Facts come from the catalog: CPU layout and memory of each node (RealMemory keeps the catalog's
``slurm.real_memory_fraction`` of the memory, the rest is the OS's headroom), GPU model and count.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.catalog.flows import load_flows
from gpuforge.catalog.mounts import HOME_MOUNT_POINT
from gpuforge.catalog.slurm_settings import slurm_settings
from gpuforge.render.lifecycle import lifecycle_config
from gpuforge.render.slurm_contract import NodeHardware, SlurmConfig
from gpuforge.render.slurm_reservations import reservations
from gpuforge.render.slurm_rest_api import jwt_key_ref, rest_api
from gpuforge.render.slurm_sharing import NodeShape, partition_sharing, preemption
from gpuforge.render.slurm_tenancy import accounts, team_qos
from gpuforge.render.templates import macro, render
from gpuforge.spec import ResolvedSpec
from gpuforge.spec.resolved_scheduler import ResolvedScheduler, SlurmGroup
from gpuforge.spec.scheduler_checks import secret_names

TEMPLATES = {
    "slurm.conf": "slurm/slurm.conf.j2",
    "gres.conf": "slurm/gres.conf.j2",
    "cgroup.conf": "slurm/cgroup.conf.j2",
    "job_container.conf": "slurm/job_container.conf.j2",
    "topology.conf": "slurm/topology.conf.j2",
    "plugstack.conf": "slurm/plugstack.conf.j2",
    "cli_filter.lua": "slurm/cli_filter.lua.j2",
}
SLURMD_DEFAULTS = "slurm/slurmd.default.j2"
# One node line, site or cloud (slurm.conf's NodeName lines import it too).
NODE_MACRO = "slurm/node.j2"
PYXIS_CONF = "containers/pyxis.conf.j2"
ENROOT_CONF = "containers/enroot.conf.j2"
STATE_SAVE_LOCATION = "/var/spool/slurmctld"
# The shared state directory's root, as the slurm_controller role makes StateSaveLocation.
STATE_OWNER = {"owner": "slurm", "group": "slurm", "mode": "0750"}
JOB_TMPFS_BASE = "/var/spool/slurmd-tmpfs"
# The key whose options gpuforge sets and the stack may add to (scheduler.extra_settings).
SCHEDULER_PARAMETERS = "SchedulerParameters"
# slurmd's periodic health check (issue 12): the prolog's quick check (slurm_compute role, linked under this
# name) on idle nodes between jobs, so a node that fails while idle is drained ("gpuforge health: ...")
# and replaced by gpuforge-lifecycle before a job lands on it. IDLE, not NONDRAINED_IDLE: that state is
# Slurm 23.02's (NEWS, 23.02.0), Debian 12 ships 22.05; the script leaves a drained node's reason alone.
# Every 5 minutes: the checks read nvidia-smi, the kernel log and sysfs (seconds), so the cost is nil,
# and a node found bad waits at most this long before it is drained.
HEALTH_CHECK = {
    "program": "/usr/local/sbin/gpuforge-periodic-healthcheck",
    "interval_s": 300,
    "node_state": "IDLE",
}
# SPANK plugins' configuration files: plugstack.conf (served by the controller) includes them on each node.
PLUGSTACK_DIR = "/etc/slurm/plugstack.conf.d"
# Node-local NVMe scratch (the mount the monitoring rules watch, MonitoringSpec.scratch_path): enroot's
# image cache and container root file systems go there where the node has it, else under /var/lib.
LOCAL_NVME_DIR = "/scratch"
ROOT_DISK_DIR = "/var/lib"


# Hosts per NodeName line of a site pool: each line lists its hosts' addresses (NodeAddr), about 12 characters
# each, so 16 keep a line near 400 characters; a small site's pool stays one line.
NODE_LINE_HOSTS = 16


class SlurmRenderError(ValueError):
    """The stack has no Slurm scheduler to render."""


def hostlist(names: Iterable[str]) -> str:
    """Slurm's compressed host list: dgx-a01,dgx-a02,dgx-a03 -> dgx-a[01-03]. Names without a numeric
    suffix stay as they are; ranges keep the zero padding."""
    by_prefix: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    for name in sorted(names):
        m = re.fullmatch(r"(.*?)(\d+)", name)
        if m is None:
            plain.append(name)
            continue
        by_prefix.setdefault((m.group(1), len(m.group(2))), []).append(int(m.group(2)))
    parts = list(plain)
    for (prefix, width), numbers in sorted(by_prefix.items()):
        numbers.sort()
        ranges: list[str] = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        parts.append(f"{prefix}{ranges[0]}" if len(numbers) == 1 else f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)


def real_memory_mib(memory_mib: int, fraction: float) -> int:
    return math.floor(memory_mib * fraction)


def gpu_type(model: str | None) -> str:
    """Slurm GRES type of a GPU model: H100 -> h100 (what AutoDetect=nvml reports for the SXM boards)."""
    return re.sub(r"[^a-z0-9]", "", (model or "").lower())


def slurm_config(resolved: ResolvedSpec, *, stand_in_gpus: bool = False) -> dict[str, Any]:
    """``slurm_contract`` as the dict the inventory carries and the templates read."""
    return slurm_contract(resolved, stand_in_gpus=stand_in_gpus).to_vars()


def slurm_contract(resolved: ResolvedSpec, *, stand_in_gpus: bool = False) -> SlurmConfig:
    """The variables every Slurm template and role reads (docs/slurm.md, "The slurm_config variable").

    stand_in_gpus: gres.conf lists the GPU device files instead of AutoDetect=nvml (test machines have
    stand-in device files and no NVML); production leaves it False.
    """
    sched = resolved.scheduler
    if sched is None:
        raise SlurmRenderError(f"{resolved.spec.name} has no scheduler section: nothing to render for Slurm")
    spec = resolved.spec
    catalog = resolved.catalog
    fraction = catalog.slurm.real_memory_fraction
    ports = catalog.slurm.ports

    nodes: list[NodeHardware] = []
    dynamic: list[dict[str, Any]] = []
    nodesets: list[dict[str, Any]] = []
    gres_files: list[dict[str, Any]] = []
    groups: dict[str, dict[str, Any]] = {}
    shapes: dict[str, NodeShape] = {}
    max_nodes = 0
    for name, group in sched.groups.items():
        nodeset = f"ns_{name.replace('-', '_')}"
        if group.cloud:
            facts = _cloud_facts(resolved, group, fraction)
            dynamic.append({"name": name, "conf": facts["conf"], "features": facts["features"]})
            nodesets.append({"name": nodeset, "feature": f"group_{name}", "nodes": ""})
            max_nodes += resolved.spec.node_groups[name].total_nodes
            if facts["gpus"] and stand_in_gpus:
                gres_files.append({"nodes": "", "type": facts["gpu_type"], "file": _device_files(facts["gpus"])})
        else:
            facts = _site_facts(group, fraction)
            nodes += facts["lines"]
            nodesets.append({"name": nodeset, "feature": "", "nodes": facts["names"]})
            max_nodes += len(group.hosts)
            if facts["gpus"] and stand_in_gpus:
                gres_files.append(
                    {"nodes": facts["names"], "type": facts["gpu_type"], "file": _device_files(facts["gpus"])}
                )
        shapes[name] = facts["shape"]
        groups[name] = {
            "nodeset": nodeset,
            "dynamic": group.cloud,
            "conf": facts.get("conf", ""),
            "local_nvme": facts["local_nvme"],
            "gpus": facts["gpus"],
        }

    partitions = [
        {
            "name": pname,
            "nodesets": [groups[g]["nodeset"] for g in p.node_groups],
            "default": pname == sched.default_partition,
            "max_time": p.max_time,
            "default_time": p.default_time or "",
            "exclusive": p.exclusive,
            "allow_accounts": list(p.allow_accounts),
            "allow_qos": list(p.allow_qos),
            "priority_tier": p.priority_tier,
            **partition_sharing(shapes[g] for g in p.node_groups),
            "extra_options": {key: str(value) for key, value in p.extra_options.items()},
        }
        for pname, p in sched.spec.partitions.items()
    ]
    controllers = [{"name": c.name, "address": c.address} for c in sched.controllers]
    held_by = {g: [pname for pname, p in sched.spec.partitions.items() if g in p.node_groups] for g in groups}
    lifecycle = lifecycle_config(resolved, held_by)
    if lifecycle:
        # The gate tests a new cloud node with a healthy neighbour: on a hybrid cluster only a cloud one, so
        # the gate's own jobs never span the link either.
        hybrid = spec.placement.kind == "hybrid"
        lifecycle["gate_nodesets"] = [g["nodeset"] for g in groups.values() if g["dynamic"] or not hybrid]
        if hybrid:
            # The site's controller drives the Auto Scaling groups with IAM Roles Anywhere credentials
            # (gpuforge/infra/hybrid/slurm_burst.py): the slurm_scaler role installs the catalog's signing
            # helper; the ARNs are the deployed stack's output hybrid.burst.scaler (slurm_inventory.py).
            helper = resolved.catalog.slurm.signing_helper
            lifecycle["aws_credentials"] = {
                "kind": "roles_anywhere",
                "signing_helper": {"version": helper.version, "url": dict(helper.url), "sha256": dict(helper.sha256)},
            }
    return SlurmConfig.model_validate({
        "cluster_name": spec.name,
        "slurm_user": "slurm",
        "controllers": controllers,
        "state_save_location": STATE_SAVE_LOCATION,
        "state_shared": _state_shared(resolved, sched),
        "timeouts": {"slurmctld": 120 if len(controllers) > 1 else 300, "slurmd": 300},
        "max_node_count": max_nodes,
        "nodes": nodes,
        "dynamic_groups": dynamic,
        "nodesets": nodesets,
        "partitions": partitions,
        "preemption": preemption(sched.spec.preemption),
        **passed_through(sched.spec.extra_settings),
        "groups": groups,
        "login_groups": list(sched.login_groups),
        "login_hosts": [{"name": name, "address": address} for name, address in sched.login_hosts.items()],
        "gres": {
            "types": ["gpu"],
            "autodetect": "" if stand_in_gpus else "nvml",
            "files": gres_files,
        },
        "topology": _topology(resolved, sched),
        # What every firewall opens (catalog): SrunPortRange bounds srun's listening ports to the same range.
        "ports": {"slurmctld": ports.slurmctld, "slurmd": ports.slurmd, "slurmdbd": ports.slurmdbd,
                  "srun": f"{ports.srun[0]}-{ports.srun[1]}"},
        # MPI ranks wire up through Slurm's mpi/pmix; the packages are per distribution (catalog).
        "mpi": {"default": "pmix", "packages": catalog.slurm.pmix_packages()},
        "job_container": {"enabled": sched.spec.job_tmpfs, "base_path": JOB_TMPFS_BASE},
        "prolog": "/etc/slurm/prolog.d/*",
        "epilog": "/etc/slurm/epilog.d/*",
        "health_check": HEALTH_CHECK,
        "accounting": _accounting(resolved, sched),
        "secrets": _secrets(resolved, sched),
        "home": _home(resolved, sched),
        "containers": _containers(resolved, sched, groups),
        "login_access": "bastion" if sched.spec.login.bastion else "ssm",
        "accounts": accounts(sched.spec),
        "qos": team_qos(sched.spec),
        "reservations": reservations(sched.spec),
        "users": {
            name: {"uid": u.uid, "account": u.account, "further_accounts": list(u.further_accounts),
                   "ssh_public_keys": list(u.ssh_public_keys)}
            for name, u in sched.spec.users.items()
        },
        "directory": _directory(sched),
        **({"rest_api": api} if (api := rest_api(sched)) else {}),
        # gpuforge-lifecycle on the controller (slurm_scaler role), for groups in Auto Scaling groups.
        **({"lifecycle": lifecycle} if lifecycle else {}),
        # Hybrid: cli_filter.lua refuses a heterogeneous job whose components sit on both sides of the VPN.
        **({"het_job_guard": _het_job_guard(sched)} if spec.placement.kind == "hybrid" else {}),
        "versions": {
            # Every Slurm role refuses a daemon older than this (role slurm_version).
            "minimum": catalog.slurm.minimum.version,
            "production": catalog.slurm.production.version,
            "production_source": catalog.slurm.production.source.strip(),
            "test": catalog.slurm.test.version,
        },
    })


def passed_through(extra: Mapping[str, str | int]) -> dict[str, Any]:
    """scheduler.extra_settings as the contract carries them: SchedulerParameters as gpuforge's options (catalog
    slurm_settings, merged_after) followed by the stack's, the other keys as they are."""
    own = slurm_settings().settings[SCHEDULER_PARAMETERS].merged_after
    options = [o for o in str(extra.get(SCHEDULER_PARAMETERS, "")).split(",") if o and o not in own]
    rest = {key: str(value) for key, value in extra.items() if key != SCHEDULER_PARAMETERS}
    return {"extra_settings": rest, "scheduler_parameters": [*own, *options]}


def _het_job_guard(sched: ResolvedScheduler) -> dict[str, Any]:
    """Each partition's side of the VPN (a partition holds one side's groups: slurm_burst_checks.py)."""
    sides = {
        name: "cloud" if any(sched.groups[g].cloud for g in p.node_groups if g in sched.groups) else "site"
        for name, p in sched.spec.partitions.items()
    }
    return {"partitions": sides, "default_partition": sched.default_partition}


def _cloud_facts(resolved: ResolvedSpec, group: SlurmGroup, fraction: float) -> dict[str, Any]:
    it = resolved.catalog.instance_type(group.instance_type or "")
    spec = resolved.spec.node_groups[group.name]
    gpus = it.gpu_count if it.accelerator is not None and it.accelerator.kind == "gpu" else 0
    features = [f"group_{group.name}", it.instance_type]
    if gpus:
        features.append(gpu_type(it.gpu_model))
    if spec.availability_zone:
        features.append(spec.availability_zone)
    # The same record as a site's node line (no names: the nodes register themselves, named at boot). Sockets
    # where the catalog has them (instance_extras), else Slurm's default of one socket holding every core.
    sockets = it.sockets
    if sockets and it.cores % sockets:
        raise SlurmRenderError(f"catalog: {it.instance_type} has {it.cores} cores, not a multiple of its {sockets} "
                               "sockets (facts.yaml instance_extras): correct sockets")
    line = NodeHardware(
        names="",
        addresses="",
        cpus=it.vcpus,
        sockets=sockets,
        cores_per_socket=it.cores // (sockets or 1),
        threads_per_core=it.threads_per_core,
        real_memory=real_memory_mib(it.memory_mib, fraction),
        gres=f"gpu:{gpu_type(it.gpu_model)}:{gpus}" if gpus else "",
        features=features,
    )
    return {"conf": node_conf(line), "features": features, "gpus": gpus, "gpu_type": gpu_type(it.gpu_model),
            "local_nvme": it.nvme_gb > 0, "shape": NodeShape(line.cpus, line.real_memory, gpus)}


def _site_facts(group: SlurmGroup, fraction: float) -> dict[str, Any]:
    servers = {h.server.name for h in group.hosts}
    if len(servers) != 1:
        raise SlurmRenderError(f"pool {group.name} mixes server models ({', '.join(sorted(servers))}); "
                               "a Slurm node line needs one hardware layout: split the pool")
    server = group.hosts[0].server
    if not (server.cpu_threads and server.sockets and server.threads_per_core and server.memory_gib):
        raise SlurmRenderError(f"catalog server {server.name} lacks cpu_threads, sockets, threads_per_core or "
                               "memory_gib: add them (catalog overrides) so slurm.conf can describe the node")
    cores_per_socket = server.cpu_threads // (server.sockets * server.threads_per_core)
    gpus = server.gpu_count
    features = [f"group_{group.name}", server.name, gpu_type(server.gpu_model)]
    hosts = sorted(group.hosts, key=lambda h: h.name)
    line = NodeHardware(
        names="",
        addresses="",
        cpus=server.cpu_threads,
        sockets=server.sockets,
        cores_per_socket=cores_per_socket,
        threads_per_core=server.threads_per_core,
        real_memory=real_memory_mib(server.memory_gib * 1024, fraction),
        gres=f"gpu:{gpu_type(server.gpu_model)}:{gpus}" if gpus else "",
        features=features,
    )
    # One line per NODE_LINE_HOSTS hosts: NodeAddr lists every address, so a pool of 12,500 on one line would be
    # 170 kB of slurm.conf no one can read; NodeName takes the same host list form on every line.
    lines = [
        line.model_copy(update={
            "names": hostlist(h.name for h in chunk), "addresses": ",".join(h.spec.management_ip for h in chunk),
        })
        for chunk in (hosts[i : i + NODE_LINE_HOSTS] for i in range(0, len(hosts), NODE_LINE_HOSTS))
    ]
    # Local scratch where the server model lists its drives (the local_scratch role mounts them).
    return {"lines": lines, "names": hostlist(h.name for h in hosts), "gpus": gpus,
            "gpu_type": gpu_type(server.gpu_model),
            "local_nvme": bool(server.scratch_devices), "shape": NodeShape(line.cpus, line.real_memory, gpus)}


def _device_files(gpus: int) -> str:
    return "/dev/nvidia0" if gpus == 1 else f"/dev/nvidia[0-{gpus - 1}]"


def _topology(resolved: ResolvedSpec, sched: ResolvedScheduler) -> dict[str, Any]:
    """Slurm's tree. On a site: the rail-optimized fabric (a leaf switch per scalable unit, under the spines).
    On AWS the controller writes topology.conf at run time from EC2 instance topology (docs/slurm.md), so
    nothing is rendered here. Hybrid: the site's switches rendered, the cloud groups' switches written at
    run time beside them; no switch joins the two, and Slurm places a job only on nodes under one switch
    fabric (topology.conf(5)), so no job spans the link."""
    site_switches, site_source = _site_topology(resolved, sched)
    cloud = sorted(name for name, group in sched.groups.items() if group.cloud)
    ec2 = "EC2 instance topology, written by the controller at run time"
    if resolved.spec.placement.kind == "hybrid" and cloud:
        return {"kind": "hybrid", "source": f"{site_source or 'no site fabric'} (site); {ec2} (cloud groups "
                f"{', '.join(cloud)}), never joined to the site's", "region": resolved.spec.region,
                "switches": site_switches,
                # The site's nodes, which the controller's topology script keeps under the rendered switches.
                "static_nodes": sorted(h.name for g in sched.groups.values() for h in g.hosts)}
    if site_switches:
        return {"kind": "site", "source": site_source, "switches": site_switches}
    if resolved.spec.network:  # AWS: gpuforge-slurm-topology on the controller writes the file
        return {"kind": "ec2", "source": ec2, "region": resolved.spec.region, "switches": []}
    return {"kind": "none", "source": "none", "switches": []}


def _site_topology(resolved: ResolvedSpec, sched: ResolvedScheduler) -> tuple[list[dict[str, Any]], str]:
    """The site fabric's switches: Slurm's tree holds a node under one switch, and a rail-optimized host has
    an HCA on every rail leaf of its scalable unit, so the SU's rail leaves together are that switch. Hosts
    of one SU reach each other through one leaf hop on every rail: the unit Slurm should keep a job in."""
    site = resolved.site
    fabric = site.spec.fabric if site is not None else None
    static_hosts = [h for g in sched.groups.values() for h in g.hosts if h.spec.hcas]
    if fabric is None or not static_hosts:
        return [], ""
    by_su: dict[str, list[str]] = {}
    for host in static_hosts:
        by_su.setdefault(host.scalable_unit, []).append(host.name)
    leaves = [
        {"name": f"{su}-leaves", "switches": "", "nodes": hostlist(names),
         "comment": f"{su}: {fabric.rails} rail leaves (one per rail), every host cabled to each"}
        for su, names in sorted(by_su.items())
    ]
    switches = list(leaves)
    if fabric.cores:
        # Three tiers: each spine group (whole SUs, site.py SiteFabric.pods) is a switch over its SUs' leaves, and
        # the cores one switch over the groups: Slurm keeps a job in as few groups as it can.
        pods = fabric.pods(sorted(by_su))
        width = len(str(len(pods)))
        groups = [f"spines{i:0{width}d}" for i in range(1, len(pods) + 1)]
        switches += [
            {"name": name, "switches": ",".join(f"{su}-leaves" for su in pod), "nodes": "",
             "comment": f"spine group {name}: scalable units {pod[0]}-{pod[-1]}"}
            for name, pod in zip(groups, pods, strict=True)
        ]
        switches.append({"name": "cores", "switches": hostlist(groups), "nodes": "",
                         "comment": f"{fabric.cores} cores joining {len(pods)} spine groups "
                                    f"({fabric.spine_oversubscription:g}:1 at the spines)"})
    elif len(leaves) > 1 or fabric.spines:
        switches.append({"name": "spines", "switches": ",".join(leaf["name"] for leaf in leaves), "nodes": "",
                         "comment": f"{fabric.spines} spines joining the scalable units' leaves"})
    tiers = f", {fabric.cores} cores" if fabric.cores else ""
    return switches, f"the site fabric ({fabric.kind}, {fabric.rails} rails, {fabric.spines} spines{tiers})"


def _accounting(resolved: ResolvedSpec, sched: ResolvedScheduler) -> dict[str, Any]:
    ctl = sched.controllers
    managed = sched.database == "managed"
    return {
        "host": ctl[0].name,
        # A backup slurmdbd only where both controllers reach one database (managed): with MariaDB on the
        # primary, a second slurmdbd would keep a second, diverging accounting database on the backup.
        "backup_host": ctl[1].name if len(ctl) > 1 and managed else "",
        "port": resolved.catalog.slurm.ports.slurmdbd,
        "purge_after_months": sched.spec.accounting.purge_after_months,
        # AccountingStoreFlags: the job's script and (opted in) environment, in its record.
        "store_flags": [
            flag
            for flag, wanted in (
                ("job_script", sched.spec.accounting.store_job_script),
                ("job_env", sched.spec.accounting.store_job_environment),
            )
            if wanted
        ],
        "database": {
            "kind": sched.database,
            # The RDS endpoint is known once deployed: the inventory fills it from the stack's outputs.
            "host": "" if managed else "localhost",
            "port": load_flows().ports["mariadb"].ports[0],
            "name": resolved.catalog.slurm.accounting_database.name,
            "user": resolved.catalog.slurm.accounting_database.user,
        },
    }


def _secrets(resolved: ResolvedSpec, sched: ResolvedScheduler) -> dict[str, Any]:
    """Where nodes read the munge key, the database password and the directory's bind password: never the
    values themselves."""
    names = secret_names(resolved.spec.name)
    jwt = {"jwt_key": ref} if (ref := jwt_key_ref(resolved, sched)) else {}
    if resolved.spec.placement.kind == "aws":
        return {**{name: {"store": "aws_secretsmanager", "id": secret} for name, secret in names.items()}, **jwt}
    directory = sched.spec.directory  # a site's only (scheduler_checks)
    site = {
        "munge_key": {"store": "ansible_vault", "id": "vault_slurm_munge_key"},
        "db_password": {"store": "ansible_vault", "id": "vault_slurm_db_password"},
        **(
            {"ldap_bind_password": {"store": "ansible_vault", "id": directory.bind_password_secret}}
            if directory is not None and directory.bind_dn
            else {}
        ),
        **jwt,
    }
    if resolved.spec.placement.kind == "hybrid" and any(g.cloud for g in sched.groups.values()):
        # The program generates the key into Secrets Manager; cloud nodes read it with their role, the site
        # holds the same key as its vault variable (docs/onprem-hybrid.md, "Slurm burst").
        site["cloud_munge_key"] = {"store": "aws_secretsmanager", "id": names["munge_key"]}
    return site


def _directory(sched: ResolvedScheduler) -> dict[str, Any] | None:
    """What the sssd role configures (docs/slurm.md, "Users from the site's directory"); None without one."""
    directory = sched.spec.directory
    if directory is None:
        return None
    return {
        "kind": directory.kind,
        "uri": directory.uri,
        "start_tls": directory.start_tls,
        "search_base": directory.search_base,
        "ca_certificate": directory.ca_certificate or "",
        "bind_dn": directory.bind_dn or "",
    }


def _home(resolved: ResolvedSpec, sched: ResolvedScheduler) -> dict[str, Any]:
    """The shared /home as the site_mounts role takes a mount (slurm.yml mounts it on every Slurm host):
    on AWS the cluster's EFS (`server`, its DNS name, and `source`, its id, come from the deployed stack's
    outputs), on a site the spec's mount at /home."""
    if sched.home == "efs":
        return {"name": "home", "kind": "efs", "mount_point": HOME_MOUNT_POINT, "server": "", "export": "/",
                "source": "", "nfs_options": _efs_nfs_options()}
    assert resolved.spec.site is not None
    mount = resolved.spec.site.storage.mounts[sched.home]
    source = f"{mount.server}:{mount.export}" if mount.kind == "nfs" else ""
    return {"name": sched.home, **mount.model_dump(mode="json"), "source": source,
            "version": getattr(mount, "version", "")}


def _efs_nfs_options() -> str:

    return load_aws_wiring().efs.nfs_options


def _state_shared(resolved: ResolvedSpec, sched: ResolvedScheduler) -> dict[str, Any]:
    """Where two controllers share StateSaveLocation, as a site_mounts mount at that path (slurm.yml mounts
    it on the controllers, and slurmctld requires it): on AWS the cluster's own state EFS (`server` from the
    deployed stack's outputs), on a site the spec's `state_mount`'s export. {} with one controller."""
    if not sched.state_shared:
        return {}
    key = sched.spec.controller.state_mount
    if key is None:
        return {"name": "slurm-state", "kind": "efs", "mount": "slurm-state", "mount_point": STATE_SAVE_LOCATION,
                "server": "", "export": "/", "source": "", "nfs_options": _efs_nfs_options(), **STATE_OWNER}
    assert resolved.spec.site is not None
    mount = resolved.spec.site.storage.mounts[key]
    return {**mount.model_dump(mode="json"), "name": "slurm-state", "kind": mount.kind, "mount": key,
            "mount_point": STATE_SAVE_LOCATION, **STATE_OWNER}


def _containers(resolved: ResolvedSpec, sched: ResolvedScheduler, groups: Mapping[str, Any]) -> dict[str, Any]:
    """enroot + pyxis for jobs (docs/slurm.md, "Containers"): releases from the catalog, pyxis's plugstack
    options, and per node group (compute and login) the enroot settings: per-user paths, on local NVMe
    where the group's nodes have it."""
    facts = resolved.catalog.slurm.containers
    enroot, pyxis, toolkit = facts.enroot, facts.pyxis, facts.nvidia_container_toolkit
    local_nvme = {name: group["local_nvme"] for name, group in groups.items()}
    for name in sched.login_groups:
        group = resolved.spec.node_groups.get(name)
        it = resolved.catalog.instance_type(group.instance_type) if group and group.instance_type else None
        local_nvme[name] = it is not None and it.nvme_gb > 0
    return {
        "runtime": sched.spec.containers,
        "plugstack_dir": PLUGSTACK_DIR,
        "enroot": {
            "version": f"{enroot.version}-{enroot.package_release}",
            "packages": list(enroot.packages),
            "url": enroot.url,
            "sha256": dict(enroot.sha256),
            "settings": {name: _enroot_settings(nvme) for name, nvme in local_nvme.items()},
        },
        "pyxis": {
            "version": f"{pyxis.version}-{pyxis.package_release}",
            "package": pyxis.package,
            "plugin": pyxis.plugin,
            # pyxis's plugstack arguments (its config.c): containers under /run, named containers removed
            # when the job ends (a shared node's disk does not fill with leftovers), #SBATCH
            # --container-image accepted, the image's entrypoint not run unless the user asks.
            "options": {"runtime_path": "/run/pyxis", "container_scope": "job", "sbatch_support": "1",
                        "execute_entrypoint": "0"},
        },
        "nvidia_container_toolkit": {
            "version": toolkit.version,
            "packages": list(toolkit.packages),
            "repository": toolkit.repository,
            "key": toolkit.key,
        },
        # GPU groups get the toolkit enroot's 98-nvidia.sh hook runs (nvidia-container-cli).
        "gpu_groups": sorted(name for name, group in groups.items() if group["gpus"]),
    }


def _enroot_settings(local_nvme: bool) -> dict[str, str]:
    """enroot.conf: every user's own runtime, cache and data directories (enroot creates them with umask
    077 under directories the role makes world-writable and sticky); enroot expands $(id -u) itself."""
    base = f"{LOCAL_NVME_DIR if local_nvme else ROOT_DISK_DIR}/enroot"
    return {
        "ENROOT_RUNTIME_PATH": "/run/enroot/user-$(id -u)",
        "ENROOT_CACHE_PATH": f"{base}/cache/user-$(id -u)",
        "ENROOT_DATA_PATH": f"{base}/data/user-$(id -u)",
        # Uncompressed squashfs: imports finish sooner and local disk holds the larger images.
        "ENROOT_SQUASH_OPTIONS": "-noI -noD -noF -noX -no-duplicates",
        # The shared /home inside the container, /dev limited to what the job's GPUs and the hooks add,
        # and a writable root file system (pip install inside the job's container).
        "ENROOT_MOUNT_HOME": "yes",
        "ENROOT_RESTRICT_DEV": "yes",
        "ENROOT_ROOTFS_WRITABLE": "yes",
    }


def node_conf(node: NodeHardware) -> str:
    """A node's hardware as slurm.conf writes it (CPUs= ... Feature=): the macro a site's NodeName line uses,
    here for a cloud group's ``slurmd -Z --conf``."""
    return str(macro(NODE_MACRO, "hardware")(node.model_dump(mode="json")))


def render_slurm(config: SlurmConfig | Mapping[str, Any]) -> dict[str, str]:
    """The files every node receives, by name: exactly ``config.files``, rendered from ``slurm_config``.
    A dict (the inventory's variable, or a test's variation of it) is checked against the contract first."""
    contract = config if isinstance(config, SlurmConfig) else SlurmConfig.model_validate(dict(config))
    data = contract.to_vars()
    containers = contract.containers
    files: dict[str, str] = {}
    for name in contract.files:
        if name in TEMPLATES:
            files[name] = render(TEMPLATES[name], slurm_config=data)
        elif name.startswith("slurmd."):
            group = {"name": name.removeprefix("slurmd."), **data["groups"][name.removeprefix("slurmd.")]}
            files[name] = render(SLURMD_DEFAULTS, slurm_config=data, slurm_group=group)
        elif name == "pyxis.conf":
            pyxis = containers.pyxis
            files[name] = render(PYXIS_CONF, pyxis_plugin=pyxis.plugin, pyxis_options=pyxis.options)
        else:
            settings = containers.enroot.settings[name.removeprefix("enroot.conf.")]
            files[name] = render(ENROOT_CONF, enroot_settings=settings)
    return files
