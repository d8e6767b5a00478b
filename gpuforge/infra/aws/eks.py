"""EksCluster: a hardened EKS control plane for the node groups with orchestrator eks.

- the control plane's interfaces sit in the private management tier; the API endpoint is
  private, or public only to the spec's CIDRs (never 0.0.0.0/0, which the spec refuses);
- Kubernetes secrets are envelope-encrypted with the cluster's KMS key;
- all five control-plane log types go to a log group with a retention;
- an OIDC provider lets pods assume IAM roles (IRSA) instead of borrowing the node role;
- access is granted through EKS access entries only (authentication mode API, no implicit
  admin for whoever ran `pulumi up`);
- the cluster role carries AmazonEKSClusterPolicy and the four KMS actions on the one key;
- the whoever runs `pulumi up` (the IAM identity behind its session) gets a cluster-scope admin
  access entry, so the Kubernetes provider can install the platform;
- the managed add-ons a cluster made through the API lacks: vpc-cni (pinned at a version that
  ignores EFA-only interfaces, network policy enforcement on, its own IRSA role), kube-proxy and the
  Pod Identity agent before any node (`network_addons`), CoreDNS and the node monitoring agent once
  nodes exist (`kubernetes_provider`); every version pinned in aws_wiring.yaml.

`kubeconfig` is built from the cluster's outputs (no resources inside apply); the placement makes
the Kubernetes provider from it once node groups, add-ons and access entries exist
(`kubernetes_provider`), so no Helm release starts before the cluster can run it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpuforge.catalog.aws_wiring import load_aws_wiring
from gpuforge.infra.k8s.platform import PLATFORM_ADMIN_GROUP
from gpuforge.infra.k8s.scheduling import Taint, tolerations_for
from gpuforge.spec.errors import SpecError, SpecIssue
from gpuforge.spec.models import KubernetesSpec

from .iam import STS_AUDIENCE, assume_role_policy
from .irsa import controller_role

CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
CLUSTER_POLICY = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"
ACCESS_POLICY_ARN = "arn:aws:eks::aws:cluster-access-policy/{policy}"
DEPLOYER_POLICY = "AmazonEKSClusterAdminPolicy"
# Add-ons nodes need to become Ready (pod networking, service routing, pod credentials); CoreDNS and
# the node monitoring agent (the GPU signal of node auto repair) need nodes to run on and come after them.
BEFORE_NODES = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
AFTER_NODES = ("coredns", "eks-node-monitoring-agent")


def deployer_needs_entry(spec: KubernetesSpec, deployer_arn: str) -> bool:
    """Whether the identity running `up` needs an access entry of its own. EKS keeps one access entry per
    principal (CreateAccessEntry: ResourceInUseException), so where access_entries already names it, that
    entry is its entry: it must then be a cluster-scope AmazonEKSClusterAdminPolicy, which installing the
    platform needs; anything else is a SpecError naming the entry and the fix."""
    key = next((k for k, e in spec.access_entries.items() if e.principal_arn == deployer_arn), None)
    if key is None:
        return True
    entry = spec.access_entries[key]
    if entry.policy != DEPLOYER_POLICY or entry.namespaces:
        scope = f"namespaces {', '.join(entry.namespaces)}" if entry.namespaces else "the cluster"
        raise SpecError(
            [
                SpecIssue(
                    f"cluster.kubernetes.access_entries[{key}]",
                    f"{deployer_arn} is the identity running `up`, which needs {DEPLOYER_POLICY} on the "
                    f"whole cluster to install the platform; this entry gives it {entry.policy} on {scope}, "
                    "and EKS keeps one access entry per principal",
                    f"give access_entries[{key}] policy {DEPLOYER_POLICY} and no namespaces, or run `up` as "
                    "another identity (a deployment role) and keep this entry for people",
                )
            ]
        )
    return False


@dataclass(frozen=True)
class EksClusterArgs:
    spec: KubernetesSpec
    region: str
    subnet_ids: list[pulumi.Input[str]]  # private tier, one per AZ (EKS needs two AZs or more)
    kms_key_arn: pulumi.Input[str]
    protected: bool = False
    tags: dict[str, str] = field(default_factory=dict)


def eks_props(spec: KubernetesSpec) -> dict[str, Any]:
    """The facts policies read off the component."""
    return {
        "kubernetesVersion": spec.version,
        "endpoint": spec.endpoint,
        "publicAccessCidrs": list(spec.public_access_cidrs),
        "logTypes": list(CONTROL_PLANE_LOG_TYPES),
        "secretsEncryption": True,
        "accessEntries": sorted(spec.access_entries),
    }


class EksCluster(pulumi.ComponentResource):
    name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]  # the provider URL; service-account trust policies key on it
    kubeconfig: pulumi.Output[str]
    network_addons: list[aws.eks.Addon]  # what node groups wait for
    access: list[pulumi.Resource]  # access entries and their policy associations, the deployer's included

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuforge:aws:EksCluster", name, eks_props(args.spec), opts)
        child = pulumi.ResourceOptions(parent=self)
        spec = args.spec

        # Whoever runs `up` installs the platform through the Kubernetes API: an admin entry for the
        # IAM identity behind the caller's session (the role, for an assumed-role session). Read now,
        # while the program runs (preview included), so a clash with a declared entry stops it before
        # the cluster is declared.
        invoke = pulumi.InvokeOptions(parent=self)
        caller = aws.get_caller_identity(opts=invoke).arn
        deployer = aws.iam.get_session_context(arn=caller, opts=invoke).issuer_arn
        deployer_entry = deployer_needs_entry(spec, deployer)
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        role = aws.iam.Role(
            f"{name}-role",
            # Only EKS acting for this account's cluster of this name (confused-deputy prevention).
            assume_role_policy=account.account_id.apply(
                lambda acct: assume_role_policy(
                    "eks.amazonaws.com",
                    ("sts:AssumeRole", "sts:TagSession"),
                    source_account=acct,
                    source_arn=f"arn:aws:eks:{args.region}:{acct}:cluster/{name}",
                )
            ),
            opts=child,
        )
        cluster_policy = aws.iam.RolePolicyAttachment(
            f"{name}-cluster-policy", role=role.name, policy_arn=CLUSTER_POLICY, opts=child
        )
        kms_policy = aws.iam.RolePolicy(
            f"{name}-secrets-kms",
            role=role.id,
            policy=pulumi.Output.from_input(args.kms_key_arn).apply(
                lambda arn: json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"],
                                "Resource": [arn],
                            }
                        ],
                    }
                )
            ),
            opts=child,
        )
        # The log group EKS writes to is named after the cluster; create it first so it has a
        # retention (EKS would create one that never expires).
        logs = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=f"/aws/eks/{name}/cluster",
            retention_in_days=spec.log_retention_days,
            kms_key_id=args.kms_key_arn,  # the key policy lets CloudWatch Logs use it for this account
            opts=child,
        )
        public = spec.endpoint == "public"
        cluster = aws.eks.Cluster(
            f"{name}-cluster",
            name=name,
            version=spec.version,
            role_arn=role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=args.subnet_ids,
                endpoint_private_access=True,
                endpoint_public_access=public,
                public_access_cidrs=list(spec.public_access_cidrs) if public else None,
            ),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API",
                bootstrap_cluster_creator_admin_permissions=False,
            ),
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=args.kms_key_arn),
                resources=["secrets"],
            ),
            enabled_cluster_log_types=list(CONTROL_PLANE_LOG_TYPES),
            deletion_protection=args.protected,
            tags={**args.tags, "Name": name},
            opts=pulumi.ResourceOptions.merge(
                child,
                pulumi.ResourceOptions(
                    depends_on=[cluster_policy, kms_policy, logs],
                    protect=args.protected,
                    retain_on_delete=args.protected,
                ),
            ),
        )

        issuer = cluster.identities.apply(_oidc_issuer)
        oidc = aws.iam.OpenIdConnectProvider(
            f"{name}-oidc",
            url=issuer,
            client_id_lists=[STS_AUDIENCE],
            tags={**args.tags, "Name": f"{name}-oidc"},
            opts=child,
        )

        self.access = []
        entries: list[tuple[str, pulumi.Input[str], str, tuple[str, ...]]] = [
            *([("deployer", deployer, DEPLOYER_POLICY, ())] if deployer_entry else []),
            *((k, e.principal_arn, e.policy, tuple(e.namespaces)) for k, e in spec.access_entries.items()),
        ]
        for key, principal, policy, namespaces in entries:
            access = aws.eks.AccessEntry(
                f"{name}-access-{key}",
                cluster_name=cluster.name,
                principal_arn=principal,
                type="STANDARD",
                # Cluster admins (the deployer among them) are the platform's admins: the platform's
                # ValidatingAdmissionPolicy lets this group, and no team editor, change team namespaces' policies.
                kubernetes_groups=[PLATFORM_ADMIN_GROUP] if policy == DEPLOYER_POLICY and not namespaces else None,
                opts=child,
            )
            association = aws.eks.AccessPolicyAssociation(
                f"{name}-access-{key}-policy",
                cluster_name=cluster.name,
                principal_arn=principal,
                policy_arn=ACCESS_POLICY_ARN.format(policy=policy),
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(
                    type="namespace" if namespaces else "cluster",
                    namespaces=list(namespaces) or None,
                ),
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[access])),
            )
            self.access += [access, association]

        self._cluster_name = cluster.name
        self._child = child
        self.network_addons = [self._addon(name, addon, oidc.arn, oidc.url, args.tags) for addon in BEFORE_NODES]

        self.name = cluster.name
        self.endpoint = cluster.endpoint
        self.cluster_security_group_id = cluster.vpc_config.apply(lambda vpc: vpc.cluster_security_group_id or "")
        self.oidc_provider_arn = oidc.arn
        self.oidc_issuer = oidc.url
        self.kubeconfig = pulumi.Output.all(cluster.name, cluster.endpoint, cluster.certificate_authority).apply(
            lambda values: kubeconfig(values[0], values[1], _ca_data(values[2]), args.region)
        )
        self.register_outputs(
            {
                "name": cluster.name,
                "endpoint": cluster.endpoint,
                "clusterSecurityGroupId": self.cluster_security_group_id,
                "oidcProviderArn": oidc.arn,
            }
        )

    def _addon(
        self,
        name: str,
        addon: str,
        oidc_arn: pulumi.Input[str],
        oidc_url: pulumi.Input[str],
        tags: dict[str, str],
        depends_on: list[pulumi.Resource] | None = None,
        gpu_taints: list[Taint] | None = None,
    ) -> aws.eks.Addon:
        """A managed add-on at the catalog's version and configuration; one with a service account
        in the catalog gets its own IRSA role with its managed policy (never the node role); one with a
        GPU DaemonSet tolerates the taints GPU nodes register with."""
        facts = load_aws_wiring().eks.addons[addon]
        configuration = addon_configuration(addon, gpu_taints or [])
        role_arn: pulumi.Output[str] | None = None
        if facts.service_account and facts.policy_arn:
            role_arn = controller_role(
                f"{name}-{addon}-role",
                oidc_provider_arn=oidc_arn,
                oidc_issuer=oidc_url,
                service_account=facts.service_account,
                policy_arn=facts.policy_arn,
                tags=tags,
                opts=self._child,
            ).arn
        return aws.eks.Addon(
            f"{name}-{addon}",
            cluster_name=self._cluster_name,
            addon_name=addon,
            addon_version=facts.version,
            configuration_values=json.dumps(configuration) if configuration else None,
            service_account_role_arn=role_arn,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags,
            opts=pulumi.ResourceOptions.merge(self._child, pulumi.ResourceOptions(depends_on=depends_on or [])),
        )

    def kubernetes_provider(
        self, name: str, nodes: list[pulumi.Resource], gpu_taints: list[Taint] | None = None
    ) -> k8s.Provider:
        """CoreDNS and the node monitoring agent once the nodes exist, then the Kubernetes provider the
        platform is installed through: it waits for the node groups, every add-on and the access entries
        (the deployer's among them), so no release starts on a cluster that cannot run it or let it in."""
        after = [self._addon(name, addon, "", "", {}, depends_on=nodes, gpu_taints=gpu_taints) for addon in AFTER_NODES]
        return k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            opts=pulumi.ResourceOptions.merge(
                self._child,
                pulumi.ResourceOptions(depends_on=[*nodes, *self.network_addons, *after, *self.access]),
            ),
        )


def addon_configuration(addon: str, gpu_taints: list[Taint]) -> dict[str, Any]:
    """The add-on's configuration values: the catalog's, plus, where the add-on runs a DaemonSet on GPU
    nodes, a toleration for each taint they register with (the catalog names where in the configuration)."""
    facts = load_aws_wiring().eks.addons[addon]
    configuration: dict[str, Any] = json.loads(json.dumps(facts.configuration or {}))
    if facts.gpu_tolerations and gpu_taints:
        *parents, leaf = facts.gpu_tolerations
        at = configuration
        for key in parents:
            at = at.setdefault(key, {})
        at[leaf] = tolerations_for(gpu_taints, at.get(leaf, []))
    return configuration


def _oidc_issuer(identities: Any) -> str:
    for identity in identities or []:
        for oidc in getattr(identity, "oidcs", None) or []:
            if getattr(oidc, "issuer", None):
                return str(oidc.issuer)
    return ""


def _ca_data(authority: Any) -> str:
    return str(getattr(authority, "data", "") or "")


def kubeconfig(cluster: str, endpoint: str, ca_data: str, region: str) -> str:
    """A kubeconfig that authenticates with `aws eks get-token` (the caller's AWS credentials,
    mapped through an access entry); nothing secret is stored in it."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
            "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}],
            "current-context": cluster,
            "users": [
                {
                    "name": cluster,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "aws",
                            "args": ["eks", "get-token", "--cluster-name", cluster, "--region", region],
                        }
                    },
                }
            ],
        }
    )
