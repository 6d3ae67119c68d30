"""Which implementation of the hot path runs: the compiled cores where they were built, else
the pure-Python ones they mirror.

Every per-message piece of work (frame decoding and header stamping in
:mod:`drivers.amqp.frames`, sequence tracking in :mod:`drivers.accounting`, histogram records
in :mod:`results.rundir.histogram`) is written in Python, the reference, and compiled once more
in a Cython twin (``drivers/_speedups.pyx``, ``results/rundir/_histogram.pyx``) that the tests
hold to the same outputs on the same inputs. A module asks :func:`load` for its twin and falls
back to its own code when there is none: a pure wheel, a platform without a compiler, or
``SURGE_SPEEDUPS=0``. :func:`state` says which path ran, for the agent's snapshot, ``run.json``
and the report.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

ENV = "SURGE_SPEEDUPS"
"""Set to ``0`` to run the pure-Python code although the compiled one is installed."""

COMPILED = "compiled"

_loaded: dict[str, str] = {}  # module -> "" (loaded) or why not


def wanted() -> bool:
    """Whether the compiled cores may run in this process (``SURGE_SPEEDUPS`` is not 0)."""
    return os.environ.get(ENV, "1").strip() != "0"


def load(name: str) -> ModuleType | None:
    """The compiled module ``name``, or ``None`` (turned off, or not built here): the caller
    uses its pure-Python code then."""
    if not wanted():
        _loaded[name] = f"turned off by {ENV}=0"
        return None
    try:
        module = importlib.import_module(name)
    except ImportError:
        _loaded[name] = "not built in this install (a pure wheel)"
        return None
    _loaded[name] = ""
    return module


def state() -> str:
    """``compiled`` where every core asked for ran compiled, else ``pure (why)``; ``pure``
    alone where none was asked for yet."""
    why = sorted({reason for reason in _loaded.values() if reason})
    if not _loaded:
        return "pure"
    return COMPILED if not why else f"pure ({'; '.join(why)})"
