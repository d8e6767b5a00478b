# Managed by gpuforge from templates/nccl/nccl.env.j2. Do not edit on the node.
# Inputs: fabric efa; instance type p5en.48xlarge; NCCL 2.19.3
# aws-ofi-nccl 1.7.3; libfabric 1.19.0; efa-installer 1.29.0
# Sourced by login shells; /etc/nccl.conf carries the same values for every process.

# efa-installer 1.29.0 is older than 1.29.1 and NCCL 2.19.3 is 2.19 or newer
export FI_EFA_SET_CUDA_SYNC_MEMOPS='0'

# ENA interfaces are named en* on p4d/p4de/p5 and later; keeps NCCL off docker and loopback
export NCCL_SOCKET_IFNAME='en'
