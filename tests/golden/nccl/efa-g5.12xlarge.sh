# Managed by gpuforge from templates/nccl/nccl.env.j2. Do not edit on the node.
# Inputs: fabric efa; instance type g5.12xlarge; NCCL 2.26.2
# aws-ofi-nccl 1.13.2; libfabric 2.1.0; efa-installer 1.41.0
# Sourced by login shells; /etc/nccl.conf carries the same values for every process.

# ENA interfaces are named en* on p4d/p4de/p5 and later; keeps NCCL off docker and loopback
export NCCL_SOCKET_IFNAME='en'

# g5 GPUs have no NVLink; cudaMemcpy for shared-memory transfers is about 2x faster
export NCCL_SHM_USE_CUDA_MEMCPY='1'
