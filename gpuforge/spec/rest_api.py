"""`scheduler.rest_api`: slurmrestd on the controllers, for pipelines and notebooks that submit jobs over HTTP.

Off by default. Turned on, slurmrestd listens on the catalog's port (gpuforge/catalog/data/flows.yaml ports
slurmrestd: 6820, slurmrestd's documented default) and takes only JSON Web Tokens that slurmctld signed with the
cluster's key (AuthAltTypes=auth/jwt; a user gets one with `scontrol token`). Only the address ranges named here
reach it: the controllers' security group on AWS, and on every placement the unit's own IP filter (systemd's
IPAddressAllow), so a site without a firewall in front of the controller is closed to the rest of the network too.
docs/slurm.md, "The REST API".
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from .base import SpecModel
from .fields import parse_cidr

EXAMPLE = "10.20.0.0/16"


def _a_client_range(value: str) -> str:
    network = parse_cidr(value, example=EXAMPLE)
    if network.prefixlen == 0:
        raise ValueError(
            f"{value} is every address: slurmrestd runs any job a valid token asks for, so only the networks your "
            f"pipelines and notebooks run in may reach it (a token leaked once would work from anywhere); name "
            f"those, e.g. {EXAMPLE} or a CI runner's /32"
        )
    return value


ClientRange = Annotated[str, AfterValidator(_a_client_range)]


class RestApi(SpecModel):
    enabled: bool = Field(
        default=False,
        description="Run slurmrestd on the controllers, taking Slurm's JSON Web Tokens (AuthAltTypes=auth/jwt).",
    )
    allowed_cidrs: list[ClientRange] = Field(
        default_factory=list,
        description="IPv4 ranges allowed to reach slurmrestd (the pipelines' and notebooks' networks); never "
        "0.0.0.0/0. Required when enabled.",
    )

    @model_validator(mode="after")
    def _someone_may_reach_it(self) -> RestApi:
        if self.enabled and not self.allowed_cidrs:
            raise ValueError(
                "enabled with no allowed_cidrs: nothing could reach slurmrestd; list the ranges your pipelines "
                f"and notebooks run in, e.g. allowed_cidrs: [{EXAMPLE}]"
            )
        return self
