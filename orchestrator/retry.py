"""Trying a provisioning step again when its error says that may help.

A :class:`~orchestrator.errors.ProvisionError` is *temporary* (a node still booting, an API
answering 503) or permanent (a port in use, a bad manifest). Temporary ones are tried again
after a pause, a few times; permanent ones, and the last temporary one, are raised at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from orchestrator.clock import SYSTEM_CLOCK, Clock
from orchestrator.errors import ProvisionError

T = TypeVar("T")
ATTEMPTS = 3
PAUSE_S = 5.0


def retrying(action: Callable[[], T], *, attempts: int = ATTEMPTS, pause_s: float = PAUSE_S,
             clock: Clock = SYSTEM_CLOCK, stop: threading.Event | None = None,
             said: Callable[[int, ProvisionError], None] | None = None) -> T:
    """``action()``, tried up to ``attempts`` times while it fails with a temporary
    :class:`ProvisionError` (``said`` hears of each failure that is tried again); a set
    ``stop`` ends the retries."""
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except ProvisionError as error:
            if not error.temporary or attempt == attempts or (stop and stop.is_set()):
                raise
            if said is not None:
                said(attempt, error)
            clock.sleep(pause_s, stop)
    raise AssertionError("unreachable")  # the loop returns or raises
