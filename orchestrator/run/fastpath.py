"""Which paths a run's load agents ran, from their snapshots, as records of ``run.json``: the
AMQP fast path (:class:`results.rundir.manifest.FastPathRecord`) and the compiled or pure hot
path (:class:`results.rundir.manifest.HotPathRecord`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drivers import protocol
from results.rundir.compiled import COMPILED


def fast_path_fields(snapshots: Mapping[int, protocol.Snapshot]) -> dict[str, Any]:
    """The manifest's ``fast_path`` and ``hot_path`` from each agent's last snapshot (by agent
    index): on where every agent ran it; else why not, naming the agents where they differ.
    Neither before any snapshot; no ``fast_path`` where no agent's driver has one (MQ)."""
    fast = {i: (s.fast_path.on, s.fast_path.why) for i, s in snapshots.items()
            if s.fast_path is not None}
    hot = {i: (s.hot_path == COMPILED, s.hot_path.removeprefix("pure (").removesuffix(")"))
           for i, s in snapshots.items() if s.hot_path}
    fields = {}
    for name, states in (("fast_path", fast), ("hot_path", hot)):
        if states:
            on, why = _one(states)
            fields[name] = {"on": on, "why": why}
    return fields


def _one(states: Mapping[int, tuple[bool, str]]) -> tuple[bool, str]:
    """On where every agent says on; else why not, naming the agents where they differ."""
    off: dict[str, list[int]] = {}
    for index in sorted(states):
        on, why = states[index]
        if not on:
            off.setdefault(why, []).append(index)
    if not off:
        return True, ""
    if len(off) == 1 and len(next(iter(off.values()))) == len(states):
        return False, next(iter(off))  # all off, for one reason
    parts = [f"{_agents(indexes)}: {why}" for why, indexes in off.items()]
    on = sorted(set(states) - {i for indexes in off.values() for i in indexes})
    if on:
        parts.append(f"on in {_agents(on)}")
    return False, "; ".join(parts)


def _agents(indexes: list[int]) -> str:
    return ("agent " if len(indexes) == 1 else "agents ") + ", ".join(map(str, indexes))
