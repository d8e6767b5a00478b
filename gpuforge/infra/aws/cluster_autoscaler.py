"""ClusterAutoscaler: grows and shrinks the elastic EKS managed node groups (scaling: {min, max}) with the pods
Kueue admits, down to min (0 included) once their nodes are idle.

Why the Cluster Autoscaler on the managed node groups, not Karpenter (docs/kubernetes.md, "Elastic GPU groups"):
the group stays the one node-group spec's EKS managed node group on gpuforge's launch template (EFA interfaces,
cluster placement group, IMDSv2, encrypted root), node auto repair and the EKS update strategy are unchanged,
and Kueue's ProvisioningRequest admission check asks it for a workload's nodes all at once.

What it needs, from kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md at cluster-autoscaler-1.33.6:
- auto-discovery tags on the Auto Scaling group (`k8s.io/cluster-autoscaler/enabled`,
  `k8s.io/cluster-autoscaler/<cluster>`), and, to scale from 0, `node-template` tags for the labels, taints and
  extended resources (GPUs, EFA devices) a node would have: the autoscaler reads them from the group while it is
  empty ("The following is only required if scaling up from 0 nodes");
- IAM through IRSA: the describe calls on "*", SetDesiredCapacity and TerminateInstanceInAutoScalingGroup only on
  groups tagged for this cluster ("using tag based conditionals"), eks:DescribeNodegroup;
- `--enable-provisioning-requests=true` and `--kube-api-content-type application/json`, and RBAC on
  provisioningrequests and podtemplates (FAQ.md, "How can I use ProvisioningRequest to run batch workloads").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpuforge.catalog.charts import Charts, load_charts
from gpuforge.infra.k8s.platform import EFA_RESOURCE, GPU_RESOURCE
from gpuforge.spec import ResolvedNodeGroup

from .irsa import ROLE_ARN_ANNOTATION, controller_role

CHART = "cluster_autoscaler"
SERVICE_ACCOUNT = "cluster-autoscaler"
DISCOVERY_TAG = "k8s.io/cluster-autoscaler/enabled"
TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template"


def cluster_tag(cluster: str) -> str:
    return f"k8s.io/cluster-autoscaler/{cluster}"


def tag_slug(key: str) -> str:
    """A stable child name for one tag: its key after the autoscaler's prefix, `/` and `.` as `-`."""
    return key.removeprefix("k8s.io/cluster-autoscaler/").replace("/", "-").replace(".", "-")


def autoscaler_tags(
    group: ResolvedNodeGroup, cluster: str, labels: dict[str, str], taints: list[tuple[str, str, str]]
) -> dict[str, str]:
    """The tags an elastic group's Auto Scaling group carries for the autoscaler: discovery, what a node of an
    empty group would offer (labels, taints, GPUs, EFA devices) and the group's own idle time."""
    scaling = group.spec.scaling
    assert scaling is not None  # only elastic groups are tagged
    tags = {DISCOVERY_TAG: "true", cluster_tag(cluster): "owned"}
    tags |= {f"{TEMPLATE_TAG}/label/{key}": value for key, value in labels.items()}
    tags |= {f"{TEMPLATE_TAG}/taint/{key}": f"{value}:{effect}" for key, value, effect in taints}
    if group.gpus_per_node:
        tags[f"{TEMPLATE_TAG}/resources/{GPU_RESOURCE}"] = str(group.gpus_per_node)
    if group.efa_interfaces:
        tags[f"{TEMPLATE_TAG}/resources/{EFA_RESOURCE}"] = str(group.efa_interfaces)
    tags[f"{TEMPLATE_TAG}/autoscaling-options/scaledownunneededtime"] = f"{scaling.scaledown_idle_minutes}m0s"
    return tags


def autoscaler_policy(cluster: str, region: str, account: str) -> str:
    """Least privilege: read anywhere (the Describe calls take no resource-level permissions), change only the
    Auto Scaling groups tagged for this cluster, describe only this cluster's node groups."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": [
                        "autoscaling:DescribeAutoScalingGroups",
                        "autoscaling:DescribeAutoScalingInstances",
                        "autoscaling:DescribeLaunchConfigurations",
                        "autoscaling:DescribeScalingActivities",
                        "ec2:DescribeImages",
                        "ec2:DescribeInstanceTypes",
                        "ec2:DescribeLaunchTemplateVersions",
                        "ec2:GetInstanceTypesFromInstanceRequirements",
                    ],
                    "Resource": "*",
                },
                {
                    "Effect": "Allow",
                    "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                    "Resource": "*",
                    "Condition": {"StringEquals": {f"aws:ResourceTag/{cluster_tag(cluster)}": "owned"}},
                },
                {
                    "Effect": "Allow",
                    "Action": ["eks:DescribeNodegroup"],
                    "Resource": f"arn:aws:eks:{region}:{account}:nodegroup/{cluster}/*",
                },
            ],
        }
    )


def autoscaler_values(
    cluster: str,
    region: str,
    kubernetes_version: str,
    role_arn: pulumi.Input[str],
    node_selector: dict[str, str],
    charts: Charts,
) -> dict[str, Any]:
    """The release's values (keys of charts/cluster-autoscaler/values.yaml at cluster-autoscaler-chart-9.50.1)."""
    chart = charts.chart(CHART)
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster},
        "image": {"tag": chart.images_by_kubernetes[kubernetes_version]},
        "rbac": {
            "serviceAccount": {
                "create": True,
                "name": SERVICE_ACCOUNT,
                "annotations": {ROLE_ARN_ANNOTATION: role_arn},
            }
        },
        "extraArgs": {
            "enable-provisioning-requests": "true",
            "kube-api-content-type": "application/json",
        },
        **({"nodeSelector": node_selector} if node_selector else {}),
    }


@dataclass(frozen=True)
class ClusterAutoscalerArgs:
    cluster: str  # the EKS cluster's name, which the groups' discovery tags carry
    region: str
    kubernetes_version: str
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    node_selector: dict[str, str] = field(default_factory=dict)  # the system group's label, where it runs
    # What the release waits for: the ProvisioningRequest CRD (the platform's), which it watches from its start.
    after: tuple[pulumi.Resource, ...] = ()
    charts: Charts = field(default_factory=load_charts)
    tags: dict[str, str] = field(default_factory=dict)


class ClusterAutoscaler(pulumi.ComponentResource):
    role_arn: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: ClusterAutoscalerArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        chart = args.charts.chart(CHART)
        super().__init__(
            "gpuforge:aws:ClusterAutoscaler",
            name,
            {"cluster": args.cluster, "chartVersion": chart.version},
            opts,
        )
        child = pulumi.ResourceOptions(parent=self)
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id
        role = controller_role(
            f"{name}-role",
            oidc_provider_arn=args.oidc_provider_arn,
            oidc_issuer=args.oidc_issuer,
            service_account=f"{chart.namespace}/{SERVICE_ACCOUNT}",
            inline_policy=account.apply(lambda acct: autoscaler_policy(args.cluster, args.region, acct)),
            tags=args.tags,
            opts=child,
        )
        in_cluster = child  # the Kubernetes provider comes from opts (providers={"kubernetes": ...})
        # ProvisioningRequests (Kueue creates them) and the PodTemplates they name (FAQ.md, step 4).
        rules = k8s.rbac.v1.ClusterRole(
            f"{name}-provisioning",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="cluster-autoscaler-provisioning"),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(
                    api_groups=["autoscaling.x-k8s.io"],
                    resources=["provisioningrequests", "provisioningrequests/status"],
                    verbs=["watch", "list", "get", "create", "update", "patch", "delete"],
                ),
                k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["podtemplates"], verbs=["watch", "list", "get"]),
            ],
            opts=in_cluster,
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-provisioning",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="cluster-autoscaler-provisioning"),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="cluster-autoscaler-provisioning"
            ),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=SERVICE_ACCOUNT, namespace=chart.namespace)],
            opts=pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[rules])),
        )
        k8s.helm.v3.Release(
            f"{name}-release",
            name=CHART.replace("_", "-"),
            chart=chart.chart,
            version=chart.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo) if chart.repo else None,
            namespace=chart.namespace,
            create_namespace=False,
            values=autoscaler_values(
                args.cluster, args.region, args.kubernetes_version, role.arn, args.node_selector, args.charts
            ),
            opts=pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[binding, *args.after])),
        )
        self.role_arn = role.arn
        self.register_outputs({"roleArn": role.arn})
