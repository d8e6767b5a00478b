"""The base of every model of the stack file (kept apart so spec sections can import it without
importing the whole spec)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


class SpecModel(BaseModel):
    """Base of every model of the stack file.

    strict: a value is the type the JSON Schema says (`count: "16"` and `spares: yes` are errors
    in gpuforge, in editors and in check-jsonschema alike, not silently coerced); numbers are
    finite; negative zero, which no field means, is refused.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _no_negative_zero(cls, value: Any) -> Any:
        if isinstance(value, float) and value == 0 and math.copysign(1, value) < 0:
            raise ValueError("got -0.0 (negative zero); write 0")
        return value
