"""Burst through Kueue MultiKueue: the site's cluster (the manager) dispatches whole jobs to an EKS
worker cluster in the region. A job runs wholly on one side of the VPN; nodes never join across it.

On the worker (EKS, the same GpuPlatform as any EKS stack, quotas from hybrid.burst.team_gpus):
- a ServiceAccount `multikueue` in kueue-system bound to the ClusterRole of Kueue's own
  create-multikueue-kubeconfig.sh (gpuforge/catalog/data/multikueue_worker_role.yaml), and its
  token Secret: the manager's identity on the worker;
- a LocalQueue `<burst.local_queue>` in every team namespace, on the team's ClusterQueue (MultiKueue
  creates the job in the same namespace and LocalQueue on the worker).

On the manager (the site's cluster):
- a Secret in kueue-system with the worker's kubeconfig (the EKS private endpoint, its CA, the token),
  a MultiKueueCluster naming it, a MultiKueueConfig, and the AdmissionCheck
  (controllerName kueue.x-k8s.io/multikueue);
- a ResourceFlavor per cloud GPU model (`gpu-h100-aws`): never the site's flavor, so no site queue
  can borrow cloud quota and no job is split over the link;
- per team a ClusterQueue `<team>-burst` with the check (MultiKueue checks apply to the whole queue,
  not per flavor: Kueue refuses MultiKueue in admissionChecksStrategy.onFlavors), covering the same
  resources as the worker's queues (EFA included, so EFA jobs are admissible), quota equal to the
  worker's, and a LocalQueue `<burst.local_queue>` in the team's namespace.

Reachability (the join): the worker's endpoint is private and EKS advertises its private addresses
through the public DNS name, so the site resolves it with no DNS forwarding; the site's CIDRs reach
the VPC over the link (SiteLink); the EKS cluster security group admits tcp/443 from them. Nothing
else crosses: no kubelet, pod or overlay traffic, so no CNI spans the sites.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from functools import cache
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import yaml

from gpuforge.catalog.models import DATA_DIR
from gpuforge.infra.k8s.platform import GPU_RESOURCE, GpuPool, flavor_name
from gpuforge.render.labels import NODE_LABEL_GPU_MODEL, NODE_LABEL_LOCATION

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
WORKER_SERVICE_ACCOUNT = "multikueue"
ROLE_FILE = DATA_DIR / "multikueue_worker_role.yaml"


@cache
def worker_role_rules() -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = yaml.safe_load(ROLE_FILE.read_text())["rules"]
    return rules


def _snake(rule: dict[str, Any]) -> dict[str, Any]:
    """A PolicyRule as the SDK's arguments (apiGroups -> api_groups)."""
    return {"".join("_" + c.lower() if c.isupper() else c for c in k): v for k, v in rule.items()}


def cloud_flavor(gpu_model: str) -> str:
    return f"{flavor_name(gpu_model)}-aws"


def dispatch_queue(team: str) -> str:
    return f"{team}-burst"


def worker_kubeconfig(cluster: str, endpoint: str, ca_data: str, token: str) -> str:
    """A kubeconfig for the manager: a static service-account token (MultiKueue rejects exec plugins)."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
            "users": [{"name": WORKER_SERVICE_ACCOUNT, "user": {"token": token}}],
            "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": WORKER_SERVICE_ACCOUNT}}],
            "current-context": cluster,
        }
    )


@dataclass(frozen=True)
class MultiKueueBurstArgs:
    region: str
    site_cidrs: list[str]
    team_gpus: dict[str, dict[str, int]]
    team_namespaces: dict[str, str]
    pools: list[GpuPool]  # the worker's GPU nodes by model
    covered: list[str]  # resources the worker's queues cover (cpu, memory, GPUs, EFA)
    local_queue: str
    kueue_api_version: str
    kueue_namespace: str
    worker_cluster: pulumi.Input[str]
    worker_endpoint: pulumi.Input[str]
    worker_ca_data: pulumi.Input[str]
    worker_security_group_id: pulumi.Input[str]
    worker_provider: k8s.Provider
    worker_after: list[pulumi.Resource]  # the worker's Kueue release and team namespaces
    manager_provider: k8s.Provider
    manager_after: list[pulumi.Resource]  # the site's Kueue release and team namespaces


def dispatch_resources(pools: list[GpuPool], team_gpus: dict[str, int], covered: list[str]) -> list[dict[str, Any]]:
    """A team's dispatching flavors: whole worker nodes' worth of every covered resource."""
    by_model = {p.gpu_model: p for p in pools}
    flavors = []
    for model, gpus in sorted(team_gpus.items()):
        pool = by_model[model]
        nodes = gpus // pool.gpus_per_node
        amounts: dict[str, Any] = {
            "cpu": f"{nodes * pool.allocatable_cpu_millicores}m",
            "memory": f"{nodes * pool.allocatable_memory_mib}Mi",
            GPU_RESOURCE: gpus,
        }
        for extra in covered:
            amounts.setdefault(extra, nodes * pool.fabric_devices_per_node)
        flavors.append(
            {"name": cloud_flavor(model), "resources": [{"name": r, "nominalQuota": amounts[r]} for r in covered]}
        )
    return flavors


class MultiKueueBurst(pulumi.ComponentResource):
    def __init__(self, name: str, args: MultiKueueBurstArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        cluster_name = f"burst-{args.region}"
        check = f"multikueue-{args.region}"
        secret_name = f"multikueue-{args.region}-kubeconfig"
        super().__init__(
            "gpuforge:hybrid:MultiKueueBurst",
            name,
            {
                "region": args.region,
                "mechanism": "multikueue",
                "admissionCheck": check,
                "multiKueueCluster": cluster_name,
                "kubeconfigSecret": secret_name,
                "siteCidrs": args.site_cidrs,
                "apiPort": 443,
                "teamGpus": args.team_gpus,
                "localQueue": args.local_queue,
            },
            opts,
        )
        api = args.kueue_api_version
        ns = args.kueue_namespace

        # --- on the worker: the manager's identity and the burst LocalQueues -----------------------
        on_worker = pulumi.ResourceOptions(
            parent=self, provider=args.worker_provider, depends_on=list(args.worker_after)
        )
        sa = k8s.core.v1.ServiceAccount(
            f"{name}-worker-sa",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=WORKER_SERVICE_ACCOUNT, namespace=ns),
            opts=on_worker,
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-worker-role",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{WORKER_SERVICE_ACCOUNT}-role"),
            rules=[k8s.rbac.v1.PolicyRuleArgs(**_snake(rule)) for rule in worker_role_rules()],
            opts=on_worker,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-worker-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{WORKER_SERVICE_ACCOUNT}-crb"),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role.metadata.name
            ),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=WORKER_SERVICE_ACCOUNT, namespace=ns)],
            opts=on_worker,
        )
        token = k8s.core.v1.Secret(
            f"{name}-worker-token",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=f"{WORKER_SERVICE_ACCOUNT}-token",
                namespace=ns,
                annotations={"kubernetes.io/service-account.name": WORKER_SERVICE_ACCOUNT},
            ),
            type="kubernetes.io/service-account-token",
            opts=pulumi.ResourceOptions.merge(
                on_worker, pulumi.ResourceOptions(depends_on=[sa], additional_secret_outputs=["data"])
            ),
        )
        for team, namespace in sorted(args.team_namespaces.items()):
            if team in args.team_gpus:
                k8s.apiextensions.CustomResource(
                    f"{name}-worker-lq-{team}",
                    api_version=api,
                    kind="LocalQueue",
                    metadata=k8s.meta.v1.ObjectMetaArgs(name=args.local_queue, namespace=namespace),
                    spec={"clusterQueue": team},
                    opts=on_worker,
                )

        # --- the port: the site reaches the worker's API over the link --------------------------
        for cidr in args.site_cidrs:
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-api-from-{cidr.replace('.', '-').replace('/', '-')}",
                security_group_id=args.worker_security_group_id,
                cidr_ipv4=cidr,
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                description="site Kueue (MultiKueue manager) to the worker's API",
                opts=pulumi.ResourceOptions(parent=self),
            )

        # --- on the manager: the kubeconfig, the cluster, the check, flavors and queues ------------
        on_manager = pulumi.ResourceOptions(
            parent=self, provider=args.manager_provider, depends_on=list(args.manager_after)
        )
        raw_token = token.data.apply(lambda d: base64.b64decode((d or {}).get("token", "")).decode())
        kubeconfig: pulumi.Output[str] = pulumi.Output.secret(
            pulumi.Output.all(args.worker_cluster, args.worker_endpoint, args.worker_ca_data, raw_token).apply(
                lambda v: worker_kubeconfig(str(v[0]), str(v[1]), str(v[2]), str(v[3]))
            )
        )
        secret = k8s.core.v1.Secret(
            f"{name}-kubeconfig",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=secret_name, namespace=ns),
            string_data={"kubeconfig": kubeconfig},
            opts=on_manager,
        )
        mk_cluster = k8s.apiextensions.CustomResource(
            f"{name}-cluster",
            api_version=api,
            kind="MultiKueueCluster",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=cluster_name),
            spec={"kubeConfig": {"locationType": "Secret", "location": secret_name}},
            opts=pulumi.ResourceOptions.merge(on_manager, pulumi.ResourceOptions(depends_on=[secret])),
        )
        config = k8s.apiextensions.CustomResource(
            f"{name}-config",
            api_version=api,
            kind="MultiKueueConfig",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=cluster_name),
            spec={"clusters": [cluster_name]},
            opts=pulumi.ResourceOptions.merge(on_manager, pulumi.ResourceOptions(depends_on=[mk_cluster])),
        )
        admission = k8s.apiextensions.CustomResource(
            f"{name}-check",
            api_version=api,
            kind="AdmissionCheck",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=check),
            spec={
                "controllerName": MULTIKUEUE_CONTROLLER,
                "parameters": {"apiGroup": api.split("/")[0], "kind": "MultiKueueConfig", "name": cluster_name},
            },
            opts=pulumi.ResourceOptions.merge(on_manager, pulumi.ResourceOptions(depends_on=[config])),
        )
        for model in sorted({m for gpus in args.team_gpus.values() for m in gpus}):
            k8s.apiextensions.CustomResource(
                f"{name}-flavor-{cloud_flavor(model)}",
                api_version=api,
                kind="ResourceFlavor",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=cloud_flavor(model)),
                # The manager never runs these pods: the labels name where the worker runs them.
                spec={"nodeLabels": {NODE_LABEL_GPU_MODEL: model, NODE_LABEL_LOCATION: "aws"}},
                opts=on_manager,
            )
        for team, gpus in sorted(args.team_gpus.items()):
            namespace = args.team_namespaces[team]
            k8s.apiextensions.CustomResource(
                f"{name}-cq-{team}",
                api_version=api,
                kind="ClusterQueue",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=dispatch_queue(team)),
                spec={
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                    "queueingStrategy": "BestEffortFIFO",
                    "resourceGroups": [
                        {
                            "coveredResources": args.covered,
                            "flavors": dispatch_resources(args.pools, gpus, args.covered),
                        }
                    ],
                    "admissionChecks": [check],
                },
                opts=pulumi.ResourceOptions.merge(on_manager, pulumi.ResourceOptions(depends_on=[admission])),
            )
            k8s.apiextensions.CustomResource(
                f"{name}-lq-{team}",
                api_version=api,
                kind="LocalQueue",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=args.local_queue, namespace=namespace),
                spec={"clusterQueue": dispatch_queue(team)},
                opts=on_manager,
            )
        self.register_outputs({"admissionCheck": check, "multiKueueCluster": cluster_name})
