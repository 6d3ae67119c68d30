"""Typed models of the two spec files: a topology (the brokers) and a scenario (the test).

Every model forbids unknown keys; units are parsed by :mod:`orchestrator.units` so files can say
``2KiB`` or ``30s``. Loading from YAML, with file/line errors, lives in :mod:`orchestrator.loader`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from orchestrator import units

Bytes = Annotated[int, BeforeValidator(units.parse_size)]
Seconds = Annotated[float, BeforeValidator(units.parse_duration)]
Fraction = Annotated[float, BeforeValidator(units.parse_percent)]


def _rate_change(value: object) -> str:
    """Normalise a step rate to text: ``"50"`` (absolute) or ``"+50"`` / ``"-25"`` (relative)."""
    text = str(value).strip()
    try:
        float(text)
    except ValueError:
        raise ValueError("expected msg/s as a number (50) or an increment ('+50')") from None
    return text


RateChange = Annotated[str, BeforeValidator(_rate_change)]


class Spec(BaseModel):
    """Base of every spec model: unknown keys are errors, models are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class QueueSpec(Spec):
    """A queue the provisioner declares once the cluster is up."""

    name: str = Field(min_length=1)
    type: Literal["classic", "quorum"] = "classic"
    durable: bool = True
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="x-arguments, passed to the broker unchanged")
    per_member: bool = Field(
        False, description="one instance per running member, named <name>.<member index> and "
                           "led by that member (like a cluster queue's instance on each queue "
                           "manager); workers use the instance of the member they connect to")

    def instance(self, member_index: int) -> str:
        """The queue name workers on member ``member_index`` use."""
        return f"{self.name}.{member_index}" if self.per_member else self.name

    def owns(self, queue_name: str) -> bool:
        """Whether ``queue_name`` is this queue or one of its per-member instances."""
        return queue_name == self.name or (
            self.per_member and queue_name.startswith(self.name + ".")
            and queue_name[len(self.name) + 1:].isdigit())


class TopologySpec(Spec):
    """The broker side: which broker, where, how many members, how big each is."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="used in node and cgroup names")
    broker: Literal["rabbitmq"] = "rabbitmq"
    placement: Literal["local"] = "local"
    members: int = Field(3, ge=1, le=32, description="size of the pool of members")
    start: int = Field(3, ge=1, description="members started at provisioning")
    cpu_per_member: float | None = Field(
        None, gt=0, description="cgroup CPU quota per member in cores; null = unlimited")
    port_base: int = Field(
        5680, ge=1024, le=30000,
        description="member i listens for AMQP on port_base+i, management on port_base+10000+i, "
                    "Prometheus on port_base+10100+i, Erlang distribution on port_base+20000+i; "
                    "a private epmd runs on port_base+30000. The default keeps clear of a "
                    "system RabbitMQ on 5672/15672/25672")
    warm_pool: bool = Field(
        True, description="boot the members beyond `start` at provisioning too, joined but with "
                          "the broker application stopped (like MQ queue managers created but not "
                          "started), so a scale-out only starts the application: seconds instead "
                          "of a full boot")
    queues: list[QueueSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _start_within_pool(self) -> TopologySpec:
        if self.start > self.members:
            raise ValueError(f"start ({self.start}) cannot exceed members ({self.members})")
        return self

    def queue(self, name: str) -> QueueSpec | None:
        """The queue called ``name``, if the topology declares it."""
        return next((q for q in self.queues if q.name == name), None)


class MessageSpec(Spec):
    """Shape of every message a sender publishes."""

    size: Bytes = Field(2048, description="bytes on the wire, including the 24-byte header")
    persistent: bool = False

    @field_validator("size")
    @classmethod
    def _fits_header(cls, size: int) -> int:
        if size < 24:
            raise ValueError("must be at least 24 bytes (the message header)")
        return size


class WorkloadSpec(Spec):
    """Who sends and receives what: the workers the agents host."""

    pattern: Literal["point-to-point"] = "point-to-point"
    queue: str
    senders: int = Field(ge=1, le=10000)
    receivers: int = Field(ge=1, le=10000)
    message: MessageSpec = Field(default_factory=MessageSpec)
    confirms: bool = Field(False, description="publisher confirms (counted, not waited for)")
    prefetch: int = Field(200, ge=1, le=65535, description="unacknowledged messages per receiver")
    ack: Literal["auto", "manual"] = "manual"


class StepSpec(Spec):
    """One step of the load plan: a per-sender rate held for a while, perhaps repeated."""

    rate_per_sender: RateChange = Field(
        description="msg/s per sender, absolute (50) or relative to the previous step ('+50', "
                    "'-25'); 0 = as fast as possible")
    hold: Seconds = Field(gt=0)
    repeat: int = Field(1, ge=1, le=10000)


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

    @model_validator(mode="after")
    def _exactly_one_condition(self) -> Trigger:
        set_ = [name for name in CONDITIONS if getattr(self, name) is not None]
        if len(set_) != 1:
            raise ValueError(f"give exactly one of {', '.join(CONDITIONS)} (got "
                             f"{', '.join(set_) or 'none'})")
        return self

    @property
    def condition(self) -> str:
        """The name of the condition this trigger tests."""
        return next(name for name in CONDITIONS if getattr(self, name) is not None)


CONDITIONS = ("shortfall", "member_cpu", "member_cpu_below", "queue_depth", "queue_depth_below",
              "latency_p99")


class ScaleRule(Spec):
    """When to act: any or all of some triggers, then a quiet period."""

    when_any: list[Trigger] | None = Field(None, min_length=1)
    when_all: list[Trigger] | None = Field(None, min_length=1)
    cooldown: Seconds = Field(20.0, description="seconds after any scaling action before the next")

    @model_validator(mode="after")
    def _one_combinator(self) -> ScaleRule:
        if (self.when_any is None) == (self.when_all is None):
            raise ValueError("give either when_any or when_all")
        return self


class ScalingSpec(Spec):
    """Start further members of the topology's pool while the load runs (and stop idle ones)."""

    pool: int | None = Field(None, ge=1, description="members that may run; default the "
                                                     "topology's members")
    scale_out: ScaleRule | None = None
    scale_in: ScaleRule | None = None
    rebalance: bool = Field(True, description="move a fair share of workers to a new member")


class ScenarioSpec(Spec):
    """A test: a topology, a workload and a plan of steps."""

    name: str = Field(min_length=1)
    description: str = ""
    topology: Path
    workload: WorkloadSpec
    plan: list[StepSpec] = Field(min_length=1)
    agents: int | None = Field(None, ge=1, le=64,
                               description="agent processes; default one per core")
    measure: MeasureSpec = Field(default_factory=MeasureSpec)
    scaling: ScalingSpec | None = None
