"""The image_pipeline section: the EC2 Image Builder pipeline that bakes the node AMI."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from .base import SpecModel
from .errors import described_pattern
from .fields import ReadParameter
from .limits import cron_problem, refusing, written_parameter_problem

CRON_SCHEDULE = described_pattern(
    r"^cron\((\S+\s+){5}\S+\)$",
    "an EventBridge cron expression with six fields",
    "cron(0 4 ? * SUN *)",
)

CronSchedule = Annotated[str, Field(pattern=CRON_SCHEDULE), AfterValidator(refusing(cron_problem))]

# Canonical's public SSM parameter for the current Ubuntu 22.04 LTS amd64 AMI (22.04 AMIs are
# published under ebs-gp2; 24.04 and later under ebs-gp3).
UBUNTU_2204_SSM = "/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id"
UBUNTU_2404_SSM = "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"
SSM_PARAMETER_PATTERN = described_pattern(
    r"^/[A-Za-z0-9_.\-/]{1,1000}$",
    "an SSM parameter name: a path starting with / of letters, digits and _ . - /",
    "/gpuforge/prod/gpu-node-ami",
)


# A parameter gpuforge writes may not be under /aws or /ssm (ReadParameter above may: AWS's public ones).
WrittenParameter = Annotated[
    str, Field(pattern=SSM_PARAMETER_PATTERN), AfterValidator(refusing(written_parameter_problem))
]


class ImagePipelineSpec(SpecModel):
    parent_image_ssm_parameter: ReadParameter = Field(
        default=UBUNTU_2204_SSM,
        pattern=SSM_PARAMETER_PATTERN,
        description="SSM parameter holding the parent AMI id the bake starts from. Default: Canonical's "
        "Ubuntu 22.04 LTS amd64 parameter.",
    )
    build_instance_type: str = Field(
        default="c7i.4xlarge",
        description="EC2 instance type that runs the bake (no GPU needed: the driver is built with DKMS); "
        "must be in the catalog and offered in the cluster's region.",
    )
    root_volume_gib: int = Field(
        default=100, ge=20, le=16384, description="Root volume of the baked AMI in GiB (encrypted, cluster key)."
    )
    schedule: CronSchedule | None = Field(
        default=None,
        description="Image Builder cron expression (six fields, UTC), e.g. cron(0 4 ? * SUN *); the pipeline "
        "then rebuilds when the parent image or the playbooks changed. None: build on demand only.",
    )
    ssm_parameter: WrittenParameter | None = Field(
        default=None,
        description="SSM parameter the pipeline writes the baked AMI id to; node groups with image: "
        "{pipeline: true} launch from it. Default: /gpuforge/<cluster>/gpu-node-ami.",
    )
    extra_vars: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Extra Ansible variables for bake-image.yml (e.g. dcgm_exporter_binary_url); they override "
        "the ones derived from the spec.",
    )


    def parameter_for(self, cluster: str) -> str:
        return self.ssm_parameter or f"/gpuforge/{cluster}/gpu-node-ami"
