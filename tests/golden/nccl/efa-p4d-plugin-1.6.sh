# Managed by gpuforge from templates/nccl/nccl.env.j2. Do not edit on the node.
# Inputs: fabric efa; instance type p4d.24xlarge; NCCL 2.12.12
# aws-ofi-nccl 1.6.0; libfabric 1.16.1; efa-installer 1.22.1
# Sourced by login shells; /etc/nccl.conf carries the same values for every process.

# aws-ofi-nccl 1.6.0 (older than 1.7) does not enable GPUDirect RDMA itself on p4d, a GPUDirect RDMA type (not needed from plugin 1.7 with libfabric 1.18)
export FI_EFA_USE_DEVICE_RDMA='1'

# ENA interfaces are named en* on p4d/p4de/p5 and later; keeps NCCL off docker and loopback
export NCCL_SOCKET_IFNAME='en'
