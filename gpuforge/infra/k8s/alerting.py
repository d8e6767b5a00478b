"""AlertRouting: the spec's monitoring for the Prometheus operator (monitoring.server.kind kubernetes).

The objects `gpuforge render monitoring` prints, declared in the monitoring namespace
(kube-prometheus-stack reads them from its own namespace by default):
- the PrometheusRule (every alert and recording rule), the dcgm-exporter ServiceMonitor and the
  dashboards' ConfigMaps (gpuforge/render/monitoring.py operator_objects);
- a Secret holding each receiver secret (webhook token, SMTP password, Slack URL, PagerDuty routing
  key), read from the stack's config with `require_secret`: the value stays a Pulumi secret, so the
  plan, its report and the outputs only ever show [secret];
- an AlertmanagerConfig with the same routes, inhibitions and receivers as the file-based
  alertmanager.yml (rendered by gpuforge/render/monitoring.py, the one source of both), each secret a
  secretKeySelector on that Secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuforge.render.monitoring import alertmanager_config_object, alertmanager_secret_name, operator_objects
from gpuforge.spec import ResolvedSpec
from gpuforge.spec.monitoring import KubernetesServer, receiver_secret_names

CONFIG_NAMESPACE = "gpuforge"


@dataclass(frozen=True)
class AlertRoutingArgs:
    namespace: str
    secret_name: str
    secrets: dict[str, str]  # Secret key (staging-hook-token) -> Pulumi config key (alertWebhookToken)
    alertmanager_config: dict[str, Any]  # the rendered AlertmanagerConfig object
    objects: list[dict[str, Any]]  # the rules, ServiceMonitors and dashboard ConfigMaps, rendered
    # The release installing the operator's CRDs (kube-prometheus-stack): every object waits for it.
    after: pulumi.Resource | None = None


class AlertRouting(pulumi.ComponentResource):
    secret: k8s.core.v1.Secret | None  # None when no receiver names a secret
    config: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: AlertRoutingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuforge:k8s:AlertRouting", name, {"namespace": args.namespace}, opts)
        config = pulumi.Config(CONFIG_NAMESPACE)
        child = pulumi.ResourceOptions(parent=self, depends_on=[args.after] if args.after else [])
        self.secret = None
        if args.secrets:
            self.secret = k8s.core.v1.Secret(
                f"{name}-secrets",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=args.secret_name,
                    namespace=args.namespace,
                    labels={"app.kubernetes.io/managed-by": "gpuforge"},
                ),
                type="Opaque",
                # `pulumi up` fails when the stack lacks a key (pulumi config set --secret gpuforge:<key>).
                string_data={file: config.require_secret(key) for file, key in sorted(args.secrets.items())},
                opts=child,
            )
        manifest = args.alertmanager_config
        self.config = k8s.apiextensions.CustomResource(
            f"{name}-config",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=k8s.meta.v1.ObjectMetaArgs(**manifest["metadata"]),
            spec=manifest["spec"],
            # The operator skips a config whose Secret is missing: the Secret first.
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=[self.secret] if self.secret else [])
            ),
        )
        for obj in args.objects:
            declare_object(f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}", obj, child)
        self.register_outputs({})


def declare_object(name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """A rendered manifest as a Pulumi resource: a ConfigMap, or a custom resource of the operator."""
    metadata = k8s.meta.v1.ObjectMetaArgs(**obj["metadata"])
    if obj["kind"] == "ConfigMap":
        return k8s.core.v1.ConfigMap(name, metadata=metadata, data=obj["data"], opts=opts)
    return k8s.apiextensions.CustomResource(
        name, api_version=obj["apiVersion"], kind=obj["kind"], metadata=metadata, spec=obj["spec"], opts=opts
    )


def operator_monitoring(resolved: ResolvedSpec) -> bool:
    """The stack's monitoring runs under the Prometheus operator (this module declares its objects)."""
    monitoring = resolved.spec.monitoring
    return monitoring is not None and isinstance(monitoring.server, KubernetesServer)


def declare_alert_routing(
    name: str, resolved: ResolvedSpec, opts: pulumi.ResourceOptions, after: pulumi.Resource | None = None
) -> AlertRouting | None:
    """AlertRouting for a stack whose Alertmanager is the operator's (monitoring.server.kind kubernetes);
    None for any other server. *opts* carry the cluster's Kubernetes provider; *after* is the release that
    installs the operator (GpuPlatform.monitoring_release)."""
    monitoring, cluster = resolved.spec.monitoring, resolved.spec.name
    if monitoring is None or not isinstance(monitoring.server, KubernetesServer):
        return None
    server = monitoring.server
    return AlertRouting(
        name,
        AlertRoutingArgs(
            namespace=server.namespace,
            secret_name=alertmanager_secret_name(cluster),
            secrets=receiver_secret_names(monitoring),
            alertmanager_config=alertmanager_config_object(monitoring, server, cluster),
            objects=operator_objects(resolved, server),
            after=after,
        ),
        opts=opts,
    )
