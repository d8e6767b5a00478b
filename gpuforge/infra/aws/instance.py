"""A standalone EC2 instance (controller, bastion) hardened the way the policies expect.

The launch template resolves the image from SSM at launch (an instance takes only an AMI id); the instance
states its metadata and disk settings too, so the policies read them wherever they look: IMDSv2 only, hop
limit 1, the root volume encrypted with the cluster key.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from gpuforge.spec.models import UBUNTU_2204_SSM


def hardened_instance(
    name: str,
    *,
    template_name: str,
    volume_size: int,
    kms_key_arn: pulumi.Input[str],
    template_opts: pulumi.ResourceOptions,
    instance_profile_arn: pulumi.Input[str] | None = None,
    image_parameter: str = UBUNTU_2204_SSM,
    user_data: str | None = None,
    opts: pulumi.ResourceOptions,
    **instance_args: Any,
) -> aws.ec2.Instance:
    """Declare the template *template_name* and the instance *name*, booting the AMI *image_parameter* (an
    SSM parameter; Canonical's Ubuntu 22.04 unless given) with *user_data* (base64, as launch templates take
    it); *instance_args* are the instance's own (type, subnet, security groups, tags, ...).

    The instance launches from the template's version as of this deployment, never "$Latest": the AWS
    provider replaces an instance whenever "$Latest" resolves to another version than the one it runs
    (terraform-provider-aws internal/service/ec2/ec2_instance.go), so any edit of the template would replace
    a controller in the next `up` and lose its local state; pinned, a new version is a visible change of
    the instance in the diff, as for the node groups (wiring-launchtemplate-pinned-version)."""
    template = aws.ec2.LaunchTemplate(
        template_name,
        image_id=f"resolve:ssm:{image_parameter}",
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
        ),
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/sda1",
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=volume_size, volume_type="gp3", encrypted="true", kms_key_id=kms_key_arn
                ),
            )
        ],
        iam_instance_profile=(
            aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=instance_profile_arn) if instance_profile_arn else None
        ),
        user_data=user_data,
        opts=template_opts,
    )
    return aws.ec2.Instance(
        name,
        launch_template=aws.ec2.InstanceLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str)),
        metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
        ),
        root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
            volume_size=volume_size, volume_type="gp3", encrypted=True, kms_key_id=kms_key_arn
        ),
        opts=opts,
        **instance_args,
    )
