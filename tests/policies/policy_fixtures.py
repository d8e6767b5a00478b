"""Rule fixtures (tests/policies/fixtures/<pack>/<rule-id>.yaml), Checkov style: each case lists
resources that must pass beside resources that must fail, and names exactly the failing ones.

    cases:
      - environment: prod          # default prod
        params: {...}              # rule parameters, optional
        resources:
          - {type, name, inputs?, parent?: <name>, protect?, deps?: {prop: [<name>, ...]},
             depends_on?: [<name>, ...], provider?: <name>}
        failing: [<name>, ...]

URNs are made from type and name; `parent` and `deps` name other resources of the case. A list inside
`resources` (a YAML alias of an earlier case's resources, `- *base`) is spliced in, so a failing case can
say "the passing one, plus this".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuforge.policy.rules import Resource

FIXTURES = Path(__file__).parent / "fixtures"
STACK = "test"


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:{STACK}::gpuforge::{type_}::{name}"


@dataclass(frozen=True)
class Case:
    rule: str
    index: int
    environment: str
    params: dict[str, Any]
    resources: list[Resource]
    failing: set[str]  # URNs

    @property
    def id(self) -> str:
        return f"{self.rule}[{self.index}]"


def fixture_path(rule_id: str) -> Path:
    return FIXTURES / rule_id.split("-")[0] / f"{rule_id}.yaml"


def load_cases(rule_id: str) -> list[Case]:
    data = yaml.safe_load(fixture_path(rule_id).read_text())
    cases = []
    for i, case in enumerate(data["cases"]):
        raw = [r for item in case["resources"] for r in (item if isinstance(item, list) else [item])]
        urns = {r["name"]: urn(r["type"], r["name"]) for r in raw}
        resources = [
            Resource(
                urn=urns[r["name"]],
                type=r["type"],
                name=r["name"],
                inputs=r.get("inputs", {}),
                parent=urns[r["parent"]] if r.get("parent") else None,
                protect=bool(r.get("protect", False)),
                dependencies={k: tuple(urns[n] for n in v) for k, v in r.get("deps", {}).items()},
                depends_on=tuple(urns[n] for n in r.get("depends_on", [])),
                provider=urns[r["provider"]] if r.get("provider") else None,
            )
            for r in raw
        ]
        failing = {urns[n] for n in case.get("failing", [])}
        cases.append(Case(rule_id, i, case.get("environment", "prod"), case.get("params", {}), resources, failing))
    return cases
