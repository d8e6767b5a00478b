"""The placement section: where the cluster runs (one AWS region, a site's bare metal, or both)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import SpecModel
from .fields import Name

AUTOSCALING_ROLE_DESCRIPTION = (
    "EC2 Auto Scaling's service-linked role (AWSServiceRoleForAutoScaling), which the cluster key's policy names: "
    "KMS refuses a key policy naming a role that does not exist, and an account gets this one only with its first "
    "Auto Scaling group. create: the stack declares it (aws.iam.ServiceLinkedRole, the key waits for it, kept on "
    "destroy); existing: the account has it already (another stack of the account created it, or `aws iam "
    "create-service-linked-role --aws-service-name autoscaling.amazonaws.com`). One stack per account creates it; "
    "`gpuforge preflight` says which this account needs."
)


class AwsPlacement(SpecModel):
    kind: Literal["aws"] = Field(description="Place the cluster in one AWS region.")
    region: str = Field(description="AWS region, e.g. us-east-1. No default: it is the environment's choice.")
    autoscaling_service_linked_role: Literal["create", "existing"] = Field(
        default="create", description=AUTOSCALING_ROLE_DESCRIPTION
    )


class OnPremPlacement(SpecModel):
    kind: Literal["onprem"] = Field(description="Place the cluster on a site's bare metal.")
    site: Name = Field(description="Site name, as declared in the site model.")


class HybridPlacement(SpecModel):
    kind: Literal["hybrid"] = Field(description="An on-premises site that bursts into one AWS region.")
    site: Name = Field(description="Site name, as declared in the site model.")
    region: str = Field(description="AWS region the burst node groups run in.")
    autoscaling_service_linked_role: Literal["create", "existing"] = Field(
        default="create", description=AUTOSCALING_ROLE_DESCRIPTION
    )


Placement = Annotated[AwsPlacement | OnPremPlacement | HybridPlacement, Field(discriminator="kind")]
