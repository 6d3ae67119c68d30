"""Whether a run's load agents ran the AMQP fast path: their snapshots' states, as one record
of ``run.json`` (:class:`results.rundir.manifest.FastPathRecord`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drivers import protocol


def fast_path_fields(snapshots: Mapping[int, protocol.Snapshot]) -> dict[str, Any]:
    """The manifest's ``fast_path`` from each agent's last snapshot (by agent index): on where
    every agent ran it; else why not, naming the agents where they differ. Nothing (``{}``)
    before any snapshot, or where no agent's driver has a fast path (MQ)."""
    states = {i: s.fast_path for i, s in snapshots.items() if s.fast_path is not None}
    if not states:
        return {}
    off: dict[str, list[int]] = {}
    for index in sorted(states):
        if not states[index].on:
            off.setdefault(states[index].why, []).append(index)
    if not off:
        return {"fast_path": {"on": True, "why": ""}}
    if len(off) == 1 and len(next(iter(off.values()))) == len(states):
        return {"fast_path": {"on": False, "why": next(iter(off))}}  # all off, for one reason
    parts = [f"{_agents(indexes)}: {why}" for why, indexes in off.items()]
    on = sorted(set(states) - {i for indexes in off.values() for i in indexes})
    if on:
        parts.append(f"on in {_agents(on)}")
    return {"fast_path": {"on": False, "why": "; ".join(parts)}}


def _agents(indexes: list[int]) -> str:
    return ("agent " if len(indexes) == 1 else "agents ") + ", ".join(map(str, indexes))
