"""The software section: the driver, NCCL and EFA versions the nodes install."""

from __future__ import annotations

from pydantic import Field

from .base import SpecModel
from .errors import described_pattern

DRIVER_BRANCH = described_pattern(
    r"^\d{3}$",
    "a three-digit driver branch in quotes",
    "'580'",
)


class Software(SpecModel):
    nvidia_driver_branch: str = Field(default="580", pattern=DRIVER_BRANCH, description="Datacenter driver branch.")
    nccl_version: str = Field(default="2.27.7", description="NCCL version baked into nodes.")
    nccl_cuda_version: str = Field(
        default="12.9",
        pattern=r"^[0-9]+\.[0-9]+$",
        description="CUDA version of the NCCL build the nodes install (libnccl2=<nccl_version>-1+cuda<this>, from "
        "NVIDIA's CUDA repository) and of the CUDA toolkit nccl-tests is built with; the pair must be one the "
        "catalog lists (catalog.nccl.builds).",
    )
    aws_ofi_nccl_version: str = Field(default="1.16.3", description="aws-ofi-nccl plugin version (EFA).")
    efa_installer_version: str = Field(default="1.43.1", description="EFA installer version (EFA).")
