"""NCCL environment for a node: inputs -> /etc/nccl.conf and /etc/profile.d/nccl.sh.

The derivation lives in ONE template, ``gpuforge/assets/playbooks/templates/nccl/nccl.env.j2``, that the
Ansible role ``nccl_tuning`` renders on nodes and this module renders for plans,
golden files and reviews. Both renderers must agree byte for byte; the template
may therefore use plain Jinja2 plus the ``version`` test, which this module
implements with Ansible's semantics (``ansible.builtin.version`` with the default
``loose`` version type).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Literal

import jinja2
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuforge.assets import PLAYBOOK_TEMPLATES_DIR

NCCL_TEMPLATE = "nccl/nccl.env.j2"

Fabric = Literal["efa", "infiniband", "roce", "none"]
Format = Literal["conf", "profile"]

_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.,:=^/+\-]*$")
_ENV_KEY = re.compile(r"^[A-Z_][A-Z0-9_]*$")


class NcclInputs(BaseModel):
    """What the NCCL environment of one node group depends on.

    Field names equal the Ansible role's variables without the ``nccl_tuning_`` prefix.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    fabric: Fabric = Field(description="Inter-node fabric of the node group.")
    instance_type: str | None = Field(
        default=None, description="EC2 instance type (p5.48xlarge, g5.12xlarge); None on premises."
    )
    nccl_version: str | None = Field(default=None, description="Installed NCCL version, e.g. 2.26.2.")
    aws_ofi_nccl_version: str | None = Field(
        default=None, description="aws-ofi-nccl plugin version (EFA only), e.g. 1.13.2."
    )
    libfabric_version: str | None = Field(default=None, description="libfabric version (EFA only).")
    efa_installer_version: str | None = Field(default=None, description="EFA installer version (EFA only).")
    gpudirect_rdma: bool = Field(
        default=False,
        description="The instance type does GPUDirect RDMA over EFA (catalog: aws-ofi-nccl's gdr_required flag); "
        "plugins older than 1.7 then need FI_EFA_USE_DEVICE_RDMA=1.",
    )
    ib_hcas: tuple[str, ...] = Field(default=(), description="InfiniBand/RoCE HCAs, one per rail (mlx5_0 or mlx5_0:1).")
    rail_optimized: bool = Field(default=False, description="Rail-optimized IB/RoCE fabric: rings must not cross NICs.")
    socket_ifname: str | None = Field(
        default=None, description="NCCL_SOCKET_IFNAME override; default derived from the fabric."
    )
    ib_gid_index: int | None = Field(default=None, ge=0, description="RoCE GID index (default 3).")
    ib_tc: int | None = Field(default=None, ge=0, le=255, description="RoCE/IB traffic class.")
    sharp: bool = Field(default=False, description="Enable SHARP (NCCL_COLLNET_ENABLE) on InfiniBand.")
    efa_use_huge_page: bool = Field(
        default=True, description="False emits FI_EFA_USE_HUGE_PAGE=0 (fork() ENOMEM in data loaders)."
    )
    debug: Literal["VERSION", "WARN", "INFO", "TRACE"] | None = Field(default=None, description="NCCL_DEBUG level.")
    extra: dict[str, str] = Field(
        default_factory=dict, description="Operator-set variables, emitted last and verbatim."
    )

    @field_validator("ib_hcas", "socket_ifname")
    @classmethod
    def _no_shell_metacharacters(cls, value: Any) -> Any:
        items = value if isinstance(value, tuple) else ((value,) if value else ())
        for item in items:
            if not _SAFE_VALUE.match(item):
                raise ValueError(f"{item!r}: only letters, digits and _.,:=^/+- are allowed")
        return value

    @field_validator("extra")
    @classmethod
    def _extra_is_env(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not _ENV_KEY.match(key):
                raise ValueError(f"{key!r} is not an environment variable name (A-Z, 0-9, _)")
            if not _SAFE_VALUE.match(item):
                raise ValueError(f"{key}={item!r}: only letters, digits and _.,:=^/+- are allowed")
        return value

    @model_validator(mode="after")
    def _fabric_needs(self) -> NcclInputs:
        if self.fabric == "efa" and not self.aws_ofi_nccl_version:
            raise ValueError("fabric efa needs aws_ofi_nccl_version: the EFA variables depend on the plugin version")
        if self.fabric not in ("infiniband", "roce") and (self.ib_hcas or self.rail_optimized):
            raise ValueError(f"ib_hcas and rail_optimized apply to infiniband/roce, not {self.fabric}")
        return self

    def template_vars(self, fmt: Format) -> dict[str, Any]:
        """The variables the template sees, named as the Ansible role names them."""
        data = self.model_dump()
        data["ib_hcas"] = list(self.ib_hcas)
        out = {f"nccl_tuning_{key}": value for key, value in data.items()}
        out["nccl_tuning_format"] = fmt
        return out


# --- Ansible's `version` test (loose comparison) ------------------------------------------------

_LOOSE_COMPONENT = re.compile(r"(\d+ | [a-z]+ | \.)", re.VERBOSE)
_OPERATORS: dict[str, str] = {
    "<": "lt",
    "lt": "lt",
    "<=": "le",
    "le": "le",
    ">": "gt",
    "gt": "gt",
    ">=": "ge",
    "ge": "ge",
    "==": "eq",
    "=": "eq",
    "eq": "eq",
    "!=": "ne",
    "<>": "ne",
    "ne": "ne",
}


def _loose(value: str) -> list[int | str]:
    parts: list[int | str] = []
    for piece in _LOOSE_COMPONENT.split(value):
        if not piece or piece == ".":
            continue
        parts.append(int(piece) if piece.isdigit() else piece)
    return parts


def version_test(value: Any, version: str, operator: str = "eq") -> bool:
    """Same result as Ansible's ``value is version(version, operator)`` (loose type)."""
    if operator not in _OPERATORS:
        raise ValueError(f"invalid operator {operator!r} for the version test")
    if not value or not version:
        raise ValueError("the version test needs two non-empty versions")
    left, right = _loose(str(value)), _loose(str(version))
    try:
        result = {
            "lt": left < right,
            "le": left <= right,
            "gt": left > right,
            "ge": left >= right,
            "eq": left == right,
            "ne": left != right,
        }[_OPERATORS[operator]]
    except TypeError as exc:  # int vs str at the same position, as Ansible reports it
        raise ValueError(f"cannot compare versions {value!r} and {version!r}: {exc}") from exc
    return result


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    # trim_blocks/keep_trailing_newline as ansible.builtin.template renders; StrictUndefined
    # because Ansible fails on undefined variables too.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PLAYBOOK_TEMPLATES_DIR)),
        trim_blocks=True,
        lstrip_blocks=False,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    env.tests["version"] = version_test
    env.tests["version_compare"] = version_test
    return env


def render_nccl_env(inputs: NcclInputs, fmt: Format) -> str:
    """Render /etc/nccl.conf (``conf``) or /etc/profile.d/nccl.sh (``profile``) for *inputs*."""
    if fmt not in ("conf", "profile"):
        raise ValueError(f"fmt must be 'conf' or 'profile', not {fmt!r}")
    return _environment().get_template(NCCL_TEMPLATE).render(**inputs.template_vars(fmt))


def parse_nccl_conf(text: str) -> dict[str, str]:
    """KEY=VALUE pairs of an nccl.conf, read the way NCCL's setEnvFile reads them."""
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        env.setdefault(key, value)  # NCCL uses setenv(..., overwrite=0): the first one wins
    return env


def nccl_env(inputs: NcclInputs) -> dict[str, str]:
    """The variables a node of *inputs* receives, in the order they are written."""
    return parse_nccl_conf(render_nccl_env(inputs, "conf"))
