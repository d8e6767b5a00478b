"""Field paths of spec problems, built from the models instead of written by hand.

`CLUSTER.field("node_groups").key("train").field("capacity", "reservation_id")` is the text
`cluster.node_groups[train].capacity.reservation_id`, the one notation every problem uses (errors.py): a field
after a dot, a key the user chose or a list index in brackets. Each step is checked against the model at that
point of the path, so a misspelt or renamed field raises where the path is built (in the tests of that check),
not in a user's report. A FieldPath is a str, so it goes wherever a path did.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel

from .cluster import ClusterSpec


def _models(annotation: Any) -> tuple[type[BaseModel], ...]:
    """The models a field of this type holds (several for a union: any of their fields may follow)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return (annotation,)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(m for member in typing.get_args(annotation) for m in _models(member))
    return ()


def _items(annotation: Any) -> tuple[type[BaseModel], ...]:
    """The models held by the entries of a map or list field (dict[Name, NodeGroup] -> NodeGroup)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(m for member in typing.get_args(annotation) for m in _items(member))
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict and len(args) == 2:
        return _models(args[1])
    if origin in (list, tuple) and args:
        return _models(args[0])
    return ()


class FieldPath(str):
    """A path into the stack file's cluster spec; `field` and `key` extend it, checked against the models."""

    models: tuple[type[BaseModel], ...]
    items: tuple[type[BaseModel], ...]

    def __new__(cls, text: str, models: tuple[type[BaseModel], ...] = (), items: tuple[type[BaseModel], ...] = ()
                ) -> FieldPath:
        path = super().__new__(cls, text)
        path.models, path.items = models, items
        return path

    def field(self, *names: str) -> FieldPath:
        """The path of a field (or of fields nested in one another) below this one."""
        path = self
        for name in names:
            declared = [m.model_fields[name] for m in path.models if name in m.model_fields]
            if not declared:
                held = ", ".join(m.__name__ for m in path.models) or "no model"
                raise AttributeError(f"{path} ({held}) has no field {name!r}")
            annotation = declared[0].annotation
            path = FieldPath(f"{path}.{name}", _models(annotation), _items(annotation))
        return path

    def key(self, key: str | int) -> FieldPath:
        """The path of one entry of a map (a key the user chose) or list (an index) field."""
        if not self.items and self.models:
            raise TypeError(f"{self} is not a map or list of models")
        return FieldPath(f"{self}[{key}]", self.items)


CLUSTER = FieldPath("cluster", (ClusterSpec,))
NODE_GROUPS = CLUSTER.field("node_groups")
