"""What goes wrong on purpose: a fault (:class:`FaultSpec`), in a scenario's ``faults`` at a
time of the plan, or in a capacity search's ``conditions`` (:class:`ConditionSpec`) at a time
into every probe."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from orchestrator.specs.base import Loc, SafeName, Seconds, Spec
from orchestrator.specs.limits import MAX_SPIKE_FACTOR, Number

#: Fault kinds that take a member down until ``restart_after`` has passed.
MEMBER_DOWN = ("kill_member", "stop_member")
#: Fault kinds in force for ``duration``.
LASTING = ("consumer_slowdown", "memory_alarm", "link_down")


class FaultSpec(Spec):
    """An adverse condition the controller applies at a time or at the start of a plan step."""

    kind: Literal["kill_member", "stop_member", "rolling_restart", "consumer_slowdown",
                  "publish_spike", "memory_alarm", "delete_queues", "link_down"] = Field(
        description="kill_member: SIGKILL, restart after restart_after; stop_member: graceful "
                    "stop and start; rolling_restart: each running member's VM stopped and "
                    "started in turn, the next once every quorum queue has its leader and all "
                    "its members again; consumer_slowdown: receivers take `delay` per message "
                    "for `duration`; publish_spike: senders publish `factor` x the plan rate "
                    "for `duration`; memory_alarm: the member's (every running member's if "
                    "none) memory alarm set off for `duration`, the broker blocking publishers; "
                    "delete_queues: the topology's queues deleted (consumers cancelled by the "
                    "broker, their messages lost) and declared again after restart_after; "
                    "link_down: a linked topology's shovels removed (RabbitMQ) or sender "
                    "channels stopped (IBM MQ) for `duration`, then brought back (what was "
                    "sent meanwhile waits on side a)")
    at: Seconds | None = Field(None, ge=0, description="seconds into the plan")
    at_step: int | None = Field(None, ge=1, description="at the start of this plan step")
    member: int | None = Field(None, ge=0, description="member index (kill_member, stop_member, "
                                                       "memory_alarm)")
    restart_after: Seconds = Field(10.0, ge=0, description="seconds before the member starts "
                                                           "again (delete_queues: before the "
                                                           "queues are declared again)")
    duration: Seconds = Field(30.0, gt=0, description="how long a slowdown, spike, memory "
                                                      "alarm or link down lasts")
    delay: Seconds = Field(0.01, gt=0, description="consumer_slowdown: processing time per "
                                                   "message")
    factor: Number = Field(2.0, gt=0, le=MAX_SPIKE_FACTOR,
                          description="publish_spike: rate multiplier")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """A time or a step, not both; a member for the kinds that act on one."""
        found: list[tuple[Loc, str]] = []
        if (self.at is None) == (self.at_step is None):
            found.append(((), "give either at (seconds) or at_step (a plan step)"))
        if self.kind in ("kill_member", "stop_member") and self.member is None:
            found.append(((), f"{self.kind} needs the member's index"))
        return found


class ConditionSpec(Spec):
    """A condition every probe of a capacity search is measured under: ``ideal`` (no faults)
    or a named set of faults, each started ``at`` seconds into every probe. Unless a fault
    says otherwise it is held until the probe ends: a member taken down (kill_member,
    stop_member) starts again when the probe ends, and a consumer_slowdown or memory_alarm
    lasts until then."""

    name: SafeName = Field(description="what the condition is called in the answer "
                                       "(ideal, member-down, ...)")
    faults: list[FaultSpec] = Field(default_factory=list,
                                    description="the faults held over every probe; none: ideal")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """Each fault starts at seconds into the probe, and varies nothing the search sets."""
        found: list[tuple[Loc, str]] = []
        for i, fault in enumerate(self.faults):
            if fault.at_step is not None:
                found.append((("faults", i, "at_step"), "a condition's fault starts at seconds "
                                                        "into every probe: give at (0s: when "
                                                        "the probe starts), not at_step"))
            if fault.kind == "publish_spike":
                found.append((("faults", i, "kind"), "publish_spike changes the rate the "
                                                     "search sets: expected kill_member, "
                                                     "stop_member, rolling_restart, "
                                                     "consumer_slowdown, memory_alarm or "
                                                     "delete_queues"))
        return found

    def held(self, fault: FaultSpec, start_s: float, length_s: float) -> FaultSpec:
        """``fault`` as the run applies it in a probe from ``start_s`` lasting ``length_s``:
        at a time of the run, held to the probe's end where it gives no end of its own."""
        left = max(length_s - (fault.at or 0.0), 0.0)
        changes: dict[str, float] = {"at": start_s + (fault.at or 0.0)}
        if fault.kind in MEMBER_DOWN and "restart_after" not in fault.model_fields_set:
            changes["restart_after"] = left
        if fault.kind in LASTING and "duration" not in fault.model_fields_set and left > 0:
            changes["duration"] = left
        return fault.model_copy(update=changes)
