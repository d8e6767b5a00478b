"""GpuNodeGroup: one node group as a launch template, a placement group and one Auto
Scaling group of count + spares. Node count never multiplies resources.

The launch template carries the EFA layout for the type, IMDSv2 only with a hop limit of 1
(containers on the node cannot reach the instance role's credentials through the metadata
service), an encrypted root volume and no public IP.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from components.spec import ResolvedNodeGroup
from components.templates import render

from .efa import efa_layout

SSM_CORE_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"


@dataclass(frozen=True)
class LustreMount:
    dns_name: pulumi.Input[str]
    mount_name: pulumi.Input[str]
    mount_point: str = "/fsx"


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
    tags: dict[str, str] = field(default_factory=dict)


def node_group_props(group: ResolvedNodeGroup) -> dict[str, Any]:
    """The facts policies, the plan summary and the inventory read off the component."""
    spec = group.spec
    return {
        "nodeGroup": group.name,
        "role": spec.role,
        "instanceType": spec.instance_type,
        "count": spec.count,
        "spares": spec.spares,
        "gpuModel": group.instance.gpu_model,
        "gpusPerNode": group.gpus_per_node,
        "fabric": spec.fabric,
        "efaInterfacesPerNode": group.efa_interfaces,
        "availabilityZones": list(group.azs),
        "placement": spec.placement_strategy,
        "capacity": spec.capacity.type,
        "nodePowerKw": group.node_power_kw,
    }


class GpuNodeGroup(pulumi.ComponentResource):
    asg_name: pulumi.Output[str]
    launch_template_id: pulumi.Output[str]
    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: GpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuforge:aws:GpuNodeGroup", name, node_group_props(args.group), opts)
        child = pulumi.ResourceOptions(parent=self)
        group, spec = args.group, args.group.spec

        role, profile = self._instance_role(name, args, child)
        placement_group = (
            aws.ec2.PlacementGroup(f"{name}-pg", strategy=spec.placement_strategy, opts=child)
            if spec.placement_strategy != "none"
            else None
        )
        template = aws.ec2.LaunchTemplate(
            f"{name}-lt",
            image_id=spec.image.image_id,
            instance_type=spec.instance_type,
            update_default_version=True,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",
                http_put_response_hop_limit=1,
                instance_metadata_tags="enabled",
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name=spec.root_volume.device_name,
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=spec.root_volume.size_gib,
                        volume_type=spec.root_volume.type,
                        encrypted="true",
                        kms_key_id=args.kms_key_arn,
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
                    security_groups=args.security_group_ids,
                )
                for slot in efa_layout(group.efa_interfaces, group.instance.max_network_cards)
            ],
            iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=profile.arn),
            user_data=self._user_data(group, args),
            capacity_reservation_specification=self._capacity_reservation(group),
            instance_market_options=self._market_options(group),
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags={**args.tags, "Name": name})
                for kind in ("instance", "volume", "network-interface")
            ],
            opts=child,
        )
        asg = aws.autoscaling.Group(
            f"{name}-asg",
            min_size=spec.total_nodes,
            max_size=spec.total_nodes,
            desired_capacity=spec.total_nodes,
            vpc_zone_identifiers=args.subnet_ids,
            placement_group=placement_group.id if placement_group else None,
            launch_template=aws.autoscaling.GroupLaunchTemplateArgs(id=template.id, version="$Latest"),
            health_check_type="EC2",
            # Large GPU groups fill over hours; `pulumi up` should not block on instances.
            wait_for_capacity_timeout="0",
            # One AZ by design for EFA groups: rebalancing would only churn nodes.
            suspended_processes=["AZRebalance"],
            tags=[
                aws.autoscaling.GroupTagArgs(key=key, value=value, propagate_at_launch=True)
                for key, value in {**args.tags, "gpuforge:node-group": group.name}.items()
            ],
            opts=child,
        )
        self.asg_name = asg.name
        self.launch_template_id = template.id
        self.role_arn = role.arn
        self.register_outputs(
            {
                "asgName": asg.name,
                "launchTemplateId": template.id,
                "placementGroup": placement_group.id if placement_group else None,
                "roleArn": role.arn,
            }
        )

    @staticmethod
    def _instance_role(
        name: str, args: GpuNodeGroupArgs, child: pulumi.ResourceOptions
    ) -> tuple[aws.iam.Role, aws.iam.InstanceProfile]:
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
                    ],
                }
            ),
            opts=child,
        )
        aws.iam.RolePolicyAttachment(f"{name}-ssm", role=role.name, policy_arn=SSM_CORE_POLICY, opts=child)
        if args.read_bucket_arns or args.write_bucket_arns:
            aws.iam.RolePolicy(
                f"{name}-buckets",
                role=role.id,
                policy=pulumi.Output.all(
                    pulumi.Output.all(*args.read_bucket_arns),
                    pulumi.Output.all(*args.write_bucket_arns),
                    args.kms_key_arn,
                ).apply(lambda values: json.dumps(_bucket_policy(values[0], values[1], values[2]))),
                opts=child,
            )
        profile = aws.iam.InstanceProfile(f"{name}-profile", role=role.name, opts=child)
        return role, profile

    @staticmethod
    def _user_data(group: ResolvedNodeGroup, args: GpuNodeGroupArgs) -> pulumi.Output[str]:
        node = {"cluster": args.cluster, **node_group_props(group)}
        lustre = args.lustre
        if lustre is None:
            text = render("cloud-init/node.yaml.j2", node=node, lustre=None)
            return pulumi.Output.from_input(base64.b64encode(text.encode()).decode())
        return pulumi.Output.all(lustre.dns_name, lustre.mount_name).apply(
            lambda values: base64.b64encode(
                render(
                    "cloud-init/node.yaml.j2",
                    node=node,
                    lustre={"dns_name": values[0], "mount_name": values[1], "mount_point": lustre.mount_point},
                ).encode()
            ).decode()
        )

    @staticmethod
    def _capacity_reservation(
        group: ResolvedNodeGroup,
    ) -> aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs | None:
        capacity = group.spec.capacity
        if capacity.type not in ("capacity_reservation", "capacity_block"):
            return None
        return aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=capacity.reservation_id
            )
        )

    @staticmethod
    def _market_options(group: ResolvedNodeGroup) -> aws.ec2.LaunchTemplateInstanceMarketOptionsArgs | None:
        capacity = group.spec.capacity
        if capacity.type == "capacity_block":
            return aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
        if capacity.type == "spot":
            return aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(
                market_type="spot",
                spot_options=aws.ec2.LaunchTemplateInstanceMarketOptionsSpotOptionsArgs(max_price=capacity.max_price),
            )
        return None


def _bucket_policy(read: list[str], write: list[str], kms_key_arn: str) -> dict[str, Any]:
    """Least privilege: list and read the data buckets, also write the checkpoint/artifact ones,
    and use the cluster key that encrypts them."""
    everything = read + write
    statements: list[dict[str, Any]] = [
        {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": everything},
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"{a}/*" for a in everything]},
        {"Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": [kms_key_arn]},
    ]
    if write:
        statements.append(
            {
                "Effect": "Allow",
                "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
                "Resource": [f"{a}/*" for a in write],
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}
