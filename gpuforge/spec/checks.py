"""Checks that need the catalog, run before any resource is declared.

`resolve` returns a `ResolvedSpec`: the spec plus every fact the components need (the
subnet plan, each group's AZs and EFA count, the file system's size), so nothing
downstream derives them again. Every problem is collected; a bad spec raises `SpecError`
listing all of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from gpuforge.catalog import Catalog, CatalogError, InstanceType, load_catalog
from gpuforge.catalog.models import CatalogData

from . import registry
from .address_checks import check_host_addresses
from .capacity_checks import check_group_capacity, check_shared_reservations
from .errors import SpecError, SpecIssue, issues_from_validation_error
from .image_os_checks import check_image_os
from .models import KUBERNETES_ORCHESTRATORS, ClusterSpec, FsxLustre, NodeGroup
from .monitoring import check_monitoring
from .paths import CLUSTER, NODE_GROUPS
from .resolved import ResolvedNodeGroup, ResolvedSpec
from .resolved_site import ResolvedSite
from .scheduler_checks import check_scheduler, raw_duplicate_uids
from .site_checks import check_hybrid, check_site
from .sizing import size_lustre
from .slurm_os_checks import check_slurm_os
from .slurm_settings_checks import check_slurm_settings
from .software_checks import check_software
from .subnets import Subnets, plan_subnets
from .suggest import suggestion, unusual_characters


def parse_spec(data: Any, source: str = "") -> ClusterSpec:
    """Structural validation only; raises SpecError with every problem."""
    if not isinstance(data, Mapping):
        raise SpecError(
            [
                SpecIssue(
                    "cluster", "expected a mapping of cluster settings", "put the spec under config: gpuforge:cluster:"
                )
            ],
            source,
        )
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as exc:
        issues = issues_from_validation_error(exc, data, model=ClusterSpec)
        raise SpecError(registry.MODELS.tag(issues), source) from None


def resolve(data: Any, source: str = "") -> ResolvedSpec:
    """Parse and check a spec against the catalog; raises SpecError listing every problem."""
    try:
        spec = parse_spec(data, source)
    except SpecError as error:
        # Structural problems do not hide catalog ones: check what remains valid as well.
        beside = [*_catalog_issues_beside(data, error.issues), *registry.SCHEDULER.tag(raw_duplicate_uids(data))]
        raise SpecError([*error.issues, *beside], source) from None
    try:
        catalog = load_catalog(spec.catalog or None)
    except CatalogError as exc:
        raise SpecError(catalog_issues(exc), source) from None
    try:
        return _resolve(spec, catalog, source)
    except CatalogError as exc:  # a fact a check needed is missing from an overridden catalog
        raise SpecError(registry.CATALOG.tag(
            [SpecIssue("cluster.catalog", str(exc), "restore the catalog entry the override removed or broke")]
        ), source) from None


# Checks whose problems stand on their own (one group, one host, one store), safe to report beside
# structural problems; cross-section sums (quotas, power) wait for a spec that parses.
_LOCAL_CHECKS = (
    "cluster.node_groups[",
    "cluster.placement.",
    "cluster.network.availability_zones",
    "cluster.site.hosts[",
    "cluster.scheduler.controller.hosts[",
    "cluster.scheduler.users[",
    "cluster.scheduler.reservations[",
    "cluster.scheduler.login.hosts[",
    "cluster.monitoring.server.address",
    "cluster.hybrid.link.customer_gateway.",
    "cluster.storage.",
    "cluster.image_pipeline.build_instance_type",
    "cluster.catalog",
)


def _catalog_issues_beside(data: Any, structural: list[SpecIssue], rounds: int = 8) -> list[SpecIssue]:
    """Catalog problems of the parts of a spec that are structurally valid: the invalid parts are
    pruned (a field, else the map entry or list item holding it) until the rest parses."""
    if not isinstance(data, Mapping):
        return []
    pruned_data: Any = _copy(data)
    pruned: list[str] = [i.path for i in structural]
    keys: set[str] = set()
    for _ in range(rounds):
        try:
            spec = ClusterSpec.model_validate(pruned_data)
            break
        except ValidationError as exc:
            progressed = False
            for error in exc.errors(include_url=False):
                where = _data_prefix(pruned_data, error["loc"])
                if not where:
                    return []  # a top-level field (name, placement): nothing sensible remains to check
                parent = _at(pruned_data, where[:-1])
                if isinstance(parent, dict) and where[-1] in parent:
                    del parent[where[-1]]
                elif isinstance(parent, list) and isinstance(where[-1], int) and where[-1] < len(parent):
                    parent.pop(where[-1])
                else:
                    continue
                keys.add(str(where[-1]))
                progressed = True
            if not progressed:
                return []
    else:
        return []
    try:
        catalog = load_catalog(spec.catalog or None)
        _resolve(spec, catalog, "")
    except SpecError as error:
        return [
            issue
            for issue in error.issues
            if issue.path.startswith(_LOCAL_CHECKS)
            and not any(issue.path.startswith(p) or p.startswith(issue.path) for p in pruned)
            # a pruned section's name in any case ("needs a Kubernetes control plane" for kubernetes)
            and not any(re.search(rf"\b{re.escape(k)}\b", issue.message, re.IGNORECASE) for k in keys)
        ]
    except CatalogError:
        return []
    return []


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _data_prefix(data: Any, loc: tuple[int | str, ...]) -> list[int | str]:
    """The longest prefix of an error location that names values present in the data."""
    out: list[int | str] = []
    for part in loc:
        present = isinstance(data, dict) and part in data
        present |= isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if present:
            data = data[part]
        elif part == "[key]" or not isinstance(data, dict | list):
            break
        else:
            continue  # a union tag pydantic inserted
        out.append(part)
    return out


def _at(data: Any, path: list[int | str]) -> Any:
    for part in path:
        data = data[part]
    return data


def catalog_issues(exc: CatalogError) -> list[SpecIssue]:
    """Invalid catalog overrides, each at its path under cluster.catalog."""
    if exc.validation is None:
        return registry.CATALOG.tag([SpecIssue("cluster.catalog", str(exc), "correct the override")])
    error, document = exc.validation
    issues = issues_from_validation_error(error, document, root="cluster.catalog", model=CatalogData)
    return registry.CATALOG.tag(issues)


def _resolve(spec: ClusterSpec, catalog: Catalog, source: str) -> ResolvedSpec:
    issues: list[SpecIssue] = []
    placement_issues = registry.PLACEMENT.tag(_check_placement(spec, catalog))
    issues += placement_issues
    # An unknown region is one problem: checks that compare against the region's offerings would
    # each repeat it (one per node group, each listing every region).
    region_known = not any(i.path == "cluster.placement.region" for i in placement_issues)
    subnets: Subnets = {}
    if spec.network is not None:
        subnets, subnet_issues = plan_subnets(spec.network)
        issues += registry.SUBNETS.tag(subnet_issues)
    site, site_issues = check_site(spec, catalog)
    issues += registry.SITE.tag(site_issues)
    if spec.placement.kind == "hybrid":
        issues += registry.HYBRID.tag(check_hybrid(spec, site))
    groups: dict[str, ResolvedNodeGroup] = {}
    for name, group in (spec.node_groups if spec.network is not None and region_known else {}).items():
        resolved, group_issues = _resolve_group(spec, name, group, catalog)
        issues += registry.NODE_GROUP.tag(group_issues)
        if resolved is not None:
            groups[name] = resolved

    lustre, lustre_az = None, None
    fs = spec.storage.parallel_fs
    if fs is not None and spec.network is not None:
        training_gpus = sum(
            g.spec.active_nodes * g.gpus_per_node for g in groups.values() if g.spec.role == "training"
        )
        lustre, fs_issues = size_lustre(fs, training_gpus, catalog)
        issues += registry.LUSTRE.tag(fs_issues + _check_lustre(spec, fs, catalog))
        lustre_az = fs.availability_zone or _first_pinned_az(spec) or sorted(spec.network.availability_zones)[0]
    issues += registry.OBJECT_STORES.tag(_check_object_stores(spec, catalog))
    issues += registry.KUBERNETES.tag(_check_kubernetes(spec, groups, site))
    image_build_az, pipeline_issues = _check_image_pipeline(spec, catalog) if region_known else (None, [])
    issues += registry.IMAGE_PIPELINE.tag(pipeline_issues)
    scheduler, scheduler_issues = check_scheduler(spec, catalog, subnets, site)
    issues += registry.SCHEDULER.tag(scheduler_issues)
    issues += registry.BUCKET_NAMES.tag(_check_bucket_names(spec))
    issues += registry.MONITORING.tag(check_monitoring(spec))
    issues += registry.HOST_ADDRESSES.tag(check_host_addresses(spec))
    issues += registry.SOFTWARE.tag(check_software(spec, catalog))
    issues += registry.SLURM_OS.tag(check_slurm_os(spec, catalog))
    issues += registry.SLURM_SETTINGS.tag(check_slurm_settings(spec, catalog))
    issues += registry.RESERVATIONS.tag(check_shared_reservations(spec))
    issues += registry.IMAGE_OS.tag(check_image_os(spec))

    if issues:
        raise SpecError(issues, source)
    pue, pue_source = catalog.pue_default, catalog.data.host_power.pue_source
    if spec.power.pue is not None:
        pue, pue_source = spec.power.pue, "the stack's power.pue"
    elif spec.placement.kind == "onprem" and spec.site is not None:
        pue, pue_source = spec.site.power.pue, f"site {spec.site.name}'s measured PUE (site.power.pue)"
    return ResolvedSpec(
        spec=spec,
        catalog=catalog,
        subnets=subnets,
        node_groups=groups,
        lustre=lustre,
        lustre_az=lustre_az,
        pue=pue,
        site=site,
        image_build_az=image_build_az,
        scheduler=scheduler,
        pue_source=pue_source,
    )


def _known_regions(catalog: Catalog) -> set[str]:
    return {r for name in catalog.instance_type_names() for r in catalog.instance_type(name).regions()}


def _check_placement(spec: ClusterSpec, catalog: Catalog) -> list[SpecIssue]:
    kind = spec.placement.kind
    if kind in ("onprem", "hybrid") and spec.site is None:
        return [SpecIssue("cluster.site", f"{kind} placement needs the site model", "add site: (racks, hosts, ...)")]
    if kind == "onprem":
        cloud_only = {
            "network": spec.network is not None,
            "node_groups": bool(spec.node_groups),
            "hybrid": spec.hybrid is not None,
            "storage.parallel_fs": spec.storage.parallel_fs is not None,
            "storage.object_stores": bool(spec.storage.object_stores),
        }
        return [
            SpecIssue(f"cluster.{field}", "an AWS setting on onprem placement",
                      "remove it; on premises, hosts and storage endpoints live under site")
            for field, present in cloud_only.items()
            if present
        ]
    issues: list[SpecIssue] = []
    if kind == "aws" and (spec.site is not None or spec.hybrid is not None):
        issues.append(SpecIssue("cluster.site" if spec.site is not None else "cluster.hybrid",
                                "site and hybrid apply to onprem and hybrid placements", "remove it, or change kind"))
    if kind == "hybrid" and spec.hybrid is None:
        issues.append(SpecIssue("cluster.hybrid", "hybrid placement needs the site-to-cloud link", "add hybrid: link:"))
    if not spec.node_groups:
        issues.append(SpecIssue("cluster.node_groups", "no node group", "declare at least one node group"))
    for name, group in spec.node_groups.items():
        if group.renamed_from is not None and group.renamed_from in spec.node_groups:
            issues.append(
                SpecIssue(
                    NODE_GROUPS.key(name).field("renamed_from"),
                    f"{group.renamed_from!r} is still a node group of this stack",
                    "name the group's previous key, which no group uses any more",
                )
            )
    if spec.network is None:
        return [*issues, SpecIssue("cluster.network", "missing: the cloud side needs a VPC", "add it")]
    region = spec.region or ""
    regions = _known_regions(catalog)
    if region not in regions:
        return [
            *issues,
            SpecIssue(
                "cluster.placement.region",
                f"{region!r} is not a region the catalog knows" + unusual_characters(region),
                suggestion(region, regions) or f"use one of {', '.join(sorted(regions))}",
            ),
        ]
    for i, az in enumerate(spec.network.availability_zones):
        if not re.fullmatch(re.escape(region) + r"[a-z]", az):
            issues.append(
                SpecIssue(
                    f"cluster.network.availability_zones[{i}]",
                    f"{az} is not an AZ of {region}",
                    f"use {region}a, {region}b, ...",
                )
            )
    return issues


def _resolve_group(
    spec: ClusterSpec, name: str, group: NodeGroup, catalog: Catalog
) -> tuple[ResolvedNodeGroup | None, list[SpecIssue]]:
    path = NODE_GROUPS.key(name)
    region = spec.region or ""
    instance, unknown = _instance_type(catalog, group.instance_type, f"{path}.instance_type")
    if instance is None:
        return None, unknown

    issues: list[SpecIssue] = []
    offered = instance.azs_offering(region)
    if not offered:
        elsewhere = ", ".join(instance.regions()) or "nowhere in the catalog"
        issues.append(
            SpecIssue(
                f"{path}.instance_type",
                f"{group.instance_type} is not offered in {region}; offered in: {elsewhere}",
                "pick another instance type or region",
            )
        )
    assert spec.network is not None  # resolve() resolves groups only with a network
    network_azs = spec.network.availability_zones
    if group.availability_zone is not None:
        azs: tuple[str, ...] = (group.availability_zone,)
        if group.availability_zone not in network_azs:
            issues.append(
                SpecIssue(
                    f"{path}.availability_zone",
                    f"{group.availability_zone} is not in the network",
                    f"use one of {', '.join(network_azs)} or add it to network.availability_zones",
                )
            )
        elif offered and group.availability_zone not in offered:
            issues.append(
                SpecIssue(
                    f"{path}.availability_zone",
                    f"{group.instance_type} is not offered in {group.availability_zone}",
                    f"use one of {', '.join(offered)}",
                )
            )
    else:
        azs = tuple(az for az in sorted(network_azs) if az in offered)
        if offered and not azs:
            issues.append(
                SpecIssue(
                    f"{path}.instance_type",
                    f"{group.instance_type} is offered in none of the network's AZs",
                    f"add one of {', '.join(offered)} to network.availability_zones",
                )
            )

    efa = 0
    if group.fabric == "efa":
        if not instance.efa_supported:
            capable = [n for n in catalog.instance_type_names() if catalog.instance_type(n).efa_supported]
            issues.append(
                SpecIssue(
                    f"{path}.fabric",
                    f"{group.instance_type} has no EFA",
                    f"use fabric: none, or an EFA type such as {', '.join(capable[:6])}",
                )
            )
        elif group.efa_interfaces is not None and group.efa_interfaces > instance.max_efa_interfaces:
            issues.append(
                SpecIssue(
                    f"{path}.efa_interfaces",
                    f"{group.efa_interfaces} EFA interfaces asked; {group.instance_type} "
                    f"takes at most {instance.max_efa_interfaces}",
                    f"use at most {instance.max_efa_interfaces}, or omit it for the maximum",
                )
            )
        else:
            efa = group.efa_interfaces or instance.max_efa_interfaces
        if group.availability_zone is None:
            issues.append(
                SpecIssue(
                    f"{path}.availability_zone",
                    "an EFA group must live in one AZ",
                    f"pin one: availability_zone: {(azs or offered or ('<az>',))[0]}",
                )
            )
    elif group.efa_interfaces is not None:
        issues.append(SpecIssue(f"{path}.efa_interfaces", "set without fabric: efa", "remove it or set fabric: efa"))
    if group.fabric in ("infiniband", "roce"):
        issues.append(
            SpecIssue(
                f"{path}.fabric",
                f"{group.fabric} is an on-premises fabric; AWS offers EFA",
                "use fabric: efa (or none) on AWS placement",
            )
        )
    if group.placement_strategy == "cluster" and group.availability_zone is None and group.fabric != "efa":
        issues.append(
            SpecIssue(
                f"{path}.placement",
                "a cluster placement group lives in one AZ",
                "pin availability_zone, or use placement: spread / none",
            )
        )
    if group.capacity.type == "capacity_block" and group.placement not in (None, "none"):
        issues.append(
            SpecIssue(
                f"{path}.placement",
                f"{group.placement}: a Capacity Block's instances are already placed together, and a placement "
                "group can make its launches fail with insufficient capacity",
                "remove placement (a Capacity Block takes none)",
            )
        )
    reserved_placement = "cluster" if getattr(group.capacity, "placement_group", None) else "none"
    if group.capacity.type == "capacity_reservation" and group.placement not in (None, reserved_placement):
        issues.append(
            SpecIssue(
                f"{path}.placement",
                f"{group.placement}: a capacity reservation launches into the placement group it was created in "
                f"({getattr(group.capacity, 'placement_group', None) or 'none'}), not a new one",
                "remove placement; name the reservation's placement group in capacity.placement_group",
            )
        )
    issues += check_group_capacity(path, group)
    if group.is_reserved and group.availability_zone is None:
        issues.append(
            SpecIssue(
                f"{path}.capacity",
                "a capacity reservation belongs to one AZ",
                "pin availability_zone to the reservation's AZ",
            )
        )
    if issues:
        return None, issues
    image_parameter = (
        spec.image_pipeline.parameter_for(spec.name) if group.image.pipeline and spec.image_pipeline else None
    )
    try:
        power = catalog.node_power_kw(group.instance_type)
    except CatalogError as exc:  # an accelerator without a sourced power figure (Trainium)
        return None, [SpecIssue(f"{path}.instance_type", str(exc), "pick a type whose GPU the catalog knows")]
    resolved = ResolvedNodeGroup(
        name=name,
        spec=group,
        instance=instance,
        azs=azs,
        efa_interfaces=efa,
        node_power_kw=power,
        image_parameter=image_parameter,
    )
    return resolved, []


def _instance_type(catalog: Catalog, name: str, path: str) -> tuple[InstanceType | None, list[SpecIssue]]:
    """The catalog's instance type, or the problem with did-you-mean (any case, look-alike characters)."""
    if catalog.has_instance_type(name):
        return catalog.instance_type(name), []
    hint = suggestion(name, catalog.instance_type_names())
    return None, [
        SpecIssue(
            path,
            f"unknown instance type {name!r}" + unusual_characters(name),
            hint or "use an EC2 instance type from the catalog (gpuforge/catalog/data/aws_instance_types.json), "
            "or add its row under catalog.instance_types",
        )
    ]


# S3 bucket names are 3-63 characters; Pulumi's autonaming adds "-" and 7 random hex characters to the
# logical name (pulumi-terraform-bridge NewUniqueHex(name + "-", 7, maxlen)) and fails past 63.
BUCKET_NAME_MAX = 63
AUTONAME_SUFFIX = 8


def _check_bucket_names(spec: ClusterSpec) -> list[SpecIssue]:
    """Logical names of the buckets gpuforge/infra/aws declares, against S3's limit once Pulumi adds its suffix."""
    names = {
        f"cluster.storage.object_stores[{key}]": [f"{spec.name}-{key}-bucket"] for key in spec.storage.object_stores
    }
    for key, store in spec.storage.object_stores.items():
        if store.replication_region:
            names[f"cluster.storage.object_stores[{key}]"].append(f"{spec.name}-{key}-replica-bucket")
    if spec.image_pipeline is not None:
        names["cluster.image_pipeline"] = [f"{spec.name}-image-artifacts-bucket"]
    issues = []
    for path, logical in names.items():
        longest = max(logical, key=len)
        if len(longest) + AUTONAME_SUFFIX > BUCKET_NAME_MAX:
            over = len(longest) + AUTONAME_SUFFIX - BUCKET_NAME_MAX
            issues.append(
                SpecIssue(
                    path,
                    f"its bucket would be named {longest}-xxxxxxx ({len(longest) + AUTONAME_SUFFIX} characters with "
                    f"the suffix Pulumi adds); S3 bucket names are at most {BUCKET_NAME_MAX}",
                    f"shorten the store's key or the cluster name by {over} characters",
                )
            )
    return issues


def _first_pinned_az(spec: ClusterSpec) -> str | None:
    pinned = [g.availability_zone for g in spec.node_groups.values() if g.role == "training" and g.availability_zone]
    return pinned[0] if pinned else None


def _check_lustre(spec: ClusterSpec, fs: FsxLustre, catalog: Catalog) -> list[SpecIssue]:
    path = "cluster.storage.parallel_fs"
    rules = catalog.fsx_lustre(fs.deployment_type)
    assert spec.network is not None  # resolve() checks Lustre only with a network
    issues = []
    if fs.availability_zone is not None and fs.availability_zone not in spec.network.availability_zones:
        issues.append(
            SpecIssue(
                f"{path}.availability_zone",
                f"{fs.availability_zone} is not in the network",
                f"use one of {', '.join(spec.network.availability_zones)}",
            )
        )
    if fs.efa and not rules.efa_supported:
        issues.append(
            SpecIssue(
                f"{path}.efa",
                f"EFA-enabled Lustre needs PERSISTENT_2, not {fs.deployment_type}",
                "set deployment_type: PERSISTENT_2 or efa: false",
            )
        )
    eks_groups = sorted(n for n, g in spec.node_groups.items() if g.orchestrator == "eks")
    if fs.efa and eks_groups:
        # EKS nodes run the EKS-optimized AMI with nodeadm and none of the playbooks, so nothing installs
        # gpuforge-lnet.service there: the EKS User Guide's EFA tuning ("Optimize Amazon FSx for Lustre
        # performance on nodes (EFA)") configures LNet over EFA with a script in each node group's
        # bootstrap, which gpuforge does not ship. The mount entry requires the unit (docs/wiring.md).
        issues.append(
            SpecIssue(
                f"{path}.efa",
                f"an EFA-enabled file system on EKS node groups ({', '.join(eks_groups)}): EKS nodes get no LNet "
                "over EFA from gpuforge (the EKS User Guide's 'Optimize Amazon FSx for Lustre performance on "
                "nodes (EFA)' sets it up with a bootstrap script per node group), and their mount requires "
                "gpuforge-lnet.service",
                "set efa: false (EKS nodes then reach Lustre over tcp), or run the groups that need EFA Lustre "
                "with orchestrator slurm or none",
            )
        )
    if fs.metadata is not None and fs.deployment_type != "PERSISTENT_2":
        issues.append(
            SpecIssue(
                f"{path}.metadata",
                f"{fs.deployment_type} has no metadata configuration",
                "remove metadata, or use PERSISTENT_2",
            )
        )
    if fs.efa and fs.metadata is None and rules.efa_supported:
        issues.append(
            SpecIssue(
                f"{path}.metadata",
                "EFA-enabled Lustre needs a metadata configuration",
                "add metadata: {mode: AUTOMATIC}",
            )
        )
    if fs.metadata is not None and fs.metadata.iops is not None and not rules.metadata_iops_valid(fs.metadata.iops):
        issues.append(
            SpecIssue(
                f"{path}.metadata.iops",
                f"{fs.metadata.iops} is not a valid metadata IOPS value",
                "use 1500, 3000, 6000, 12000, or a multiple of 12000 up to 192000",
            )
        )
    paths_seen: dict[str, str] = {}
    for key, dra in fs.data_repository_associations.items():
        mine = dra.file_system_path.rstrip("/") + "/"
        nested = next(
            (k for p, k in paths_seen.items() if p.rstrip("/") + "/" != mine and
             (mine.startswith(p.rstrip("/") + "/") or (p.rstrip("/") + "/").startswith(mine))),
            None,
        )
        if nested is not None:
            other = fs.data_repository_associations[nested].file_system_path
            issues.append(
                SpecIssue(
                    f"{path}.data_repository_associations[{key}].file_system_path",
                    f"{dra.file_system_path} overlaps {other} of {nested}: FSx links a directory tree to one bucket, "
                    "so associations may not nest",
                    "give each association its own top-level directory",
                )
            )
        dra_path = f"{path}.data_repository_associations[{key}]"
        if not rules.dra_supported:
            issues.append(
                SpecIssue(
                    dra_path,
                    f"{fs.deployment_type} does not support data repository associations",
                    "use SCRATCH_2 or PERSISTENT_2, or remove the association",
                )
            )
        if dra.object_store not in spec.storage.object_stores:
            issues.append(
                SpecIssue(
                    f"{dra_path}.object_store",
                    f"no object store named {dra.object_store!r}",
                    f"use one of {', '.join(spec.storage.object_stores) or '(none declared)'}",
                )
            )
        if dra.file_system_path.rstrip("/") in [p.rstrip("/") for p in paths_seen]:
            issues.append(
                SpecIssue(
                    f"{dra_path}.file_system_path",
                    f"{dra.file_system_path} is already linked by {paths_seen[dra.file_system_path]}",
                    "give each association its own directory",
                )
            )
        paths_seen.setdefault(dra.file_system_path, key)
    if len(fs.data_repository_associations) > 8:
        issues.append(
            SpecIssue(
                f"{path}.data_repository_associations",
                "more than 8 associations",
                "FSx allows 8 per file system: merge prefixes",
            )
        )
    return issues


def _check_object_stores(spec: ClusterSpec, catalog: Catalog) -> list[SpecIssue]:
    issues = []
    regions = _known_regions(catalog)
    for key, store in spec.storage.object_stores.items():
        path = f"cluster.storage.object_stores[{key}]"
        target = store.replication_region
        if target is None:
            continue
        if not store.versioning:
            issues.append(
                SpecIssue(
                    f"{path}.replication_region", "replication needs versioning on the bucket", "set versioning: true"
                )
            )
        if target == spec.region:
            issues.append(
                SpecIssue(
                    f"{path}.replication_region", f"{target} is the cluster's own region", "replicate to another region"
                )
            )
        elif target not in regions:
            issues.append(
                SpecIssue(
                    f"{path}.replication_region",
                    f"{target!r} is not a known region" + unusual_characters(target),
                    suggestion(target, regions) or f"use one of {', '.join(sorted(regions))}",
                )
            )
    return issues


def _check_kubernetes(
    spec: ClusterSpec, groups: dict[str, ResolvedNodeGroup], site: ResolvedSite | None = None
) -> list[SpecIssue]:
    """Orchestrators against the kubernetes section, and team GPU quotas against the nodes that serve them
    (EKS groups, or the site's Kubernetes hosts; hybrid burst nodes lend through the cohort, they add no quota)."""
    issues: list[SpecIssue] = []
    kube = spec.kubernetes
    kube_groups = {n: g for n, g in spec.node_groups.items() if g.orchestrator in KUBERNETES_ORCHESTRATORS}
    for name, group in kube_groups.items():
        path = NODE_GROUPS.key(name)
        if group.orchestrator == "kubernetes":
            if spec.placement.kind != "hybrid":
                issues.append(
                    SpecIssue(
                        f"{path}.orchestrator",
                        "orchestrator kubernetes joins the site's cluster; only hybrid placement has one",
                        "use orchestrator: eks on aws placement",
                    )
                )
            continue
        if kube is None:
            issues.append(
                SpecIssue(
                    f"{path}.orchestrator",
                    f"orchestrator {group.orchestrator} needs a Kubernetes control plane",
                    "add a kubernetes: section (version, endpoint, platform), or use orchestrator: none",
                )
            )
        if group.image.ami_id or group.image.ssm_parameter or group.image.pipeline:
            issues.append(
                SpecIssue(
                    f"{path}.image",
                    "an EKS managed node group runs the EKS accelerated AMI (AL2023 NVIDIA), which joins the "
                    "cluster by itself; a custom image would need its own bootstrap",
                    "remove image from this group",
                )
            )
    if kube is None:
        return issues
    site_gpus = site.gpus_by_model() if site is not None else {}
    if not kube_groups and not site_gpus:
        issues.append(
            SpecIssue(
                "cluster.kubernetes",
                "a Kubernetes control plane with no node group to run on",
                "set orchestrator: eks on the node groups that should join it, or remove kubernetes",
            )
        )
    # GPUs per model on the Kubernetes nodes (active nodes only: spares back up, they add no quota).
    available: dict[str, int] = {}
    per_node: dict[str, int] = {}
    for site_model, (total, each) in site_gpus.items():
        available[site_model], per_node[site_model] = available.get(site_model, 0) + total, each
    for name in kube_groups:
        # Hybrid: EKS groups form the burst worker cluster; their quotas are hybrid.burst.team_gpus.
        if kube_groups[name].orchestrator != "eks" or spec.placement.kind == "hybrid":
            continue
        resolved = groups.get(name)
        model = resolved.instance.gpu_model if resolved else None
        if resolved is None or model is None or resolved.gpus_per_node == 0:
            continue
        available[model] = available.get(model, 0) + resolved.spec.active_nodes * resolved.gpus_per_node
        per_node[model] = resolved.gpus_per_node
    unresolved = [n for n, g in kube_groups.items() if g.orchestrator == "eks" and n not in groups]
    if unresolved and spec.placement.kind != "hybrid":
        # A group that did not resolve (its own problem is reported at its path) leaves the GPU count
        # unknown: judging the quotas against the rest would report a second, unrelated problem.
        return issues
    asked: dict[str, int] = {}
    teams_path = CLUSTER.field("kubernetes", "platform", "teams")
    for team_name, team in kube.platform.teams.items():
        for model, gpus in team.gpu_quota.items():
            path = teams_path.key(team_name).field("gpu_quota").key(model)
            if model not in available:
                known = ", ".join(sorted(available)) or "none"
                issues.append(
                    SpecIssue(
                        path,
                        f"no Kubernetes node group has {model} GPUs (GPU models on orchestrator eks groups: {known})",
                        "use one of those models, or set orchestrator: eks on a group with them",
                    )
                )
                continue
            if gpus % per_node[model]:
                issues.append(
                    SpecIssue(
                        path,
                        f"{gpus} is not a whole number of {model} nodes ({per_node[model]} GPUs each)",
                        f"use a multiple of {per_node[model]}, so multi-node jobs are admitted whole",
                    )
                )
            asked[model] = asked.get(model, 0) + gpus
    for model, total in sorted(asked.items()):
        if total > available.get(model, 0):
            issues.append(
                SpecIssue(
                    teams_path,
                    f"teams' {model} quotas add up to {total} GPUs; the Kubernetes node groups have "
                    f"{available[model]} active {model} GPUs",
                    "lower the quotas or add nodes; quotas are guarantees, not a wish list",
                )
            )
    return issues


def _check_image_pipeline(spec: ClusterSpec, catalog: Catalog) -> tuple[str | None, list[SpecIssue]]:
    """References to the pipeline, and the pipeline's build instance against the catalog and the network.
    Returns the AZ of the build instance (the first network AZ, sorted, that offers its type)."""
    issues = [
        SpecIssue(
            NODE_GROUPS.key(name).field("image", "pipeline"),
            "the group's image references the image pipeline, but the cluster has no image_pipeline section",
            "add image_pipeline: {} (bakes playbooks/bake-image.yml on Ubuntu 22.04), or set ami_id / ssm_parameter",
        )
        for name, group in spec.node_groups.items()
        if group.image.pipeline and spec.image_pipeline is None
    ]
    pipeline = spec.image_pipeline
    if pipeline is None:
        return None, issues
    path = "cluster.image_pipeline"
    if spec.placement.kind != "aws" or spec.network is None:
        return None, [
            *issues,
            SpecIssue(path, "the image pipeline is EC2 Image Builder: it needs aws placement and a network",
                      "remove image_pipeline, or bake with gpuforge bake --target rootfs:PATH"),
        ]
    region = spec.region or ""
    offered: tuple[str, ...] | list[str] = ()
    instance, unknown = _instance_type(catalog, pipeline.build_instance_type, f"{path}.build_instance_type")
    issues += unknown
    if instance is not None:
        offered = instance.azs_offering(region)
    build_azs = [az for az in sorted(spec.network.availability_zones) if az in offered]
    if instance is not None and not offered:
        elsewhere = ", ".join(instance.regions()) or "nowhere in the catalog"
        issues.append(
            SpecIssue(
                f"{path}.build_instance_type",
                f"{pipeline.build_instance_type} is not offered in {region}; offered in: {elsewhere}",
                "pick a build instance type offered in the cluster's region",
            )
        )
    elif instance is not None and not build_azs:
        issues.append(
            SpecIssue(
                f"{path}.build_instance_type",
                f"{pipeline.build_instance_type} is offered in none of the network's AZs",
                f"pick another type, or add one of {', '.join(offered)} to network.availability_zones",
            )
        )
    dcgm = ("dcgm_exporter_binary_url", "dcgm_exporter_binary_checksum")
    if pipeline.extra_vars.get("dcgm_exporter_enabled", True) and not all(pipeline.extra_vars.get(v) for v in dcgm):
        issues.append(
            SpecIssue(
                f"{path}.extra_vars",
                "the dcgm_exporter role needs a published binary (NVIDIA ships none) and would fail the bake",
                "set dcgm_exporter_binary_url and dcgm_exporter_binary_checksum, or dcgm_exporter_enabled: false",
            )
        )
    if spec.network.nat == "none":
        issues.append(
            SpecIssue(
                path,
                "the build instance installs packages (apt, NVIDIA's and AWS's repositories, PyPI) through NAT, "
                "and network.nat is none",
                "set network.nat: single (or per_az)",
            )
        )
    return (build_azs[0] if build_azs and not issues else None), issues
