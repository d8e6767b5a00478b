"""IAM documents the components share."""

from __future__ import annotations

import json
from typing import Any

STS_AUDIENCE = "sts.amazonaws.com"


def assume_role_policy(service: str, actions: tuple[str, ...] = ("sts:AssumeRole",)) -> str:
    """Trust policy letting one AWS service (e.g. ec2.amazonaws.com) assume a role."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": service},
                    "Action": actions[0] if len(actions) == 1 else list(actions),
                }
            ],
        }
    )


def service_account_trust_policy(oidc_provider_arn: str, issuer: str, namespace: str, service_account: str) -> str:
    """Trust policy for IAM roles for service accounts (IRSA): only the one Kubernetes service
    account, through the cluster's OIDC provider, with a token minted for STS.

    `issuer` is the provider's URL; the condition keys take it without the scheme
    (EKS user guide, "Assign IAM roles to Kubernetes service accounts")."""
    host = issuer.removeprefix("https://")
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": oidc_provider_arn},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": {
                        "StringEquals": {
                            f"{host}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                            f"{host}:aud": STS_AUDIENCE,
                        }
                    },
                }
            ],
        }
    )


def bucket_access_policy(read: list[str], write: list[str], kms_key_arn: str) -> dict[str, Any]:
    """Least privilege: list and read the data buckets, also write the checkpoint/artifact ones,
    and use the cluster key that encrypts them. Node roles and service-account roles share it."""
    everything = read + write
    statements: list[dict[str, Any]] = [
        {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": everything},
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"{a}/*" for a in everything]},
        {"Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": [kms_key_arn]},
    ]
    if write:
        statements.append(
            {
                "Effect": "Allow",
                "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
                "Resource": [f"{a}/*" for a in write],
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}
