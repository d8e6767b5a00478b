"""The software versions against the catalog: the NCCL build the nodes install must exist."""

from __future__ import annotations

from gpuforge.catalog import Catalog

from .errors import SpecIssue
from .models import ClusterSpec

PATH = "cluster.software"


def check_software(spec: ClusterSpec, catalog: Catalog) -> list[SpecIssue]:
    """The nccl role installs libnccl2=<nccl_version>-1+cuda<nccl_cuda_version> from NVIDIA's CUDA repository:
    a pair the catalog does not list names a package NVIDIA does not publish, and every node's bake fails."""
    software, nccl = spec.software, catalog.data.nccl
    release, cuda = software.nccl_version, software.nccl_cuda_version
    built_for = nccl.cuda_versions(release)
    if cuda in built_for:
        return []
    add = f"or, if NVIDIA publishes it, add it under catalog.nccl.builds ({release}: [{cuda}])"
    if not built_for:
        known = ", ".join(f"{r} (CUDA {', '.join(c)})" for r, c in sorted(nccl.builds.items()))
        return [
            SpecIssue(
                f"{PATH}.nccl_version",
                f"NCCL {release} is not in the catalog; known builds: {known}",
                f"use one of those releases with its CUDA version, {add}",
            )
        ]
    others = [r for r, c in sorted(nccl.builds.items()) if cuda in c]
    return [
        SpecIssue(
            f"{PATH}.nccl_cuda_version",
            f"NCCL {release} has no build for CUDA {cuda} (libnccl2={release}-1+cuda{cuda} is not published); "
            f"it is built for CUDA {', '.join(built_for)}",
            f"set nccl_cuda_version to {' or '.join(built_for)}"
            + (f", or nccl_version to {' or '.join(others)} (built for CUDA {cuda})" if others else "")
            + f", {add}",
        )
    ]
