"""Stop signals: a first Ctrl-C, SIGTERM or SIGHUP ends a run early but cleanly (senders stop,
queues drain briefly, accounting is written), a second one forces."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from orchestrator.run.liveview import LiveView

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""What a person, ``timeout``, systemd, Kubernetes or a CI runner sends to stop a command."""


class Stoppable(Protocol):
    """A run that can be asked to stop (the controller)."""

    stop_requested: threading.Event
    view: LiveView

    def request_stop(self, why: str = ...) -> None:
        """End the load early."""


@contextlib.contextmanager
def on_stop_signals(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler`` for each of :data:`STOP_SIGNALS` meanwhile (only the main thread can set
    one; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, handler) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def signal_name(number: int) -> str:
    """``Ctrl-C`` for SIGINT, else the signal's name."""
    return "Ctrl-C" if number == signal.SIGINT else signal.Signals(number).name


@contextlib.contextmanager
def stop_on_signals(controller: Stoppable) -> Iterator[None]:
    """While a run goes (in the main thread), a first stop signal (Ctrl-C, SIGTERM, SIGHUP)
    asks it to stop cleanly (senders stop, a short drain, the accounting, teardown) and a
    second raises ``KeyboardInterrupt``."""
    def interrupt(signum, frame) -> None:
        if controller.stop_requested.is_set():
            raise KeyboardInterrupt
        controller.request_stop(f"stopped by {signal_name(signum)}")
        controller.view.say(f"[yellow]stopping ({signal_name(signum)}): senders stop, queues "
                            f"drain; again to force[/]")

    with on_stop_signals(interrupt):
        yield
