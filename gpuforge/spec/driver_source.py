"""Where a site's hosts get the NVIDIA driver: a mirror of NVIDIA's CUDA network repository (site.driver_source).

A site's hosts often reach no Internet, so they install the driver (and Fabric Manager, DCGM and NCCL, which
the later roles take from the same repository) from the site's own mirror or a local repository on disk. The
mirror keeps NVIDIA's layout: `<repository>/<distribution path>/x86_64/` (e.g. `.../ubuntu2204/x86_64/`) with
its signing key beside it, so the nvidia_driver role's checks (branch, hold) are unchanged. The inventory
gives the site's pools `nvidia_driver_cuda_repo_base_url` (and the key URL) from it; cloud groups keep
NVIDIA's repository.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from .base import SpecModel
from .errors import described_pattern

REPOSITORY_URL = described_pattern(
    r"^(https?://[A-Za-z0-9.-]+(:\d+)?|file://)(/[A-Za-z0-9._~-]+)+$",
    "an https://, http:// (apt checks the repository's signature either way) or file:// URL with a path and "
    "no trailing slash",
    "https://mirror.site.example/cuda/repos",
)
KEY_URL = described_pattern(
    r"^(https?://[A-Za-z0-9.-]+(:\d+)?|file://)(/[A-Za-z0-9._~-]+)+\.(pub|asc|gpg)$",
    "an https://, http:// or file:// URL of a .pub, .asc or .gpg key",
    "https://mirror.site.example/cuda/repos/ubuntu2204/x86_64/3bf863cc.pub",
)


class DriverSource(SpecModel):
    cuda_repository: Annotated[str, Field(pattern=REPOSITORY_URL)] = Field(
        description="Base URL of the site's mirror of NVIDIA's CUDA network repository (what "
        "https://developer.download.nvidia.com/compute/cuda/repos is to the Internet), or file:///path of a local "
        "copy on every host; the distribution path and architecture are appended. The driver, Fabric Manager, "
        "DCGM and NCCL all install from it."
    )
    key_url: Annotated[str, Field(pattern=KEY_URL)] | None = Field(
        default=None,
        description="The repository's signing key; default the key beside the distribution's repository in the "
        "mirror (<cuda_repository>/<distribution>/x86_64/3bf863cc.pub, as NVIDIA publishes it).",
    )
