"""Node labels shared by every placement and the platform: a placement puts them on its nodes
(EKS managed node group labels, kubelet --node-labels on-prem); the platform selects on them."""

NODE_LABEL_GROUP = "gpuforge.dev/node-group"
NODE_LABEL_GPU_MODEL = "gpuforge.dev/gpu-model"  # the Kueue ResourceFlavor of each GPU model selects it
TEAM_LABEL = "gpuforge.dev/team"
# Where a node runs (onprem, aws): hybrid burst nodes and site hosts share every other label.
NODE_LABEL_LOCATION = "gpuforge.dev/location"
# The taint every GPU node registers with, on every placement (site hosts' default in gpuforge/spec/site.py,
# EKS GPU node groups): pods without a GPU stay off GPU nodes. Its key is the one the GPU Operator's operands
# tolerate by default (daemonsets.tolerations), and Kueue's GPU flavors add the toleration to admitted pods.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
GPU_TAINT_EFFECT = "NoSchedule"
