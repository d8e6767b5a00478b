"""The flow model (data/flows.yaml), typed: which role's daemons reach which role on what ports, and the AWS
calls each role makes. gpuforge/infra/aws/slurm.py declares security-group rules and IAM from it and
gpuforge/policy/rules/wiring_flows.py checks plans against it, so the two cannot drift.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from gpuforge.catalog.models import SlurmPorts, load_data_file

FLOWS_FILE = Path(__file__).resolve().parent / "data" / "flows.yaml"
SLURM_PORTS = ("slurmctld", "slurmd", "slurmdbd", "srun")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Role(_Frozen):
    what: str
    security_group: str  # the control plane's key: a network tier group, "controller" or "database"
    exclusive: bool = False  # its groups are its own: no other role carries them


class PortRange(_Frozen):
    ports: tuple[int, int]
    source: str


class Flow(_Frozen):
    source_role: str
    target_role: str
    ports: str  # a key of `ports` or of the catalog's slurm.ports
    protocol: Literal["tcp", "all"] = "tcp"
    rule: str | None = None  # the ingress rule's name suffix, for flows the control plane declares
    declared_by: Literal["control_plane", "network"] = "control_plane"
    why: str
    source: str

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _direction(cls, data: object) -> object:
        # from/to in the file: Python keywords, so renamed here.
        if isinstance(data, dict) and "from" in data:
            data = {**data, "source_role": data["from"], "target_role": data["to"]}
            data.pop("from"), data.pop("to")
        return data

    @property
    def label(self) -> str:
        return f"{self.source_role} -> {self.target_role} ({self.ports})"


class ExternalFlow(_Frozen):
    """A flow into a role from address ranges the stack names (spec field `allowed_from`), when it turns it on."""

    name: str  # the key the control plane records the ranges under (its `clientRanges` property)
    target_role: str
    ports: str  # a key of `ports`
    rule: str
    allowed_from: str  # the spec field that names the ranges
    why: str
    source: str

    @model_validator(mode="before")
    @classmethod
    def _direction(cls, data: object) -> object:
        if isinstance(data, dict) and "to" in data:
            data = {**data, "target_role": data["to"]}
            data.pop("to")
        return data


class AwsCall(_Frozen):
    actions: tuple[str, ...]
    caller: str
    source: str


class FlowModel(_Frozen):
    roles: dict[str, Role]
    ports: dict[str, PortRange]
    flows: tuple[Flow, ...]
    external_flows: tuple[ExternalFlow, ...] = ()
    aws_calls: dict[str, tuple[AwsCall, ...]]

    @model_validator(mode="after")
    def _references(self) -> FlowModel:
        for flow in self.flows:
            for role in (flow.source_role, flow.target_role):
                if role not in self.roles:
                    raise ValueError(f"flow {flow.label}: no role {role!r} (roles: {', '.join(self.roles)})")
            if flow.ports not in self.ports and flow.ports not in SLURM_PORTS:
                raise ValueError(f"flow {flow.label}: no port entry {flow.ports!r}")
            if flow.declared_by == "control_plane" and not flow.rule:
                raise ValueError(f"flow {flow.label}: a flow the control plane declares needs a rule name")
        for external in self.external_flows:
            if external.target_role not in self.roles:
                raise ValueError(f"external flow {external.name}: no role {external.target_role!r}")
            if external.ports not in self.ports:
                raise ValueError(f"external flow {external.name}: no port entry {external.ports!r}")
        for role in self.aws_calls:
            if role not in self.roles:
                raise ValueError(f"aws_calls: no role {role!r}")
        return self

    def port_range(self, flow: Flow, slurm: SlurmPorts) -> tuple[int, int]:
        """The flow's inclusive port range; Slurm's from the stack's catalog (what slurm.conf names)."""
        if flow.ports == "srun":
            return slurm.srun
        if flow.ports in SLURM_PORTS:
            port = int(getattr(slurm, flow.ports))
            return port, port
        return self.ports[flow.ports].ports

    def external(self, name: str) -> ExternalFlow:
        return next(f for f in self.external_flows if f.name == name)

    def actions(self, role: str) -> list[str]:
        """Every action the role's daemons call, in file order, once each."""
        seen: dict[str, None] = {}
        for call in self.aws_calls.get(role, ()):
            seen.update(dict.fromkeys(call.actions))
        return list(seen)


@lru_cache(maxsize=1)
def load_flows() -> FlowModel:
    return load_data_file(FLOWS_FILE, FlowModel)
