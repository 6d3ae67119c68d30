"""Reading many sources at once within a deadline, so that no slow source stalls the tick.

Each source is a function; :meth:`Collector.collect` starts every source that is not still busy
with an earlier read, waits until the deadline, and returns what arrived. A read that misses the
deadline is not abandoned: it finishes in the background and its result (stamped by its own
source with the time it was taken) is handed out by a later ``collect``. A source is never read
twice at once, so a hung broker API costs one thread, not one per second.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Failed:
    """A read that raised: the error, kept for the record (the reading counts as missing)."""

    error: str


class Collector:
    """Concurrent reads of named sources with a deadline."""

    def __init__(self, sources: dict[str, Callable[[], Any]], workers: int | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.sources = dict(sources)
        self.clock = clock
        self._pool = ThreadPoolExecutor(max(1, workers or len(self.sources)),
                                        thread_name_prefix="collect")
        self._busy: dict[str, Future] = {}

    def start(self) -> None:
        """Start a read of every source that is not still busy with an earlier one."""
        for name, source in self.sources.items():
            if name not in self._busy:
                self._busy[name] = self._pool.submit(source)

    def collect(self, deadline: float) -> dict[str, Any]:
        """Results by source name for every read that completed by ``deadline`` (a
        :class:`Failed` for reads that raised); sources still busy are absent. Starts the
        reads :meth:`start` has not started."""
        self.start()
        pending = {f for f in self._busy.values() if not f.done()}
        while pending:
            remaining = deadline - self.clock()
            if remaining <= 0:
                break
            # one wait for all (not one per completion: with many agents, waking on each
            # reply and waiting again on every read still out cost the tick's thread O(n^2))
            _, pending = wait(pending, timeout=remaining)
        out: dict[str, Any] = {}
        for name, future in list(self._busy.items()):
            if future.done():
                del self._busy[name]
                error = future.exception()
                out[name] = Failed(f"{type(error).__name__}: {error}") if error else \
                    future.result()
        return out

    def busy(self) -> list[str]:
        """Sources whose read is still running."""
        return [name for name, future in self._busy.items() if not future.done()]

    def close(self) -> None:
        """Stop accepting reads; running ones finish on their own."""
        self._pool.shutdown(wait=False, cancel_futures=True)
