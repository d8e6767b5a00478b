"""slurm.conf keys and partition options a stack may pass through, and the keys gpuforge renders itself
(data/slurm_settings.yaml), typed: what gpuforge/spec/slurm_settings_checks.py holds a stack's values
against, each with the slurm.conf(5) release that documents it."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuforge.catalog.models import load_data_file

SLURM_SETTINGS_FILE = Path(__file__).resolve().parent / "data" / "slurm_settings.yaml"
OLDEST = "22.05"  # the oldest manual read; a key without since is documented there


class _Facts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ValueFacts(_Facts):
    since: str = OLDEST


class SettingFacts(_Facts):
    """One key: the form slurm.conf(5) gives its value, and the first release that documents it."""

    form: Literal["seconds", "count", "choice", "choices", "options", "location"]
    doc: str
    example: str | int  # a value that passes the check and that slurmctld takes (the docs and tests use it)
    since: str = OLDEST
    min: int | None = None
    max: int | None = None
    unlimited: tuple[str, ...] = ()  # seconds, count: the words slurm.conf(5) takes for no limit (INFINITE, -1)
    values: dict[str, ValueFacts] = Field(default_factory=dict)  # choice, choices
    requires: str | None = None  # another key of the same map that must be set with it
    owned_with_dynamic_nodes: str | None = None  # gpuforge renders the key when cloud nodes register themselves
    merged_after: tuple[str, ...] = ()  # options: gpuforge's own, rendered before the stack's

    @model_validator(mode="after")
    def _complete(self) -> SettingFacts:
        if self.form in ("seconds", "count") and (self.min is None or self.max is None):
            raise ValueError(f"a {self.form} needs min and max (slurm.conf(5)'s bounds)")
        if self.form in ("choice", "choices") and not self.values:
            raise ValueError(f"a {self.form} needs its values")
        return self

    @field_validator("values", mode="before")
    @classmethod
    def _listed(cls, raw: object) -> object:
        """`values: [A, B]` in the data file is shorthand for `{A: {}, B: {}}`."""
        return {value: {} for value in raw} if isinstance(raw, list) else raw


_FIXED = re.compile(r"gpuforge \((?P<why>.+)\)")


def fixed_by_gpuforge(owner: str) -> str | None:
    """Why gpuforge fixes a key's value, for an `owned` entry "gpuforge (why)"; None for a spec field."""
    match = _FIXED.fullmatch(owner)
    return match["why"] if match else None


class SlurmSettings(_Facts):
    source: str
    releases_read: tuple[str, ...]
    settings: dict[str, SettingFacts]  # slurm.conf keys
    partition_options: dict[str, SettingFacts]  # options of a PartitionName line
    owned: dict[str, str]  # slurm.conf key -> what sets it
    partition_owned: dict[str, str]  # partition option -> the partition's field (or gpuforge) that sets it

    @model_validator(mode="after")
    def _owners(self) -> SlurmSettings:
        for key, owner in {**self.owned, **self.partition_owned}.items():
            if owner.startswith("gpuforge") and fixed_by_gpuforge(owner) is None:
                raise ValueError(f"{key}: write what gpuforge fixes as \"gpuforge (why)\", not {owner!r}")
        return self


@lru_cache(maxsize=1)
def slurm_settings() -> SlurmSettings:
    return load_data_file(SLURM_SETTINGS_FILE, SlurmSettings)
