"""Alertmanager receiver secrets in AWS Secrets Manager, read from the stack's config with `require_secret`.

A receiver names the Pulumi config key of its secret (gpuforge/spec/monitoring.py); `pulumi up` fails
when the stack lacks one (`pulumi config set --secret gpuforge:<key> ...`). The value travels as a
Pulumi secret into a Secrets Manager secret encrypted with the cluster key; the alertmanager role writes
it to the file the rendered configuration names. It is never in the plan, the outputs or user data.

The monitoring node group's role (where Alertmanager runs) is granted GetSecretValue on exactly these
secrets and kms:Decrypt on the cluster key, nothing wider (policy wiring-alert-secrets-reader).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from gpuforge.catalog.tokens import ALERT_SECRETS

from .iam import secret_read_policy

CONFIG_NAMESPACE = "gpuforge"


@dataclass(frozen=True)
class AlertSecretsArgs:
    cluster: str
    secrets: dict[str, str]  # file name (oncall-routing-key) -> Pulumi config key (alertPagerdutyKey)
    kms_key_arn: pulumi.Input[str]
    protected: bool
    # The node group Alertmanager runs on and its instance role's name; None where no node of this
    # stack runs Alertmanager (the Prometheus operator on Kubernetes, a site host).
    reader_node_group: str | None = None
    reader_role: pulumi.Input[str] | None = None


class AlertSecrets(pulumi.ComponentResource):
    arns: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: AlertSecretsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(ALERT_SECRETS, name, {"readerNodeGroup": args.reader_node_group}, opts)
        config = pulumi.Config(CONFIG_NAMESPACE)
        # Protected in production like every stateful resource (policy redundancy-stateful-protected); a
        # deleted secret also stays recoverable for 30 days there.
        child = pulumi.ResourceOptions(parent=self, protect=args.protected)
        self.arns = {}
        for file_name, key in sorted(args.secrets.items()):
            secret = aws.secretsmanager.Secret(
                f"{name}-{file_name}",
                name=f"gpuforge/{args.cluster}/alertmanager/{file_name}",
                description=f"Alertmanager receiver secret {file_name} (Pulumi config gpuforge:{key})",
                kms_key_id=args.kms_key_arn,
                recovery_window_in_days=30 if args.protected else 0,
                opts=child,
            )
            aws.secretsmanager.SecretVersion(
                f"{name}-{file_name}",
                secret_id=secret.id,
                secret_string=config.require_secret(key),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.arns[file_name] = secret.arn
        if self.arns and args.reader_role is not None:
            arns = [self.arns[f] for f in sorted(self.arns)]
            aws.iam.RolePolicy(
                f"{name}-read",
                role=args.reader_role,
                policy=pulumi.Output.all(pulumi.Output.all(*arns), args.kms_key_arn).apply(
                    lambda v: json.dumps(secret_read_policy(v[0], v[1]))
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.register_outputs({"arns": self.arns})
