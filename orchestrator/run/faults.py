"""The fault schedule: adverse conditions applied while the load runs (document 001's point:
test beyond ideal conditions).

The controller calls :meth:`FaultInjector.tick` once a second. Member faults (kill, stop,
rolling restart) run in background threads so the tick never waits for a broker; load faults
(consumer slowdown, publish spike) are effects the controller reads back each tick through
:meth:`spike_factor` and :meth:`consumer_delay_s`. Everything goes to ``events.jsonl``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.clock import SYSTEM_CLOCK, Clock
from orchestrator.errors import SurgeError
from orchestrator.retry import retrying
from orchestrator.specs.plan import Phase
from orchestrator.specs.scenario import FaultSpec


@dataclass(frozen=True)
class Effect:
    """A load fault in force from ``start_s`` to ``end_s``."""

    fault: FaultSpec
    start_s: float
    end_s: float


class FaultInjector:
    """Applies a scenario's faults at their times and keeps track of the ones in force."""

    def __init__(self, faults: list[FaultSpec], phases: list[Phase], provisioner,
                 event: Callable[..., None], stop: threading.Event,
                 clock: Clock = SYSTEM_CLOCK):
        self.clock = clock
        self.schedule = sorted(((_start_s(f, phases), i, f) for i, f in enumerate(faults)),
                               key=lambda item: item[:2])
        self.provisioner = provisioner
        self.event = event
        self.stop = stop
        self.effects: list[Effect] = []
        self.threads: list[threading.Thread] = []

    def tick(self, elapsed_s: float) -> None:
        """Start the faults that are due and end the effects that are over."""
        while self.schedule and self.schedule[0][0] <= elapsed_s:
            _, index, fault = self.schedule.pop(0)
            self._start(index, fault, elapsed_s)
        for effect in [e for e in self.effects if e.end_s <= elapsed_s]:
            self.effects.remove(effect)
            self.event("fault_cleared", action=effect.fault.kind, elapsed_s=elapsed_s,
                       explain=f"{effect.fault.kind} over")

    def spike_factor(self) -> float:
        """How much the plan's rate is multiplied by now."""
        factor = 1.0
        for effect in self.effects:
            if effect.fault.kind == "publish_spike":
                factor *= effect.fault.factor
        return factor

    def consumer_delay_s(self) -> float | None:
        """The processing time a slowdown imposes now, if one is in force."""
        delays = [e.fault.delay for e in self.effects if e.fault.kind == "consumer_slowdown"]
        return max(delays) if delays else None

    def wait(self, timeout_s: float = 120.0) -> None:
        """Let member faults in progress finish (a killed member is started again)."""
        for thread in self.threads:
            thread.join(timeout_s)

    def _start(self, index: int, fault: FaultSpec, elapsed_s: float) -> None:
        what = f"member {fault.member}" if fault.member is not None else \
            f"delay {fault.delay * 1000:g} ms" if fault.kind == "consumer_slowdown" else \
            f"x{fault.factor:g}" if fault.kind == "publish_spike" else "every member"
        self.event("fault", action=fault.kind, index=index, elapsed_s=elapsed_s,
                   member=fault.member, explain=f"{fault.kind} ({what})")
        if fault.kind in ("consumer_slowdown", "publish_spike"):
            self.effects.append(Effect(fault, elapsed_s, elapsed_s + fault.duration))
            return
        members = [fault.member] if fault.member is not None else \
            [i for i, m in enumerate(self.provisioner.status()) if m.running]
        thread = threading.Thread(target=self._restart, name=f"fault-{index}", daemon=True,
                                  args=(members, fault.kind == "kill_member",
                                        fault.restart_after))
        self.threads.append(thread)
        thread.start()

    def _restart(self, members: list[int], kill: bool, restart_after: float) -> None:
        """Stop each member (SIGKILL or gracefully), wait, start it again; one at a time."""
        for index in members:
            name = self.provisioner.member(index).name
            started = self.clock.monotonic()
            try:
                self.provisioner.stop_member(index, kill=kill)
                self.event("member_killed" if kill else "member_stopped", member=name,
                           explain=f"{name} {'killed (SIGKILL)' if kill else 'stopped'}")
                self.clock.sleep(restart_after, self.stop)
                retrying(lambda index=index: self.provisioner.start_member(index),
                         clock=self.clock, said=lambda attempt, error, name=name: self.event(
                             "fault_failed", member=name, attempt=attempt, error=str(error),
                             explain="temporary: trying again"))
            except SurgeError as error:
                self.event("fault_failed", member=name, error=str(error))
                continue
            self.event("member_restarted", member=name,
                       seconds=round(self.clock.monotonic() - started, 2),
                       explain=f"{name} serves again")


def _start_s(fault: FaultSpec, phases: list[Phase]) -> float:
    if fault.at is not None:
        return fault.at
    return phases[fault.at_step - 1].start_s
