"""The placement-neutral cluster spec, its checks, and the facts resolved from it."""

from .checks import ResolvedNodeGroup, ResolvedSpec, parse_spec, resolve
from .errors import SpecError, SpecIssue
from .models import ClusterSpec, NodeGroup

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
