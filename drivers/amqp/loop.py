"""The event loop every AMQP connection of an agent runs on: epoll, a timer heap and a queue of
callbacks, behind pika's public loop interface (``AbstractSelectorIOLoop``, handed to
``SelectConnection`` as its ``custom_ioloop``).

pika's own ``IOLoop`` spends, per turn, more Python than a receiver spends on the deliveries
of a socket read: it rebuilds its event map, checks each event against three sets, asks its
timer heap twice for the time and goes through two layers of callbacks per ready descriptor.
At tens of thousands of messages a second a turn handles a few messages, so that is a third of
an agent's CPU. This loop does one ``epoll_wait`` a turn, calls each ready descriptor's
handler once, and looks at the clock only when a timer is due.

A loop that keeps finding data waiting lingers. When :data:`BUSY_TURNS` turns in a row found
descriptors ready at once (their wait returned within :data:`BUSY_WAIT_NS`), the loop is not
keeping up turn by turn: each turn handles the few messages that came in during the last one,
and a turn's fixed cost (the wait, a read per socket, the decoder's call) outweighs them. Such a
loop sleeps :data:`LINGER_NS` after the turn, so the next one reads what a fraction of a
millisecond brought in at once: a busy agent spends about a third less CPU a message (interrupt
moderation, as network cards do). It does not linger with a callback waiting or a timer due
within the linger (a paced sender's next publish keeps its time), and a loop that waits never
lingers, so what it adds to a message's latency is at most one linger, and only where the
messages queue anyway. A loop with a requester or a responder never lingers
(:meth:`Loop.never_linger`). ``SURGE_LOOP_LINGER_US`` sets the linger (0: never).
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from pika.adapters.utils.selector_ioloop_adapter import AbstractSelectorIOLoop

from results.rundir import compiled

MAX_WAIT_S = 1.0  # the longest a turn waits with nothing due: stop() from a signal is seen
COMPACT_AFTER = 512  # cancelled timers the heap may hold before it is rebuilt without them
BUSY_TURNS = 3  # turns in a row that found descriptors ready at once before the loop lingers
BUSY_WAIT_NS = 50_000  # a wait that returned sooner found its descriptors ready at once
DEFAULT_LINGER_US = 200
_real_monotonic_ns, _nap_s = time.monotonic_ns, time.sleep  # real time, under a fake clock too


def linger_ns(environ: Mapping[str, str] = os.environ) -> int:
    """How long a busy loop lingers after a turn: ``SURGE_LOOP_LINGER_US`` microseconds (0:
    never), else :data:`DEFAULT_LINGER_US`; a value that is not a whole number >= 0 is
    reported once and the default used."""
    text = environ.get("SURGE_LOOP_LINGER_US", "").strip()
    if not text:
        return DEFAULT_LINGER_US * 1000
    if not text.isdigit():
        logging.getLogger(__name__).warning(
            "SURGE_LOOP_LINGER_US=%r: expected whole microseconds (0: never linger); using %d",
            text, DEFAULT_LINGER_US)
        return DEFAULT_LINGER_US * 1000
    return int(text) * 1000


LINGER_NS = linger_ns()


class LoopCore:
    """A turn of the loop: wait for what is ready (no longer than the next timer), call the
    handlers, then the callbacks and the timers that are due. The pure-Python reference of the
    compiled core (``drivers/_speedups.pyx``); :class:`Loop` is built on whichever runs
    (:mod:`results.rundir.compiled`)."""

    _timers: list[list]
    _handlers: dict[int, Callable[[int, int], None]]
    _events: dict[int, int]
    _readers: dict[int, Callable[[], object]]
    _callbacks: deque[Callable[[], object]]
    _epoll: select.epoll
    _wake_read: int
    _stopping: bool
    _linger_ns: int  # 0: never linger
    _busy: int  # turns in a row that found descriptors ready at once

    def _wait_s(self) -> float:
        """How long this turn may wait for a descriptor: not at all with callbacks waiting,
        else until the next timer, at most :data:`MAX_WAIT_S`."""
        if self._callbacks:
            return 0.0
        if self._timers:
            return min(max(0.0, self._timers[0][0] - time.monotonic()), MAX_WAIT_S)
        return MAX_WAIT_S

    def _turns(self) -> None:
        """Turn until ``_stopping``."""
        while not self._stopping:
            self._turn()

    def _turn(self) -> None:
        timers, handlers, events, readers = self._timers, self._handlers, self._events, \
            self._readers
        started = _real_monotonic_ns()
        found = self._epoll.poll(self._wait_s())
        busy = found and _real_monotonic_ns() - started < BUSY_WAIT_NS
        self._busy = self._busy + 1 if busy else 0
        for fd, ready in found:
            handler = handlers.get(fd)
            if handler is not None:
                if ready == select.EPOLLIN and fd in readers:
                    readers[fd]()
                    continue
                ready &= events[fd] | select.EPOLLERR | select.EPOLLHUP
                if ready:
                    handler(fd, ready)
            elif fd == self._wake_read:
                self._woken()
        for _ in range(len(self._callbacks)):  # what these add waits for the next turn
            self._callbacks.popleft()()
        if timers and timers[0][0] <= time.monotonic():
            self._run_timers()
        if self._busy >= BUSY_TURNS and self._linger_ns and not self._callbacks and (
                not timers or timers[0][0] - time.monotonic() > self._linger_ns / 1e9):
            _nap_s(self._linger_ns / 1e9)

    def _run_timers(self) -> None:
        raise NotImplementedError

    def _woken(self) -> None:
        raise NotImplementedError


_compiled = compiled.load("drivers._speedups")
_LoopCore: type[LoopCore] = LoopCore if _compiled is None else _compiled.LoopCore


class Loop(_LoopCore, AbstractSelectorIOLoop):  # type: ignore[valid-type,misc]
    """One thread's event loop (see the module). Not reentrant; everything but
    :meth:`add_callback` and :meth:`stop` is for the loop's own thread."""

    READ = select.EPOLLIN
    WRITE = select.EPOLLOUT
    ERROR = select.EPOLLERR

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._epfd = self._epoll.fileno()
        self._handlers: dict[int, Callable[[int, int], None]] = {}
        self._events: dict[int, int] = {}
        self._readers: dict[int, Callable[[], object]] = {}  # see direct_reader
        self._timers: list[list] = []  # heap of [deadline, order, callback]; None: cancelled
        self._order = 0
        self._cancelled = 0
        self._callbacks: deque[Callable[[], object]] = deque()  # appended from any thread
        self._owner: int | None = None  # the loop's thread, once it runs
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._epoll.register(self._wake_read, select.EPOLLIN)
        self._stopping = False
        self._running = False
        self._linger_ns, self._busy = LINGER_NS, 0

    def never_linger(self) -> None:
        """A link whose messages are round trips (a requester, a responder) runs on this loop:
        a linger would lengthen each trip and so lower the rate a bounded number in flight
        reaches."""
        self._linger_ns = 0

    # -- timers and callbacks ---------------------------------------------------------------

    def call_later(self, delay: float, callback: Callable[[], object]) -> list:
        """Call ``callback`` once ``delay`` seconds have passed; the handle cancels it."""
        self._order += 1
        timer = [time.monotonic() + delay, self._order, callback]
        heapq.heappush(self._timers, timer)
        return timer

    def remove_timeout(self, timeout_handle: list) -> None:
        """Cancel a :meth:`call_later` (nothing happens once it has run)."""
        if timeout_handle[2] is None:
            return
        timeout_handle[2] = None
        self._cancelled += 1
        if self._cancelled > COMPACT_AFTER and self._cancelled > len(self._timers) // 2:
            self._timers[:] = [timer for timer in self._timers if timer[2] is not None]
            heapq.heapify(self._timers)
            self._cancelled = 0

    def add_callback(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` in the loop's thread, in its next turn; from any thread (pika's
        interface asks that of this method alone)."""
        self._callbacks.append(callback)
        if threading.get_ident() != self._owner:
            self._wake()

    add_callback_threadsafe = add_callback

    # -- descriptors ------------------------------------------------------------------------

    def add_handler(self, fd: int, handler: Callable[[int, int], None], events: int) -> None:
        """Call ``handler(fd, events)`` when ``fd`` is ready for any of ``events``."""
        self._epoll.register(fd, events)
        self._handlers[fd], self._events[fd] = handler, events

    def update_handler(self, fd: int, events: int) -> None:
        """Watch ``fd`` for ``events`` from now on."""
        self._epoll.modify(fd, events)
        self._events[fd] = events

    def direct_reader(self, fd: int, reader: Callable[[], object]) -> None:
        """Call ``reader()`` itself when ``fd`` is only readable, instead of its handler
        (which would call it in the end), until the descriptor is removed."""
        self._readers[fd] = reader

    def remove_handler(self, fd: int) -> None:
        """Stop watching ``fd``."""
        self._readers.pop(fd, None)
        self._handlers.pop(fd, None)
        self._events.pop(fd, None)
        with contextlib.suppress(OSError, ValueError):  # closed already: the kernel dropped it
            self._epoll.unregister(fd)

    # -- running ----------------------------------------------------------------------------

    def start(self) -> None:
        """Run until :meth:`stop`."""
        if self._running:
            raise RuntimeError("the loop is running already")
        self._running, self._owner = True, threading.get_ident()
        try:
            self._turns()
        finally:
            self._running = self._stopping = False

    def stop(self) -> None:
        """End :meth:`start` after the current turn; from any thread."""
        self._stopping = True
        self._wake()

    def close(self) -> None:
        """Release the loop's descriptors (once it has stopped)."""
        self._epoll.close()
        for fd in (self._wake_read, self._wake_write):
            os.close(fd)

    def _run_timers(self) -> None:
        timers, now, due = self._timers, time.monotonic(), []
        while timers and timers[0][0] <= now:
            timer = heapq.heappop(timers)
            if timer[2] is not None:
                due.append(timer)
            else:
                self._cancelled -= 1
        for timer in due:  # one may cancel another that is due too (counted as it is)
            callback, timer[2] = timer[2], None
            if callback is not None:
                callback()
            else:
                self._cancelled -= 1

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: it will wake anyway; closed: stopped
            os.write(self._wake_write, b"x")

    def _woken(self) -> None:
        try:
            while os.read(self._wake_read, 4096):
                pass
        except BlockingIOError:
            pass
