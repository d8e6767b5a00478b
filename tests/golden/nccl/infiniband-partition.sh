# Managed by gpuforge from templates/nccl/nccl.env.j2. Do not edit on the node.
# Inputs: fabric infiniband; instance type unknown; NCCL 2.26.2
# HCAs mlx5_0, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_9, mlx5_10, mlx5_11; rail-optimized yes
# Sourced by login shells; /etc/nccl.conf carries the same values for every process.

# keeps NCCL bootstrap traffic off loopback and container bridges
export NCCL_SOCKET_IFNAME='^lo,docker'

# exactly the 8 HCAs of this node, one per rail (a prefix match would also take mlx5_1x)
export NCCL_IB_HCA='=mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11'

# rail-optimized fabric, so rings stay on one rail and never cross NICs
export NCCL_CROSS_NIC='0'

# P_Key index 0: where the subnet manager put this node's tenant partition key (indx0)
export NCCL_IB_PKEY='0'
