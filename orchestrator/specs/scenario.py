"""The scenario spec: a test's workload (:mod:`orchestrator.specs.workload`), its plan of
steps, faults, scaling rules and measurement; the brokers it runs on are a topology
(:mod:`orchestrator.specs.topology`).

Every model forbids unknown keys; units are parsed by :mod:`orchestrator.specs.units` so files
can say ``2KiB`` or ``30s``. Loading from YAML, with file/line errors, lives in
:mod:`orchestrator.specs.loader`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, ConfigDict, Field, field_validator

from orchestrator.specs.base import Bytes, FilePath, Fraction, Loc, SafeName, Seconds, Spec
from orchestrator.specs.capacity import CapacitySpec, SloSpec
from orchestrator.specs.faults import FaultSpec
from orchestrator.specs.limits import (
    Number,
    plan_problems,
)
from orchestrator.specs.rate import RateChange
from orchestrator.specs.workload import WorkloadSpec

MAX_PHASES = 100_000
"""Most phases a plan may expand to (every repeat of every sweep count of every step)."""


def _shorthand(field: str):
    """Accept ``"VALUE:SECONDS"`` (PerfTest's ``-vr`` / ``-vl`` form) for a step mapping."""
    def parse(value: object) -> object:
        if isinstance(value, str) and ":" in value:
            amount, _, hold = value.partition(":")
            return {field: amount.strip(), "hold": hold.strip()}
        return value
    return parse


class BacklogSpec(Spec):
    """A backlog test within a step (OpenMessaging Benchmark's backlog mode): receivers take
    nothing until the workload's queues hold ``messages`` (or ``bytes``) that they have not
    received, then take again while senders publish at ``publish_ratio`` of the step's rate,
    until ``drain_ratio`` of that backlog is drained. The run says how long each part took and
    the rate the backlog drained at."""

    messages: int | None = Field(None, ge=1, le=1_000_000_000,
                                 description="messages the backlog holds before receivers "
                                             "take again")
    bytes: Bytes | None = Field(None, gt=0, description="instead of messages: bytes the backlog "
                                                        "holds (OMB's consumerBacklogSizeGB), "
                                                        "counted at the mean message size")
    drain_ratio: Fraction = Field(1.0, gt=0, le=1, description="share of the backlog drained "
                                                               "before it counts as drained "
                                                               "(OMB's backlogDrainRatio)")
    publish_ratio: Number = Field(1.0, ge=0, le=10, description="senders' rate while the "
                                                                "backlog drains, as a ratio "
                                                                "of the step's")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """A size in messages or in bytes."""
        if (self.messages is None) == (self.bytes is None):
            return [((), "give either messages or bytes")]
        return []


class StepSpec(Spec):
    """One step of the load plan: a per-sender rate held for a while, perhaps repeated; also
    written ``"RATE:SECONDS"`` like PerfTest's ``-vr``."""

    rate_per_sender: RateChange = Field(
        description="msg/s per sender, absolute (50) or relative to the previous step ('+50', "
                    "'-25'); 0 = as fast as possible")
    hold: Seconds = Field(gt=0, description="how long the step lasts")
    repeat: int = Field(
        1, ge=1, le=10000,
        description="times this step is taken in a row (with a relative rate, each time adds "
                    "again)")
    ramp: bool = Field(False, description="move linearly from the previous step's rate to this "
                                          "one over the hold, instead of jumping")
    senders: int | list[int] | None = Field(
        None, description="senders (requesters) active in this step; a list is a client-count "
                          "sweep, one step per count, e.g. [1, 2, 4, 8]; default all")
    receivers: int | list[int] | None = Field(
        None, description="receivers (responders) started by this step, receivers 1 to N; a "
                          "list goes with a senders list, count for count (document 004: the "
                          "servers of each added queue pair). A receiver once started stays: "
                          "the counts never fall. Default: all from the start")
    backlog: BacklogSpec | None = Field(
        None, description="build a backlog with receivers held, then drain it, within this "
                          "step's hold (which bounds it)")

    @field_validator("senders", "receivers")
    @classmethod
    def _sweep_counts(cls, value: int | list[int] | None) -> int | list[int] | None:
        counts = value if isinstance(value, list) else [] if value is None else [value]
        if isinstance(value, list) and not value:
            raise ValueError("a sweep needs at least one client count, e.g. [1, 2, 4]")
        if any(n < 1 for n in counts):
            raise ValueError(f"client counts must be at least 1, got {counts}")
        return value


_SHORTHAND_TEXT = Annotated[str, Field(pattern=":")]
Step = Annotated[StepSpec, BeforeValidator(_shorthand("rate_per_sender"),
                                           json_schema_input_type=StepSpec | _SHORTHAND_TEXT)]


class DelayStep(Spec):
    """One step of a consumer processing-time profile; also written ``"10ms:300s"`` like
    PerfTest's ``-vl``."""

    delay: Seconds = Field(ge=0, description="processing time per message, per receiver")
    hold: Seconds = Field(gt=0, description="how long this delay lasts")
    ramp: bool = Field(False, description="move linearly from the previous delay to this one")


Delay = Annotated[DelayStep, BeforeValidator(_shorthand("delay"),
                                             json_schema_input_type=DelayStep | _SHORTHAND_TEXT)]


class ExitSpec(Spec):
    """When the load part of a run ends before its plan does."""

    messages_per_sender: int | None = Field(
        None, ge=1, description="each sender stops after this many messages; the run ends once "
                                "all have (PerfTest's -C)")
    messages_per_receiver: int | None = Field(
        None, ge=1, description="each receiver stops after this many messages; the run ends "
                                "once all have (PerfTest's -D)")
    queue_empty: bool = Field(False, description="end once the workload's queues are empty "
                                                 "during the plan's last step (after its "
                                                 "settle seconds): a drain step")
    agent_lost: bool = Field(False, description="end the load once a load agent is lost (its "
                                                "reads fail 3 s in a row); by default the run "
                                                "goes on with the others and accounts for "
                                                "the lost one's share as unknown")


FAULT_KINDS = ("kill_member", "stop_member", "rolling_restart", "consumer_slowdown",
               "publish_spike", "memory_alarm", "delete_queues")
#: Faults done through the members' own rabbitmqctl and management API, which surge has only for
#: RabbitMQ members it runs itself on this machine.
LOCAL_RABBITMQ_FAULTS = ("memory_alarm", "delete_queues")


class MeasureSpec(Spec):
    """How the step table is measured."""

    settle: Seconds = Field(3.0, description="seconds after a change left out of step figures")
    drain: Seconds = Field(30.0, description="max seconds to wait for queues to empty at the end")


class Trigger(Spec):
    """One condition on the 1 Hz metrics that must hold for ``for`` seconds in a row."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    shortfall: Fraction | None = Field(
        None, description="achieved publish rate below target by more than this ('3%')")
    member_cpu: Fraction | None = Field(
        None, description="any running member above this share of its CPU quota ('90%')")
    member_cpu_below: Fraction | None = Field(
        None, description="every running member below this share of its quota ('30%')")
    queue_depth: int | None = Field(None, ge=0, description="more messages than this queued")
    queue_depth_below: int | None = Field(None, ge=1, description="fewer messages than this queued")
    latency_p99: Seconds | None = Field(None, description="p99 end-to-end latency ('200ms')")
    for_s: Seconds = Field(10.0, alias="for", gt=0, description="seconds the condition must hold")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """Exactly one condition."""
        set_ = [name for name in CONDITIONS if getattr(self, name) is not None]
        if len(set_) != 1:
            return [((), f"give exactly one of {', '.join(CONDITIONS)} (got "
                         f"{', '.join(set_) or 'none'})")]
        return []

    @property
    def condition(self) -> str:
        """The name of the condition this trigger tests."""
        return next(name for name in CONDITIONS if getattr(self, name) is not None)


CONDITIONS = ("shortfall", "member_cpu", "member_cpu_below", "queue_depth", "queue_depth_below",
              "latency_p99")


class ScaleRule(Spec):
    """When to act: any or all of some triggers, then a quiet period."""

    when_any: list[Trigger] | None = Field(
        None, min_length=1, description="the rule fires when any of these holds")
    when_all: list[Trigger] | None = Field(
        None, min_length=1, description="the rule fires when all of these hold")
    cooldown: Seconds = Field(20.0, description="seconds after any scaling action before the next")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """One combinator."""
        if (self.when_any is None) == (self.when_all is None):
            return [((), "give either when_any or when_all")]
        return []


class ScalingSpec(Spec):
    """Start further members of the topology's pool while the load runs (and stop idle ones)."""

    pool: int | None = Field(None, ge=1, description="members that may run; default the "
                                                     "topology's members")
    scale_out: ScaleRule | None = Field(None, description="when to start another member")
    scale_in: ScaleRule | None = Field(None, description="when to stop a member")
    rebalance: bool = Field(True, description="move a fair share of workers to a new member")


class AgentPlacementSpec(Spec):
    """Which load hosts of the topology run which workers (document 000: senders on AppHost1,
    receivers on AppHost2). Empty: agents run on this machine."""

    senders: list[str] = Field(default_factory=list, description="host names (role load)")
    receivers: list[str] = Field(default_factory=list, description="host names (role load)")
    pods: int | None = Field(None, ge=1, le=256, description="agents as pods of a Job in the "
                                                             "topology's Kubernetes namespace")


class ScenarioSpec(Spec):
    """A test: a topology, a workload, a plan of steps, and what goes wrong on purpose."""

    name: SafeName = Field(description="part of the run directory's name")
    description: str = Field(
        "", description="what the scenario tests and which document it follows")
    topology: FilePath = Field(description="topology file, relative to this scenario")
    workload: WorkloadSpec = Field(description="who sends and receives what, through which queue")
    plan: list[Step] = Field(default_factory=list, description="the steps of surge run (a "
                                                           "scenario only for surge capacity "
                                                           "may leave it out)")
    consumer_profile: list[Delay] = Field(
        default_factory=list, description="receivers' processing time per message over time, "
                                          "applied live; after its last step the last delay "
                                          "stays")
    exit: ExitSpec = Field(default_factory=ExitSpec,
                           description="when the load part of a run ends before its plan does")
    faults: list[FaultSpec] = Field(
        default_factory=list,
        description="what goes wrong on purpose, at a time or at a step's start")
    agents: int | None = Field(None, ge=1, le=64,
                               description="agent processes; default one per core")
    agents_on: AgentPlacementSpec = Field(
        default_factory=AgentPlacementSpec,
        description="which SSH hosts (role load) or pods run the senders and the receivers")
    measure: MeasureSpec = Field(
        default_factory=MeasureSpec, description="how the step table is measured")
    scaling: ScalingSpec | None = Field(
        None,
        description="members started or stopped while the load runs, by rules on what is measured")
    slo: SloSpec = Field(default_factory=SloSpec, description="what a rate must hold to count "
                                                               "as carried (surge capacity)")
    capacity: CapacitySpec | None = Field(None, description="surge capacity's search")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """The plan fits the workload, :data:`MAX_PHASES` and the bounds of
        :mod:`orchestrator.specs.limits` (counted, not expanded), faults fit the plan, a
        slowed consumer acknowledges by hand."""
        found: list[tuple[Loc, str]] = []
        if self.capacity is not None:
            found += [((name,), "a capacity search measures each member count as it is: "
                                "leave out faults and scaling (faults held over every probe "
                                "go in capacity.conditions)")
                      for name in ("faults", "scaling") if getattr(self, name)]
            found += [(("capacity", "conditions", i, "faults", j, "kind"),
                       "a consumer_slowdown needs workload.ack: manual (with auto ack the "
                       "prefetch does not hold messages back)")
                      for i, condition in enumerate(self.capacity.conditions)
                      for j, fault in enumerate(condition.faults)
                      if fault.kind == "consumer_slowdown" and self.workload.ack == "auto"]
            if self.workload.pattern == "request-reply":
                found.append((("workload", "pattern"), "a capacity search paces senders: "
                                                        "request-reply is not searched yet"))
        if not self.plan:
            if self.capacity is None:
                found.append((("plan",), "a plan needs at least one step (a scenario only for "
                                         "surge capacity gives a capacity section instead)"))
            return found
        first = self.plan[0].rate_per_sender
        if first.relative:
            found.append((("plan", 0, "rate_per_sender"),
                          f"the first step needs an absolute rate (got {first.text!r}); a rate "
                          f"cannot be negative"))
        steps = 0
        for i, step in enumerate(self.plan):
            counts = step.senders if isinstance(step.senders, list) else [step.senders or 1]
            found += _receiver_problems(i, step, self.workload.receivers)
            if max(counts) > self.workload.senders:
                found.append((("plan", i, "senders"), f"{max(counts)} is more than the "
                                                      f"workload's {self.workload.senders} "
                                                      f"senders"))
            phases = step.repeat * len(counts)
            if steps <= MAX_PHASES < steps + phases:
                found.append((("plan", i), f"the plan comes to more than {MAX_PHASES:,} steps "
                                           f"here (this one is {step.repeat} repeats x "
                                           f"{len(counts)} sender counts = {phases:,})"))
            steps += phases
        started = [n for step in self.plan for n in _listed(step.receivers)]
        if started != sorted(started):
            at = next(i for i, step in enumerate(self.plan) if _listed(step.receivers) and
                      min(_listed(step.receivers)) < max(
                          [n for s in self.plan[:i] for n in _listed(s.receivers)], default=0))
            found.append((("plan", at, "receivers"), f"receivers once started stay: the counts "
                                                     f"never fall (got {started})"))
        spike = max((f.factor for f in self.faults if f.kind == "publish_spike"), default=1.0)
        found += plan_problems(self.plan, self.workload.senders, spike, steps <= MAX_PHASES)
        for i, fault in enumerate(self.faults):
            if fault.at_step is not None and fault.at_step > steps:
                found.append((("faults", i, "at_step"), f"the plan has {steps} steps"))
        backlogs = [i for i, step in enumerate(self.plan) if step.backlog is not None]
        slowed = self.consumer_profile or backlogs or \
            any(f.kind == "consumer_slowdown" for f in self.faults)
        if slowed and self.workload.ack == "auto":
            found.append((("workload", "ack"), "a consumer_profile, consumer_slowdown or "
                                               "backlog test needs workload.ack: manual (with "
                                               "auto ack the prefetch does not hold messages "
                                               "back)"))
        found += [(("plan", i, "backlog"), "unlimited senders (rate 0) stop at "
                                          "workload.max_backlog: set it to null for a backlog "
                                          "test") for i in backlogs
                  if self.workload.max_backlog is not None
                  and not self.plan[i].rate_per_sender.relative
                  and self.plan[i].rate_per_sender.after(0.0) == 0]
        return found


def _listed(counts: int | list[int] | None) -> list[int]:
    """A step's client counts as a list (none given: empty)."""
    return counts if isinstance(counts, list) else [] if counts is None else [counts]


def _receiver_problems(index: int, step: StepSpec, receivers: int) -> list[tuple[Loc, str]]:
    """A step's receivers within the workload's, and a list of them beside a list of senders
    of the same length."""
    found: list[tuple[Loc, str]] = []
    counts = _listed(step.receivers)
    if counts and max(counts) > receivers:
        found.append((("plan", index, "receivers"), f"{max(counts)} is more than the "
                                                    f"workload's {receivers} receivers"))
    if isinstance(step.receivers, list) and (
            not isinstance(step.senders, list) or len(step.senders) != len(step.receivers)):
        found.append((("plan", index, "receivers"), "a list of receivers goes with a list of "
                                                    "senders of the same length, count for "
                                                    "count"))
    return found
