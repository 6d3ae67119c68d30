"""What every spec model shares: the base model (unknown keys are errors, models are immutable,
numbers are finite and counts are whole numbers, never ``true``), the unit-parsing field types
(``2KiB``, ``30s``, ``3%``), names that become directory names, and problems between fields.

A check that involves several fields is a model's :meth:`Spec.cross_problems`, each problem at
the field it is about. Built in Python, a model raises on them at once; the spec loader
validates with :data:`COLLECT` instead and then reports every one of a file at its own line
(:func:`cross_problems`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)

from orchestrator.specs import units

Loc = tuple[str | int, ...]

# What a file may hold for each unit type, as the JSON Schema says it (`surge schema`).
_UNIT_TEXT = Annotated[str, Field(pattern=units.UNIT_PATTERN)]
_PERCENT_TEXT = Annotated[str, Field(pattern=units.PERCENT_PATTERN)]
Bytes = Annotated[int, BeforeValidator(units.parse_size, json_schema_input_type=int | _UNIT_TEXT)]
Seconds = Annotated[float, BeforeValidator(units.parse_duration,
                                           json_schema_input_type=float | _UNIT_TEXT)]
Fraction = Annotated[float, BeforeValidator(units.parse_percent,
                                            json_schema_input_type=float | _PERCENT_TEXT),
                     PlainSerializer(lambda v: f"{format(round(v * 100, 10), '.12g')}%",
                                     return_type=str, when_used="json")]
"""A share, written ``3%`` (a bare number is percent too); written out as percent text, so a
spec dumped to JSON reads back the same."""

COLLECT = {"collect_cross_problems": True}
"""Validation context under which models leave their cross-field problems to the caller."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _safe_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"a name becomes part of a directory name: use up to 64 letters, "
                         f"digits, '.', '_' and '-', starting with a letter or digit (got "
                         f"{name!r})")
    return name


def _file_path(value: Any) -> Any:
    if not isinstance(value, (str, Path)) or not str(value) or "\0" in str(value):
        raise ValueError("expected the path of a file, e.g. ../topologies/local-3.yaml")
    return value


SafeName = Annotated[str, AfterValidator(_safe_name),
                     WithJsonSchema({"type": "string", "pattern": f"^{_NAME.pattern}$"})]
"""A name that becomes (part of) a file or directory name: no ``/``, ``..`` or line breaks."""
FilePath = Annotated[Path, Field(strict=False), BeforeValidator(_file_path)]
"""A file named in a spec (relative to that spec); text in YAML, so not strict."""


class Spec(BaseModel):
    """Base of every spec model: unknown keys are errors, models are immutable, ``nan`` and
    ``inf`` are refused, and an ``int`` field takes only whole numbers (not ``true``, ``2.0``
    or ``"3"``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """Problems between this model's fields (nested models check their own), each with the
        path of the field it is about, relative to this model (``()``: the model itself)."""
        return []

    @model_validator(mode="after")
    def _cross_checked(self, info: ValidationInfo) -> Spec:
        if not (info.context or {}).get("collect_cross_problems"):
            found = self.cross_problems()
            if found:
                raise ValueError("; ".join(
                    ".".join(map(str, loc)) + ": " + message if loc else message
                    for loc, message in found))
        return self


def cross_problems(spec: Spec, loc: Loc = ()) -> list[tuple[Loc, str]]:
    """The cross-field problems of ``spec`` and of every spec inside it, each at its full
    field path (as pydantic names fields: by alias where there is one)."""
    found = [(loc + where, message) for where, message in spec.cross_problems()]
    for name, info in type(spec).model_fields.items():
        value = getattr(spec, name)
        items = value.items() if isinstance(value, dict) else \
            enumerate(value) if isinstance(value, list) else [(None, value)]
        for key, item in items:
            if isinstance(item, Spec):
                where = (info.alias or name,) + (() if key is None else (key,))
                found += cross_problems(item, loc + where)
    return found
