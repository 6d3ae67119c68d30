"""Carrying out scaling decisions while the run goes: start or drain a member, move workers.

The controller feeds one :class:`~orchestrator.scaling.policy.Observation` per tick; decisions
come from the pure policy, and each action runs in a background thread so the 1 Hz tick never
waits for a member to boot. Workers are placed per member (``placement``); a new member gets a
fair share of senders and receivers, a drained one gives all of its own away before it stops.

Where the broker balances its clients itself (a provisioner with ``balances_clients``: an IBM MQ
uniform cluster, whose reconnectable applications of a QM group the queue managers move), the
scaler only starts and stops members and sends no moves: moving its own workers as well would
fight the cluster's balancing (each move is a reconnect MQ may undo) and would not be the test
document 000 describes, where the spread is MQ's and is what is measured. What surge does
there is record it: after a member starts, the placement the broker reports
(``client_placement``: connections per member and application name) once the new member holds
a share of every application with at least as many instances as members (MQ's promise), or
after :data:`BALANCE_WAIT_S` (MQ spreads clients over tens of seconds), as a ``clients_placed``
event. The next scaling decision waits for that: a shortfall measured before the clients moved
would start members the cluster does not need."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Container
from typing import Any

from drivers import protocol
from orchestrator.clock import SYSTEM_CLOCK, Clock
from orchestrator.errors import SurgeError
from orchestrator.retry import retrying
from orchestrator.scaling.policy import Decision, Observation, decide
from orchestrator.scaling.rebalance import fair_moves
from orchestrator.specs.scenario import ScalingSpec
from orchestrator.specs.topology import QueueSpec

Worker = tuple[str, int]  # ("s", producer id) or ("r", receiver id)
DRAIN_WAIT_S = 30.0
BALANCE_WAIT_S = 60.0  # longest wait for the broker to move clients to a started member
BALANCE_POLL_S = 2.0


class Scaler:
    """Scaling state of one run: history, placement, the action in progress."""

    def __init__(self, spec: ScalingSpec, provisioner, queue: QueueSpec, pool: int,
                 minimum: int, event: Callable[..., None],
                 ready: Callable[[str], int | None] = lambda name: None,
                 clock: Clock = SYSTEM_CLOCK, background: bool = True,
                 lost: Container[int] = frozenset()):
        self.spec = spec
        self.lost = lost  # the indexes of the agents the run lost: their workers are gone
        self.clock = clock
        self.background = background  # False: actions run within observe (tests)
        self.ready = ready  # messages ready in one queue now, read from the queue itself
        self.provisioner = provisioner
        self.queue = queue
        self.pool = pool
        self.minimum = minimum
        self.event = event
        self.history: list[Observation] = []
        self.last_action_s: float | None = None
        self.busy = threading.Lock()
        self.thread: threading.Thread | None = None
        self.placement: dict[Worker, int] = {}
        self.agent_of: dict[Worker, Any] = {}
        self.queue_depth = 0
        self.broker_balances = provisioner.balances_clients

    def place(self, worker: Worker, agent, member_index: int) -> None:
        """Record where a worker was started."""
        self.placement[worker] = member_index
        self.agent_of[worker] = agent

    def observe(self, observation: Observation, running: list[int]) -> Decision | None:
        """Add one tick; start an action in the background if the policy says so."""
        self.history.append(observation)
        self.queue_depth = observation.queue_depth
        if self.busy.locked():
            return None
        decision = decide(self.spec, self.history, len(running), self.pool, self.minimum,
                          self.last_action_s)
        if decision is None:
            return None
        self.busy.acquire()
        self.event("scale_decision", action=decision.action, triggers=decision.triggers,
                   values=decision.values, elapsed_s=observation.elapsed_s,
                   explain=decision.describe())
        action = self._scale_out if decision.action == "out" else self._scale_in
        if not self.background:
            self._run(action, observation.elapsed_s, running)
            return decision
        self.thread = threading.Thread(target=self._run, args=(action, observation.elapsed_s,
                                                                running), daemon=True)
        self.thread.start()
        return decision

    def wait(self, timeout_s: float = 120.0) -> None:
        """Let an action in progress finish (at the end of a run)."""
        if self.thread is not None:
            self.thread.join(timeout_s)

    def _run(self, action, decided_s: float, running: list[int]) -> None:
        try:
            action(running)
        except Exception as error:  # noqa: BLE001 - recorded; the run goes on without it
            self.event("scale_failed", action=action.__name__.removeprefix("_scale_"),
                       error=f"{type(error).__name__}: {error}")
        finally:
            self.last_action_s = self.history[-1].elapsed_s if self.history else decided_s
            self.busy.release()

    def _scale_out(self, running: list[int]) -> None:
        started = self.clock.monotonic()
        try:
            member = retrying(self.provisioner.start_member, clock=self.clock,
                              said=lambda attempt, error: self.event(
                                  "scale_failed", action="out", attempt=attempt,
                                  error=str(error), explain="temporary: trying again"))
        except SurgeError as error:
            self.event("scale_failed", action="out", error=str(error))
            return
        self.event("member_started", member=member.name, index=member.index,
                   seconds=round(self.clock.monotonic() - started, 2),
                   explain=f"{member.name} serves" + (
                       "; the cluster moves clients to it itself" if self.broker_balances
                       else ""))
        if self.broker_balances:
            self._record_placement(member.name)
        elif self.spec.rebalance:
            self._move_to([*running, member.index])

    def _record_placement(self, name: str) -> None:
        """Wait for the broker to give member ``name`` its share of the clients (see the
        module docstring); record where they are as a ``clients_placed`` event."""
        started = self.clock.monotonic()
        placement = self.provisioner.client_placement()
        if placement is None:
            return
        while not spread_to(placement, name) and \
                self.clock.monotonic() - started < BALANCE_WAIT_S:
            self.clock.sleep(BALANCE_POLL_S)
            placement = self.provisioner.client_placement()
        seconds = round(self.clock.monotonic() - started, 1)
        held = sum(placement.get(name, {}).values())
        total = sum(n for counts in placement.values() for n in counts.values())
        self.event("clients_placed", member=name, placement=placement, seconds=seconds,
                   explain=f"{name} holds {held} of {total} client connections after "
                           f"{seconds:g} s" + ("" if spread_to(placement, name) else
                                               " (the broker has not balanced them yet)"))

    def _scale_in(self, running: list[int]) -> None:
        leaving = max(i for i in running if i != 0)
        staying = [i for i in running if i != leaving]
        name = self.provisioner.member(leaving).name
        if self.broker_balances:  # its clients reconnect to the others as it ends
            self.provisioner.stop_member(leaving)
            self.event("member_stopped", member=name,
                       explain=f"{name} stopped; its clients reconnect to the others")
            return
        self.event("member_draining", member=name, explain=f"moving clients off {name}")
        self._move_to(staying, kinds=("s",))
        if self.queue.per_member:
            self._wait_for_instance_to_empty(leaving)
        self._move_to(staying, kinds=("r",))
        self.clock.sleep(2.0)  # let moved receivers cancel and close before the member goes
        self.provisioner.stop_member(leaving)
        self.event("member_stopped", member=name, explain=f"{name} stopped")

    def _wait_for_instance_to_empty(self, member_index: int) -> None:
        name = self.queue.instance(member_index)
        deadline = self.clock.monotonic() + DRAIN_WAIT_S
        while self.clock.monotonic() < deadline:
            if self.ready(name) == 0:
                return
            self.clock.sleep(1.0)

    def _move_to(self, members: list[int], kinds: tuple[str, ...] = ("s", "r")) -> None:
        """Give each of ``members`` a fair share of each kind of worker."""
        moves: dict[Worker, int] = {}
        placed = self._live_placement()
        for kind in kinds:
            mine = {w: m for w, m in placed.items() if w[0] == kind}
            moves.update(fair_moves(mine, members))
        batches: dict[tuple[int, int], dict[str, list[int]]] = defaultdict(
            lambda: {"senders": [], "receivers": []})
        for worker, member_index in moves.items():
            agent = self.agent_of[worker]
            key = "senders" if worker[0] == "s" else "receivers"
            batches[(agent.index, member_index)][key].append(worker[1])
        agents = {a.index: a for a in self.agent_of.values()}
        for (agent_index, member_index), ids in batches.items():
            member = self.provisioner.member(member_index)
            agents[agent_index].move(protocol.Move(
                endpoint=member.endpoint, senders=ids["senders"], receivers=ids["receivers"],
                queue=self.queue.instance(member_index)))
        self.placement.update(moves)
        counts = defaultdict(int)
        for worker, member_index in self._live_placement().items():
            counts[f"{worker[0]}{member_index}"] += 1
        self.event("rebalanced", moved=len(moves), placement=dict(sorted(counts.items())),
                   explain=f"moved {len(moves)} workers")


    def _live_placement(self) -> dict[Worker, int]:
        """Where each worker of an agent not lost sits."""
        return {w: m for w, m in self.placement.items() if self.agent_of[w].index not in self.lost}


def spread_to(placement: dict[str, dict[str, int]], name: str) -> bool:
    """Whether member ``name`` holds at least one client of every application that has at
    least as many clients as there are members (what a uniform cluster ensures)."""
    totals: dict[str, int] = defaultdict(int)
    for counts in placement.values():
        for application, count in counts.items():
            totals[application] += count
    mine = placement.get(name, {})
    return all(mine.get(application, 0) > 0 for application, total in totals.items()
               if total >= len(placement))
