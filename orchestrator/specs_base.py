"""What every spec model shares: the base model (unknown keys are errors, models are immutable)
and the unit-parsing field types (``2KiB``, ``30s``, ``3%``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict

from orchestrator import units

Bytes = Annotated[int, BeforeValidator(units.parse_size)]
Seconds = Annotated[float, BeforeValidator(units.parse_duration)]
Fraction = Annotated[float, BeforeValidator(units.parse_percent)]


class Spec(BaseModel):
    """Base of every spec model: unknown keys are errors, models are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
