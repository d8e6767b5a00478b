# Managed by gpuforge from templates/nccl/nccl.env.j2. Do not edit on the node.
# Inputs: fabric efa; instance type p4d.24xlarge; NCCL 2.18.5
# aws-ofi-nccl 1.7.4; libfabric 1.19.0; efa-installer 1.30.0
# Sourced by login shells; /etc/nccl.conf carries the same values for every process.

# ENA interfaces are named en* on p4d/p4de/p5 and later; keeps NCCL off docker and loopback
export NCCL_SOCKET_IFNAME='en'

# log level requested for this node group
export NCCL_DEBUG='WARN'

# set by the operator in nccl_tuning_extra
export NCCL_ALGO='^NVLS,CollnetDirect'

# set by the operator in nccl_tuning_extra
export NCCL_NVLS_ENABLE='0'
