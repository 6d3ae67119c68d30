"""A run's message bodies: the bytes after each message's header, one per size class (or
payload file), and which class each message takes.

Every class's bytes are made once, when the agent is configured; a message is its header,
stamped as it is sent, followed by its class's bytes. The class is a pure function of the
message's producer and sequence number (:class:`drivers.routing.KeyPicker`, weighted), or the
one the plan sets live for sizes that change over time.
"""

from __future__ import annotations

import json
import random
import string

from drivers.header import HEADER_SIZE, encode
from drivers.protocol import MessageShape
from drivers.routing import KeyPicker

FILLS = ("zeros", "random", "json")
SIZE_SALT = 1
"""The size picker's salt: picks independent of the routing key picker's (salt 0)."""


class Bodies:
    """The bytes after the header of each size class, and the class of each message."""

    __slots__ = ("sizes", "fillers", "picker", "current")

    def __init__(self, shape: MessageShape):
        if shape.payloads:
            self.fillers = list(shape.payloads)
        else:
            if shape.fill not in FILLS:
                raise ValueError(f"message fill {shape.fill!r}: expected one of "
                                 f"{', '.join(FILLS)}")
            for size in shape.sizes:
                if size < HEADER_SIZE:
                    raise ValueError(f"message size {size}: a surge message holds at least "
                                     f"its {HEADER_SIZE}-byte header")
            self.fillers = [_filler(shape.fill, size - HEADER_SIZE, i)
                            for i, size in enumerate(shape.sizes)]
        self.sizes = [HEADER_SIZE + len(filler) for filler in self.fillers]
        weighted = len(self.fillers) > 1 and bool(shape.weights)
        if weighted and len(shape.weights) != len(self.fillers):
            raise ValueError(f"{len(shape.weights)} weights for {len(self.fillers)} sizes")
        self.picker = KeyPicker(len(self.fillers), "weighted", weights=list(shape.weights),
                                salt=SIZE_SALT) if weighted else None
        self.current = 0

    @classmethod
    def fixed(cls, size: int) -> Bodies:
        """Every message ``size`` bytes, zeros after the header."""
        return cls(MessageShape(sizes=(size,)))

    @property
    def count(self) -> int:
        """Size classes (templates)."""
        return len(self.fillers)

    @property
    def mean_size(self) -> int:
        """The mean message size in bytes (sizes set live: the one in force)."""
        if self.picker is None:
            return self.sizes[self.current]
        counts = [0] * self.count
        for k in self.picker.slots:
            counts[k] += 1
        return round(sum(s * c for s, c in zip(self.sizes, counts)) / len(self.picker.slots))

    def set_class(self, index: int) -> None:
        """Sizes set live: every message from now on takes class ``index``."""
        if not 0 <= index < self.count:
            raise ValueError(f"size class {index}: this run has {self.count}")
        self.current = index

    def picks(self, producer_id: int, first_seq: int, n: int) -> list[int] | None:
        """The class of each of ``n`` messages from ``first_seq``; ``None``: all take
        :attr:`current`."""
        return None if self.picker is None else self.picker.picks(producer_id, first_seq, n)

    def pick(self, producer_id: int, seq: int) -> int:
        """The class of message ``seq`` of ``producer_id``."""
        return self.current if self.picker is None else self.picker.pick(producer_id, seq)


def _filler(fill: str, length: int, index: int) -> bytes:
    """``length`` bytes of ``fill`` (each class its own random bytes, the same every run)."""
    if fill == "zeros" or length == 0:
        return bytes(length)
    rng = random.Random(f"surge-body-{index}")
    if fill == "random":
        return rng.randbytes(length)
    return _json_document(length, rng)


def _json_document(length: int, rng: random.Random) -> bytes:
    """A JSON object of exactly ``length`` bytes: an id and random text, or for too few bytes
    an empty object padded with spaces (a single space for 1 byte)."""
    frame = json.dumps({"id": rng.getrandbits(32), "text": ""}, separators=(",", ":"))
    room = length - len(frame)
    if room < 0:
        return (b"{}" + b" " * (length - 2)) if length >= 2 else b" " * length
    letters = string.ascii_letters + string.digits + " "
    text = "".join(rng.choices(letters, k=room))
    return frame.replace('"text":""', f'"text":"{text}"').encode()


class PayloadBuilder:
    """Builds message bodies: a header followed by the bytes of the message's size class."""

    __slots__ = ("bodies", "size")

    def __init__(self, bodies: Bodies | int) -> None:
        """Bodies of ``bodies``' classes, or of exactly ``bodies`` bytes (zeros after the
        header; at least :data:`~drivers.header.HEADER_SIZE`)."""
        self.bodies = Bodies.fixed(bodies) if isinstance(bodies, int) else bodies
        self.size = self.bodies.mean_size

    def build(self, producer_id: int, seq: int, send_ns: int, lag_us: int | None = None
              ) -> bytes:
        """Return the body of message ``seq`` of ``producer_id``, its header carrying the
        given fields (``lag_us`` ``None``: unscheduled)."""
        bodies = self.bodies
        return encode(producer_id, seq, send_ns, lag_us) + \
            bodies.fillers[bodies.pick(producer_id, seq)]
