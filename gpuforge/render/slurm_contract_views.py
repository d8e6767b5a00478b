"""What the Slurm contract (slurm_contract.SlurmConfig) generates for its other readers: the roles'
``meta/argument_specs.yml`` option for ``slurm_config`` (nested ``options:``, so Ansible checks the shape
before a task runs) and docs/slurm.md's table of its fields. ``make slurm-contract`` writes both
(scripts/gen_slurm_contract.py); tests/slurm/test_slurm_contract.py fails when a committed copy is stale.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterator
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic.fields import ComputedFieldInfo, FieldInfo

from gpuforge.render.slurm_contract import SlurmConfig

# The roles whose argument specs declare slurm_config (all their entry points get the generated option).
# (slurm_version reads only versions.minimum, through slurm_version_minimum, and is run alone with just that.)
ROLES = ("slurm_compute", "slurm_controller", "slurm_dbd", "slurm_login", "slurm_scaler")
DOCS_BEGIN = "<!-- slurm_config fields: generated from gpuforge/render/slurm_contract.py by `make slurm-contract` -->"
DOCS_END = "<!-- end of the generated slurm_config fields -->"
_SCALARS: dict[Any, str] = {str: "str", int: "int", bool: "bool", float: "float"}
_SPEC_HEADER = "# slurm_config's options: generated from gpuforge/render/slurm_contract.py (make slurm-contract)."


def _optional(annotation: Any) -> tuple[Any, bool]:
    """(the type inside ``X | None``, whether None was allowed)."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(args) < len(get_args(annotation)):
            return args[0], True
    return annotation, False


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _fields(model: type[BaseModel]) -> Iterator[tuple[str, Any, str, bool, bool]]:
    """(name, annotation, description, optional, serialized when None) of each field, computed ones last."""
    for name, field in model.model_fields.items():
        annotation, optional = _optional(field.annotation)
        yield name, annotation, _description(field), optional, optional and field.exclude_if is None
    for name, computed in model.model_computed_fields.items():
        yield name, computed.return_type, _description(computed), False, False


def _description(field: FieldInfo | ComputedFieldInfo) -> str:
    if not field.description:
        raise ValueError(f"a field of the Slurm contract has no description: {field!r}")
    return field.description


# --- the roles' argument specs

def _option(annotation: Any, description: str, required: bool, children_required: bool) -> dict[str, Any]:
    option: dict[str, Any] = {}
    nested: dict[str, Any] = {}
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        option["type"] = _SCALARS[type(args[0])]
        option["choices"] = list(args)
    elif annotation in _SCALARS:
        option["type"] = _SCALARS[annotation]
    elif origin is list:
        option["type"] = "list"
        (element,) = args
        if _is_model(element):
            option["elements"] = "dict"
            nested = _options(element, children_required=children_required)
        else:
            option["elements"] = _SCALARS[element]
    elif _is_model(annotation):
        option["type"] = "dict"
        nested = _options(annotation, children_required=children_required)
    elif origin is dict or annotation is dict:
        option["type"] = "dict"
        if args and _is_model(args[1]):
            keys = ", ".join(args[1].model_fields)
            description += f" Each value: {{{keys}}}."
    else:
        raise TypeError(f"no Ansible type for {annotation!r}")
    option["required"] = required
    option["description"] = description
    if nested:
        option["options"] = nested
    return option


def _options(model: type[BaseModel], children_required: bool) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for name, annotation, description, optional, present_when_none in _fields(model):
        # A model serialized as {} when absent (directory) has every sub-option optional; one left out when
        # absent (secrets.ldap_bind_password) is whole where present.
        options[name] = _option(annotation, description, required=children_required and not optional,
                                children_required=children_required and not present_when_none)
    return options


def slurm_config_option(required: bool) -> dict[str, Any]:
    """The argument spec option ``slurm_config`` of a role's entry point."""
    return {
        "type": "dict",
        "required": required,
        "description": "The cluster's Slurm variables (gpuforge.render.slurm.slurm_config), from the inventory.",
        "options": _options(SlurmConfig, children_required=True),
    }


class _IndentedLists(yaml.SafeDumper):
    """List items indented under their key, as yamllint (ansible-lint's yaml rule) wants them."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


_OPTION_BLOCK = re.compile(r"^(?P<indent> +)slurm_config:\n(?:(?P=indent) +.*\n|\s*\n)*", re.MULTILINE)


def with_generated_option(text: str) -> str:
    """A role's argument_specs.yml with every entry point's slurm_config option replaced by the generated one
    (its `required` kept); the role's own options stay as written."""

    def replace(match: re.Match[str]) -> str:
        indent = match.group("indent")
        required = re.search(rf"^{indent}  required: true$", match.group(0), re.MULTILINE) is not None
        option = {"slurm_config": slurm_config_option(required)}
        dumped = yaml.dump(option, Dumper=_IndentedLists, sort_keys=False, width=120, default_flow_style=False)
        lines = [f"{indent}{_SPEC_HEADER}"] + [f"{indent}{line}" if line else line for line in dumped.splitlines()]
        return "\n".join(lines) + "\n"

    without_header = re.sub(rf"^ +{re.escape(_SPEC_HEADER)}\n", "", text, flags=re.MULTILINE)
    return _OPTION_BLOCK.sub(replace, without_header)


# --- docs/slurm.md's table

def _shape(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" if a != "" else '`""`' for a in args)
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if origin is list:
        return f"list of {_shape(args[0])}"
    if _is_model(annotation):
        return "{" + ", ".join(annotation.model_fields) + "}"
    if origin is dict or annotation is dict:
        return "{<key>: " + (_shape(args[1]) if args and args[1] is not Any else "...") + "}"
    raise TypeError(f"no shape for {annotation!r}")


def _rows(model: type[BaseModel], prefix: str) -> Iterator[str]:
    for name, annotation, description, optional, present_when_none in _fields(model):
        path = f"{prefix}{name}"
        shape = _shape(annotation)
        if optional:
            shape += ", or `{}`" if present_when_none else ", or absent"
        # A bare <word> would read as an HTML tag.
        yield f"| `{path}` | {shape} | {description.replace('<', chr(92) + '<')} |"
        origin, args = get_origin(annotation), get_args(annotation)
        if _is_model(annotation):
            yield from _rows(annotation, f"{path}.")
        elif origin is list and _is_model(args[0]):
            yield from _rows(args[0], f"{path}[].")
        elif origin is dict and args and _is_model(args[1]):
            yield from _rows(args[1], f"{path}.<key>.")


def docs_table() -> str:
    return "\n".join(["| key | shape | meaning |", "|---|---|---|", *_rows(SlurmConfig, "")]) + "\n"


def with_generated_table(markdown: str) -> str:
    """docs/slurm.md with the table between its markers regenerated."""
    begin, end = markdown.index(DOCS_BEGIN), markdown.index(DOCS_END)
    return f"{markdown[:begin]}{DOCS_BEGIN}\n{docs_table()}{markdown[end:]}"
