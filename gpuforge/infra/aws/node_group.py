"""GpuNodeGroup: one node group as a launch template, a placement group and either one Auto
Scaling group of count + spares or, for orchestrator eks, one EKS managed node group of the
same size. Node count never multiplies resources.

The launch template (`gpu_launch_template`, one function for both paths) carries the EFA
layout for the type, IMDSv2 only with a hop limit of 1, an encrypted root volume, no public
IP and the capacity reservation or block.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pulumi
import pulumi_aws as aws

from gpuforge.assets import PLAYBOOKS_DIR
from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.catalog.mounts import HOME_MOUNT_POINT, LUSTRE_MOUNT_POINT
from gpuforge.catalog.tokens import NODE_GROUP, NODE_GROUP_TAG
from gpuforge.render.labels import (
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    NODE_LABEL_GPU_MODEL,
    NODE_LABEL_GROUP,
)
from gpuforge.render.templates import render
from gpuforge.spec import ResolvedNodeGroup
from gpuforge.spec.capacity import (
    EKS_UPDATE_ON_DEMAND,
    EKS_UPDATE_RESERVED,
    MAINTENANCE_ON_DEMAND,
    MAINTENANCE_RESERVED,
)

from .cluster_autoscaler import autoscaler_tags, tag_slug
from .efa import efa_layout
from .iam import assume_role_policy, bucket_access_policy
from .lustre_mount import fsx_mount_entry

# The shared /home (EFS) in a Slurm node's fstab, mounted by the EFS mount helper (catalog efs.mount_helper, in
# the image): AWS's NFS options (catalog), then the site_mounts role's own for the efs kind (TLS, after the
# network, on first access), so user data and slurm.yml write the same entry.
EFS_MOUNT_OPTIONS = (
    f"{load_aws_wiring().efs.nfs_options},{load_aws_wiring().efs.mount_helper.tls_option},_netdev,x-systemd.automount"
)
# The first mount of that /home keeps what the image holds there (its default user's home and keys): the
# site_mounts role's script, written by user data where slurm.yml's site_mounts installs it.
MOUNT_KEEPING = PLAYBOOKS_DIR / "roles" / "site_mounts" / "files" / "gpuforge-mount-keeping"
NODE_FACTS = ("nodeGroup", "role", "instanceType", "gpuModel", "gpusPerNode", "fabric", "efaInterfacesPerNode")
# The stable tag every instance of a node group carries (ASG names get a random suffix from Pulumi):
# gpuforge/nodes/inventory.py's aws_ec2 inventory selects hosts by it.
SSM_CORE_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
# What an EKS node needs (EKS user guide, "Amazon EKS node IAM role"): join the cluster and pull
# images. The VPC CNI's AmazonEKS_CNI_Policy is on the add-on's own IRSA role (gpuforge/infra/aws/eks.py),
# not here, where every pod that reaches the node's credentials would hold it.
EKS_NODE_POLICIES = {
    "worker": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "ecr": "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
}
# Auto Scaling groups this small wait for their instances during `up`, so a launch that fails
# (capacity, key policy, quota) fails the deployment instead of leaving an empty group behind.
# Larger GPU groups fill over hours and do not block `up`; the plan's policies check both.
WAIT_FOR_CAPACITY_MAX_NODES = 16
WAIT_FOR_CAPACITY_TIMEOUT = "20m"
# A GPU node is healthy to EC2 long before its driver, Fabric Manager and EFA are up; a short grace
# period lets Auto Scaling replace nodes that are still booting.
GPU_HEALTH_CHECK_GRACE_S = 900


@dataclass(frozen=True)
class LustreMount:
    dns_name: pulumi.Input[str]
    mount_name: pulumi.Input[str]
    mount_point: str = LUSTRE_MOUNT_POINT
    # EFA-enabled file system: the entry requires gpuforge-lnet.service (LNet over EFA before the mount).
    efa: bool = False


@dataclass(frozen=True)
class GpuNodeGroupArgs:
    group: ResolvedNodeGroup
    cluster: str
    subnet_ids: list[pulumi.Input[str]]  # one per AZ the group may launch in
    security_group_ids: list[pulumi.Input[str]]  # on every interface: tier group (+ EFA group)
    kms_key_arn: pulumi.Input[str]
    read_bucket_arns: list[pulumi.Input[str]] = field(default_factory=list)
    write_bucket_arns: list[pulumi.Input[str]] = field(default_factory=list)
    lustre: LustreMount | None = None
    # A Slurm group's shared /home: the id of the cluster's EFS (gpuforge/infra/aws/slurm.py), which the mount helper
    # takes.
    home: pulumi.Input[str] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    eks: EksAttachment | None = None  # set for orchestrator eks: an EKS managed node group instead of an ASG
    # A Slurm group's controllers, name -> address: the names slurm.conf gives them, written to /etc/hosts.
    slurm_controllers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EksAttachment:
    """The EKS cluster an orchestrator-eks group joins."""

    cluster_name: pulumi.Input[str]
    # The cluster security group: a launch template with its own interfaces replaces the
    # groups EKS would attach, so nodes must carry it to talk to the control plane.
    cluster_security_group_id: pulumi.Input[str]
    kubernetes_version: pulumi.Input[str]
    # The add-ons nodes need to become Ready (vpc-cni, kube-proxy, pod identity agent).
    depends_on: Sequence[pulumi.Resource] = ()
    # The cluster's name as its Cluster Autoscaler discovers groups by (an elastic group's tags carry it).
    autoscaler_cluster: str | None = None


def node_labels(group: ResolvedNodeGroup) -> dict[str, str]:
    """Kubernetes labels of the group's nodes; the platform's ResourceFlavors select on them."""
    labels = {NODE_LABEL_GROUP: group.name}
    if group.instance.gpu_model:
        labels[NODE_LABEL_GPU_MODEL] = group.instance.gpu_model
    return labels


# aws.eks.NodeGroup spells taint effects in the EKS API's enum.
EKS_TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}


def node_taints(group: ResolvedNodeGroup) -> list[tuple[str, str, str]]:
    """(key, value, effect) of the taints the group's nodes register with: GPU nodes carry the GPU taint, so
    only pods Kueue admitted to a GPU flavor (which tolerates it) and the GPU node agents land there."""
    return [(GPU_TAINT_KEY, GPU_TAINT_VALUE, GPU_TAINT_EFFECT)] if group.gpus_per_node else []


def node_group_props(group: ResolvedNodeGroup) -> dict[str, Any]:
    """The facts policies, the plan summary and the inventory read off the component."""
    spec = group.spec
    return {
        "nodeGroup": group.name,
        "role": spec.role,
        "instanceType": spec.instance_type,
        # An elastic group's count is its max: cost, power and quotas plan the worst case.
        "count": spec.active_nodes,
        "spares": spec.spares,
        "gpuModel": group.instance.gpu_model,
        "gpusPerNode": group.gpus_per_node,
        "fabric": spec.fabric,
        "efaInterfacesPerNode": group.efa_interfaces,
        "availabilityZones": list(group.azs),
        "placement": spec.placement_strategy,
        "capacity": spec.capacity.type,
        "nodePowerKw": group.node_power_kw,
        # Only when set, so plans of groups from before the field stay identical.
        **({"orchestrator": spec.orchestrator} if spec.orchestrator != "none" else {}),
        **({"scaling": {"min": spec.scaling.min, "max": spec.scaling.max}} if spec.scaling is not None else {}),
        # How a new image or launch template reaches the nodes (gpuforge diff names it).
        "updateStrategy": spec.effective_update_strategy,
        **(
            {
                "capacityWindow": {"start": _utc(spec.capacity.start), "end": _utc(spec.capacity.end)},
                # What AWS bills: every instance of the block, whatever count + spares the group runs.
                "capacityBlockInstances": spec.capacity.instance_count,
            }
            if spec.capacity.type == "capacity_block"
            else {}
        ),
        **({"renamedFrom": spec.renamed_from} if spec.renamed_from else {}),
    }


def gpu_launch_template(
    name: str,
    group: ResolvedNodeGroup,
    *,
    security_group_ids: list[pulumi.Input[str]],
    kms_key_arn: pulumi.Input[str],
    user_data: pulumi.Input[str],
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
    instance_profile_arn: pulumi.Input[str] | None = None,
    placement_group: pulumi.Input[str] | None = None,
    eks: bool = False,
) -> aws.ec2.LaunchTemplate:
    """The one launch template of a GPU group, for the Auto Scaling path and the EKS managed path.

    EKS managed node groups refuse an instance profile and spot requests in the template (the
    node role and capacity_type carry them), take the placement group here rather than on the
    group, and use the EKS AMI from ami_type instead of an image id.
    """
    spec = group.spec
    return aws.ec2.LaunchTemplate(
        f"{name}-lt",
        image_id=None if eks else group.image_id,
        instance_type=spec.instance_type,
        update_default_version=True,
        # IMDSv2 only, hop limit 1: a pod's traffic crosses one more hop (its network namespace),
        # so pods cannot reach the node role's credentials through the metadata service. On EKS
        # that is the point: pods get AWS access through IRSA (the cluster's OIDC provider), and the
        # node agents that need IMDS (VPC CNI, kube-proxy, the EFA device plugin) run on the host
        # network. Hop limit 2 would only serve pods that rely on the node role: do not raise it.
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled",
            http_tokens="required",
            http_put_response_hop_limit=1,
            # EKS tags nodes with keys holding "/" (kubernetes.io/cluster/...), which are invalid as
            # metadata tags: EKS node groups fail with IMDS tags on (data/aws_wiring.yaml eks).
            instance_metadata_tags=load_aws_wiring().eks.imds_tags if eks else "enabled",
        ),
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=_root_device(group, eks),
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=spec.root_volume.size_gib,
                    volume_type=spec.root_volume.type,
                    encrypted="true",
                    kms_key_id=kms_key_arn,
                    delete_on_termination="true",
                ),
            )
        ],
        network_interfaces=[
            aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                network_card_index=slot.network_card_index,
                device_index=slot.device_index,
                interface_type="efa-only" if slot.is_efa else None,
                associate_public_ip_address=None if slot.is_efa else "false",
                delete_on_termination="true",
                security_groups=security_group_ids,
            )
            for slot in efa_layout(group.efa_interfaces, group.instance.max_network_cards)
        ],
        iam_instance_profile=(
            aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=instance_profile_arn) if instance_profile_arn else None
        ),
        placement=aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group) if placement_group else None,
        user_data=user_data,
        capacity_reservation_specification=_capacity_reservation(group),
        instance_market_options=_market_options(group, spot_in_template=not eks),
        # gpuforge:node-group on every instance, whichever path launches it (ASG or EKS managed group):
        # the inventory finds a group's instances by it, not by the ASG's generated name.
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(
                resource_type=kind, tags={**tags, "Name": name, NODE_GROUP_TAG: group.name}
            )
            for kind in ("instance", "volume", "network-interface")
        ],
        opts=opts,
    )


def _root_device(group: ResolvedNodeGroup, eks: bool) -> str:
    # The EKS AL2023 AMI's root device is /dev/xvda; the spec's default (/dev/sda1) is Ubuntu's.
    if eks and "device_name" not in group.spec.root_volume.model_fields_set:
        return "/dev/xvda"
    return group.spec.root_volume.device_name


def _capacity_reservation(
    group: ResolvedNodeGroup,
) -> aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs | None:
    reservation = group.spec.reservation
    if reservation is None:
        return None
    return aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
        capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
            capacity_reservation_id=reservation.reservation_id
        )
    )


def _market_options(
    group: ResolvedNodeGroup, spot_in_template: bool = True
) -> aws.ec2.LaunchTemplateInstanceMarketOptionsArgs | None:
    capacity = group.spec.capacity
    if capacity.type == "capacity_block":
        return aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
    if capacity.type == "spot" and spot_in_template:
        return aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(
            market_type="spot",
            spot_options=aws.ec2.LaunchTemplateInstanceMarketOptionsSpotOptionsArgs(max_price=capacity.max_price),
        )
    return None


def eks_capacity_type(group: ResolvedNodeGroup) -> str:
    """An EKS managed node group's capacity_type for the spec's capacity source."""
    return {"spot": "SPOT", "capacity_block": "CAPACITY_BLOCK"}.get(group.spec.capacity.type, "ON_DEMAND")


class GpuNodeGroup(pulumi.ComponentResource):
    asg_name: pulumi.Output[str]
    launch_template_id: pulumi.Output[str]
    role_arn: pulumi.Output[str]
    role_name: pulumi.Output[str]

    def __init__(self, name: str, args: GpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(NODE_GROUP, name, node_group_props(args.group), opts)
        child = pulumi.ResourceOptions(parent=self)
        group, spec = args.group, args.group.spec

        role, profile = self._instance_role(name, args, child)
        placement_group = self._placement_group(name, group, child)
        if args.eks is not None:
            self._eks_node_group(name, args, args.eks, role, placement_group, child)
            return
        template = gpu_launch_template(
            name,
            group,
            security_group_ids=args.security_group_ids,
            kms_key_arn=args.kms_key_arn,
            user_data=self._user_data(group, args),
            tags=args.tags,
            instance_profile_arn=profile.arn if profile else None,
            opts=child,
        )
        asg = aws.autoscaling.Group(
            f"{name}-asg",
            min_size=0 if spec.capacity.type == "capacity_block" else spec.min_nodes,
            max_size=spec.max_nodes,
            # An elastic group starts at its min; from then on the scaler owns the desired capacity.
            desired_capacity=_created_desired(group),
            vpc_zone_identifiers=args.subnet_ids,
            placement_group=placement_group,
            # The template version is explicit: a new image or template is a visible change of the
            # group (never "$Latest", which lets spares and replacements boot something newer).
            launch_template=aws.autoscaling.GroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            instance_maintenance_policy=aws.autoscaling.GroupInstanceMaintenancePolicyArgs(
                min_healthy_percentage=_maintenance(group)[0], max_healthy_percentage=_maintenance(group)[1]
            ),
            # instance_refresh: a new template version replaces the instances through the maintenance
            # policy. drain: Slurm drains each node and waits for its jobs before it is replaced
            # (gpuforge's scaler), so Auto Scaling must not refresh on its own.
            instance_refresh=(
                aws.autoscaling.GroupInstanceRefreshArgs(
                    strategy="Rolling",
                    preferences=aws.autoscaling.GroupInstanceRefreshPreferencesArgs(skip_matching=True),
                )
                if spec.effective_update_strategy == "instance_refresh"
                else None
            ),
            # EC2 status checks, with a grace period covering the GPU stack's bring-up; GPU faults
            # (XID, DCGM, fabric) are found by `gpuforge check`, which marks the node unhealthy.
            health_check_type="EC2",
            health_check_grace_period=GPU_HEALTH_CHECK_GRACE_S if group.gpus_per_node else 300,
            # Small groups: `up` waits until every instance runs, so a failing launch fails `up`.
            # Large GPU groups fill over hours; `up` does not block on them.
            wait_for_capacity_timeout=(
                WAIT_FOR_CAPACITY_TIMEOUT if spec.min_nodes <= WAIT_FOR_CAPACITY_MAX_NODES else "0"
            ),
            # A single-AZ EFA group has nothing to rebalance and rebalancing would churn nodes;
            # groups across AZs keep rebalancing so an AZ's loss is made good.
            suspended_processes=["AZRebalance"] if group.efa_interfaces and len(group.azs) == 1 else None,
            tags=[
                aws.autoscaling.GroupTagArgs(key=key, value=value, propagate_at_launch=True)
                for key, value in {**args.tags, NODE_GROUP_TAG: group.name}.items()
            ],
            opts=pulumi.ResourceOptions.merge(child, _desired_owned_elsewhere(group)),
        )
        _capacity_block_schedules(name, group, asg.name, child)
        self.asg_name = asg.name
        self.launch_template_id = template.id
        self.role_arn = role.arn
        self.role_name = role.name
        self.register_outputs(
            {
                "asgName": asg.name,
                "launchTemplateId": template.id,
                "placementGroup": placement_group,
                "roleArn": role.arn,
            }
        )

    @staticmethod
    def _placement_group(
        name: str, group: ResolvedNodeGroup, child: pulumi.ResourceOptions
    ) -> pulumi.Input[str] | None:
        """The placement group name: the reservation's own (an ODCR made in one), a new one for
        the strategy, or none (Capacity Blocks, ODCRs made without one, strategy none)."""
        spec = group.spec
        if spec.reservation_placement_group:
            return spec.reservation_placement_group
        if spec.placement_strategy == "none":
            return None
        return aws.ec2.PlacementGroup(f"{name}-pg", strategy=spec.placement_strategy, opts=child).name

    @staticmethod
    def _instance_role(
        name: str, args: GpuNodeGroupArgs, child: pulumi.ResourceOptions
    ) -> tuple[aws.iam.Role, aws.iam.InstanceProfile | None]:
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=assume_role_policy("ec2.amazonaws.com"),
            opts=child,
        )
        aws.iam.RolePolicyAttachment(f"{name}-ssm", role=role.name, policy_arn=SSM_CORE_POLICY, opts=child)
        # EKS nodes get no bucket access: pods reach the buckets through their team's IRSA role, and
        # anything on the node role is open to every pod that reaches the node's credentials.
        if (args.read_bucket_arns or args.write_bucket_arns) and args.eks is None:
            aws.iam.RolePolicy(
                f"{name}-buckets",
                role=role.id,
                policy=pulumi.Output.all(
                    pulumi.Output.all(*args.read_bucket_arns),
                    pulumi.Output.all(*args.write_bucket_arns),
                    args.kms_key_arn,
                ).apply(lambda values: json.dumps(bucket_access_policy(values[0], values[1], values[2]))),
                opts=child,
            )
        if args.eks is not None:
            # EKS makes the instance profile from the node group's role; it needs the node policies.
            for key, arn in EKS_NODE_POLICIES.items():
                aws.iam.RolePolicyAttachment(f"{name}-{key}", role=role.name, policy_arn=arn, opts=child)
            return role, None
        profile = aws.iam.InstanceProfile(f"{name}-profile", role=role.name, opts=child)
        return role, profile

    @staticmethod
    def _user_data(group: ResolvedNodeGroup, args: GpuNodeGroupArgs, mime: bool = False) -> pulumi.Output[str]:
        # Only what a node needs to know about itself: scaling the group must not change user data.
        node = {"cluster": args.cluster, **{k: v for k, v in node_group_props(group).items() if k in NODE_FACTS}}
        lustre, wrap = args.lustre, (_mime_multipart if mime else _as_is)

        def text(values: list[Any]) -> str:
            mounts = {
                "lustre": fsx_mount_entry(values[0], values[1], lustre.mount_point, lustre.efa)
                if lustre is not None
                else None,
                # The shared /home with the options slurm.yml's site_mounts writes (EFS_MOUNT_OPTIONS).
                "home": {
                    "file_system": values[2],
                    "mount_point": HOME_MOUNT_POINT,
                    "fstype": load_aws_wiring().efs.mount_helper.fstype,
                    "options": EFS_MOUNT_OPTIONS,
                    "mount_keeping": MOUNT_KEEPING.read_text().rstrip("\n"),
                }
                if args.home is not None
                else None,
            }
            text = render("cloud-init/node.yaml.j2", node=node, controllers=args.slurm_controllers, **mounts)
            return base64.b64encode(wrap(text).encode()).decode()

        return pulumi.Output.all(
            lustre.dns_name if lustre else "", lustre.mount_name if lustre else "", args.home or ""
        ).apply(text)

    def _eks_node_group(
        self,
        name: str,
        args: GpuNodeGroupArgs,
        eks: EksAttachment,
        role: aws.iam.Role,
        placement_group: pulumi.Input[str] | None,
        child: pulumi.ResourceOptions,
    ) -> None:
        group, spec = args.group, args.group.spec
        template = gpu_launch_template(
            name,
            group,
            security_group_ids=[*args.security_group_ids, eks.cluster_security_group_id],
            kms_key_arn=args.kms_key_arn,
            user_data=self._user_data(group, args, mime=True),
            tags=args.tags,
            placement_group=placement_group,
            eks=True,
            opts=child,
        )
        node_group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=eks.cluster_name,
            node_role_arn=role.arn,
            subnet_ids=args.subnet_ids,
            version=eks.kubernetes_version,
            # The accelerated AMI (NVIDIA driver, toolkit, EFA) for GPU groups; the standard one for
            # CPU groups such as the system group running the operators.
            ami_type=load_aws_wiring().eks.gpu_ami_type
            if group.gpus_per_node
            else load_aws_wiring().eks.standard_ami_type,
            capacity_type=eks_capacity_type(group),
            # A Capacity Block group may be empty (before and after its window): min 0.
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=0 if spec.capacity.type == "capacity_block" else spec.min_nodes,
                max_size=spec.max_nodes,
                desired_size=_created_desired(group),
            ),
            # EKS node auto repair replaces GPU nodes its node monitoring agent finds unhealthy
            # (XID errors, NVLink, DCGM): EKS User Guide, "Enable node auto repair".
            node_repair_config=aws.eks.NodeGroupNodeRepairConfigArgs(enabled=True) if group.gpus_per_node else None,
            # Pinned template version: a new version rolls the nodes, one at a time.
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            # In a reservation or block, terminate before launching: a full one has no room for EKS's extra node.
            update_config=aws.eks.NodeGroupUpdateConfigArgs(
                max_unavailable=1,
                update_strategy=EKS_UPDATE_RESERVED if group.spec.is_reserved else EKS_UPDATE_ON_DEMAND,
            ),
            labels=node_labels(group),
            taints=[
                aws.eks.NodeGroupTaintArgs(key=key, value=value, effect=EKS_TAINT_EFFECTS[effect])
                for key, value, effect in node_taints(group)
            ]
            or None,
            tags={**args.tags, NODE_GROUP_TAG: group.name},
            opts=pulumi.ResourceOptions.merge(
                child,
                pulumi.ResourceOptions(
                    depends_on=list(eks.depends_on),
                    ignore_changes=["scalingConfig.desiredSize"] if _desired_scheduled(group) else None,
                ),
            ),
        )
        self.asg_name = node_group.resources.apply(_first_asg_name)
        _capacity_block_schedules(name, group, self.asg_name, child)
        if spec.is_elastic and eks.autoscaler_cluster is not None:
            # On the Auto Scaling group EKS made: a managed node group's own tags do not reach it.
            tags = autoscaler_tags(group, eks.autoscaler_cluster, node_labels(group), node_taints(group))
            for key, value in tags.items():
                aws.autoscaling.Tag(
                    f"{name}-ca-{tag_slug(key)}",
                    autoscaling_group_name=self.asg_name,
                    tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
                    opts=child,
                )
        self.launch_template_id = template.id
        self.role_arn = role.arn
        self.role_name = role.name
        self.register_outputs(
            {
                "eksNodeGroup": node_group.node_group_name,
                "asgName": self.asg_name,
                "launchTemplateId": template.id,
                "placementGroup": placement_group,
                "roleArn": role.arn,
            }
        )


def _utc(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _desired_scheduled(group: ResolvedNodeGroup) -> bool:
    """Whether something other than `pulumi up` owns the desired capacity after creation: the scaler
    (elastic groups) or the block's scheduled actions (Capacity Blocks). `pulumi up` must not reset
    it (which would terminate busy nodes or launch outside the block's window)."""
    return group.spec.is_elastic or group.spec.capacity.type == "capacity_block"


def _created_desired(group: ResolvedNodeGroup) -> int:
    """The desired size a group is created with. A Capacity Block's group starts empty: its instances can only
    launch inside the window, the block-start action fills it, and an upgrade of an EKS managed node group on a
    block is made at desired 0 (EKS User Guide, "Create a managed node group with Capacity Blocks for ML" and
    "Create self-managed nodes with Capacity Blocks for ML": desired 0 before the block is active)."""
    return 0 if group.spec.capacity.type == "capacity_block" else group.spec.min_nodes


def _desired_owned_elsewhere(group: ResolvedNodeGroup) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(ignore_changes=["desiredCapacity"] if _desired_scheduled(group) else None)


def _maintenance(group: ResolvedNodeGroup) -> tuple[int, int]:
    return MAINTENANCE_RESERVED if group.spec.is_reserved else MAINTENANCE_ON_DEMAND


def _capacity_block_schedules(
    name: str, group: ResolvedNodeGroup, asg_name: pulumi.Input[str], child: pulumi.ResourceOptions
) -> None:
    """A Capacity Block's group comes up when the block starts and goes to 0 before EC2 terminates its
    instances (data/aws_wiring.yaml capacity_blocks: window_source)."""
    block = group.spec.capacity
    if block.type != "capacity_block":
        return
    facts = load_aws_wiring().capacity_blocks
    down_at = block.end - timedelta(minutes=facts.scale_down_before_end_minutes)
    nodes = group.spec.total_nodes
    for suffix, when, desired in (("block-start", block.start, nodes), ("block-end", down_at, 0)):
        aws.autoscaling.Schedule(
            f"{name}-{suffix}",
            autoscaling_group_name=asg_name,
            scheduled_action_name=f"gpuforge-{suffix}",
            start_time=_utc(when),
            min_size=0,
            max_size=nodes,
            desired_capacity=desired,
            opts=child,
        )


def _first_asg_name(resources: Any) -> str:
    # Known after creation only; empty in a preview.
    for resource in resources or []:
        for asg in getattr(resource, "autoscaling_groups", None) or []:
            return str(getattr(asg, "name", "") or "")
    return ""


def _as_is(text: str) -> str:
    return text


def _mime_multipart(cloud_config: str) -> str:
    """EKS merges its own bootstrap (nodeadm) into a managed group's user data, which must
    therefore be MIME multi-part (EKS user guide, "Customize managed nodes with launch templates")."""
    boundary = "==GPUFORGE=="
    return (
        f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="{boundary}"\n\n'
        f'--{boundary}\nContent-Type: text/cloud-config; charset="us-ascii"\n\n'
        f"{cloud_config.rstrip()}\n\n--{boundary}--\n"
    )
