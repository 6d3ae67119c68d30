"""The fault schedule: adverse conditions applied while the load runs (document 001's point:
test beyond ideal conditions).

The controller calls :meth:`FaultInjector.tick` once a second. Member faults (kill, stop,
rolling restart of each VM, memory alarm) and queue deletion run in background threads so the
tick never waits for a broker; load faults
(consumer slowdown, publish spike) are effects the controller reads back each tick through
:meth:`spike_factor` and :meth:`consumer_delay_s`. Everything goes to ``events.jsonl``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
        self.added = len(faults)  # the index of the next fault added

    def tick(self, elapsed_s: float) -> None:
        """Start the faults that are due and end the effects that are over."""
        while self.schedule and self.schedule[0][0] <= elapsed_s:
            _, index, fault = self.schedule.pop(0)
            self._start(index, fault, elapsed_s)
        for effect in [e for e in self.effects if e.end_s <= elapsed_s]:
            self.effects.remove(effect)
            self.event("fault_cleared", action=effect.fault.kind, elapsed_s=elapsed_s,
                       explain=f"{effect.fault.kind} over")

    def add(self, fault: FaultSpec) -> None:
        """Schedule ``fault`` (its ``at`` a time of the run) beside the scenario's own: a
        capacity search holds its condition's faults over each probe this way."""
        self.schedule.append((_start_s(fault, []), self.added, fault))
        self.added += 1
        self.schedule.sort(key=lambda item: item[:2])

    def busy(self) -> bool:
        """Whether a fault is due, in force, or still taking a member down or up."""
        return bool(self.schedule or self.effects
                    or any(thread.is_alive() for thread in self.threads))

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
        self.event("fault", action=fault.kind, index=index, elapsed_s=elapsed_s,
                   member=fault.member, explain=f"{fault.kind} ({_what(fault)})")
        if fault.kind in ("consumer_slowdown", "publish_spike"):
            self.effects.append(Effect(fault, elapsed_s, elapsed_s + fault.duration))
            return
        members = [fault.member] if fault.member is not None else \
            [i for i, m in enumerate(self.provisioner.status()) if m.running]
        if fault.kind == "memory_alarm":
            work, args = self._alarm, (members, fault.duration)
        elif fault.kind == "link_down":
            work, args = self._link_down, (fault.duration,)
        elif fault.kind == "delete_queues":
            work, args = self._delete_queues, (fault.restart_after,)
        else:
            work, args = self._restart, (members, fault.kind, fault.restart_after)
        thread = threading.Thread(target=work, name=f"fault-{index}", daemon=True, args=args)
        self.threads.append(thread)
        thread.start()

    def _offered(self, kind: str, found: Callable[..., Any] | None) -> Callable[..., Any] | None:
        """``found``, the provisioner's feature that ``kind`` needs, or ``None`` and an event
        saying this placement does not offer it."""
        if found is None:
            self.event("fault_failed", action=kind, error=f"{kind} is not supported by "
                       f"{type(self.provisioner).__name__}")
        return found

    def _restart(self, members: list[int], kind: str, restart_after: float) -> None:
        """Stop each member (SIGKILL or gracefully), wait, start it again; one at a time. A
        rolling restart stops each member's VM (not only its broker application) and starts
        the next only once every quorum queue has its leader and all its members again."""
        kill, rolling = kind == "kill_member", kind == "rolling_restart"
        stop = self.provisioner.stop_vm if rolling else None
        await_quorum = self.provisioner.await_quorum if rolling else None
        for index in members:
            name = self.provisioner.member(index).name
            if self.stop.is_set():  # the run ends: no member is taken down any more
                self.event("fault_failed", member=name, error="the run stopped first")
                continue
            started = self.clock.monotonic()
            pid_before = self._pid(index)
            try:
                if stop is not None:
                    stop(index)
                else:
                    self.provisioner.stop_member(index, kill=kill)
                how = "killed (SIGKILL)" if kill else "stopped" if stop is None else \
                    "stopped (its VM)"
                self.event("member_killed" if kill else "member_stopped", member=name,
                           pid=pid_before, explain=f"{name} {how}")
                self.clock.sleep(restart_after, self.stop)
                retrying(lambda index=index: self.provisioner.start_member(index),
                         clock=self.clock, said=lambda attempt, error, name=name: self.event(
                             "fault_failed", member=name, attempt=attempt, error=str(error),
                             explain="temporary: trying again"))
            except SurgeError as error:
                self.event("fault_failed", member=name, error=str(error))
                continue
            pid_after = self._pid(index)
            self.event("member_restarted", member=name, pid_before=pid_before,
                       pid_after=pid_after, seconds=round(self.clock.monotonic() - started, 2),
                       explain=f"{name} serves again"
                       + (f" (VM pid {pid_before} -> {pid_after})"
                          if pid_before != pid_after else ""))
            if await_quorum is not None and not self.stop.is_set():
                self._await_quorum(await_quorum, name)

    def _await_quorum(self, await_quorum: Callable[..., float], name: str) -> None:
        try:
            waited = await_quorum(stop=self.stop)
        except SurgeError as error:
            self.event("fault_failed", member=name, error=str(error))
            return
        self.event("quorum_restored", member=name, seconds=round(waited, 2),
                   explain=f"every quorum queue has its leader and all members after {name}")

    def _pid(self, index: int) -> int | None:
        """The OS process of member ``index`` now (``None``: not running, or not known)."""
        try:
            return self.provisioner.status()[index].pid
        except (SurgeError, IndexError):
            return None

    def _alarm(self, members: list[int], duration: float) -> None:
        """Set off the members' memory alarms for ``duration`` (less if the run stops), then
        clear them; the alarm is cleared whatever happens in between."""
        alarm = self._offered("memory_alarm", self.provisioner.memory_alarm)
        if alarm is None:
            return
        names = [self.provisioner.member(i).name for i in members]
        set_off: list[int] = []
        try:
            for index in members:
                alarm(index, True)
                set_off.append(index)
            self.event("memory_alarm", members=names,
                       explain=f"memory alarm on {', '.join(names)}: publishers blocked")
            self.clock.sleep(duration, self.stop)
        except SurgeError as error:
            self.event("fault_failed", action="memory_alarm", error=str(error))
        finally:
            for index in set_off:
                try:
                    alarm(index, False)
                except SurgeError as error:
                    self.event("fault_failed", action="memory_alarm", error=str(error),
                               explain="the alarm could not be cleared")
            if set_off:
                self.event("fault_cleared", action="memory_alarm", members=names,
                           explain="memory alarm over")

    def _link_down(self, duration: float) -> None:
        """Take the link between linked clusters down for ``duration`` (less if the run
        stops), then up again; it is brought up whatever happens in between."""
        link = self._offered("link_down", self.provisioner.set_link)
        if link is None:
            return
        try:
            link(False)
            self.event("link_down", explain=f"the link is down for {duration:g} s: what is sent "
                                            "waits on side a")
            self.clock.sleep(duration, self.stop)
        except SurgeError as error:
            self.event("fault_failed", action="link_down", error=str(error))
        finally:
            try:
                retrying(lambda: link(True), clock=self.clock)
                self.event("fault_cleared", action="link_down", explain="the link runs again")
            except SurgeError as error:
                self.event("fault_failed", action="link_down", error=str(error),
                           explain="the link could not be brought up again")

    def _delete_queues(self, restart_after: float) -> None:
        """Delete the topology's queues (the broker cancels their consumers) and declare them
        again ``restart_after`` seconds later."""
        delete = self._offered("delete_queues", self.provisioner.delete_queues)
        if delete is None:
            return
        try:
            names = delete()
            self.event("queues_deleted", queues=len(names),
                       explain=f"{len(names)} queues deleted: consumers cancelled")
        except SurgeError as error:
            self.event("fault_failed", action="delete_queues", error=str(error))
        self.clock.sleep(restart_after, self.stop)
        try:
            retrying(self.provisioner.declare_queues, clock=self.clock)
        except SurgeError as error:
            self.event("fault_failed", action="delete_queues", error=str(error))
            return
        self.event("fault_cleared", action="delete_queues", explain="queues declared again")


def _what(fault: FaultSpec) -> str:
    """What a fault acts on or imposes, for its event."""
    if fault.member is not None:
        return f"member {fault.member}"
    if fault.kind == "consumer_slowdown":
        return f"delay {fault.delay * 1000:g} ms"
    if fault.kind == "publish_spike":
        return f"x{fault.factor:g}"
    if fault.kind == "delete_queues":
        return f"declared again after {fault.restart_after:g} s"
    if fault.kind == "link_down":
        return f"for {fault.duration:g} s"
    return "every member"


def _start_s(fault: FaultSpec, phases: list[Phase]) -> float:
    if fault.at is not None:
        return fault.at
    return phases[fault.at_step - 1].start_s
