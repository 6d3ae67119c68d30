"""How the load part of a run ends: the exit conditions, the drain after the senders stop,
the accounting of every message, and what the final run.json says."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from drivers.accounting import Reconciliation
from orchestrator.run.accounting import Routing, account, routing_of
from orchestrator.run.crew import Crew
from orchestrator.run.depth import QueueDepth
from orchestrator.run.listeners import TickRecord
from orchestrator.run.schedule import History
from orchestrator.run.ticker import TICK_DEADLINE_S, Ticker
from orchestrator.specs import plan as plans
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from results.rundir.manifest import Accounting, Interruption, Sampling
from results.rundir.steps import StepRow


def exit_reason(scenario: ScenarioSpec, final: plans.Phase, last: dict[str, Any],
                elapsed: float, crew: Crew) -> str | None:
    """Why an exit condition ends the load part early at ``elapsed`` (``last`` being the
    latest tick row), or ``None``."""
    exit_ = scenario.exit
    if crew.watch.lost and (exit_.agent_lost or not crew.live):
        return "an agent was lost" if crew.live else "every agent was lost"
    if exit_.messages_per_sender and last["senders_done"] >= scenario.workload.senders:
        return "every sender sent its messages"
    if exit_.messages_per_receiver and last.get("receivers_done", 0) >= \
            scenario.workload.receivers:
        return "every receiver took its messages"
    if exit_.queue_empty and last["queue_depth"] == 0 and \
            elapsed > final.start_s + scenario.measure.settle:
        return "queues empty"
    return None


def drain(ticker: Ticker, crew: Crew, depth: QueueDepth, drain_s: float,
          stop: threading.Event, record: Callable[[float, float], TickRecord],
          routing: Routing | None = None) -> int | None:
    """Keep ticking (``record(planned, started)``) after the senders stopped until every
    message sent was received and the queues are empty, or ``drain_s`` passes (5 s once a
    stop was asked for); the last queue depth. Both are judged on readings asked for after the
    stop: each live agent's (its totals) and the depth's (known only if at most a second old,
    as in every tick: :meth:`QueueDepth.now`), so the drain ends at the first tick that sees
    the last message received and acknowledged. Where an exchange routes each message to any
    number of queues (``routing``), receipts are not compared with sends: empty queues say
    it. A stream is never empty: its readers have read everything once they received every
    copy (where every message has as many; else the drain takes ``drain_s``)."""
    stream = routing is not None and routing.readers > 0
    copies = 1 if routing is None else routing.copies_each()
    clock = ticker.clock
    stopped = clock.monotonic()
    deadline = stopped + drain_s
    planned = max(ticker.t0 + math.floor(stopped - ticker.t0), ticker.t0)
    queued = None
    while clock.monotonic() < deadline:
        planned = ticker.next_tick(planned, None)
        second = record(planned, clock.monotonic())
        tick, queued = second.tick, second.row["queue_depth"]
        live = [ticker.math.agents.get(a.index) for a in crew.live]
        settled = all(r is not None and r.taken_after > stopped for r in live)
        empty = stream or (queued == 0 and depth.read_since(stopped)) or (
            queued is None and not depth.readable(ticker.broker))
        caught_up = crew.watch.lost or (
            routing is not None and not stream) or (copies is not None and tick.totals[
                "received"] >= tick.totals["sent"] * (copies if stream else 1))
        if settled and caught_up and empty:
            break
        if stop.is_set() and clock.monotonic() > stopped + 5:
            break
    return queued


def finish(ticker: Ticker, crew: Crew, depth: QueueDepth, scenario: ScenarioSpec,
           stop: threading.Event, event: Callable[..., None],
           record: Callable[[float, float], TickRecord], topology: TopologySpec | None = None):
    """Stop the senders, keep ticking until every message sent was received and the queues
    are empty or ``measure.drain`` passes (:func:`drain`), then stop receiving and account
    for every message (:func:`reckon`, said as the ``accounting`` event; each copy where
    the ``topology``'s exchanges route a message to several queues)."""
    routing = None if topology is None else routing_of(scenario, topology)
    event("senders_stop")
    crew.all(lambda agent: agent.stop_senders())
    queued = drain(ticker, crew, depth, scenario.measure.drain, stop, record, routing)
    event("drained", queue_depth=queued)
    crew.all(lambda agent: agent.stop_receivers())
    ticker.sampler.close()
    try:
        done = reckon(crew, depth, scenario, routing)
        event("accounting", **asdict(done.result), explain=done.result.explain(),
              producers_missing={k: v for k, v in done.missing.items() if v}, **done.extras)
    finally:
        depth.close()
    return done


def reckon(crew: Crew, depth: QueueDepth, scenario: ScenarioSpec,
           routing: Routing | None = None):
    """Every message accounted: the agents' reports and last snapshots against what the
    queues still hold (lost agents count their last reading, the rest unknown); with a
    ``routing``, each subscription's copies."""
    answers = crew.all(lambda agent: (agent.accounting(), agent.snapshot()))
    reports, snapshots = [a for a, _ in answers], [s for _, s in answers]
    settled = depth.settled()
    queued = None if settled is None else depth.total(settled)
    return account(reports, snapshots, scenario, queued, list(crew.watch.lost.values()),
                   routing, settled)


def step_table(phases: list[plans.Phase], history: History, settle: float
               ) -> tuple[list[StepRow], StepRow | None]:
    """The run's steps and its drain, from the rows it recorded."""
    return history.step_rows(phases, settle), history.drain_row(phases)


def closing(outcome: str, wall_s: float, interruption: Interruption | None,
            ticks: list[dict], accounting: Reconciliation | None, steps: list[StepRow] | None,
            lateness: Any) -> dict[str, Any]:
    """What run.json changes to when the run is ``outcome`` (``running`` at its start)."""
    changes: dict[str, Any] = {"outcome": outcome}
    if outcome != "running":
        changes["ended_at"] = utc(wall_s)
        if interruption is not None:
            last = ticks[-1]["elapsed_s"] if ticks else None
            changes["interruption"] = interruption.model_copy(update={"last_second_s": last})
    if accounting is not None:
        changes["accounting"] = Accounting(**asdict(accounting), explain=accounting.explain())
    if steps:
        changes["steps"] = steps
    if lateness.lateness_s:
        changes["sampling"] = Sampling.model_validate(
            {**lateness.summary(), "deadline_s": TICK_DEADLINE_S})
    return changes


def utc(wall_s: float) -> datetime:
    """A wall-clock time as an aware UTC datetime."""
    return datetime.fromtimestamp(wall_s, timezone.utc)
