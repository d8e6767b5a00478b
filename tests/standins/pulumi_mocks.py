"""Pulumi's mocks for a component under test on its own (with @pulumi.runtime.test): every resource echoes its
inputs and gets an id and an IAM-role-shaped ARN from its name, as the account 111122223333 would name it; no
provider function answers."""

from __future__ import annotations

from typing import Any

import pulumi


class ArnMocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", {**args.inputs, "arn": f"arn:aws:iam::111122223333:role/{args.name}"}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None
