"""ImagePipeline: EC2 Image Builder bakes playbooks/bake-image.yml into the AMI node groups use.

The playbooks and templates go up as one zip object (its key carries the content hash, so a
playbook change makes a new component version) to a private, KMS-encrypted bucket (an
ObjectStore). The component document downloads it, installs ansible-core and runs
`ansible-playbook -c local -i localhost, playbooks/bake-image.yml` with the cluster's software
versions as extra vars. The build instance runs in a private compute subnet, IMDSv2 only with hop
limit 1, with an instance profile that can read that one object and nothing else of the
cluster's; the AMI's root volume is encrypted with the cluster key, and the distribution writes
the AMI id to an SSM parameter that node groups resolve at launch (`resolve:ssm:<parameter>`).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import yaml

from gpuforge.assets import ASSETS_DIR
from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.spec.models import ImagePipelineSpec, Software
from gpuforge.spec.models import ObjectStore as ObjectStoreSpec

from .node_group import SSM_CORE_POLICY
from .storage import ObjectStore, ObjectStoreArgs

# What the bake needs on the instance: the playbooks directory, complete on its own (its roles' shared templates
# are inside it).
ARCHIVE_DIRS = ("playbooks",)
IMAGE_BUILDER_INSTANCE_POLICY = "arn:aws:iam::aws:policy/EC2InstanceProfileForImageBuilder"
# The roles rely on ansible-core 2.19's strict conditionals (pyproject.toml pins the same line);
# 2.19 needs Python >= 3.11, which Ubuntu 22.04 ships as python3.11 (universe).
ANSIBLE_CORE = "ansible-core>=2.19,<2.20"
ANSIBLE_COLLECTIONS = ("ansible.posix",)  # ansible.posix.mount (lustre_client)
BAKE_DIR = "/var/tmp/gpuforge-bake"
ANSIBLE_VENV = "/opt/gpuforge/ansible"


@dataclass(frozen=True)
class ImagePipelineArgs:
    spec: ImagePipelineSpec
    cluster: str
    region: str
    parameter_name: str  # the SSM parameter the AMI id is written to
    software: Software
    subnet_id: pulumi.Input[str]  # a private compute subnet (egress through NAT)
    security_group_ids: list[pulumi.Input[str]]
    kms_key_arn: pulumi.Input[str]
    fabric: str = "none"  # efa when a group that launches from the image has EFA
    nvswitch: bool = False  # Fabric Manager, when such a group is an NVSwitch system
    # The cluster's FSx for Lustre file system: None without one, else whether it is EFA-enabled. The image
    # carries the client (and, EFA-enabled, gpuforge-lnet.service); the node's user data writes the mount.
    lustre_efa: bool | None = None
    lustre_efa_interfaces: int = 1  # EFA devices the LNet unit puts on the efa network (FSx's per-type default)
    root_device_name: str = "/dev/sda1"  # Ubuntu's
    protected: bool = False
    tags: dict[str, str] = field(default_factory=dict)


def archive_files() -> dict[str, Path]:
    """The files shipped to the build instance, keyed by their path in the archive (symlinks
    followed, so the zip holds plain files)."""
    files: dict[str, Path] = {}
    for top in ARCHIVE_DIRS:
        base = ASSETS_DIR / top
        for path in sorted(base.rglob("*")):
            relative = Path(top) / path.relative_to(base)
            if path.is_file() and "__pycache__" not in relative.parts and path.suffix not in (".pyc", ".retry"):
                files[relative.as_posix()] = path
    return files


def archive_digest(files: dict[str, Path]) -> str:
    digest = hashlib.sha256()
    for name, path in sorted(files.items()):
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def bake_extra_vars(args: ImagePipelineArgs) -> dict[str, Any]:
    """Ansible variables for bake-image.yml: the spec's software versions (the same names the
    inventory uses), the fabric of the groups that launch from the image, then the spec's extra_vars."""
    software, efa = args.software, args.fabric == "efa"
    variables: dict[str, Any] = {
        "gpuforge_fabric": args.fabric,
        "nvidia_driver_branch": software.nvidia_driver_branch,
        "nvidia_fabricmanager_enabled": args.nvswitch,
        "nccl_version": software.nccl_version,
        "nccl_cuda_version": software.nccl_cuda_version,
        "nccl_net_plugin": "aws-ofi-nccl" if efa else "none",
        "nccl_tuning_fabric": args.fabric,
        "nccl_tuning_nccl_version": software.nccl_version,
    }
    if efa:
        variables |= {
            "efa_installer_version": software.efa_installer_version,
            "nccl_tuning_aws_ofi_nccl_version": software.aws_ofi_nccl_version,
            "nccl_tuning_efa_installer_version": software.efa_installer_version,
        }
    if args.lustre_efa is not None:
        # The client and, for an EFA-enabled file system, the LNet unit the user data's mount entry requires
        # (templates/lustre/fsx-mount.yaml.j2); no fstab entry: one image serves launches whose file system it
        # does not name, and the file system's name is the launch template's.
        lustre = load_aws_wiring().lustre
        variables |= {"lustre_client_filesystem": {"efa": args.lustre_efa}, "lustre_client_fstab": False}
        if args.lustre_efa:
            variables |= {
                "lustre_client_efa_interfaces": args.lustre_efa_interfaces,
                "lustre_client_efa_peer_credits": lustre.efa_client_peer_credits,
                "lustre_client_lnet_discovery": lustre.efa_client_discovery,
                "lustre_client_efa_udsp_priority": lustre.efa_client_udsp_priority,
            }
    return variables | dict(args.spec.extra_vars)


def component_document(bucket: str, key: str, extra_vars: dict[str, Any]) -> str:
    """The Image Builder (AWSTOE) component document, schema 1.0: build phase downloads the archive,
    installs ansible-core and runs bake-image.yml; validate phase checks what the bake must leave."""
    ansible = f"{ANSIBLE_VENV}/bin"
    document = {
        "name": "gpuforge-bake-image",
        "description": "Run playbooks/bake-image.yml (gpuforge) on the build instance",
        "schemaVersion": 1.0,
        "phases": [
            {
                "name": "build",
                "steps": [
                    {
                        "name": "DownloadPlaybooks",
                        "action": "S3Download",
                        "maxAttempts": 3,
                        "inputs": [{"source": f"s3://{bucket}/{key}", "destination": f"{BAKE_DIR}/bake.zip"}],
                    },
                    {
                        "name": "InstallAnsible",
                        "action": "ExecuteBash",
                        "inputs": {
                            "commands": [
                                "set -euo pipefail",
                                "export DEBIAN_FRONTEND=noninteractive",
                                "apt-get update",
                                "apt-get install -y --no-install-recommends unzip python3-venv",
                                "PYTHON=python3",
                                "if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then "
                                "apt-get install -y --no-install-recommends python3.11 python3.11-venv; "
                                "PYTHON=python3.11; fi",
                                f"$PYTHON -m venv {ANSIBLE_VENV}",
                                f"{ansible}/pip install --no-cache-dir {shlex.quote(ANSIBLE_CORE)}",
                                f"{ansible}/ansible-galaxy collection install {' '.join(ANSIBLE_COLLECTIONS)}",
                            ]
                        },
                    },
                    {
                        "name": "RunBakeImagePlaybook",
                        "action": "ExecuteBash",
                        "timeoutSeconds": 5400,
                        "inputs": {
                            "commands": [
                                "set -euo pipefail",
                                f"cd {BAKE_DIR}",
                                "unzip -o -q bake.zip",
                                f"{ansible}/ansible-playbook -c local -i localhost, "
                                f"-e {shlex.quote(json.dumps(extra_vars, sort_keys=True))} playbooks/bake-image.yml",
                            ]
                        },
                    },
                    {
                        "name": "CleanUp",
                        "action": "ExecuteBash",
                        "inputs": {"commands": [f"rm -rf {BAKE_DIR} {ANSIBLE_VENV} /root/.ansible"]},
                    },
                ],
            },
            {
                "name": "validate",
                "steps": [
                    {
                        "name": "NcclConfigPresent",
                        "action": "ExecuteBash",
                        "inputs": {"commands": ["test -s /etc/nccl.conf"]},
                    }
                ],
            },
        ],
    }
    return yaml.safe_dump(document, sort_keys=False, width=1000)


class ImagePipeline(pulumi.ComponentResource):
    pipeline_arn: pulumi.Output[str]
    parameter_name: str

    def __init__(self, name: str, args: ImagePipelineArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec = args.spec
        super().__init__(
            "gpuforge:aws:ImagePipeline",
            name,
            {
                "parentImage": spec.parent_image_ssm_parameter,
                "buildInstanceType": spec.build_instance_type,
                "schedule": spec.schedule,
                "ssmParameter": args.parameter_name,
            },
            opts,
        )
        child = pulumi.ResourceOptions(parent=self)

        # The playbooks: a content-addressed zip in a private, versioned, KMS-encrypted bucket.
        store = ObjectStore(
            f"{name}-artifacts",
            ObjectStoreArgs(spec=ObjectStoreSpec(purpose="artifacts"), kms_key_arn=args.kms_key_arn,
                            protected=args.protected),
            opts=child,
        )
        files = archive_files()
        key = f"image-pipeline/bake-{archive_digest(files)[:16]}.zip"
        archive = aws.s3.BucketObjectv2(
            f"{name}-playbooks",
            bucket=store.bucket,
            key=key,
            source=pulumi.AssetArchive({n: pulumi.FileAsset(str(p)) for n, p in files.items()}),
            content_type="application/zip",
            server_side_encryption="aws:kms",
            kms_key_id=args.kms_key_arn,
            opts=child,
        )

        profile = self._build_instance_profile(name, args, store.arn, key, child)
        component = aws.imagebuilder.Component(
            f"{name}-bake",
            platform="Linux",
            version="1.0.0",  # auto-named: a changed document is a new component, not a new version
            description="Runs playbooks/bake-image.yml",
            supported_os_versions=["Ubuntu"],
            data=pulumi.Output.from_input(store.bucket).apply(
                lambda bucket: component_document(bucket, key, bake_extra_vars(args))
            ),
            kms_key_id=args.kms_key_arn,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[archive]),
        )
        infrastructure = aws.imagebuilder.InfrastructureConfiguration(
            f"{name}-infra",
            description=f"{args.cluster}: private compute subnet, IMDSv2 only",
            instance_profile_name=profile.name,
            instance_types=[spec.build_instance_type],
            subnet_id=args.subnet_id,
            security_group_ids=args.security_group_ids,
            # IMDSv2 only, hop limit 1, as on the nodes (gpuforge/infra/aws/node_group.py).
            instance_metadata_options=aws.imagebuilder.InfrastructureConfigurationInstanceMetadataOptionsArgs(
                http_tokens="required", http_put_response_hop_limit=1
            ),
            terminate_instance_on_failure=True,
            resource_tags=args.tags,
            tags=args.tags,
            opts=child,
        )
        recipe = aws.imagebuilder.ImageRecipe(
            f"{name}-recipe",
            parent_image=f"ssm:{spec.parent_image_ssm_parameter}",
            version="1.0.0",
            components=[aws.imagebuilder.ImageRecipeComponentArgs(component_arn=component.arn)],
            block_device_mappings=[
                aws.imagebuilder.ImageRecipeBlockDeviceMappingArgs(
                    device_name=args.root_device_name,
                    ebs=aws.imagebuilder.ImageRecipeBlockDeviceMappingEbsArgs(
                        encrypted="true",
                        kms_key_id=args.kms_key_arn,
                        volume_size=spec.root_volume_gib,
                        volume_type="gp3",
                        delete_on_termination="true",
                    ),
                )
            ],
            tags=args.tags,
            opts=child,
        )
        distribution = aws.imagebuilder.DistributionConfiguration(
            f"{name}-dist",
            description=f"{args.cluster}: GPU node AMI, id written to {args.parameter_name}",
            distributions=[
                aws.imagebuilder.DistributionConfigurationDistributionArgs(
                    region=args.region,
                    ami_distribution_configuration=aws.imagebuilder.DistributionConfigurationDistributionAmiDistributionConfigurationArgs(
                        name=f"{args.cluster}-gpu-node-{{{{ imagebuilder:buildDate }}}}",
                        description=f"{args.cluster}: playbooks/bake-image.yml on {spec.parent_image_ssm_parameter}",
                        kms_key_id=args.kms_key_arn,
                        ami_tags={**args.tags, "gpuforge:image": "gpu-node"},
                    ),
                    ssm_parameter_configurations=[
                        aws.imagebuilder.DistributionConfigurationDistributionSsmParameterConfigurationArgs(
                            parameter_name=args.parameter_name, data_type="aws:ec2:image"
                        )
                    ],
                )
            ],
            tags=args.tags,
            opts=child,
        )
        pipeline = aws.imagebuilder.ImagePipeline(
            f"{name}-pipeline",
            description=f"{args.cluster}: bake GPU node AMIs",
            image_recipe_arn=recipe.arn,
            infrastructure_configuration_arn=infrastructure.arn,
            distribution_configuration_arn=distribution.arn,
            schedule=(
                aws.imagebuilder.ImagePipelineScheduleArgs(
                    schedule_expression=spec.schedule,
                    pipeline_execution_start_condition="EXPRESSION_MATCH_AND_DEPENDENCY_UPDATES_AVAILABLE",
                )
                if spec.schedule
                else None
            ),
            status="ENABLED",
            tags=args.tags,
            opts=child,
        )
        self.pipeline_arn = pipeline.arn
        self.parameter_name = args.parameter_name
        self.register_outputs(
            {"pipelineArn": pipeline.arn, "ssmParameter": args.parameter_name, "archiveBucket": store.bucket}
        )

    @staticmethod
    def _build_instance_profile(
        name: str,
        args: ImagePipelineArgs,
        bucket_arn: pulumi.Input[str],
        key: str,
        child: pulumi.ResourceOptions,
    ) -> aws.iam.InstanceProfile:
        """Least privilege: SSM (Image Builder drives the instance through it), Image Builder's own
        instance policy, and read of the one archive object (with the key that encrypts it)."""
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
        aws.iam.RolePolicyAttachment(
            f"{name}-imagebuilder", role=role.name, policy_arn=IMAGE_BUILDER_INSTANCE_POLICY, opts=child
        )
        aws.iam.RolePolicy(
            f"{name}-archive",
            role=role.id,
            policy=pulumi.Output.all(bucket_arn, args.kms_key_arn).apply(
                lambda values: json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"{values[0]}/{key}"]},
                            {"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [values[1]]},
                        ],
                    }
                )
            ),
            opts=child,
        )
        return aws.iam.InstanceProfile(f"{name}-profile", role=role.name, opts=child)
