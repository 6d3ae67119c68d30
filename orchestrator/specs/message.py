"""What every message a sender publishes looks like: its size (fixed, a weighted mix, a uniform
range in size classes, or steps over time), what follows the surge header (zeros, random
bytes, a JSON document or the contents of files), its AMQP properties and publish flags.

A sender never encodes a message per send: every size class (or payload file) is a template
encoded once, and each message takes one of them (:mod:`drivers.message`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from orchestrator.specs.base import Bytes, FilePath, Loc, Seconds, Spec
from orchestrator.specs.limits import Number

MAX_MESSAGE_BYTES = 512 * 1024 * 1024
"""Largest message or reply (RabbitMQ's own hard limit; a sender holds one in memory)."""
MIN_MESSAGE_BYTES = 28
"""The surge message header's size (``drivers.header.HEADER_SIZE``; the specs sit below the
drivers, so the number is repeated here, and a test keeps the two equal)."""
MAX_SIZE_CLASSES = 64
"""Most distinct sizes (or payload files) one workload's messages take: each is a template
every sender keeps encoded."""


def _at_least_header(size: int) -> int:
    if size < MIN_MESSAGE_BYTES:
        raise ValueError(f"must be at least {MIN_MESSAGE_BYTES} bytes (the message header)")
    return size


MessageBytes = Annotated[Bytes, Field(le=MAX_MESSAGE_BYTES), AfterValidator(_at_least_header)]
"""A message size: within RabbitMQ's limit, and room for the header."""


class SizeShare(Spec):
    """One size of a weighted mix: messages of ``size`` in proportion to ``weight``."""

    size: MessageBytes = Field(description="bytes on the wire, header included")
    weight: Number = Field(1.0, gt=0, description="relative share of the messages")


class SizeRange(Spec):
    """Sizes spread uniformly from ``min`` to ``max``, in ``classes`` evenly spaced sizes."""

    min: MessageBytes = Field(description="smallest message, header included")
    max: MessageBytes = Field(description="largest message")
    classes: int = Field(16, ge=2, le=MAX_SIZE_CLASSES,
                         description="evenly spaced sizes from min to max, each as likely")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """A range that goes up."""
        if self.max <= self.min:
            return [(("max",), f"must be above min ({self.min:,} bytes)")]
        return []

    @property
    def sizes(self) -> list[int]:
        """The sizes of its classes, from min to max."""
        span, last = self.max - self.min, self.classes - 1
        return [self.min + span * i // last for i in range(self.classes)]


def _size_shorthand(value: object) -> object:
    """``"SIZE:SECONDS"`` (PerfTest's ``-vs``) as a size step."""
    if isinstance(value, str) and ":" in value:
        size, _, hold = value.partition(":")
        return {"size": size.strip(), "hold": hold.strip()}
    return value


class SizeStep(Spec):
    """One step of sizes over time: every message ``size`` bytes for ``hold``; also written
    ``"1000:30s"`` like PerfTest's ``-vs``."""

    size: MessageBytes = Field(description="bytes of every message during this step")
    hold: Seconds = Field(gt=0, description="how long this size lasts")


_SHORTHAND_TEXT = Annotated[str, Field(pattern=":")]
SizeStepText = Annotated[SizeStep, BeforeValidator(
    _size_shorthand, json_schema_input_type=SizeStep | _SHORTHAND_TEXT)]


class PropertiesSpec(Spec):
    """AMQP message properties every message carries (PerfTest's ``-mp``). RabbitMQ only."""

    content_type: str | None = Field(None, max_length=255, description="e.g. application/json")
    content_encoding: str | None = Field(None, max_length=255, description="e.g. gzip")
    priority: int | None = Field(None, ge=0, le=255, description="message priority (a queue "
                                                                "with x-max-priority orders "
                                                                "by it)")
    expiration: Seconds | None = Field(
        None, gt=0, description="per-message TTL: the broker drops a message queued longer "
                                "(the accounting counts it lost)")
    type: str | None = Field(None, max_length=255, description="the message type property")
    app_id: str | None = Field(None, max_length=255, description="the application id property")
    headers: dict[str, Any] = Field(default_factory=dict,
                                    description="the headers table (what a headers exchange "
                                                "matches)")

    @property
    def given(self) -> dict[str, Any]:
        """The properties set, as AMQP names them (``expiration`` in milliseconds, as text)."""
        found = {name: getattr(self, name) for name in ("content_type", "content_encoding",
                                                        "priority", "type", "app_id")
                 if getattr(self, name) is not None}
        if self.expiration is not None:
            found["expiration"] = str(max(1, round(self.expiration * 1000)))
        if self.headers:
            found["headers"] = dict(self.headers)
        return found


class MessageSpec(Spec):
    """Shape of every message a sender publishes."""

    size: MessageBytes = Field(2048, description=f"bytes on the wire, including the "
                                                 f"{MIN_MESSAGE_BYTES}-byte header")
    sizes: list[SizeShare] = Field(
        default_factory=list, max_length=MAX_SIZE_CLASSES,
        description="a weighted mix of sizes, one picked for each message (instead of size)")
    size_range: SizeRange | None = Field(
        None, description="sizes spread uniformly over a range (instead of size)")
    size_steps: list[SizeStepText] = Field(
        default_factory=list, max_length=10_000,
        description="sizes over time, 'SIZE:SECONDS' like PerfTest's -vs, from the start of "
                    "the plan; after the last step its size stays (instead of size)")
    body: Literal["zeros", "random", "json"] = Field(
        "zeros", description="what follows the header: zero bytes, random bytes, or a JSON "
                             "document filling the message (PerfTest's -jb)")
    payload_files: list[FilePath] = Field(
        default_factory=list, max_length=MAX_SIZE_CLASSES,
        description="each message carries the contents of one of these files after the "
                    "header, picked at random (PerfTest's -B); its size is the file's plus "
                    "the header. Relative to the scenario")
    persistent: bool = Field(False, description="persistent (delivery mode 2 in AMQP) messages")
    mandatory: bool = Field(False, description="publish with the mandatory flag: a message "
                                               "no queue takes is returned to its sender and "
                                               "counted (PerfTest's -f mandatory). RabbitMQ "
                                               "only")
    properties: PropertiesSpec = Field(default_factory=PropertiesSpec,
                                       description="AMQP properties of every message")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """One way of sizing; file payloads carry their own bytes; not too many classes."""
        given = [name for name in ("sizes", "size_range", "size_steps", "payload_files")
                 if getattr(self, name)]
        if "size" in self.model_fields_set:
            given.insert(0, "size")
        if len(given) > 1:
            return [((given[1],), f"give one of size, sizes, size_range, size_steps and "
                                  f"payload_files (got {', '.join(given)})")]
        if self.payload_files and self.body != "zeros":
            return [(("body",), "payload_files give the body: leave body out")]
        distinct = len({step.size for step in self.size_steps})
        if distinct > MAX_SIZE_CLASSES:
            return [(("size_steps",), f"at most {MAX_SIZE_CLASSES} different sizes (got "
                                      f"{distinct})")]
        return []

    @property
    def classes(self) -> list[int]:
        """The distinct sizes messages take, each a template (payload files: the header and
        the file; a file that cannot be read counts as empty, the loader refuses it)."""
        if self.payload_files:
            return [MIN_MESSAGE_BYTES + _file_size(path) for path in self.payload_files]
        if self.sizes:
            return [share.size for share in self.sizes]
        if self.size_range is not None:
            return self.size_range.sizes
        if self.size_steps:
            return sorted({step.size for step in self.size_steps})
        return [self.size]

    @property
    def weights(self) -> list[float]:
        """How often each class is picked (all alike for a range, files, and one size)."""
        if self.sizes:
            return [float(share.weight) for share in self.sizes]
        return [1.0] * len(self.classes)

    @property
    def largest(self) -> int:
        """The largest message."""
        return max(self.classes)

    @property
    def summary(self) -> str:
        """Its sizes in a few words, with units."""
        if self.payload_files:
            return f"{len(self.payload_files)} payload files, {min(self.classes):,} to " \
                   f"{self.largest:,} B"
        if self.size_range is not None:
            return f"{self.size_range.min:,} to {self.size_range.max:,} B uniform in " \
                   f"{self.size_range.classes} sizes"
        if self.sizes:
            return f"{len(self.sizes)} sizes, mean {self.mean:,.0f} B"
        if self.size_steps:
            return f"{min(self.classes):,} to {self.largest:,} B over time"
        return f"{self.size:,} B"

    @property
    def mean(self) -> float:
        """The mean message size picked per message (steps: the first step's)."""
        if self.size_steps:
            return float(self.size_steps[0].size)
        weights = self.weights
        return sum(s * w for s, w in zip(self.classes, weights)) / sum(weights)


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
