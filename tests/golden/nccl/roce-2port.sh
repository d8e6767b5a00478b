# Managed by gpuforge from templates/nccl/nccl.env.j2. Do not edit on the node.
# Inputs: fabric roce; instance type unknown; NCCL 2.26.2
# HCAs mlx5_0, mlx5_1; rail-optimized no
# Sourced by login shells; /etc/nccl.conf carries the same values for every process.

# bootstrap and socket traffic on the interfaces set for this node group
export NCCL_SOCKET_IFNAME='bond0'

# exactly the 2 HCAs of this node (a prefix match would also take mlx5_1x)
export NCCL_IB_HCA='=mlx5_0,mlx5_1'

# RoCE needs a GID index; 3 is RoCEv2 over IPv4 on a default mlx5 GID table
export NCCL_IB_GID_INDEX='3'

# traffic class of the lossless RoCE queue on this fabric
export NCCL_IB_TC='106'
