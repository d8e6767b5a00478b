"""The MLflow tracking server's pins and facts (data/tracking.yaml), typed: what the mlflow_server role installs
and the database it keeps its runs in. ``load_tracking().mlflow.requirements``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuforge.catalog.models import load_data_file

TRACKING_FILE = Path(__file__).resolve().parent / "data" / "tracking.yaml"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TrackingDatabase(_Frozen):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    user: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")
    auth_name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    source: str


class MlflowPin(_Frozen):
    requirements: tuple[str, ...]  # pip requirement lines, each pinned with ==
    version: str
    source: str
    port: int = Field(ge=1, le=65535)
    port_source: str
    database: TrackingDatabase

    @model_validator(mode="after")
    def _pinned(self) -> MlflowPin:
        # A range would let two bakes of the same commit install different servers.
        loose = [line for line in self.requirements if "==" not in line]
        if loose:
            raise ValueError(f"requirements must be pinned with ==: {', '.join(loose)}")
        if not any(line.startswith(f"mlflow[auth]=={self.version}") for line in self.requirements):
            raise ValueError(f"requirements must pin mlflow[auth]=={self.version} (the version field)")
        return self


class TrackingCatalog(_Frozen):
    mlflow: MlflowPin


@lru_cache(maxsize=1)
def load_tracking() -> TrackingCatalog:
    return load_data_file(TRACKING_FILE, TrackingCatalog)
