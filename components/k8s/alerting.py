"""AlertRouting: the spec's alert receivers and routes for the Prometheus operator's Alertmanager.

Two objects in the monitoring namespace (kube-prometheus-stack's Alertmanager reads AlertmanagerConfigs
of its own namespace by default):
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

from components.spec.monitoring import KubernetesServer, Monitoring, receiver_secret_names
from gpuforge.render.monitoring import alertmanager_config_object, alertmanager_secret_name

CONFIG_NAMESPACE = "gpuforge"


@dataclass(frozen=True)
class AlertRoutingArgs:
    namespace: str
    secret_name: str
    secrets: dict[str, str]  # Secret key (staging-hook-token) -> Pulumi config key (alertWebhookToken)
    alertmanager_config: dict[str, Any]  # the rendered AlertmanagerConfig object


class AlertRouting(pulumi.ComponentResource):
    secret: k8s.core.v1.Secret | None  # None when no receiver names a secret
    config: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: AlertRoutingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuforge:k8s:AlertRouting", name, {"namespace": args.namespace}, opts)
        config = pulumi.Config(CONFIG_NAMESPACE)
        child = pulumi.ResourceOptions(parent=self)
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
        self.register_outputs({})


def declare_alert_routing(
    name: str, cluster: str, monitoring: Monitoring, opts: pulumi.ResourceOptions
) -> AlertRouting | None:
    """AlertRouting for a stack whose Alertmanager is the operator's (monitoring.server.kind kubernetes);
    None for any other server. *opts* carry the cluster's Kubernetes provider."""
    server = monitoring.server
    if not isinstance(server, KubernetesServer):
        return None
    return AlertRouting(
        name,
        AlertRoutingArgs(
            namespace=server.namespace,
            secret_name=alertmanager_secret_name(cluster),
            secrets=receiver_secret_names(monitoring),
            alertmanager_config=alertmanager_config_object(monitoring, server, cluster),
        ),
        opts=opts,
    )
