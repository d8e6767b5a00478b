"""Checks of the site model and the hybrid link against the catalog; every problem at once.

`check_site` returns a `ResolvedSite`: each host with its catalog server, scalable unit and power,
and each rack's load, so the on-prem components, the power rules and the inventory read one set
of facts. Rack feeds are judged N+N: either side alone carries the whole rack at its continuous
rating (gpuforge/spec/power.py: 80 % of the rated kW), the same arithmetic the power policy runs.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict

from gpuforge.catalog import Catalog, CatalogError, load_catalog
from gpuforge.spec.power import CONTINUOUS_DERATE, feed_loss
from gpuforge.spec.site_halls import check_halls

from .errors import SpecIssue
from .fabric_checks import check_fabric_tiers
from .host_network_checks import check_host_network
from .ib_partition_checks import check_ib_partitions
from .limits import customer_gateway_problem
from .models import ClusterSpec
from .paths import NODE_GROUPS
from .resolved_site import ResolvedHost, ResolvedSite
from .site import Site
from .slurm_burst import SlurmBurstSpec
from .slurm_burst_checks import check_slurm_burst
from .suggest import suggestion, unusual_characters

SITE = "cluster.site"
# Where the fabric checks' rules come from. Rail-optimized fabric: NVIDIA DGX SuperPOD Reference Architecture,
# DGX H100 (RA-11333-001, "Network Fabrics", Compute - InfiniBand Fabric): each SU's nodes are rail-aligned, a
# rail's traffic is one hop away inside the SU, and "traffic between nodes, or between rails, traverses the spine
# layer"; its Table 4 (one SU: 8 leaves, 4 spines, 252 compute and UFM cables, 256 spine-leaf cables) gives each
# 64-port leaf as many uplinks as host ports, i.e. non-blocking at 1:1, the oversubscription the plan prints.
RAIL_FABRIC_SOURCE = (
    "NVIDIA DGX SuperPOD Reference Architecture, DGX H100, 'Network Fabrics' (traffic between rails traverses "
    "the spine layer; Table 4: per SU 8 leaves, 4 spines, 256 spine-leaf cables)"
)
# A subnet comes up only under a subnet manager, and each disconnected fabric is a subnet of its own: Debian's
# opensm package ("One Subnet Manager is required to run on each InfiniBand subnet in order to initialize the
# InfiniBand hardware"); NVIDIA UFM Enterprise User Manual, "Subnet Manager Tab" (the SM "discovers and
# configures all the InfiniBand fabric devices to enable traffic flow throughout the fabric").
SUBNET_MANAGER_SOURCE = (
    "OpenSM (Debian opensm: one subnet manager is required on each InfiniBand subnet); NVIDIA UFM Enterprise "
    "User Manual, 'Subnet Manager Tab'"
)


def check_site(spec: ClusterSpec, catalog: Catalog) -> tuple[ResolvedSite | None, list[SpecIssue]]:
    site = spec.site
    if site is None:
        return None, []
    issues: list[SpecIssue] = []
    placement_site = getattr(spec.placement, "site", None)
    if placement_site is not None and placement_site != site.name:
        issues.append(
            SpecIssue(
                "cluster.placement.site",
                f"{placement_site} is not the site declared ({site.name})",
                f"use site: {site.name}, or rename site.name",
            )
        )
    hosts, host_issues = _resolve_hosts(site, catalog)
    issues += host_issues
    issues += _check_u_positions(site, hosts)
    issues += _check_addresses(site)
    issues += _check_hcas(site, hosts)
    issues += check_fabric_tiers(site, hosts)
    issues += check_host_network(site, hosts)
    issues += check_ib_partitions(site, hosts)
    resolved = ResolvedSite(spec=site, hosts=hosts)
    issues += _check_feeds(resolved)
    issues += check_halls(resolved)
    issues += _check_islands(site)
    issues += _check_equipment(site)
    issues += _check_pools(spec, resolved)
    if site.kubernetes is None:
        for name, host in site.hosts.items():
            if host.orchestrator == "kubernetes":
                issues.append(
                    SpecIssue(
                        f"{SITE}.hosts[{name}].orchestrator",
                        "orchestrator kubernetes needs site.kubernetes",
                        "add site.kubernetes (api_server), or use orchestrator: slurm / none",
                    )
                )
    store = site.storage.object_store
    if store is not None and site.kubernetes is not None and not store.cidrs:
        issues.append(
            SpecIssue(
                f"{SITE}.storage.object_store.cidrs",
                f"the site's training pods cannot reach {store.endpoint}: its addresses are not declared, and "
                "the pods' egress policy allows only public HTTPS",
                "list the addresses the endpoint resolves to, e.g. cidrs: [10.64.8.30/32]",
            )
        )
    # Fabric partitions are per tenant: a Kubernetes team, or a Slurm account on a Slurm site.
    tenants, what = set(), "team"
    if spec.kubernetes is not None:
        tenants = set(spec.kubernetes.platform.teams)
    elif spec.scheduler is not None:
        tenants, what = set(spec.scheduler.accounts), "Slurm account"
    if site.fabric is not None:
        for tenant in site.fabric.partitions:
            if tenants and tenant not in tenants:
                issues.append(
                    SpecIssue(
                        f"{SITE}.fabric.partitions[{tenant}]",
                        f"{tenant} is not a {what}",
                        f"key partitions by {what}: {', '.join(sorted(tenants))}",
                    )
                )
    return resolved, issues  # partial on problems: later checks (quotas) still see the hosts that resolved


def _resolve_hosts(site: Site, catalog: Catalog) -> tuple[dict[str, ResolvedHost], list[SpecIssue]]:
    issues: list[SpecIssue] = []
    hosts: dict[str, ResolvedHost] = {}
    for name, host in site.hosts.items():
        path = f"{SITE}.hosts[{name}]"
        rack = site.racks.get(host.rack)
        if rack is None:
            issues.append(
                SpecIssue(f"{path}.rack", f"no rack named {host.rack!r}", f"use one of {', '.join(site.racks)}")
            )
        try:
            server = catalog.server(host.model)
        except CatalogError:
            servers = list(catalog.data.servers)
            issues.append(
                SpecIssue(
                    f"{path}.model",
                    f"unknown server model {host.model!r}" + unusual_characters(host.model),
                    suggestion(host.model, servers)
                    or f"use one of {', '.join(servers)}, or add it under catalog.servers",
                )
            )
            continue
        if not host.hcas and site.fabric is not None and host.role == "training" and server.compute_hcas:
            # The model's compute ports in rail order (catalog, with its source): a DGX need not list them.
            host = host.model_copy(update={"hcas": {device: rail for rail, device in enumerate(server.compute_hcas)}})
        if rack is not None:
            hosts[name] = ResolvedHost(
                name=name, spec=host, server=server, scalable_unit=rack.scalable_unit,
                node_power_kw=catalog.node_power_kw(host.model),
            )
    return hosts, issues


def _check_u_positions(site: Site, hosts: dict[str, ResolvedHost]) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    occupied: dict[str, dict[int, str]] = defaultdict(dict)
    for name, host in sorted(hosts.items(), key=lambda item: (item[1].spec.rack, item[1].spec.u_position)):
        path = f"{SITE}.hosts[{name}]"
        height = host.spec.u_height or host.server.rack_units
        if height is None:
            issues.append(
                SpecIssue(f"{path}.u_height", f"the catalog has no height for {host.spec.model}", "set u_height")
            )
            continue
        rack = site.racks[host.spec.rack]
        top = host.spec.u_position + height - 1
        if top > rack.units:
            issues.append(
                SpecIssue(
                    f"{path}.u_position",
                    f"U{host.spec.u_position}-U{top} runs past the top of rack {host.spec.rack} ({rack.units}U)",
                    f"mount it at U{rack.units - height + 1} or lower",
                )
            )
        taken = occupied[host.spec.rack]
        clash = sorted({taken[u] for u in range(host.spec.u_position, top + 1) if u in taken})
        if clash:
            issues.append(
                SpecIssue(
                    f"{path}.u_position",
                    f"U{host.spec.u_position}-U{top} overlaps {', '.join(clash)} in rack {host.spec.rack}",
                    "give each host its own rack units",
                )
            )
        for u in range(host.spec.u_position, top + 1):
            taken.setdefault(u, name)
    return issues


def _check_addresses(site: Site) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    nets = [ipaddress.ip_network(c) for c in site.cidrs]
    seen: dict[str, str] = {}
    for name, host in site.hosts.items():
        path = f"{SITE}.hosts[{name}]"
        for field, address in (("management_ip", host.management_ip), ("bmc_address", host.bmc_address)):
            if address in seen:
                issues.append(
                    SpecIssue(
                        f"{path}.{field}",
                        f"{address} is already {seen[address]}'s",
                        "give every host and BMC its own address",
                    )
                )
            seen.setdefault(address, f"{name}.{field}")
        if not any(ipaddress.ip_address(host.management_ip) in net for net in nets):
            issues.append(
                SpecIssue(
                    f"{path}.management_ip",
                    f"{host.management_ip} is in none of site.cidrs",
                    f"use an address in {', '.join(site.cidrs)} or add its range to site.cidrs",
                )
            )
    return issues


def _check_hcas(site: Site, hosts: dict[str, ResolvedHost]) -> list[SpecIssue]:
    fabric = site.fabric
    if fabric is None:
        return [
            SpecIssue(
                f"{SITE}.hosts[{name}].hcas", "HCAs listed but the site has no fabric", "add site.fabric or remove them"
            )
            for name, host in hosts.items()
            if host.spec.hcas
        ]
    cabled = {name: host for name, host in hosts.items() if host.spec.hcas or host.spec.role == "training"}
    rails_of = {name: sorted(host.spec.hcas.values()) for name, host in cabled.items()}
    wanted = list(range(fabric.rails))
    off = {name for name, rails in rails_of.items() if rails != wanted}
    too_many = {name for name, h in cabled.items() if h.server.hca_count and fabric.rails > h.server.hca_count}
    # When every host disagrees with site.fabric.rails the same way, the rails count is the one mistake.
    patterns = {tuple(rails_of[name]) for name in cabled}
    if cabled and off == set(cabled) and len(patterns) == 1:
        (rails,) = patterns
        if rails and list(rails) == list(range(len(rails))):
            models = sorted({h.spec.model for h in cabled.values()})
            return [
                SpecIssue(
                    f"{SITE}.fabric.rails",
                    f"{fabric.rails} rails, but every host cables {len(rails)} HCAs, to rails 0-{len(rails) - 1}"
                    + (
                        f" ({', '.join(models)} has {cabled[next(iter(too_many))].server.hca_count} compute HCAs)"
                        if too_many
                        else ""
                    ),
                    f"set rails: {len(rails)}",
                )
            ]
    issues: list[SpecIssue] = []
    for name in sorted(off):
        have = rails_of[name]
        hcas = hosts[name].spec.hcas
        if not hcas and hosts[name].spec.role != "training":
            continue
        missing = sorted(set(wanted) - set(have))
        doubled = sorted({r for r in have if have.count(r) > 1})
        beyond = sorted({r for r in have if r >= fabric.rails})
        detail = "; ".join(
            part
            for part in (
                f"no HCA on rail(s) {', '.join(map(str, missing))}" if missing else "",
                f"rail(s) {', '.join(map(str, doubled))} taken twice" if doubled else "",
                f"rail(s) {', '.join(map(str, beyond))} beyond the fabric's {fabric.rails}" if beyond else "",
            )
            if part
        )
        issues.append(
            SpecIssue(
                f"{SITE}.hosts[{name}].hcas",
                f"{len(hcas)} HCA(s) do not match the fabric's {fabric.rails} rails ({detail})",
                f"cable one HCA per rail 0..{fabric.rails - 1}",
            )
        )
    if too_many == set(cabled) and cabled:
        counts = sorted({h.server.hca_count for h in cabled.values()})
        issues.append(
            SpecIssue(
                f"{SITE}.fabric.rails",
                f"{fabric.rails} rails; the hosts have {', '.join(map(str, counts))} compute HCAs",
                f"use at most {min(counts)} rails",
            )
        )
    else:
        for name in sorted(too_many):
            host = hosts[name]
            issues.append(
                SpecIssue(
                    f"{SITE}.hosts[{name}].model",
                    f"{host.spec.model} has {host.server.hca_count} compute HCAs; the fabric has {fabric.rails} rails",
                    f"use a server with {fabric.rails} HCAs, or at most {host.server.hca_count} rails",
                )
            )
    return issues


def _check_feeds(site: ResolvedSite) -> list[SpecIssue]:
    """The loss of any one feed: every device keeps its N PSUs, every other feed stays within its
    continuous rating with the load it picks up."""
    issues: list[SpecIssue] = []
    for rack_name, rack in site.spec.racks.items():
        load = site.rack_load(rack_name)
        path = f"{SITE}.racks[{rack_name}]"
        for lost, result in feed_loss(load).items():
            if result.short:
                detail = ", ".join(f"{d} keeps {left} of the {need} PSUs it needs" for d, left, need in result.short)
                issues.append(
                    SpecIssue(
                        f"{path}.feeds",
                        f"losing feed {lost}: {detail} (PSUs spread over {len(load.feeds)} feeds in name order)",
                        "add feeds so that no feed carries more PSUs of a server than its spares (a DGX H100, 4+2: "
                        "three feeds of two PSUs each), or use servers with more spare PSUs",
                    )
                )
            for feed, room in sorted(result.feeds.items()):
                if not room.ok:
                    issues.append(
                        SpecIssue(
                            f"{path}.feeds.{feed}",
                            f"with feed {lost} lost, feed {feed} carries {room.load_kw:,.1f} kW against "
                            f"{room.limit_kw:,.1f} kW continuous ({CONTINUOUS_DERATE:.0%} of rating)",
                            f"move hosts to another rack, or rate feed {feed} at least "
                            f"{room.load_kw / CONTINUOUS_DERATE:,.1f} kW",
                        )
                    )
        if load.load_kw > rack.cooling_kw:
            issues.append(
                SpecIssue(
                    f"{path}.cooling_kw",
                    f"hosts draw {load.load_kw:,.1f} kW; the rack's cooling removes {rack.cooling_kw:,.1f} kW",
                    "move hosts or add cooling",
                )
            )
    return issues


def _check_pools(spec: ClusterSpec, site: ResolvedSite) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    for pool, hosts in site.pools().items():
        first = hosts[0]
        for host in hosts[1:]:
            if (host.spec.model, host.spec.role) != (first.spec.model, first.spec.role):
                issues.append(
                    SpecIssue(
                        f"{SITE}.hosts[{host.name}].pool",
                        f"pool {pool} mixes {first.spec.model} "
                        f"{first.spec.role} ({first.name}) with {host.spec.model} {host.spec.role}",
                        "give each server model and role its own pool",
                    )
                )
        if pool in spec.node_groups:
            issues.append(
                SpecIssue(
                    f"{SITE}.hosts[{first.name}].pool",
                    f"{pool} is also a cloud node group",
                    "give site pools and node groups distinct names",
                )
            )
    return issues


def check_hybrid(spec: ClusterSpec, site: ResolvedSite | None) -> list[SpecIssue]:
    """Site vs VPC addresses, object sync ends, and the burst worker cluster (MultiKueue)."""
    issues: list[SpecIssue] = []
    hybrid = spec.hybrid
    if hybrid is not None:
        gateway = hybrid.link.customer_gateway
        for field, problem in customer_gateway_problem(gateway.ip_address, gateway.bgp_asn, spec.region):
            if field == "bgp_asn":  # the address is the model's (no region needed); the ASN's reservation is per region
                message, _, fix = problem.rpartition("; ")
                issues.append(SpecIssue("cluster.hybrid.link.customer_gateway.bgp_asn", message, fix))
    if spec.site is not None and spec.network is not None:
        vpc = ipaddress.ip_network(spec.network.cidr)
        pods = spec.site.kubernetes.pod_cidrs if spec.site.kubernetes else []
        ranges = [(f"{SITE}.cidrs[{i}]", c) for i, c in enumerate(spec.site.cidrs)]
        ranges += [(f"{SITE}.kubernetes.pod_cidrs[{i}]", c) for i, c in enumerate(pods)]
        for path, cidr in ranges:
            if ipaddress.ip_network(cidr).overlaps(vpc):
                issues.append(
                    SpecIssue(
                        path,
                        f"{cidr} overlaps the VPC {vpc}",
                        "give the VPC and the site disjoint ranges: routes cannot tell them apart",
                    )
                )
    if hybrid is not None and hybrid.object_sync is not None:
        sync = hybrid.object_sync
        store = spec.site.storage.object_store if spec.site else None
        if store is None or sync.site_bucket not in store.buckets:
            known = ", ".join(store.buckets) if store else "no site object store"
            issues.append(
                SpecIssue(
                    "cluster.hybrid.object_sync.site_bucket",
                    f"no site bucket {sync.site_bucket!r}",
                    f"use one of: {known}",
                )
            )
        if sync.cloud_store not in spec.storage.object_stores:
            issues.append(
                SpecIssue(
                    "cluster.hybrid.object_sync.cloud_store",
                    f"no object store {sync.cloud_store!r}",
                    f"use one of {', '.join(spec.storage.object_stores) or '(none declared)'}",
                )
            )
    return issues + _check_burst(spec)


def _check_burst(spec: ClusterSpec) -> list[SpecIssue]:
    """A Slurm burst: slurm_burst_checks. A MultiKueue burst: burst groups form an EKS worker cluster the
    site's Kueue dispatches to: the join
    needs the worker's API reachable from the site over the link (a private endpoint, whose public
    DNS name EKS advertises with private addresses), and quotas of whole cloud nodes per team."""
    hybrid = spec.hybrid
    burst = hybrid.burst if hybrid else None
    issues: list[SpecIssue] = check_slurm_burst(spec)
    if isinstance(burst, SlurmBurstSpec):
        return issues
    eks_groups = {n: g for n, g in spec.node_groups.items() if g.orchestrator == "eks"}
    for name, group in spec.node_groups.items():
        if group.orchestrator == "kubernetes":
            issues.append(
                SpecIssue(
                    NODE_GROUPS.key(name).field("orchestrator"),
                    "cloud nodes cannot join the site's cluster across the VPN: no join token or bootstrap, no DNS "
                    "for the site's API, no pod routes, and a Kueue cohort spans one cluster only",
                    "use orchestrator: eks (the burst worker cluster the site dispatches to through MultiKueue), "
                    "or orchestrator: slurm with hybrid.burst.mechanism: slurm (cloud partitions of the site's "
                    "Slurm)",
                )
            )
    if eks_groups and burst is None:
        issues.append(
            SpecIssue("cluster.hybrid.burst", "EKS burst groups without a dispatch path", "add burst: {team_gpus: ...}")
        )
    if burst is None:
        return issues
    kube = spec.kubernetes
    if kube is None or not eks_groups:
        issues.append(
            SpecIssue(
                "cluster.hybrid.burst",
                "MultiKueue needs a worker cluster: a kubernetes section and node groups with orchestrator eks",
                "add kubernetes: and set orchestrator: eks on the burst groups",
            )
        )
        return issues
    if kube.endpoint != "private":
        issues.append(
            SpecIssue(
                "cluster.kubernetes.endpoint",
                "the site's Kueue must reach the worker's API over the link; with a public endpoint its DNS name "
                "resolves to public addresses from the site",
                "use endpoint: private (EKS then advertises the private addresses through the public DNS name)",
            )
        )
    catalog = load_catalog(spec.catalog or None)
    available: dict[str, tuple[int, int]] = {}
    for group in eks_groups.values():
        if not catalog.has_instance_type(group.instance_type):
            continue
        it = catalog.instance_type(group.instance_type)
        if it.gpu_model and it.gpu_count:
            total, _ = available.get(it.gpu_model, (0, it.gpu_count))
            available[it.gpu_model] = (total + group.active_nodes * it.gpu_count, it.gpu_count)
    teams = set(kube.platform.teams)
    asked: dict[str, int] = {}
    for team, models in burst.team_gpus.items():
        path = f"cluster.hybrid.burst.team_gpus[{team}]"
        if team not in teams:
            issues.append(SpecIssue(path, f"{team} is not a team", f"use one of {', '.join(sorted(teams))}"))
        for model, gpus in models.items():
            if model not in available:
                issues.append(
                    SpecIssue(
                        f"{path}[{model}]",
                        f"no burst group has {model} GPUs",
                        f"use one of {', '.join(sorted(available)) or '(none)'}",
                    )
                )
                continue
            if gpus % available[model][1]:
                issues.append(
                    SpecIssue(
                        f"{path}[{model}]",
                        f"{gpus} is not a whole number of nodes ({available[model][1]} GPUs each)",
                        f"use a multiple of {available[model][1]}",
                    )
                )
            asked[model] = asked.get(model, 0) + gpus
    for model, total in sorted(asked.items()):
        if model in available and total > available[model][0]:
            issues.append(
                SpecIssue(
                    "cluster.hybrid.burst.team_gpus",
                    f"teams' {model} burst quotas add up to {total} GPUs; the burst groups have {available[model][0]}",
                    "lower the quotas or add burst nodes",
                )
            )
    return issues


def _check_islands(site: Site) -> list[SpecIssue]:
    """Rail-optimized without spines: each rail's leaves are cut off from the others, since traffic between
    rails crosses the spines (RAIL_FABRIC_SOURCE). That is a valid design (rail islands, NCCL crossing rails
    over NVLink) only when declared, and every InfiniBand island, being its own subnet, needs its own subnet
    manager (SUBNET_MANAGER_SOURCE)."""
    fabric = site.fabric
    if fabric is None:
        return []
    path = f"{SITE}.fabric"
    issues: list[SpecIssue] = []
    if fabric.rail_islands and fabric.spines:
        return [SpecIssue(f"{path}.rail_islands", f"rail islands with {fabric.spines} spines", "remove one")]
    if fabric.rails > 1 and fabric.spines == 0 and not fabric.rail_islands:
        issues.append(
            SpecIssue(
                f"{path}.spines",
                f"{fabric.rails} rails and no spines: each rail's leaves form a separate fabric, unreachable from the "
                f"others (traffic between rails crosses the spines: {RAIL_FABRIC_SOURCE})",
                "add spines, or declare rail_islands: true (and on InfiniBand a subnet manager per rail in "
                "island_subnet_managers)",
            )
        )
    if fabric.rail_islands and fabric.kind == "infiniband":
        islands = {int(rail): hosts for rail, hosts in fabric.island_subnet_managers.items()}
        missing = [r for r in range(fabric.rails) if not islands.get(r)]
        if missing:
            issues.append(
                SpecIssue(
                    f"{path}.island_subnet_managers",
                    f"rail(s) {', '.join(map(str, missing))} have no subnet manager; an island without one never "
                    f"comes up ({SUBNET_MANAGER_SOURCE})",
                    "name a subnet_managers host for every rail, e.g. {'0': [ufm-01], '1': [ufm-01], ...}",
                )
            )
        for rail, hosts in sorted(islands.items()):
            unknown = [h for h in hosts if h not in fabric.subnet_managers]
            if rail >= fabric.rails or unknown:
                issues.append(
                    SpecIssue(
                        f"{path}.island_subnet_managers[{rail}]",
                        f"rail {rail}"
                        + (f" is beyond the fabric's {fabric.rails}" if rail >= fabric.rails else "")
                        + (f"; {', '.join(unknown)} not in subnet_managers" if unknown else ""),
                        f"use rails 0..{fabric.rails - 1} and hosts of subnet_managers",
                    )
                )
    if fabric.switch_power_kw is None:
        issues.append(
            SpecIssue(
                f"{path}.switch_power_kw",
                "the fabric's switches are not in the site's IT load",
                "set switch_power_kw to one switch's datasheet maximum, kW",
            )
        )
    return issues


def _check_equipment(site: Site) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    for name, unit in site.equipment.items():
        path = f"{SITE}.equipment[{name}]"
        if unit.rack is not None and unit.rack not in site.racks:
            issues.append(
                SpecIssue(f"{path}.rack", f"no rack named {unit.rack!r}", f"use one of {', '.join(site.racks)}")
            )
        if unit.psus_required > unit.psus:
            issues.append(
                SpecIssue(f"{path}.psus_required", f"{unit.psus_required} of {unit.psus} PSUs", "at most psus")
            )
    kinds = {e.kind for e in site.equipment.values()}
    if site.fabric is not None and site.fabric.kind == "infiniband" and "subnet_manager" not in kinds:
        issues.append(
            SpecIssue(
                f"{SITE}.equipment",
                "the subnet manager hosts (fabric.subnet_managers) draw no power in the plan",
                "list them, e.g. ufm: {kind: subnet_manager, count: 2, power_kw: <datasheet maximum>}",
            )
        )
    return issues
