"""Waiting in tests for what another process does in its own time."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(condition: Callable[[], object], timeout_s: float = 5.0) -> bool:
    """Whether ``condition()`` came true within ``timeout_s``, asked every 50 ms."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
