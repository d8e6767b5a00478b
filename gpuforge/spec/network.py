"""The network section: the VPC, its subnet tiers, NAT and the openings into the ingress tier."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import SpecModel
from .fields import Port, check_log_retention, parse_cidr

Tier = Literal["ingress", "management", "compute", "storage"]
TIERS: tuple[Tier, ...] = ("ingress", "management", "compute", "storage")
DEFAULT_TIER_PREFIX: dict[Tier, int] = {"compute": 18, "management": 22, "storage": 22, "ingress": 24}


class SubnetTier(SpecModel):
    prefix_length: int | None = Field(
        default=None,
        ge=16,
        le=28,
        description="Prefix length of each per-AZ subnet, planned from the VPC CIDR. "
        "Defaults: compute /18, management /22, storage /22, ingress /24.",
    )
    cidrs: dict[str, str] | None = Field(
        default=None,
        description="Explicit subnet CIDR per availability zone, instead of planning from prefix_length.",
    )

    @field_validator("cidrs")
    @classmethod
    def _cidrs_parse(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for az, cidr in (value or {}).items():
            try:
                parse_cidr(cidr, example="10.0.0.0/20")
            except ValueError as exc:
                raise ValueError(f"{az}: {exc}") from None
        return value


class IngressRule(SpecModel):
    cidr: str = Field(description="Source CIDR allowed in, e.g. an office or VPN range.")
    ports: list[Port] = Field(
        min_length=1, description="TCP ports (1-65535) opened to that CIDR on the ingress tier."
    )
    description: str = Field(description="Why this opening exists; shown in the security group rule.")

    @field_validator("cidr")
    @classmethod
    def _cidr_parse(cls, value: str) -> str:
        parse_cidr(value, example="203.0.113.0/24")
        return value


class Network(SpecModel):
    cidr: str = Field(description="VPC CIDR block, e.g. 10.20.0.0/16.")
    availability_zones: list[str] = Field(
        min_length=1,
        max_length=6,
        description="AZs the network spans. EFA node groups pin one of them; login and services span all.",
    )
    tiers: dict[Tier, SubnetTier] = Field(
        default_factory=dict,
        description="Per-tier subnet plan (ingress, management, compute, storage). Omitted tiers use defaults.",
    )
    nat: Literal["per_az", "single", "none"] = Field(
        default="per_az",
        description="NAT gateways for private egress: one per AZ (resilient), a single one (cheap), or none.",
    )
    s3_gateway_endpoint: bool = Field(default=True, description="Route S3 traffic through a free gateway endpoint.")
    flow_logs: bool = Field(default=True, description="VPC flow logs to CloudWatch Logs.")
    flow_log_retention_days: int = Field(
        default=90, ge=1, le=3653, description="Flow log retention in days: a CloudWatch Logs period (1, 3, 5, "
        "7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653)."
    )
    allowed_ingress: list[IngressRule] = Field(
        default_factory=list,
        description="Explicit openings into the ingress tier. None by default: reach nodes through SSM.",
    )

    @model_validator(mode="after")
    def _private_egress(self) -> Network:
        if self.nat == "none" and not self.s3_gateway_endpoint:
            raise ValueError(
                "nat: none leaves S3 reachable only through the gateway endpoint (ECR serves image layers "
                "from S3); set s3_gateway_endpoint: true or choose nat: single/per_az"
            )
        return self

    @field_validator("cidr")
    @classmethod
    def _vpc_cidr(cls, value: str) -> str:
        net = parse_cidr(value, example="10.20.0.0/16")
        if not 16 <= net.prefixlen <= 24:
            raise ValueError(f"{value} has prefix /{net.prefixlen}; AWS VPCs take /16 to /24")
        return value

    @field_validator("flow_log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        return check_log_retention(value)

    @field_validator("availability_zones")
    @classmethod
    def _unique_azs(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("availability zones repeat; list each once")
        return value

    def tier(self, tier: Tier) -> SubnetTier:
        return self.tiers.get(tier, SubnetTier())
