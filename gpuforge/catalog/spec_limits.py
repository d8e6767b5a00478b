"""Limits and reserved values of the services a stack configures (data/spec_limits.yaml), typed: what
the spec's format checks (gpuforge/spec/limits.py) hold values against, each with its source."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

SPEC_LIMITS_FILE = Path(__file__).resolve().parent / "data" / "spec_limits.yaml"


class _Facts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SlurmLimits(_Facts):
    reserved_partition_names: tuple[str, ...]
    reserved_partition_names_source: str
    system_accounts: frozenset[str]
    system_accounts_source: str


class SshLimits(_Facts):
    public_key_types: tuple[str, ...]
    source: str


class RdsLimits(_Facts):
    instance_class_pattern: str
    source: str


class EmailLimits(_Facts):
    local_part_octets: int
    domain_octets: int
    path_octets: int
    source: str


class SlackLimits(_Facts):
    channel_name_pattern: str
    source: str


class KubernetesLabelLimits(_Facts):
    name_pattern: str
    prefix_pattern: str
    prefix_max: int
    source: str


class CustomerGatewayLimits(_Facts):
    reserved_asns: dict[int, str]
    source: str


class EksLimits(_Facts):
    public_access_cidrs_max: int
    source: str


class CapacityBlockLimits(_Facts):
    daily_steps_up_to_days: int
    weekly_steps_up_to_days: int
    end_utc: str
    source: str


class DataSyncLimits(_Facts):
    min_interval_minutes: int
    source: str


class CronLimits(_Facts):
    fields: tuple[tuple[str, int, int], ...]
    source: str


class SsmParameterLimits(_Facts):
    max_levels: int
    reserved_prefixes: tuple[str, ...]
    source: str


class AwsLimits(_Facts):
    customer_gateway: CustomerGatewayLimits
    eks: EksLimits
    capacity_block: CapacityBlockLimits
    datasync: DataSyncLimits
    eventbridge_cron: CronLimits
    ssm_parameter: SsmParameterLimits


class SpecLimits(_Facts):
    slurm: SlurmLimits
    ssh: SshLimits
    rds: RdsLimits
    email: EmailLimits
    slack: SlackLimits
    kubernetes_labels: KubernetesLabelLimits
    aws: AwsLimits


@lru_cache(maxsize=1)
def spec_limits() -> SpecLimits:
    doc = yaml.safe_load(SPEC_LIMITS_FILE.read_text(encoding="utf-8"))
    doc.pop("_source", None)
    return SpecLimits.model_validate(doc)
