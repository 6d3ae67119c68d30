"""The backlog test (OpenMessaging Benchmark's backlog mode) of plan steps with a ``backlog``:
receivers are held until the workload's queues hold that backlog, then let go while senders
publish at a ratio of the step's rate, until the backlog is drained (to ``1 - drain_ratio`` of
itself); how long each part took and the rate it drained at are said as events and kept in
``run.json``.

The backlog is the ticks' ``backlog`` column: copies sent and not yet received (what the
receivers hold undelivered counts in it). A step's hold bounds the test: a backlog not built
or not drained by its end is said so, never reported as done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.run.listeners import TickRecord
from orchestrator.specs import plan as plans
from orchestrator.specs.scenario import BacklogSpec
from results.rundir.manifest import BacklogResult


@dataclass
class _Test:
    """One step's backlog test as it goes: building, draining, drained."""

    step: int
    spec: BacklogSpec
    target: int  # messages
    started_s: float
    built_s: float | None = None
    received_at_built: int = 0
    backlog_at_built: int = 0
    drained_s: float | None = None
    received_at_drained: int = 0


class BacklogTests:
    """The backlog tests of a run's steps: whether receivers are held now, the senders' rate
    factor, and each test's result (a :class:`~orchestrator.run.listeners.TickListener`)."""

    def __init__(self, mean_message_bytes: float, event: Callable[..., None]):
        self.mean_bytes = mean_message_bytes
        self.event = event
        self.tests: dict[int, _Test] = {}
        self.current: _Test | None = None

    def target(self, spec: BacklogSpec) -> int:
        """The backlog in messages (bytes counted at the mean message size)."""
        if spec.messages is not None:
            return spec.messages
        return max(1, round((spec.bytes or 0) / self.mean_bytes))

    def holding(self, phase: plans.Phase | None) -> bool:
        """Whether receivers are held now: a backlog of ``phase`` is being built."""
        test = self.tests.get(phase.index) if phase is not None else None
        return phase is not None and phase.backlog is not None and (
            test is None or test.built_s is None)

    def rate_factor(self, phase: plans.Phase | None) -> float:
        """The senders' rate as a share of the step's: ``publish_ratio`` once the backlog is
        built."""
        test = self.tests.get(phase.index) if phase is not None else None
        return test.spec.publish_ratio if test is not None and test.built_s is not None else 1.0

    def on_tick(self, record: TickRecord) -> None:
        """Follow the backlog of the step the second belongs to; end a test its step left."""
        phase = record.phase
        current = self.current
        if current is not None and (phase is None or phase.index != current.step):
            self._unfinished(current, record.elapsed_s)
            self.current = None
        if phase is None or phase.backlog is None or phase.index in self._finished():
            return
        test = self.tests.get(phase.index)
        if test is None:
            test = self.tests[phase.index] = _Test(phase.index, phase.backlog,
                                                   self.target(phase.backlog), record.elapsed_s)
            self.current = test
            self.event("backlog_building", step=phase.index, messages=test.target)
        backlog, received = record.row.get("backlog"), record.tick.totals.get("received", 0)
        if backlog is None:
            return
        if test.built_s is None and backlog >= test.target:
            test.built_s, test.received_at_built, test.backlog_at_built = \
                record.elapsed_s, received, backlog
            self.event("backlog_built", step=test.step, messages=backlog,
                       seconds=round(test.built_s - test.started_s, 3))
        elif test.built_s is not None and test.drained_s is None and \
                backlog <= round(test.backlog_at_built * (1 - test.spec.drain_ratio)):
            test.drained_s, test.received_at_drained = record.elapsed_s, received
            result = self.result(test)
            self.event("backlog_drained", step=test.step, seconds=result.drain_s,
                       drain_rate=result.drain_rate)
            self.current = None

    def _finished(self) -> set[int]:
        return {step for step, test in self.tests.items() if test.drained_s is not None}

    def _unfinished(self, test: _Test, elapsed_s: float) -> None:
        if test.drained_s is None:
            self.event("backlog_unfinished", step=test.step,
                       part="building" if test.built_s is None else "draining",
                       seconds=round(elapsed_s - test.started_s, 3))

    def result(self, test: _Test) -> BacklogResult:
        """What one test measured (``None`` for a part it did not finish)."""
        build_s = None if test.built_s is None else round(test.built_s - test.started_s, 3)
        drain_s = None if test.drained_s is None or test.built_s is None \
            else round(test.drained_s - test.built_s, 3)
        drained = test.received_at_drained - test.received_at_built
        return BacklogResult(
            step=test.step, target_messages=test.target, built_messages=test.backlog_at_built
            if test.built_s is not None else None, build_s=build_s, drain_s=drain_s,
            drain_rate=round(drained / drain_s, 1) if drain_s else None,
            drain_ratio=test.spec.drain_ratio, publish_ratio=test.spec.publish_ratio)

    def results(self) -> list[BacklogResult]:
        """Every test, in step order."""
        return [self.result(self.tests[step]) for step in sorted(self.tests)]
