"""What the plan asks of the agents second by second: the rate, the active senders, the
message size and the consumers' delay sent when they change, and each step's start and end
said."""

from __future__ import annotations

from collections.abc import Callable

from drivers import protocol
from orchestrator.run.backlogs import BacklogTests
from orchestrator.run.crew import Crew
from orchestrator.run.faults import FaultInjector
from orchestrator.run.liveview import ViewState
from orchestrator.run.schedule import History, Schedule
from orchestrator.specs import plan as plans
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.web.feed import RunFeed


class Steering:
    """Steers the agents through ``schedule`` (with the faults' spikes and slowdowns)."""

    def __init__(self, scenario: ScenarioSpec, schedule: Schedule, faults: FaultInjector,
                 crew: Crew, state: ViewState, feed: RunFeed, history: History,
                 event: Callable[..., None]):
        self.scenario, self.schedule, self.faults, self.crew = scenario, schedule, faults, crew
        self.state, self.feed, self.history, self.event = state, feed, history, event
        self.delays = plans.delay_phases(scenario.consumer_profile)
        self.backlogs = BacklogTests(scenario.workload.message.mean, event)
        message = scenario.workload.message
        self.sizes = plans.size_phases(message.size_steps)
        self.classes = message.classes

    def active(self, phase: plans.Phase) -> int:
        """Senders publishing in ``phase``."""
        return self.scenario.workload.senders if phase.senders is None else phase.senders

    def target(self, phase: plans.Phase, elapsed: float) -> float:
        """The total rate the plan (times any publish spike or backlog drain ratio) asks for
        at ``elapsed``."""
        return self.rate(phase, elapsed) * self.active(phase)

    def rate(self, phase: plans.Phase, elapsed: float) -> float:
        """Each sender's rate at ``elapsed``."""
        return phase.rate_at(elapsed) * self.faults.spike_factor() * \
            self.backlogs.rate_factor(phase)

    def apply(self, elapsed: float, phase: plans.Phase) -> None:
        """Send the agents what changed since the last tick: rate, active senders, message
        size, and the consumers' processing time (profile or slowdown) or hold (a backlog
        being built)."""
        rate = protocol.Rate(round(self.rate(phase, elapsed), 3), phase.senders,
                             self.size_class(elapsed), phase.receivers)
        delay = self.faults.consumer_delay_s()
        delay = plans.value_at(self.delays, elapsed) if delay is None else delay
        held = self.backlogs.holding(phase)
        if self.crew.apply(rate, delay, held):
            self.state.last_event = "receivers held (backlog)" if held else \
                f"consumer delay {delay * 1000:g} ms"

    def size_class(self, elapsed: float) -> int:
        """The size class of messages sent at ``elapsed`` (sizes over time; else 0)."""
        if not self.sizes:
            return 0
        size = plans.value_at(self.sizes, elapsed, self.sizes[0].rate_per_sender)
        return self.classes.index(int(size))

    def started(self, phase: plans.Phase, elapsed: float) -> None:
        """The ``step`` event of a phase that starts (or ``pause`` for one without load)."""
        if phase.index == 0:
            self.event("pause", elapsed_s=round(elapsed, 3))
            return
        self.state.steps = max(self.state.steps, len(self.schedule.phases))
        self.event("step", step=phase.index, rate_per_sender=phase.rate_per_sender,
                   senders=self.active(phase), target_rate=self.target(phase, elapsed))

    def ended(self, phase: plans.Phase) -> None:
        """The row of a step that just ended, for the page's step table (once per step)."""
        if phase.index > 0:
            self.feed.steps.extend(row.as_json() for row in self.history.step_rows(
                [phase], self.scenario.measure.settle))
