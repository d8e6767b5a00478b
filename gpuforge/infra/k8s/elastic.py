"""Elastic GPU pools on Kubernetes: Kueue asks the Cluster Autoscaler for a workload's nodes before it admits it.

A flavor whose nodes come and go (an elastic node group, scaling: {min, max}) gets a Kueue AdmissionCheck of
controller `kueue.x-k8s.io/provisioning-request`: for each workload that fits the team's quota, Kueue creates a
ProvisioningRequest of class `best-effort-atomic-scale-up.autoscaling.x-k8s.io`, the Cluster Autoscaler scales the
group up for all its pods at once (or not at all), and Kueue admits the workload once the request is Provisioned.
Quota stays the group's max; an empty queue leaves the nodes unneeded and the autoscaler takes the group back to
its min after scaling.scaledown_idle_minutes (its --scale-down-unneeded-time).

Sources: Kueue 0.14.4 apis/kueue/v1beta1/provisioningrequestconfig_types.go (ProvisioningRequestControllerName) and
site/content/en/docs/concepts/admission_check/provisioning_request.md; kubernetes/autoscaler cluster-autoscaler-1.33.6
apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go (ProvisioningClassBestEffortAtomicScaleUp) and FAQ.md,
"How can I use ProvisioningRequest to run batch workloads".
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from gpuforge.assets import CRDS_DIR

PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
ELASTIC_CHECK = "gpuforge-elastic"  # the AdmissionCheck and its ProvisioningRequestConfig
PROVISIONING_REQUEST_CRD = CRDS_DIR / "autoscaling.x-k8s.io_provisioningrequests.yaml"


@cache
def provisioning_request_crd_body() -> dict[str, Any]:
    """The upstream CRD as shipped (gpuforge/assets/crds/SOURCES.md)."""
    body: dict[str, Any] = yaml.safe_load(PROVISIONING_REQUEST_CRD.read_text())
    return body


def provisioning_request_crd(name: str, opts: pulumi.ResourceOptions) -> k8s.apiextensions.v1.CustomResourceDefinition:
    """The ProvisioningRequest CRD, which no chart installs: before Kueue starts (Kueue 0.14.4 sets up the
    provisioning admission check only where the API serves it) and before the autoscaler watches it."""
    body = provisioning_request_crd_body()
    return k8s.apiextensions.v1.CustomResourceDefinition(
        f"{name}-provisioningrequests-crd",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=body["metadata"]["name"], annotations=body["metadata"].get("annotations")
        ),
        spec=body["spec"],
        opts=opts,
    )


def elastic_admission_check(
    name: str, kueue_api: str, managed_resources: list[str], opts: pulumi.ResourceOptions
) -> None:
    """The ProvisioningRequestConfig (which class, which resources the request is about) and the AdmissionCheck
    that names it; ClusterQueues apply it to their elastic flavors only (`admission_checks_strategy`)."""
    k8s.apiextensions.CustomResource(
        f"{name}-provisioning-config",
        api_version=kueue_api,
        kind="ProvisioningRequestConfig",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=ELASTIC_CHECK),
        # managedResources: only pod sets asking for GPUs need new nodes; CPU-only pods run on the system group.
        spec={"provisioningClassName": PROVISIONING_CLASS, "managedResources": managed_resources},
        opts=opts,
    )
    k8s.apiextensions.CustomResource(
        f"{name}-admission-check",
        api_version=kueue_api,
        kind="AdmissionCheck",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=ELASTIC_CHECK),
        spec={
            "controllerName": PROVISIONING_CONTROLLER,
            "parameters": {
                "apiGroup": kueue_api.split("/")[0],
                "kind": "ProvisioningRequestConfig",
                "name": ELASTIC_CHECK,
            },
        },
        opts=opts,
    )


def admission_checks_strategy(elastic_flavors: list[str]) -> dict[str, Any]:
    """A ClusterQueue's admissionChecksStrategy: the provisioning check on the flavors whose nodes scale, none
    on fixed ones (their nodes already run); empty when the queue has no elastic flavor."""
    if not elastic_flavors:
        return {}
    return {"admissionChecksStrategy": {"admissionChecks": [{"name": ELASTIC_CHECK, "onFlavors": elastic_flavors}]}}
