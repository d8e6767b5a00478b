"""Kubernetes objects of a plan, validated offline (tests/k8s_objects.py)."""

from __future__ import annotations

from tests.k8s_objects import manifests as k8s_manifests
from tests.k8s_objects import validate_all

__all__ = ["k8s_manifests", "validate_all"]
