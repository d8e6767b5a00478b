"""The placement-neutral cluster spec, its checks, and the facts resolved from it."""

from .checks import parse_spec, resolve
from .errors import SpecError, SpecIssue
from .models import ClusterSpec, NodeGroup
from .resolved import ResolvedNodeGroup, ResolvedSpec

__all__ = [
    "ClusterSpec",
    "NodeGroup",
    "ResolvedNodeGroup",
    "ResolvedSpec",
    "SpecError",
    "SpecIssue",
    "parse_spec",
    "resolve",
]
