"""A plan step's per-sender rate, parsed once: absolute (``50``) or a change to the previous
step's rate (``'+50'``, ``'-25'``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field, PlainSerializer, PlainValidator

from orchestrator.specs.units import NUMBER_PATTERN


@dataclass(frozen=True)
class StepRate:
    """msg/s per sender as written (``text``): ``value`` itself, or added to the previous step's
    rate when ``relative``."""

    value: float
    relative: bool
    text: str

    def after(self, previous: float) -> float:
        """The rate this step asks for when the step before asked ``previous`` (floor 0)."""
        return max(0.0, previous + self.value) if self.relative else self.value

    def __str__(self) -> str:
        return self.text


def parse_step_rate(value: object) -> StepRate:
    """``50``, ``"50"``, ``"+50"`` or ``"-25"`` as a :class:`StepRate` (a StepRate as it is)."""
    if isinstance(value, StepRate):
        return value
    text = str(value).strip()
    try:
        if isinstance(value, bool) or not math.isfinite(number := float(text)):
            raise ValueError
    except ValueError:
        raise ValueError("expected msg/s as a finite number (50) or an increment "
                         "('+50')") from None
    return StepRate(number, text[0] in "+-", text)


_WRITTEN = float | Annotated[str, Field(pattern=NUMBER_PATTERN + "$")]  # what a file may hold
RateChange = Annotated[StepRate, PlainValidator(parse_step_rate, json_schema_input_type=_WRITTEN),
                       PlainSerializer(str, return_type=str)]
"""A step's rate field: parsed at load, written back as it was given."""
