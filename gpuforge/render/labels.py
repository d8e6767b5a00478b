"""Node labels shared by every placement and the platform: a placement puts them on its nodes
(EKS managed node group labels, kubelet --node-labels on-prem); the platform selects on them."""

NODE_LABEL_GROUP = "gpuforge.dev/node-group"
NODE_LABEL_GPU_MODEL = "gpuforge.dev/gpu-model"  # the Kueue ResourceFlavor of each GPU model selects it
TEAM_LABEL = "gpuforge.dev/team"
# Where a node runs (onprem, aws): hybrid burst nodes and site hosts share every other label.
NODE_LABEL_LOCATION = "gpuforge.dev/location"
