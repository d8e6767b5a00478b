"""A team's multi-node training job as a JobSet (jobset.x-k8s.io/v1alpha2), rendered from what the platform
declares for the team: its namespace, service account, Kueue LocalQueue, the GPU flavor's nodes and the data
claim. `gpuforge render job STACK --team T` prints it; gpuforge/policy/training_job.py derives the inputs
from a plan and proves the job admissible and schedulable (docs/kubernetes.md, "Training jobs").

One pod per node: every GPU, every fabric device and the huge pages of its node, so NCCL sees the whole
node and Kueue admits the job whole or not at all. The pod needs nothing Pod Security `baseline` forbids:
GPUs, EFA or RDMA devices come through the device plugins, not privileged mode or host paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .labels import TEAM_LABEL

# Left to the node agents beside the training pod (GPU Operator operands, EFA or RDMA device plugin, NFD
# worker, CNI, kube-proxy, monitoring): their requests stay under this, so one training pod per node fits
# in what the kubelet leaves allocatable.
AGENT_HEADROOM_MILLICORES = 4000
AGENT_HEADROOM_MIB = 16 * 1024
# /dev/shm for NCCL's shared-memory transport and data loader workers: a container runtime's default is
# 64 MiB. Memory-backed, so it counts against the pod's memory, which covers it.
SHM_GIB = 64
DATA_MOUNT = "/data"
# How long a pod has between SIGTERM and SIGKILL to write a checkpoint: when Kueue drains its queue before a
# Capacity Block ends (gpuforge/infra/k8s/platform.py), on preemption, and when a node is drained.
CHECKPOINT_GRACE_SECONDS = 600
REPLICATED_JOB = "workers"
CONTAINER = "trainer"
PRIORITY_CLASS = "gpuforge-training"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@dataclass(frozen=True)
class TrainingJobInputs:
    team: str
    namespace: str
    service_account: str
    queue: str  # the team's LocalQueue
    nodes: int
    gpu_resource: str
    gpus_per_node: int
    allocatable_cpu_millicores: int
    allocatable_memory_mib: int
    fabric_resource: str | None = None  # vpc.amazonaws.com/efa, rdma/...; None: no fabric devices
    fabric_devices_per_node: int = 0
    hugepages_2mi_mib: int = 0  # per pod; 0: none (only EFA's libfabric uses them)
    tolerations: tuple[dict[str, Any], ...] = ()  # the flavor's: Kueue adds them on admission too
    data_claim: str | None = None  # the team's claim on the parallel file system
    image: str = "REPLACE-WITH-YOUR-TRAINING-IMAGE"


def pod_resources(inputs: TrainingJobInputs) -> dict[str, str]:
    """Requests = limits (Guaranteed): whole devices, the node's CPU and memory less the agents' headroom."""
    out = {
        "cpu": f"{inputs.allocatable_cpu_millicores - AGENT_HEADROOM_MILLICORES}m",
        "memory": f"{inputs.allocatable_memory_mib - AGENT_HEADROOM_MIB}Mi",
        inputs.gpu_resource: str(inputs.gpus_per_node),
    }
    if inputs.fabric_resource and inputs.fabric_devices_per_node:
        out[inputs.fabric_resource] = str(inputs.fabric_devices_per_node)
    if inputs.hugepages_2mi_mib:
        out["hugepages-2Mi"] = f"{inputs.hugepages_2mi_mib}Mi"
    return out


def training_jobset(inputs: TrainingJobInputs, name: str | None = None) -> dict[str, Any]:
    name = name or f"train-{inputs.team}"
    resources = pod_resources(inputs)
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{SHM_GIB}Gi"}}]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    if inputs.data_claim:
        volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": inputs.data_claim}})
        mounts.append({"name": "data", "mountPath": DATA_MOUNT})
    # JobSet's DNS names: <jobset>-<replicatedJob>-<job index>-<pod index>.<jobset> (network.enableDNSHostnames).
    rendezvous = f"{name}-{REPLICATED_JOB}-0-0.{name}"
    env = [
        {"name": "NNODES", "value": str(inputs.nodes)},
        {"name": "NPROC_PER_NODE", "value": str(inputs.gpus_per_node)},
        {"name": "MASTER_ADDR", "value": rendezvous},
        {"name": "MASTER_PORT", "value": "29500"},
        {
            "name": "NODE_RANK",
            "valueFrom": {
                "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
            },
        },
    ]
    if inputs.fabric_resource == "vpc.amazonaws.com/efa":
        env += [{"name": "FI_PROVIDER", "value": "efa"}, {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"}]
    pod_spec: dict[str, Any] = {
        "serviceAccountName": inputs.service_account,
        "restartPolicy": "Never",
        "priorityClassName": PRIORITY_CLASS,
        "terminationGracePeriodSeconds": CHECKPOINT_GRACE_SECONDS,
        "containers": [
            {
                "name": CONTAINER,
                "image": inputs.image,
                "command": ["torchrun"],
                "args": [
                    "--nnodes=$(NNODES)",
                    "--nproc-per-node=$(NPROC_PER_NODE)",
                    "--node-rank=$(NODE_RANK)",
                    "--master-addr=$(MASTER_ADDR)",
                    "--master-port=$(MASTER_PORT)",
                    "train.py",
                ],
                "env": env,
                "resources": {"requests": dict(resources), "limits": dict(resources)},
                "volumeMounts": mounts,
            }
        ],
        "volumes": volumes,
    }
    if inputs.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in inputs.tolerations]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": inputs.namespace,
            "labels": {QUEUE_LABEL: inputs.queue, TEAM_LABEL: inputs.team},
        },
        "spec": {
            # One node lost restarts the whole job from its last checkpoint, up to three times.
            "failurePolicy": {"maxRestarts": 3},
            "network": {"enableDNSHostnames": True},
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": inputs.nodes,
                            "completions": inputs.nodes,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": {"spec": pod_spec},
                        }
                    },
                }
            ],
        },
    }
