"""Spec problems, reported all at once in words written for the person editing the YAML.

Every problem has one notation for where it is (`cluster.node_groups[train].count`,
`policy.waivers[0].expires`: a field after a dot, a key the user chose or a list index in
brackets), says what was received and what was expected, and the fix in words. pydantic's
errors are translated here once, for every model built on `SpecModel`; sections added later
get the same messages without code of their own.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Union

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from .suggest import ascii_lookalike, did_you_mean, shown, suggestion, unusual_characters

ROOT = "cluster"


@dataclass(frozen=True)
class SpecIssue:
    path: str
    message: str
    fix: str = ""
    line: int | None = None  # in the stack file, when the value came from one
    # The id of the spec check that found it (registry.py); not part of the problem's identity.
    check: str = dataclasses.field(default="", compare=False)

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}" + (f"; fix: {self.fix}" if self.fix else "")
        return text + (f" (line {self.line})" if self.line else "")


class SpecError(Exception):
    """The spec cannot be planned. Carries every problem found, never only the first."""

    def __init__(self, issues: Sequence[SpecIssue], source: str = "") -> None:
        self.issues = list(dict.fromkeys(issues))
        self.source = source
        super().__init__(self.report())

    def report(self) -> str:
        where = f" in {self.source}" if self.source else ""
        count = len(self.issues)
        lines = [f"{count} problem{'s' if count != 1 else ''}{where}:"]
        lines += [f"  - {issue}" for issue in self.issues]
        return "\n".join(lines)


class FieldProblems(ValueError):
    """Raised by a model validator that finds several problems under its model (site ranges): each is
    (path below the model, message, fix), and each becomes its own SpecIssue at that path."""

    def __init__(self, problems: Sequence[tuple[str, str, str]]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(f"{where}: {message}" for where, message, _ in self.problems))


# --- words for patterns -------------------------------------------------------------------------

_PATTERN_WORDS: dict[str, tuple[str, str]] = {}


def described_pattern(pattern: str, words: str, example: str = "") -> str:
    """Register what a regex means in words (and an example), so a mismatch never shows the regex."""
    _PATTERN_WORDS[pattern] = (words, example)
    return pattern


# --- walking the data and the models alongside a pydantic error location --------------------------


@dataclass
class _Step:
    path: str
    value: Any = None
    parent: Any = None  # the container holding value (for the line and the text as written)
    key: Any = None
    field: FieldInfo | None = None
    model: type[BaseModel] | None = None  # the model whose field the last step named
    annotation: Any = None
    is_key: bool = False  # the error is about a mapping key, not its value


def _unwrap(tp: Any) -> tuple[Any, list[Any]]:
    """Strip Annotated and Optional: (type, its metadata)."""
    metadata: list[Any] = []
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp, *extra = typing.get_args(tp)
            metadata += extra
        elif origin in (Union, types.UnionType):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(members) != 1:
                return tp, metadata
            tp = members[0]
        else:
            return tp, metadata


def _union_member(tp: Any, tag: Any) -> Any:
    """The member of a (discriminated) union a location tag names."""
    for member in typing.get_args(tp):
        base, _ = _unwrap(member)
        if isinstance(base, type) and issubclass(base, BaseModel):
            if base.__name__ == tag:
                return member
            for field in base.model_fields.values():
                literal, _ = _unwrap(field.annotation)
                if typing.get_origin(literal) is Literal and tag in typing.get_args(literal):
                    return member
        elif getattr(base, "__name__", None) == tag:
            return member
    return None


def _member_of_data(tp: Any, data: Mapping[Any, Any]) -> Any:
    """The member of a discriminated union the data's own discriminator (type: slack, kind: lustre) names."""
    for member in typing.get_args(tp):
        base = _model_of(member)
        for name, field in (base.model_fields.items() if base is not None else ()):
            choices = _literal_choices(field.annotation)
            if choices and name in data and data[name] in choices:
                return member
    return None


def _model_of(tp: Any) -> type[BaseModel] | None:
    base, _ = _unwrap(tp)
    return base if isinstance(base, type) and issubclass(base, BaseModel) else None


def walk(loc: Iterable[int | str], data: Any, root: str, model: type[BaseModel] | None) -> _Step:
    """Follow an error location through the user's data and the model types: the path in the
    one notation, the value at it, and the field it names. Union tags pydantic inserts (`aws`,
    `str`) are not keys of the user's data and are dropped."""
    parts = list(loc)
    step = _Step(root, data, annotation=model)
    for i, part in enumerate(parts):
        tp, _ = _unwrap(step.annotation)
        if part == "[key]":
            step.is_key = True
            continue
        container = step.value
        in_data = (isinstance(container, Mapping) and part in container) or (
            isinstance(container, list) and isinstance(part, int) and 0 <= part < len(container)
        )
        last = i == len(parts) - 1
        # The tag of a union member a model validator failed in ([email]) is no field, even in last place.
        union_tag = typing.get_origin(tp) in (Union, types.UnionType) and _union_member(tp, part) is not None
        if not in_data and (union_tag or not (last and isinstance(container, Mapping))):
            if typing.get_origin(tp) in (Union, types.UnionType):
                step.annotation = _union_member(tp, part)
            continue  # a union tag
        if typing.get_origin(tp) in (Union, types.UnionType) and isinstance(container, Mapping):
            tp = _member_of_data(tp, container) or tp  # a path from the data alone carries no union tag
        model_here = _model_of(tp)
        if model_here is not None and isinstance(part, str):
            field = model_here.model_fields.get(part)
            step = _Step(f"{step.path}.{part}", None, container, part, field, model_here,
                         field.annotation if field else None)
        else:
            origin = typing.get_origin(tp)
            args = typing.get_args(tp)
            item = args[-1] if args and origin in (dict, list, tuple, Mapping, Sequence) else None
            if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
                item = args[0]
            step = _Step(f"{step.path}[{part}]", None, container, part, step.field, step.model, item)
        if in_data:
            step.value = container[part]
    return step


# --- what a type expects, in words ---------------------------------------------------------------

_TYPE_WORDS = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "text",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "dict_type": "a mapping (key: value lines)",
    "list_type": "a list (- item lines)",
    "tuple_type": "a list (- item lines)",
    "model_type": "a mapping of fields",
    "model_attributes_type": "a mapping of fields",
    "none_required": "nothing (null)",
}
_FIX_VERBS = frozenset(
    {
        "use", "write", "set", "remove", "raise", "lower", "give", "add", "list", "merge", "choose", "rename",
        "drop", "quote", "pin", "keep", "split", "move", "replace", "retype", "delete", "shorten", "rewrite", "flatten",
    }
)
_YAML_11_BOOLS = {"yes": "true", "no": "false", "on": "true", "off": "false", "y": "true", "n": "false"}


def _bounds(field: FieldInfo | None, metadata: Iterable[Any] = ()) -> str:
    lo = hi = None
    for m in [*(field.metadata if field else []), *metadata]:
        if isinstance(m, annotated_types.Ge):
            lo = f"{m.ge}"
        elif isinstance(m, annotated_types.Gt):
            lo = f"more than {m.gt}"
        elif isinstance(m, annotated_types.Le):
            hi = f"{m.le}"
        elif isinstance(m, annotated_types.Lt):
            hi = f"less than {m.lt}"
    if lo and hi:
        return f"from {lo} to {hi}" if not lo.startswith("more") and not hi.startswith("less") else f"{lo}, {hi}"
    if lo:
        return lo if lo.startswith("more") else f"at least {lo}"
    return (hi if hi.startswith("less") else f"at most {hi}") if hi else ""


def _literal_choices(annotation: Any) -> list[Any]:
    tp, _ = _unwrap(annotation)
    if typing.get_origin(tp) is Literal:
        return list(typing.get_args(tp))
    return []


def _quoted_hint(value: Any, written: str | None) -> tuple[str, str]:
    """How YAML read an unquoted scalar, and how to quote it."""
    text = written if written is not None else ("true" if value is True else "false" if value is False else str(value))
    kind = "a boolean" if isinstance(value, bool) else "nothing (null)" if value is None else "a number"
    return f"YAML reads {text} unquoted as {kind}", f"quote it: '{text}'"


def _expected_text(field: FieldInfo | None, annotation: Any) -> str:
    pattern = None
    # The field's own constraints, then those of its type (Annotated[str, Field(pattern=...), ...]).
    _, type_metadata = _unwrap(annotation)
    for m in [*(field.metadata if field else []), *type_metadata]:
        for constraint in [m, *getattr(m, "metadata", [])]:
            pattern = pattern or getattr(constraint, "pattern", None)
    if pattern in _PATTERN_WORDS:
        words, example = _PATTERN_WORDS[pattern]
        return words + (f", e.g. {example}" if example else "")
    description = field.description if field else None
    return f"{description[0].lower()}{description[1:].rstrip('.')}" if description else "text of the documented form"


def _name_fix(value: str) -> str:
    fixed = re.sub(r"[^a-z0-9-]+", "-", (ascii_lookalike(value) or value).lower()).strip("-")
    if fixed and not fixed[0].isalpha():
        fixed = "x-" + fixed
    return fixed[:32].rstrip("-")


def where(container: object, key: object) -> tuple[int | None, str | None]:
    """(line, text as written) of container[key] when the container came from the stack-file reader
    (loader.py), which records both on the mappings and lists it builds."""
    lines: dict[Any, int] = getattr(container, "lines", {})
    written: dict[Any, str] = getattr(container, "written", {})
    try:
        return lines.get(key), written.get(key)
    except TypeError:  # an unhashable key in a plain dict
        return None, None


def _translate(error: ErrorDetails, data: Any, root: str, model: type[BaseModel] | None) -> SpecIssue:
    kind = error["type"]
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    step = walk(error["loc"], data, root, model)

    line, written = where(step.parent, step.key) if step.parent is not None else (None, None)
    value = error.get("input") if kind != "missing" else None
    if step.is_key:
        value = step.key
    field, annotation = step.field, step.annotation
    got = f"got {shown(value)}"
    path, message, fix = step.path, "", ""

    if kind == "extra_forbidden":
        known = list(step.model.model_fields) if step.model is not None else []
        message = f"unknown field {step.key!r}" + unusual_characters(str(step.key))
        hint = suggestion(step.key, known)
        fix = f"{hint[:-1].replace('did you mean', 'rename it to')}" if hint else (
            f"remove it; the fields here are {', '.join(known)}" if known else "remove it"
        )
    elif kind == "missing":
        message = "missing" + (f"; expected {_expected_text(field, annotation)}" if field else "")
        fix = "add it"
    elif kind in ("union_tag_not_found", "union_tag_invalid"):
        discriminator = str(ctx.get("discriminator", "kind")).strip("'")
        choices = [t.strip().strip("'") for t in str(ctx.get("expected_tags", "")).split(",") if t.strip()]
        path = f"{path}.{discriminator}"
        if kind == "union_tag_not_found":
            message = f"missing; it says which kind this is: one of {', '.join(choices)}"
            fix = f"add {discriminator}: {choices[0]}" if choices else "add it"
        else:
            tag = ctx.get("tag")
            message = f"got {shown(tag)}; expected one of {', '.join(choices)}" + unusual_characters(str(tag))
            fix = suggestion(tag, choices) or f"use one of {', '.join(choices)}"
    elif kind == "literal_error":
        choices = _literal_choices(annotation) or [
            c.strip().strip("'") for c in re.split(r",| or ", str(ctx.get("expected", ""))) if c.strip()
        ]
        words = ", ".join(str(c) for c in choices)
        message = f"{got}; expected one of {words}" + (unusual_characters(value) if isinstance(value, str) else "")
        text = written if written is not None else (None if isinstance(value, str) else str(value))
        if text is not None and text in [str(c) for c in choices]:
            message, fix = _quoted_hint(value, written)
            message = f"{message}; expected the text {text!r}"
        else:
            fix = suggestion(value, [str(c) for c in choices]) or f"use one of {words}"
    elif (kind in ("string_type",) and isinstance(value, bool | int | float)) or (
        kind == "string_type" and value is None and written is not None
    ):
        message, fix = _quoted_hint(value, written)
        message = f"{message}; expected {_expected_text(field, annotation)}"
    elif kind in ("bool_type", "bool_parsing") and isinstance(value, str):
        meant = _YAML_11_BOOLS.get(value.strip().lower())
        message = f"{got} (text); expected true or false"
        fix = (
            f"write {meant}: YAML 1.2, as Pulumi reads stack files, takes {value} as text"
            if meant
            else "write true or false"
        )
    elif kind in ("int_type", "int_parsing", "int_from_float", "float_type", "float_parsing"):
        expected = _TYPE_WORDS[kind]
        bounds = _bounds(field)
        message = f"{got}; expected {expected}" + (f" {bounds}" if bounds else "")
        if isinstance(value, str) and re.fullmatch(r"\s*[-+]?[0-9][0-9_,]*(\.[0-9]*)?\s*", value):
            fix = f"write the number without quotes: {value.strip().replace('_', '').replace(',', '')}"
        elif isinstance(value, float) and value.is_integer() and "whole" in expected:
            fix = f"write {int(value)}"
        elif isinstance(value, str) and value.strip().lower() in _YAML_11_BOOLS:
            fix = "write a number; YAML 1.2, as Pulumi reads stack files, takes yes/no/on/off as text"
        else:
            fix = f"write {expected}"
    elif kind == "finite_number":
        message, fix = f"{got}; expected a finite number", "write a real number (not .inf or .nan)"
    elif kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of"):
        bounds = _bounds(field) or str(error["msg"]).removeprefix("Input should be ")
        message = f"{got}; expected {bounds}"
        fix = f"use a value {bounds}"
    elif kind in ("too_short", "too_long", "string_too_short", "string_too_long"):
        message = f"{got}; {str(error['msg']).removeprefix('Input should have ').removeprefix('Value should have ')}"
        message = message.replace("List should have", "expected").replace("String should have", "expected")
        message = message.replace("Dictionary should have", "expected")
        fix = {"too_short": "add entries", "too_long": "remove entries", "string_too_short": "write more",
               "string_too_long": "shorten it"}[kind]
    elif kind == "string_pattern_mismatch":
        expected = _expected_text(field, annotation)
        lookalike = ascii_lookalike(value) if isinstance(value, str) else None
        message = f"{got}; expected {expected}" + (unusual_characters(value) if isinstance(value, str) else "")
        name_key = step.is_key or (field is not None and "lowercase" in expected)
        if lookalike is not None:
            fix = f"write {lookalike!r}"
        elif isinstance(value, str) and name_key and _name_fix(value):
            fix = f"rename it, e.g. {_name_fix(value)}"
        else:
            fix = "rewrite it in that form"
    elif kind.startswith("date"):
        reason = str(error["msg"]).split(",", 1)[-1].strip() if "," in str(error["msg"]) else "not a date"
        message = f"{got}, which is not a real date ({reason})"
        fix = "write a real date as YYYY-MM-DD, quoted or not"
    elif kind in _TYPE_WORDS:
        message = f"{got}; expected {_TYPE_WORDS[kind]}"
        fix = "fill it in, or remove the key to take the default" if value is None else f"write {_TYPE_WORDS[kind]}"
    elif kind in ("value_error", "assertion_error"):
        message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        # validators write "what is wrong; what to do": the second part is the fix
        head, _, tail = message.rpartition("; ")
        if head and tail.split(" ", 1)[0] in _FIX_VERBS:
            message, fix = head, tail
    else:
        message = f"{got}; {str(error['msg']).removeprefix('Input should be ').lower()}"
    return SpecIssue(path, message, fix, line)


def issues_from_validation_error(
    exc: ValidationError, data: object, root: str = ROOT, model: type[BaseModel] | None = None
) -> list[SpecIssue]:
    """pydantic's errors as SpecIssues; the errors of one value's union members merge into one."""
    issues: dict[str, SpecIssue] = {}
    errors = exc.errors(include_url=False)
    # A misspelt required field is one problem (the unknown key), not also "missing".
    renamed = {
        (tuple(e["loc"][:-1]), hits[0])
        for e in errors
        if e["type"] == "extra_forbidden"
        for hits in [_rename_targets(e, data, root, model)]
        if hits
    }
    for error in errors:
        if error["type"] == "missing" and (tuple(error["loc"][:-1]), error["loc"][-1]) in renamed:
            continue
        nested = (error.get("ctx") or {}).get("error")
        if isinstance(nested, FieldProblems):
            base = _translate(error, data, root, model)
            for where, message, fix in nested.problems:
                issue = SpecIssue(f"{base.path}.{where}", message, fix, base.line)
                issues.setdefault(f"{issue.path}#{len(issues)}", issue)
            continue
        issue = _translate(error, data, root, model)
        previous = issues.get(issue.path)
        if previous is None:
            issues[issue.path] = issue
        elif previous.message != issue.message and previous.message.split(";")[0] == issue.message.split(";")[0]:
            # one value, several union members ("text", "a number", ...): one problem, all expectations
            expected = issue.message.split("expected ", 1)[-1]
            issues[issue.path] = replace(previous, message=f"{previous.message} or {expected}", fix="")
        elif previous.message != issue.message:
            issues[f"{issue.path}#{len(issues)}"] = issue
    return list(issues.values())


def _rename_targets(error: ErrorDetails, data: Any, root: str, model: type[BaseModel] | None) -> list[str]:
    step = walk(error["loc"], data, root, model)
    known = list(step.model.model_fields) if step.model is not None else []
    return did_you_mean(step.key, known)[:1] if known else []


def field_path(loc: Iterable[int | str], data: object, root: str = ROOT) -> str:
    """A pydantic error location in the one notation (cluster.node_groups[train].instance_type)."""
    return walk(loc, data, root, None).path


def with_lines(issues: Iterable[SpecIssue], roots: Mapping[str, Any]) -> list[SpecIssue]:
    """Issues with the stack-file line of their path's nearest value, where the data came from a file."""

    out = []
    for issue in issues:
        if issue.line is not None:
            out.append(issue)
            continue
        head = re.split(r"[.\[]", issue.path, maxsplit=1)[0]
        parts = re.findall(r"\.([^.\[\]]+)|\[([^\]]+)\]", issue.path[len(head) :])
        value, line = roots.get(head), None
        for field, key in parts:
            name: Any = field or key
            if isinstance(value, list) and str(name).isdigit() and int(name) < len(value):
                name = int(name)
            elif not isinstance(value, Mapping) or name not in value:
                break
            found, _ = where(value, name)
            line = found or line
            value = value[name]
        out.append(replace(issue, line=line) if line else issue)
    return out


def did_you_mean_text(value: object, choices: Iterable[str]) -> str:
    """'; did you mean x?' for a message, or ''."""
    hits = did_you_mean(value, choices)
    return f"; did you mean {' or '.join(hits)}?" if hits else ""
