"""The capacity search as a schedule the controller follows: each probe is a step of the run
(held for :func:`~orchestrator.capacity.slo.hold_s` steady seconds after ``settle``) under the
search's condition (its faults started anew in every probe), judged from the controller's own
step row of it when it ends, then a pause without load until the condition's faults are over
(a member taken down serves again) and the queues are empty (or ``drain`` passes), then the
next probe the search asks for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.capacity.search import Found, Outcome, Probe, SearchSettings, next_probe
from orchestrator.capacity.slo import broken, hold_s, p99_ms
from orchestrator.run.faults import FaultInjector
from orchestrator.run.schedule import History, pause
from orchestrator.specs.capacity import CapacitySpec, SloSpec
from orchestrator.specs.faults import ConditionSpec
from orchestrator.specs.plan import Phase
from results.rundir.manifest import CapacityRecord, ProbeRecord
from results.rundir.steps import StepRow

#: Messages still queued or in flight that count as drained.
DRAINED = 10
CONFIRM_FACTOR = 2.0  # a confirmation holds this many times a probe's steady seconds
#: Longest wait, past ``drain``, for a condition's faults to end after a probe (a member taken
#: down to start again, a rolling restart to get round every member).
RECOVERY_S = 180.0


class SearchSchedule:
    """The phases of one search at one member count, decided as the run measures them."""

    def __init__(self, members: int, settings: SearchSettings, spec: CapacitySpec,
                 slo: SloSpec, senders: int, settle_s: float,
                 condition: ConditionSpec | None = None):
        self.members, self.settings, self.spec, self.slo = members, settings, spec, slo
        self.senders, self.settle_s = senders, settle_s
        self.condition = condition or ConditionSpec(name="ideal")
        self.faults: FaultInjector | None = None
        self.event: Callable[..., None] = lambda kind, **fields: None
        self.outcomes: list[Outcome] = []
        self.rows: list[StepRow] = []
        self.found: Found | None = None
        self._phases: list[Phase] = []
        self._pause: Phase | None = None
        self._probes: list[Probe] = []

    @property
    def phases(self) -> list[Phase]:
        return self._phases

    @property
    def planned_s(self) -> float:
        """The longest the search may take: every probe at the longest hold and drain."""
        longest = self.settle_s + self.spec.hold_max * CONFIRM_FACTOR + self.spec.drain
        if self.condition.faults:
            longest += RECOVERY_S
        return self.settings.max_probes * longest

    def phase_at(self, elapsed_s: float, history: History) -> Phase | None:
        if self.found is not None:
            return None
        current = self._phases[-1] if self._phases else None
        if current is not None and self._pause is None:
            if elapsed_s < current.end_s:
                return current
            self._judge(current, history)
            self._pause = pause(elapsed_s, elapsed_s + self.spec.drain)
        if self._pause is not None:
            self._await_recovery(elapsed_s)
            if elapsed_s < self._pause.end_s and (self._recovering(elapsed_s) or not _drained(
                    history.ticks, self._pause)):
                return self._pause
            self._pause = None
        step = next_probe(self.settings, self.outcomes)
        if isinstance(step, Found):
            self.found = step
            self.event("capacity", rate=step.rate, probes=step.probes,
                       converged=step.converged, why=step.why, condition=self.condition.name)
            return None
        return self._start(step, elapsed_s)

    def _start(self, probe: Probe, elapsed_s: float) -> Phase:
        steady = hold_s(probe.rate, self.slo, self.settings.precision, self.spec.hold_min,
                        self.spec.hold_max)
        if probe.confirm:
            steady = self.spec.confirm or steady * CONFIRM_FACTOR
        phase = Phase(len(self._phases) + 1, probe.rate / self.senders, elapsed_s,
                      elapsed_s + self.settle_s + round(steady))
        self._phases.append(phase)
        self._probes.append(probe)
        if self.faults is not None:
            for fault in self.condition.faults:
                self.faults.add(self.condition.held(fault, phase.start_s,
                                                    phase.end_s - phase.start_s))
        return phase

    def _recovering(self, elapsed_s: float) -> bool:
        """Whether the condition's faults of the last probe are still at work (within
        :data:`RECOVERY_S` past the drain)."""
        return (self.faults is not None and self.faults.busy() and self._pause is not None
                and elapsed_s < self._pause.start_s + self.spec.drain + RECOVERY_S)

    def _await_recovery(self, elapsed_s: float) -> None:
        """Hold the pause open while the faults are at work, and ``drain`` after, for the
        queues to empty."""
        if self._pause is not None and self._recovering(elapsed_s):
            self._pause = pause(self._pause.start_s, max(self._pause.end_s,
                                                         elapsed_s + self.spec.drain))

    def _judge(self, phase: Phase, history: History) -> None:
        """The probe's outcome from the controller's step row of its phase."""
        rows = history.step_rows([phase], self.settle_s)
        probe = self._probes[phase.index - 1]
        row = rows[-1] if rows else StepRow(step=phase.index, label=str(phase.index),
                                            target_rate=probe.rate)
        reasons = broken(row, self.slo)
        outcome = Outcome(probe, not reasons, row.achieved_rate, reasons)
        self.outcomes.append(outcome)
        self.rows.append(row)
        self.event("probe", step=phase.index, rate=probe.rate, confirm=probe.confirm,
                   condition=self.condition.name,
                   held=outcome.held, achieved=row.achieved_rate, p99_ms=p99_ms(row),
                   max_backlog=row.max_backlog, reasons=list(reasons))

    def attach(self, event: Callable[..., None]) -> None:
        self.event = event

    def attach_faults(self, faults: FaultInjector) -> None:
        self.faults = faults

    def manifest_fields(self) -> dict[str, Any]:
        return {"capacity": self.record()}

    def row_found(self) -> StepRow | None:
        """The step row whose figures stand for the target found: its confirmation, or (a
        search that did not converge) the last probe of that target that held."""
        target = self.found.target if self.found else None
        held = [(outcome.probe.confirm, row.end_s, row)
                for outcome, row in zip(self.outcomes, self.rows, strict=True)
                if outcome.held and target is not None and outcome.probe.rate == target]
        return max(held, key=lambda entry: entry[:2])[2] if held else None

    def record(self) -> CapacityRecord:
        """What ``run.json`` keeps of the search."""
        found = self.found
        return CapacityRecord(
            members=self.members, slo=self.slo.model_dump(),
            probes=[ProbeRecord(step=i + 1, rate=o.probe.rate, confirm=o.probe.confirm,
                                held=o.held, achieved=o.achieved, p99_ms=p99_ms(row),
                                max_backlog=row.max_backlog, reasons=list(o.reasons),
                                missing_seconds=row.missing_seconds, reconnects=row.reconnects,
                                bottleneck=row.bottleneck)
                    for i, (o, row) in enumerate(zip(self.outcomes, self.rows, strict=True))],
            rate=found.rate if found else None, target=found.target if found else None,
            converged=bool(found and found.converged),
            why=found.why if found else "the search was stopped before it ended",
            condition=self.condition.name,
            faults=[f.model_dump(mode="json", exclude_unset=True) for f in self.condition.faults])


def _drained(ticks: list[dict], since: Phase) -> bool:
    """Whether the latest second, in the pause, found the queues empty and every message sent
    received (an unknown depth counts as empty: the backlog still counts)."""
    if not ticks or ticks[-1]["elapsed_s"] <= since.start_s:
        return False
    last: dict[str, Any] = ticks[-1]
    depth = last.get("queue_depth")
    return (depth is None or depth <= DRAINED) and (last.get("backlog") or 0) <= DRAINED
