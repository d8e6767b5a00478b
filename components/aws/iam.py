"""IAM documents the components share."""

from __future__ import annotations

import json


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
