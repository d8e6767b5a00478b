"""Names that the components write and every reader of a plan matches on: Pulumi type tokens and the
AWS tags gpuforge puts on what it launches. One place, so a component and the rules, the plan summary,
the cost, the diff, the inventory and `status` cannot drift apart (a renamed token would otherwise leave a
rule silently matching nothing)."""

from __future__ import annotations

# gpuforge's own components (the type token of each component class)
CLUSTER = "gpuforge:index:TrainingCluster"
NODE_GROUP = "gpuforge:aws:GpuNodeGroup"
LUSTRE_COMPONENT = "gpuforge:aws:LustreFileSystem"
OBJECT_STORE = "gpuforge:aws:ObjectStore"
ALERT_SECRETS = "gpuforge:aws:AlertSecrets"
SLURM_CONTROL_PLANE = "gpuforge:aws:SlurmControlPlane"
SITE = "gpuforge:onprem:Site"
HOST = "gpuforge:onprem:Host"

# provider resources (pulumi-aws, pulumi-kubernetes)
ASG = "aws:autoscaling/group:Group"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
INSTANCE = "aws:ec2/instance:Instance"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
VPC = "aws:ec2/vpc:Vpc"
EFS = "aws:efs/fileSystem:FileSystem"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
FSX_LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
ROLE = "aws:iam/role:Role"
ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
RDS_INSTANCE = "aws:rds/instance:Instance"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"

# tags on what gpuforge launches (instances, groups, roles)
CLUSTER_TAG = "gpuforge:cluster"
ENVIRONMENT_TAG = "gpuforge:environment"
NODE_GROUP_TAG = "gpuforge:node-group"
SLURM_ROLE_TAG = "gpuforge:slurm-role"
