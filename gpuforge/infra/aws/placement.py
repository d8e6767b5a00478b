"""Compose the AWS components for one cluster and return the stack outputs."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.catalog.flows import load_flows
from gpuforge.catalog.tokens import CLUSTER_TAG, ENVIRONMENT_TAG
from gpuforge.infra.k8s import GpuPlatform, GpuPlatformArgs, GpuPool, ParallelFsVolume
from gpuforge.infra.k8s.alerting import declare_alert_routing, operator_monitoring
from gpuforge.infra.k8s.monitoring_stack import monitoring_stack_for
from gpuforge.infra.k8s.platform import BlockWindow
from gpuforge.infra.k8s.scheduling import Taint
from gpuforge.render.labels import NODE_LABEL_GROUP
from gpuforge.render.training_job import CHECKPOINT_GRACE_SECONDS
from gpuforge.spec import ResolvedNodeGroup, ResolvedSpec
from gpuforge.spec.models import Tier
from gpuforge.spec.monitoring import NodeGroupServer, receiver_secret_names

from .alert_secrets import AlertSecrets, AlertSecretsArgs
from .bastion import Bastion, BastionArgs
from .cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from .eks import EksCluster, EksClusterArgs
from .iam import fsx_csi_controller_policy
from .image_pipeline import ImagePipeline, ImagePipelineArgs
from .irsa import ROLE_ARN_ANNOTATION, ServiceAccount, ServiceAccountRoles, ServiceAccountRolesArgs, controller_role
from .metrics_archive import MetricsArchive, MetricsArchiveArgs
from .network import SegmentedNetwork, SegmentedNetworkArgs
from .node_group import (
    EksAttachment,
    GpuNodeGroup,
    GpuNodeGroupArgs,
    LustreMount,
    node_group_props,
    node_taints,
)
from .session_manager import SessionManagerPreferences, SessionManagerPreferencesArgs
from .slurm import SlurmControlPlane, SlurmControlPlaneArgs
from .storage import (
    ClusterKey,
    LustreFileSystem,
    LustreFileSystemArgs,
    ObjectStore,
    ObjectStoreArgs,
    autoscaling_service_linked_role,
)

READ_PURPOSES = ("data",)
WRITE_PURPOSES = ("checkpoints", "artifacts")


def build_aws_cluster(name: str, resolved: ResolvedSpec, parent: pulumi.Resource) -> dict[str, Any]:
    return build_aws_network_and_cluster(name, resolved, parent).outputs


@dataclass(frozen=True)
class AwsCluster:
    """What a composer (hybrid) attaches to: the stack outputs, the network, and the EKS cluster
    with its platform where the spec has one."""

    outputs: dict[str, Any]
    network: SegmentedNetwork
    eks: EksCluster | None
    platform: GpuPlatform | None
    kubernetes_provider: k8s.Provider | None = None  # the EKS cluster's, once its nodes and add-ons exist
    node_role_names: dict[str, pulumi.Output[str]] = field(default_factory=dict)  # node group -> its IAM role


def build_aws_network_and_cluster(name: str, resolved: ResolvedSpec, parent: pulumi.Resource) -> AwsCluster:
    """The stack outputs, and the network, EKS cluster and platform for a composer (hybrid)."""
    spec = resolved.spec
    assert spec.network is not None  # resolve() admits aws and hybrid placement only with a network
    region = spec.region
    assert region is not None  # resolve() admits only aws placement here
    tags = {CLUSTER_TAG: spec.name, ENVIRONMENT_TAG: spec.environment, **spec.tags}

    def regional_provider(suffix: str, in_region: str) -> aws.Provider:
        return aws.Provider(
            f"{name}-{suffix}",
            region=in_region,
            default_tags=aws.ProviderDefaultTagsArgs(tags=tags),
            opts=pulumi.ResourceOptions(parent=parent),
        )

    provider = regional_provider("aws", region)
    child = pulumi.ResourceOptions(parent=parent, providers={"aws": provider})

    fs_spec = spec.storage.parallel_fs
    # FSx reads and writes the SSE-KMS buckets of its data repository associations through its own
    # service-linked role, which the key policy must then name.
    dra_to_kms_buckets = fs_spec is not None and any(
        spec.storage.object_stores[d.object_store].kms for d in fs_spec.data_repository_associations.values()
    )
    placement = spec.placement
    creates_role = getattr(placement, "autoscaling_service_linked_role", "create") == "create"
    autoscaling_role = autoscaling_service_linked_role(name, child) if creates_role else None
    key = ClusterKey(
        f"{name}-kms",
        region,
        spec.protected,
        fsx_data_repositories=dra_to_kms_buckets,
        autoscaling_role=autoscaling_role,
        opts=child,
    )
    network = SegmentedNetwork(
        f"{name}-net",
        SegmentedNetworkArgs(
            spec.network,
            region,
            resolved.subnets,
            key.arn,
            lustre=fs_spec is not None,
            monitoring=_monitoring_group(resolved) is not None,
        ),
        opts=child,
    )

    replica_regions = sorted(
        {s.replication_region for s in spec.storage.object_stores.values() if s.replication_region}
    )
    replicas: dict[str, tuple[aws.Provider, ClusterKey]] = {}
    for replica_region in replica_regions:
        replica_provider = regional_provider(f"aws-{replica_region}", replica_region)
        replica_opts = pulumi.ResourceOptions(parent=parent, providers={"aws": replica_provider})
        replicas[replica_region] = (
            replica_provider,
            ClusterKey(
                f"{name}-kms-{replica_region}",
                replica_region,
                spec.protected,
                autoscaling_role=autoscaling_role,
                opts=replica_opts,
            ),
        )

    stores: dict[str, ObjectStore] = {}
    for key_name, store in spec.storage.object_stores.items():
        replica = replicas.get(store.replication_region or "")
        stores[key_name] = ObjectStore(
            f"{name}-{key_name}",
            ObjectStoreArgs(
                spec=store,
                kms_key_arn=key.arn,
                protected=spec.protected,
                replica_provider=replica[0] if replica else None,
                replica_kms_key_arn=replica[1].arn if replica else None,
            ),
            opts=child,
        )

    lustre: LustreFileSystem | None = None
    fs = spec.storage.parallel_fs
    if fs is not None and resolved.lustre is not None and resolved.lustre_az is not None:
        sg = network.security_group_ids
        lustre = LustreFileSystem(
            f"{name}-lustre",
            LustreFileSystemArgs(
                spec=fs,
                sizing=resolved.lustre,
                subnet_id=network.subnet_ids["storage"][resolved.lustre_az],
                security_group_ids=[sg["storage"], sg["efa"]] if fs.efa else [sg["storage"]],
                kms_key_arn=key.arn,
                buckets={k: s.bucket for k, s in stores.items()},
                protected=spec.protected,
            ),
            opts=child,
        )

    def bucket_arns(purposes: tuple[str, ...]) -> list[pulumi.Input[str]]:
        return [stores[k].arn for k, store in spec.storage.object_stores.items() if store.purpose in purposes]

    eks: EksCluster | None = None
    kube = spec.kubernetes
    if kube is not None:
        # Control plane interfaces in the private management tier, one subnet per AZ.
        eks = EksCluster(
            f"{name}-eks",
            EksClusterArgs(
                spec=kube,
                region=region,
                subnet_ids=[network.subnet_ids["management"][az] for az in sorted(spec.network.availability_zones)],
                kms_key_arn=key.arn,
                protected=spec.protected,
                tags=tags,
            ),
            opts=child,
        )

    sched = resolved.scheduler
    bastion: Bastion | None = None
    if sched is not None and sched.spec.login.bastion:
        bastion = Bastion(
            f"{name}-bastion",
            BastionArgs(
                cluster=spec.name,
                scheduler=sched.spec,
                allowed_ingress=spec.network.allowed_ingress,
                vpc_id=network.vpc_id,
                subnet_id=network.subnet_ids["ingress"][sorted(spec.network.availability_zones)[0]],
                kms_key_arn=key.arn,
                tags=tags,
            ),
            opts=child,
        )

    # The Slurm control plane before the node groups: their user data mounts its /home (EFS).
    slurm_outputs: dict[str, Any] = {}
    slurm: SlurmControlPlane | None = None
    # An AWS control plane only for controllers on AWS: a hybrid Slurm burst keeps its controller on the
    # site (gpuforge/infra/hybrid/slurm_burst.py) and hands this function no scheduler.
    if sched is not None:
        slurm = SlurmControlPlane(
            f"{name}-slurm",
            SlurmControlPlaneArgs(
                resolved=resolved,
                scheduler=sched,
                subnet_ids=network.subnet_ids,
                security_group_ids=network.security_group_ids,
                kms_key_arn=key.arn,
                vpc_id=network.vpc_id,
                tags=tags,
            ),
            opts=child,
        )
        slurm_outputs["slurm"] = {"controllers": {c.name: c.address for c in sched.controllers}, **slurm.outputs}
    slurm_groups = {*sched.groups, *sched.login_groups} if sched is not None else set()

    groups: dict[str, GpuNodeGroup] = {}
    for group_name, group in resolved.node_groups.items():
        tier: Tier = "compute" if group.spec.role == "training" else "management"
        # The monitoring nodes sit in the management tier's subnets with a group of their own.
        tier_group = "monitoring" if group_name == _monitoring_group(resolved) else tier
        sgs: list[pulumi.Input[str]] = [network.security_group_ids[tier_group]]
        if group.efa_interfaces:
            sgs.append(network.security_group_ids["efa"])
        if bastion is not None and sched is not None and group_name in sched.login_groups:
            sgs.append(bastion.login_security_group_id)  # SSH from the bastion reaches login nodes only
        groups[group_name] = GpuNodeGroup(
            f"{name}-{group_name}",
            GpuNodeGroupArgs(
                group=group,
                cluster=spec.name,
                subnet_ids=[network.subnet_ids[tier][az] for az in group.azs],
                security_group_ids=sgs,
                kms_key_arn=key.arn,
                read_bucket_arns=bucket_arns(READ_PURPOSES),
                write_bucket_arns=bucket_arns(WRITE_PURPOSES),
                lustre=LustreMount(lustre.dns_name, lustre.mount_name, efa=fs.efa) if lustre and fs else None,
                home=slurm.home_file_system_id if slurm is not None and group_name in slurm_groups else None,
                slurm_controllers=(
                    {c.name: c.address for c in sched.controllers}
                    if sched is not None and slurm is not None and group_name in slurm_groups
                    else {}
                ),
                tags=tags,
                eks=(
                    EksAttachment(
                        eks.name,
                        eks.cluster_security_group_id,
                        kube.version,
                        eks.network_addons,
                        autoscaler_cluster=f"{name}-eks" if group.spec.is_elastic else None,
                    )
                    if eks is not None and kube is not None and group_name in resolved.kubernetes_node_groups
                    else None
                ),
            ),
            opts=_keep_identity(child, f"{name}-{group.spec.renamed_from}" if group.spec.renamed_from else None),
        )

    if slurm is not None:
        slurm.allow_munge_read(resolved, {n: g.role_name for n, g in groups.items() if n in slurm_groups})

        # SSM is how people reach login nodes (and admins every node). The preferences hold for every
        # instance of the account and region, so every node role of the cluster may write the session log.
        SessionManagerPreferences(
            f"{name}-ssm-sessions",
            SessionManagerPreferencesArgs(
                cluster=spec.name,
                kms_key_arn=key.arn,
                node_role_names={
                    "controllers": slurm.controller_role_name,
                    **{n: g.role_name for n, g in groups.items()},
                },
                renamed_from={n: g.spec.renamed_from for n, g in resolved.node_groups.items() if g.spec.renamed_from},
                protected=spec.protected,
                tags=tags,
            ),
            opts=child,
        )

    image_pipeline = _image_pipeline(name, resolved, network, key.arn, tags, child)
    if bastion is not None and "slurm" in slurm_outputs:
        slurm_outputs["slurm"]["bastion"] = bastion.public_ip

    platform: GpuPlatform | None = None
    roles: ServiceAccountRoles | None = None
    kube_provider: k8s.Provider | None = None
    if eks is not None and kube is not None:
        kube_provider = eks.kubernetes_provider(
            f"{name}-eks",
            nodes=[groups[g] for g in sorted(resolved.kubernetes_node_groups)],
            gpu_taints=sorted({t for pool in _gpu_pools(resolved) for t in pool.taints}, key=str),
        )
        teams = kube.platform.teams
        if teams:
            # Training pods reach the buckets through their team's role, never the node role.
            roles = ServiceAccountRoles(
                f"{name}-irsa",
                ServiceAccountRolesArgs(
                    oidc_provider_arn=eks.oidc_provider_arn,
                    oidc_issuer=eks.oidc_issuer,
                    service_accounts={
                        team: ServiceAccount(t.namespace_for(team), kube.platform.service_account)
                        for team, t in teams.items()
                    },
                    kms_key_arn=key.arn,
                    read_bucket_arns=bucket_arns(READ_PURPOSES),
                    write_bucket_arns=bucket_arns(WRITE_PURPOSES),
                    tags=tags,
                ),
                opts=child,
            )
        platform = GpuPlatform(
            f"{name}-platform",
            GpuPlatformArgs(
                platform=kube.platform,
                fabric="efa" if any(g.efa_interfaces for g in resolved.kubernetes_node_groups.values()) else "none",
                pools=_gpu_pools(resolved),
                parallel_fs_volume=(
                    _fsx_volume(
                        resolved,
                        lustre,
                        _system_group_selector(resolved),
                        _fsx_csi_role(name, eks, lustre, tags, child),
                    )
                    if lustre
                    else None
                ),
                controller_node_selector=_system_group_selector(resolved),
                service_account_annotations=(
                    {team: {ROLE_ARN_ANNOTATION: arn} for team, arn in roles.role_arns.items()} if roles else {}
                ),
                dcgm_service_monitor=not operator_monitoring(resolved),
                monitoring=monitoring_stack_for(resolved),
            ),
            opts=pulumi.ResourceOptions(parent=parent, providers={"kubernetes": kube_provider}),
        )
        if any(g.spec.is_elastic for g in resolved.kubernetes_node_groups.values()):
            ClusterAutoscaler(
                f"{name}-autoscaler",
                ClusterAutoscalerArgs(
                    cluster=f"{name}-eks",
                    region=region,
                    kubernetes_version=kube.version,
                    oidc_provider_arn=eks.oidc_provider_arn,
                    oidc_issuer=eks.oidc_issuer,
                    node_selector=_system_group_selector(resolved),
                    after=(platform.provisioning_crd,) if platform.provisioning_crd else (),
                    tags=tags,
                ),
                opts=pulumi.ResourceOptions(parent=parent, providers={"kubernetes": kube_provider}),
            )

    kubernetes_outputs: dict[str, Any] = {}
    if eks is not None:
        kubernetes_outputs["kubernetes"] = {
            "clusterName": eks.name,
            "endpoint": eks.endpoint,
            "oidcProviderArn": eks.oidc_provider_arn,
            "teamNamespaces": platform.namespaces if platform else {},
            "serviceAccountRoles": roles.role_arns if roles else {},
        }
    pipeline_outputs: dict[str, Any] = {}
    if image_pipeline is not None:
        pipeline_outputs["imagePipeline"] = {
            "pipelineArn": image_pipeline.pipeline_arn,
            "ssmParameter": image_pipeline.parameter_name,
        }
    monitoring_outputs: dict[str, Any] = {}
    if spec.monitoring is not None:
        server = spec.monitoring.server
        reader = groups[server.node_group] if isinstance(server, NodeGroupServer) else None
        secrets = AlertSecrets(
            f"{name}-alert-secrets",
            AlertSecretsArgs(
                spec.name,
                receiver_secret_names(spec.monitoring),
                key.arn,
                spec.protected,
                reader_node_group=server.node_group if isinstance(server, NodeGroupServer) else None,
                reader_role=reader.role_name if reader else None,
            ),
            opts=child,
        )
        if reader is not None and isinstance(server, NodeGroupServer):
            _service_discovery_policy(f"{name}-{server.node_group}", reader.role_name, child)
        monitoring_outputs["monitoring"] = {"server": spec.monitoring.server.kind, "alertSecretArns": secrets.arns}
        if spec.monitoring.remote_write is not None and reader is not None:
            # Checked before anything is declared: remote_write needs a node group server (check_monitoring).
            archive = MetricsArchive(
                f"{name}-metrics-archive",
                MetricsArchiveArgs(spec.name, reader.role_name, spec.protected),
                opts=child,
            )
            # The prometheus role's prometheus_remote_write_url (gpuforge render monitoring leaves a placeholder).
            monitoring_outputs["monitoring"]["remoteWrite"] = {
                "workspaceArn": archive.workspace_arn,
                "url": archive.url,
            }
        if kube_provider is not None:
            declare_alert_routing(
                f"{name}-alert-routing",
                resolved,
                pulumi.ResourceOptions(parent=parent, providers={"kubernetes": kube_provider}),
                after=platform.monitoring_release if platform else None,
            )
    outputs = {
        **kubernetes_outputs,
        **pipeline_outputs,
        **slurm_outputs,
        **monitoring_outputs,
        "cluster": {"name": spec.name, "environment": spec.environment, "placement": "aws", "region": region},
        "kmsKeyArn": key.arn,
        "network": {
            "vpcId": network.vpc_id,
            "subnetIds": network.subnet_ids,
            "securityGroupIds": network.security_group_ids,
        },
        "nodeGroups": {
            n: {
                **node_group_props(resolved.node_groups[n]),
                "asgName": g.asg_name,
                "launchTemplateId": g.launch_template_id,
            }
            for n, g in groups.items()
        },
        "parallelFs": (
            {
                "fileSystemId": lustre.file_system_id,
                "dnsName": lustre.dns_name,
                "mountName": lustre.mount_name,
                "capacityGib": resolved.lustre.capacity_gib if resolved.lustre else None,
                "efa": bool(fs and fs.efa),  # nodes with EFA devices run LNet over EFA
            }
            if lustre
            else None
        ),
        "objectStores": {
            k: {"bucket": s.bucket, "arn": s.arn, "purpose": spec.storage.object_stores[k].purpose}
            for k, s in stores.items()
        },
    }
    return AwsCluster(outputs, network, eks, platform, kube_provider, {n: g.role_name for n, g in groups.items()})


def _service_discovery_policy(name: str, role_name: pulumi.Input[str], child: pulumi.ResourceOptions) -> None:
    """What Prometheus on a node group calls to find its targets (ec2_sd_configs), from the flow model's
    aws_calls (gpuforge/catalog/data/flows.yaml; checked by wiring-flows-iam). EC2's Describe calls take no
    resource-level permissions, hence "*"."""
    actions = load_flows().actions("monitoring")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
    aws.iam.RolePolicy(f"{name}-service-discovery", role=role_name, policy=json.dumps(policy), opts=child)


def _image_pipeline(
    name: str,
    resolved: ResolvedSpec,
    network: SegmentedNetwork,
    kms_key_arn: pulumi.Output[str],
    tags: dict[str, str],
    child: pulumi.ResourceOptions,
) -> ImagePipeline | None:
    """The Image Builder pipeline, only when the spec has image_pipeline: its build instance in the
    compute tier, baking for the fabric of the groups that launch from it (all groups if none does yet)."""
    spec = resolved.spec
    if spec.image_pipeline is None or resolved.image_build_az is None or spec.region is None:
        return None
    users = [g for g in resolved.node_groups.values() if g.image_parameter] or list(resolved.node_groups.values())
    fs = spec.storage.parallel_fs
    # One image for every EFA type that launches from it: the fewest FSx's defaults give, since each device on
    # LNet's efa network counts against the file system's 1024 EFA connections.
    lustre = load_aws_wiring().lustre
    efa_interfaces = [
        lustre.efa_interfaces_for(g.spec.instance_type, g.instance.max_network_cards) for g in users if g.efa_interfaces
    ]
    return ImagePipeline(
        f"{name}-image",
        ImagePipelineArgs(
            spec=spec.image_pipeline,
            cluster=spec.name,
            region=spec.region,
            parameter_name=spec.image_pipeline.parameter_for(spec.name),
            software=spec.software,
            subnet_id=network.subnet_ids["compute"][resolved.image_build_az],
            security_group_ids=[network.security_group_ids["compute"]],
            kms_key_arn=kms_key_arn,
            fabric="efa" if any(g.efa_interfaces for g in users) else "none",
            nvswitch=any(g.instance.nvswitch for g in users),
            lustre_efa=fs.efa if fs is not None else None,
            lustre_efa_interfaces=min(efa_interfaces, default=1),
            protected=spec.protected,
            tags=tags,
        ),
        opts=child,
    )


# Between draining a block's queues and its scale-in: Kueue's eviction and JobSet's deletion of the jobs
# reaching the pods, before their checkpoint grace period starts.
DRAIN_MARGIN = timedelta(minutes=5)


def block_window(group: ResolvedNodeGroup) -> BlockWindow | None:
    """A Capacity Block group's window for Kueue: open at the block's start; drained early enough that every
    pod's checkpoint grace period ends before the block-end scheduled action scales the group in."""
    block = group.spec.capacity
    if block.type != "capacity_block":
        return None
    scale_in = block.end - timedelta(minutes=load_aws_wiring().capacity_blocks.scale_down_before_end_minutes)
    return BlockWindow(block.start, scale_in - timedelta(seconds=CHECKPOINT_GRACE_SECONDS) - DRAIN_MARGIN)


def _gpu_pools(resolved: ResolvedSpec) -> list[GpuPool]:
    """Active Kubernetes GPU nodes per GPU model, for the platform's Kueue quotas. A model's pool has a window
    when every group of the model is on the same Capacity Block."""
    pools: dict[str, GpuPool] = {}
    windows: dict[str, set[BlockWindow | None]] = {}
    for group in resolved.kubernetes_node_groups.values():
        model = group.instance.gpu_model
        if model is None or group.gpus_per_node == 0:
            continue
        windows.setdefault(model, set()).add(block_window(group))
        known = pools.get(model)
        pools[model] = GpuPool(
            gpu_model=model,
            nodes=group.spec.active_nodes + (known.nodes if known else 0),
            gpus_per_node=group.gpus_per_node,
            cpus_per_node=group.instance.vcpus,
            memory_mib_per_node=group.instance.memory_mib,
            fabric_devices_per_node=group.efa_interfaces,
            node_kind="eks",
            taints=tuple(sorted({*(known.taints if known else ()), *(Taint(*t) for t in node_taints(group))}, key=str)),
            hugepages_2mi_per_node=load_aws_wiring().eks.efa_pod.node_hugepages_2mi if group.efa_interfaces else 0,
            # Kueue asks the autoscaler for a workload's nodes where any group of the model scales.
            elastic=group.spec.is_elastic or (known.elastic if known else False),
        )
    return [
        dataclasses.replace(pools[m], window=next(iter(windows[m])) if len(windows[m]) == 1 else None)
        for m in sorted(pools)
    ]


def _monitoring_group(resolved: ResolvedSpec) -> str | None:
    """The node group Prometheus runs on (monitoring.server kind node_group), if any."""
    monitoring = resolved.spec.monitoring
    return monitoring.server.node_group if monitoring and isinstance(monitoring.server, NodeGroupServer) else None


def _system_group_selector(resolved: ResolvedSpec) -> dict[str, str]:
    """The node-group label of the Kubernetes group with role services (the system group), where the platform's
    controllers run; none: no selector (GPU nodes are tainted, so they still stay off them)."""
    system = sorted(n for n, g in resolved.kubernetes_node_groups.items() if g.spec.role == "services")
    return {NODE_LABEL_GROUP: system[0]} if system else {}


def _fsx_csi_role(
    name: str, eks: EksCluster, lustre: LustreFileSystem, tags: dict[str, str], opts: pulumi.ResourceOptions
) -> pulumi.Output[str]:
    """The FSx CSI controller's own IRSA role, scoped to this stack's file system: without one the controller's
    AWS SDK falls back to the node's credentials (wiring-eks-fsx-csi-role-scope checks the scope)."""
    facts = load_aws_wiring().fsx_csi_controller
    return controller_role(
        f"{name}-fsx-csi-role",
        oidc_provider_arn=eks.oidc_provider_arn,
        oidc_issuer=eks.oidc_issuer,
        service_account=facts.service_account,
        inline_policy=lustre.arn.apply(lambda arn: json.dumps(fsx_csi_controller_policy([arn]))),
        tags=tags,
        opts=opts,
    ).arn


def _fsx_volume(
    resolved: ResolvedSpec,
    lustre: LustreFileSystem,
    controller_selector: dict[str, str],
    controller_role_arn: pulumi.Input[str],
) -> ParallelFsVolume | None:
    """The stack's FSx for Lustre file system (with its data repository associations) as a static volume:
    its id, DNS name and mount name from the file system's outputs (aws-fsx-csi-driver examples/kubernetes/
    static_provisioning). Nothing is provisioned: the controller's role (`controller_role_arn`) may only
    describe and update this file system; the node plugin mounts."""
    if resolved.spec.storage.parallel_fs is None or resolved.lustre is None:
        return None
    controller: dict[str, Any] = {"serviceAccount": {"annotations": {ROLE_ARN_ANNOTATION: controller_role_arn}}}
    if controller_selector:
        controller["nodeSelector"] = controller_selector
    return ParallelFsVolume(
        name="fsx-lustre",
        driver="fsx.csi.aws.com",
        volume_handle=lustre.file_system_id,
        volume_attributes={"dnsname": lustre.dns_name, "mountname": lustre.mount_name},
        capacity_gib=resolved.lustre.capacity_gib,
        mount_options=["flock"],
        csi_chart="aws_fsx_csi_driver",
        # The controller Deployment on the system group (charts/aws-fsx-csi-driver/values.yaml at
        # helm-chart-aws-fsx-csi-driver-1.17.0: controller.nodeSelector); the node plugin runs everywhere.
        csi_values={"controller": controller},
    )


def _keep_identity(opts: pulumi.ResourceOptions, previous_name: str | None) -> pulumi.ResourceOptions:
    """A renamed node group keeps its resources: an alias to the component's previous name, which
    the engine extends to every child named after the component (`{name}-asg`, `{name}-lt`, ...)."""
    if previous_name is None:
        return opts
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(name=previous_name)]))
