"""A receiver's deliveries taken and not acknowledged yet, and the shortest way a delivery goes
from the frame decoder to its accounting and acknowledgement.

:meth:`AckWindow.deliver` is what a plain receiver (acknowledging in batches, no consumer
delay, limit, nack, transaction or reply) hands the decoder for each delivery: the message is
accounted for by its role and counted, and every ``every`` deliveries acknowledged up to the
last. The pure-Python reference of the compiled core (``drivers/_speedups.pyx``);
:data:`AckWindow` is whichever runs (:mod:`results.rundir.compiled`).
"""

from __future__ import annotations

from collections.abc import Callable

from results.rundir import compiled


class PyAckWindow:
    """Deliveries of one channel taken and not acknowledged: ``unacked`` of them, the last
    ``last_tag``. ``every``: acknowledge once that many are taken (0: the broker needs no
    acknowledgement); ``on_body(body, offset, redelivered)`` accounts for a message;
    ``ack(tag)`` acknowledges up to ``tag`` and calls :meth:`acked`."""

    __slots__ = ("every", "recorder", "on_body", "ack", "unacked", "last_tag")

    def __init__(self, every: int, recorder, on_body: Callable[[bytes, int, bool], None],
                 ack: Callable[[int], None]) -> None:
        self.every, self.recorder, self.on_body, self.ack = every, recorder, on_body, ack
        self.unacked = self.last_tag = 0

    def took(self, tag: int) -> bool:
        """Delivery ``tag`` is held unacknowledged; whether the window is full."""
        self.last_tag = tag
        self.unacked += 1
        self.recorder.unacked += 1
        return self.unacked >= self.every

    def acked(self) -> None:
        """Everything taken was acknowledged (or went back with its channel)."""
        self.recorder.unacked -= self.unacked
        self.unacked = 0

    def deliver(self, buffer: bytes, offset: int, tag: int, redelivered: bool) -> None:
        """A plain receiver's delivery: accounted for, held, acknowledged with its batch."""
        self.on_body(buffer, offset, redelivered)
        if self.every and self.took(tag):
            self.ack(tag)


_compiled = compiled.load("drivers._speedups")
AckWindow: type[PyAckWindow] = PyAckWindow if _compiled is None else _compiled.AckWindow
