"""Typed models of the two spec files: a topology (the brokers) and a scenario (the test).

Every model forbids unknown keys; units are parsed by :mod:`orchestrator.specs.units` so files
can say ``2KiB`` or ``30s``. Loading from YAML, with file/line errors, lives in
:mod:`orchestrator.specs.loader`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, field_validator, model_validator

from orchestrator.specs.base import Bytes, FilePath, Fraction, Loc, SafeName, Seconds, Spec
from orchestrator.specs.capacity import CapacitySpec, SloSpec
from orchestrator.specs.existing import ExistingSpec
from orchestrator.specs.hosts import HostSpec, RabbitKubernetesSpec
from orchestrator.specs.limits import (
    MAX_CORES_PER_MEMBER,
    MAX_SPIKE_FACTOR,
    Number,
    plan_problems,
)
from orchestrator.specs.mq import MqSpec
from orchestrator.specs.rate import RateChange
from orchestrator.specs.routing import BindingSpec, ExchangeSpec, routes, routing_problems

MAX_PHASES = 100_000
"""Most phases a plan may expand to (every repeat of every sweep count of every step)."""
MAX_MESSAGE_BYTES = 512 * 1024 * 1024
MIN_MESSAGE_BYTES = 28
"""The surge message header's size (``drivers.header.HEADER_SIZE``; the specs sit below the
drivers, so the number is repeated here, and a test keeps the two equal)."""
"""Largest message or reply (RabbitMQ's own hard limit; a sender holds one in memory)."""


class QueueSpec(Spec):
    """A queue the provisioner declares once the cluster is up: one queue, one per running
    member (``per_member``), or a numbered pattern (``perf-test-%d`` with ``count``)."""

    name: str = Field(min_length=1, description="a name, or a pattern with %d and a count")
    count: int = Field(1, ge=1, le=10000, description="queues perf-test-1 .. perf-test-<count> "
                                                      "when the name holds %d")
    type: Literal["classic", "quorum"] = Field("classic", description="RabbitMQ queue type")
    durable: bool = Field(True, description="the queue survives a broker restart")
    auto_delete: bool = Field(
        False, description="the broker deletes the queue when its last consumer goes")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="x-arguments, passed to the broker unchanged")
    per_member: bool = Field(
        False, description="one instance per running member, named <name>.<member index> and "
                           "led by that member (like a cluster queue's instance on each queue "
                           "manager); workers use the instance of the member they connect to")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """A %d pattern goes with a count, and not with per_member."""
        found: list[tuple[Loc, str]] = []
        if ("%d" in self.name) != (self.count > 1):
            found.append((("count" if self.count > 1 else "name",),
                          f"a queue name with %d needs a count above 1 and a count needs %d in "
                          f"the name (name {self.name!r}, count {self.count})"))
        if self.count > 1 and self.per_member:
            found.append((("per_member",), "give either per_member or a %d pattern with a "
                                           "count, not both"))
        return found

    @property
    def names(self) -> list[str]:
        """Every queue of a pattern (``perf-test-1`` ...), or the one name."""
        if self.count == 1:
            return [self.name]
        return [self.name.replace("%d", str(i)) for i in range(1, self.count + 1)]

    def instance(self, member_index: int, slot: int = 0) -> str:
        """The queue a worker on member ``member_index`` uses; ``slot`` picks a queue of a
        pattern."""
        if self.per_member:
            return f"{self.name}.{member_index}"
        return self.names[slot % self.count]

    def instances(self, member_indices: range | list[int]) -> list[str]:
        """Every queue this spec declares with members ``member_indices``: their per-member
        instances, or the pattern's queues, or the one queue."""
        if self.per_member:
            return [self.instance(i) for i in member_indices]
        return self.names

    def owns(self, queue_name: str) -> bool:
        """Whether ``queue_name`` is this queue, one of its per-member instances or of its
        pattern."""
        if self.count > 1:
            prefix, _, suffix = self.name.partition("%d")
            number = queue_name[len(prefix):len(queue_name) - len(suffix)]
            return (queue_name.startswith(prefix) and queue_name.endswith(suffix)
                    and number.isdigit() and 1 <= int(number) <= self.count)
        return queue_name == self.name or (
            self.per_member and queue_name.startswith(self.name + ".")
            and queue_name[len(self.name) + 1:].isdigit())


class TopologySpec(Spec):
    """The broker side: which broker, where, how many members, how big each is."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=63,
                      description="used in node and cgroup names")
    broker: Literal["rabbitmq", "ibmmq"] = Field(
        "rabbitmq", description="which broker: RabbitMQ or IBM MQ")
    placement: Literal["local", "ssh", "kubernetes", "existing"] = Field(
        "local", description="local: processes on this machine (rabbitmq); ssh: members or "
                             "queue managers on hosts; kubernetes: through the RabbitMQ or MQ "
                             "operator; existing: a cluster surge did not start (the existing "
                             "section)")
    members: int = Field(3, ge=1, le=32, description="size of the pool of members (existing: "
                                                     "default the members it lists)")
    start: int = Field(3, ge=1, description="members started at provisioning (existing: "
                                            "default all)")
    cpu_per_member: Number | None = Field(
        None, gt=0, le=MAX_CORES_PER_MEMBER,
        description="cgroup CPU quota per member in cores; null = unlimited (existing: the "
                    "cores each member has, for CPU shares and cost; null = unknown)")
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
    queues: list[QueueSpec] = Field(
        default_factory=list, description="queues declared once the cluster is up")
    exchanges: list[ExchangeSpec] = Field(
        default_factory=list, description="exchanges declared once the queues are (RabbitMQ)")
    bindings: list[BindingSpec] = Field(
        default_factory=list, description="bindings from the exchanges to queues or exchanges, "
                                          "declared after them (RabbitMQ)")
    ibmmq: MqSpec | None = Field(None, description="queue managers, cluster, CCDT (broker ibmmq)")
    hosts: list[HostSpec] = Field(
        default_factory=list, description="SSH hosts: RabbitMQ members (role broker, placement "
                                          "ssh) and load agents (role load, any placement)")
    kubernetes: RabbitKubernetesSpec | None = Field(
        None, description="RabbitMQ through the cluster operator (placement kubernetes)")
    existing: ExistingSpec | None = Field(
        None, description="a cluster surge did not start (placement existing)")

    @model_validator(mode="before")
    @classmethod
    def _existing_sizes(cls, data: Any) -> Any:
        """An existing RabbitMQ cluster is as large as the members it lists, all serving,
        unless the file says otherwise."""
        if isinstance(data, dict) and data.get("placement") == "existing" and \
                isinstance(data.get("existing"), dict) and \
                isinstance(data["existing"].get("members"), list) and data["existing"]["members"]:
            data = dict(data)
            data.setdefault("members", len(data["existing"]["members"]))
            data.setdefault("start", data["members"])
        elif isinstance(data, dict) and data.get("placement") == "existing" and \
                data.get("broker") == "ibmmq" and isinstance(data.get("ibmmq"), dict):
            listed = data["ibmmq"].get("queue_managers")  # none: the CCDT's group, one member
            data = dict(data)
            data.setdefault("members", len(listed) if isinstance(listed, list) and listed else 1)
            data.setdefault("start", data["members"])
        return data

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """``start`` within the pool; the broker's sections and hosts fit its placement."""
        found: list[tuple[Loc, str]] = []
        if self.start > self.members:
            found.append((("start",), f"start ({self.start}) cannot exceed members "
                                      f"({self.members})"))
        found += routing_problems(self.exchanges, self.bindings, [
            name for q in self.queues for name in {q.name, *q.instances(range(self.members))}])
        if self.broker == "ibmmq" and (self.exchanges or self.bindings):
            found.append((("exchanges" if self.exchanges else "bindings",),
                          "exchanges and bindings are RabbitMQ's; IBM MQ publishes to topics "
                          "(not supported by surge yet)"))
        if self.placement == "existing":
            return found + self._existing_problems()
        if self.broker == "rabbitmq" and self.placement == "ssh":
            on_hosts = sum(h.members for h in self.hosts if "broker" in h.roles)
            if on_hosts != self.members:
                found.append((("hosts",), f"hosts with role broker hold {on_hosts} members; "
                                          f"members says {self.members}"))
        if self.broker == "rabbitmq" and self.placement == "kubernetes" and \
                self.kubernetes is None:
            found.append((("placement",), "placement kubernetes needs a kubernetes section"))
        mq = self.ibmmq
        if self.broker == "ibmmq" and (mq is None or self.placement == "local"):
            found.append((("broker",), "broker ibmmq needs an ibmmq section and placement "
                                       "ssh, kubernetes or existing (surge does not install "
                                       "MQ on this machine)"))
        elif self.broker == "ibmmq" and mq is not None:
            on_hosts = sum(h.members for h in mq.hosts)
            if self.placement == "ssh" and on_hosts != self.members:
                found.append((("ibmmq", "hosts"), f"ibmmq.hosts hold {on_hosts} queue managers; "
                                                  f"members says {self.members}"))
            if self.placement == "kubernetes" and mq.native_ha is None:
                found.append((("ibmmq",), "placement kubernetes needs ibmmq.native_ha"))
        return found

    def _existing_problems(self) -> list[tuple[Loc, str]]:
        """A cluster surge did not start is described by its existing section (RabbitMQ
        members there, IBM MQ queue managers in the ibmmq section)."""
        if self.existing is None:
            return [(("placement",), "placement existing needs an existing section (members' "
                                     "URIs, credentials)")]
        if self.broker == "rabbitmq" and self.existing.credentials is None:
            return [(("existing",), "RabbitMQ needs credentials: existing.credentials with a "
                                    "user and password_env or password_file")]
        if self.broker == "rabbitmq" and len(self.existing.members) != self.members:
            return [(("existing", "members"),
                     f"list {self.members} member URIs (members says {self.members}, the list "
                     f"has {len(self.existing.members)})")]
        if self.broker == "ibmmq":
            return self._existing_mq_problems()
        return []

    def _existing_mq_problems(self) -> list[tuple[Loc, str]]:
        """Queue managers surge did not start are listed in the ibmmq section, or reached
        through its CCDT; the existing section holds their credentials, not members."""
        mq, existing = self.ibmmq, self.existing
        if mq is None or not (mq.queue_managers or mq.ccdt_url):
            return [(("ibmmq",), "broker ibmmq with placement existing needs an ibmmq section "
                                 "with queue_managers (name and conname: HOST(PORT)) or "
                                 "ccdt_url (clients connect to *<qm_group> through it)")]
        found: list[tuple[Loc, str]] = []
        if existing is not None and existing.members:
            found.append((("existing", "members"), "IBM MQ queue managers are listed in "
                                                   "ibmmq.queue_managers, not here"))
        if existing is not None and existing.tls is not None:
            found.append((("existing", "tls"), "IBM MQ TLS is ibmmq.tls (cipher_spec, "
                                               "key_repository)"))
        if existing is not None and existing.declare:
            found.append((("existing", "declare"),
                          "surge does not define queues on queue managers it did not start: "
                          "define them (e.g. DEFINE QLOCAL in runmqsc) and leave declare "
                          "false"))
        pool = len(mq.queue_managers) or 1
        if self.members != pool:
            found.append((("members",), f"the pool is the {pool} queue manager(s) of "
                                        f"ibmmq.queue_managers (members says {self.members})"))
        return found

    def queue(self, name: str) -> QueueSpec | None:
        """The queue called ``name``, if the topology declares it."""
        return next((q for q in self.queues if q.name == name), None)

    def queue_names(self, name: str) -> list[str]:
        """Every queue a binding to ``name`` binds: a pattern's queues, a per-member queue's
        instance on each member of the pool, or the one queue."""
        queue = self.queue(name)
        return [name] if queue is None else queue.instances(range(self.members))

    def routes(self, exchange: str, routing_key: str) -> frozenset[str]:
        """The queues a message published to ``exchange`` with ``routing_key`` reaches
        (:func:`orchestrator.specs.routing.routes`)."""
        return routes(self.exchanges, self.bindings, self.queue_names, exchange, routing_key)


class MessageSpec(Spec):
    """Shape of every message a sender publishes."""

    size: Bytes = Field(2048, le=MAX_MESSAGE_BYTES,
                        description=f"bytes on the wire, including the {MIN_MESSAGE_BYTES}-byte "
                                    "header")
    persistent: bool = Field(False, description="persistent (delivery mode 2 in AMQP) messages")

    @field_validator("size")
    @classmethod
    def _fits_header(cls, size: int) -> int:
        if size < MIN_MESSAGE_BYTES:
            raise ValueError(f"must be at least {MIN_MESSAGE_BYTES} bytes (the message header)")
        return size


class WorkloadSpec(Spec):
    """Who sends and receives what: the workers the agents host.

    ``point-to-point``: senders put, receivers get. ``request-reply``: senders are requesters
    (put a request, wait for the reply with the same correlation id on their own reply queue)
    and receivers are responders (get a request, put its reply, then acknowledge it).
    """

    pattern: Literal["point-to-point", "request-reply"] = Field(
        "point-to-point",
        description="point-to-point: senders to receivers through queues; request-reply: "
                    "requesters and responders, every reply matched")
    queue: str = Field(description="a queue of the topology; with a %d pattern, senders and "
                                   "receivers are spread over its queues in blocks")
    senders: int = Field(ge=1, le=10000, description="senders, or requesters")
    receivers: int = Field(ge=1, le=10000, description="receivers, or responders")
    message: MessageSpec = Field(
        default_factory=MessageSpec, description="size and persistence of every message")
    reply_size: Bytes | None = Field(None, le=MAX_MESSAGE_BYTES,
                                     description="bytes of a reply; default the request's size")
    in_flight: int = Field(1, ge=1, le=10000, description="requests a requester may have "
                                                           "waiting for replies")
    reply_timeout: Seconds = Field(10.0, gt=0, description="a request unanswered this long "
                                                           "counts as timed out")
    unit_of_work: bool = Field(False, description="a responder acknowledges the request and "
                                                  "puts the reply in one AMQP transaction "
                                                  "(MQ's syncpoint; needs ack: manual)")
    confirms: bool = Field(False, description="publisher confirms; unconfirmed messages are "
                                              "published again after a reconnect")
    prefetch: int = Field(200, ge=1, le=65535, description="unacknowledged messages per receiver")
    confirm_window: int = Field(
        2000, ge=1, le=1_000_000, description="with confirms, publishes a sender may have "
                                              "unconfirmed before it waits (PerfTest's -c)")
    ack_every: int | None = Field(
        None, ge=1, le=65535, description="with manual acks, a receiver acknowledges every this "
                                          "many deliveries at once (multiple; PerfTest's -A), "
                                          "and what is left at least every 100 ms; default "
                                          "prefetch / 4")
    heartbeat: Seconds = Field(30.0, ge=0, le=3600, description="AMQP heartbeat interval the "
                                                                "clients ask for; 0 turns it "
                                                                "off (PerfTest's -b). RabbitMQ "
                                                                "only")
    frame_max: Bytes = Field(131072, ge=4096, le=1_048_576,
                             description="largest AMQP frame the clients ask for; bodies are "
                                         "split into frames of this size (PerfTest's -M). "
                                         "RabbitMQ only")
    max_backlog: int | None = Field(
        1000, ge=1, le=10_000_000,
        description="unlimited senders (rate 0) wait while their queue holds more than this many "
                    "ready messages, so an unlimited step measures the rate the receivers keep "
                    "up with instead of how fast the queue grows; null: publish regardless. "
                    "Rate-limited senders never wait (their backlog is the finding). RabbitMQ "
                    "only")
    ack: Literal["auto", "manual"] = Field(
        "manual",
        description="manual: receivers acknowledge each message; auto: the broker counts a "
                    "message acknowledged when it delivers it")
    bind: Literal["on-open", "not-fixed"] = Field(
        "on-open", description="on-open: a sender puts every message to one queue instance "
                               "(its member's, or its slot of a pattern); not-fixed: each "
                               "message goes to the next instance in turn (document 002)")
    start_delay: Seconds = Field(0.0, ge=0, description="each sender starts after a random "
                                                        "delay up to this (PerfTest's "
                                                        "--producer-random-start-delay)")
    exchange: str = Field(
        "", description="the exchange senders publish to (PerfTest's -e); empty: the default "
                        "exchange, each sender publishing to its queue by name. With an "
                        "exchange, receivers still consume from `queue`, each of its queues a "
                        "subscription that receives its own copy of what is routed to it")
    routing_key: str = Field(
        "", max_length=255, description="the routing key of every message (PerfTest's -k); "
                                        "with the default exchange the queue's name is used")
    routing_keys: list[str] = Field(
        default_factory=list, max_length=100_000,
        description="several routing keys, one picked for each message by key_order (a "
                    "pattern key-%d with key_count gives key-1 .. key-<key_count>)")
    key_count: int = Field(1, ge=1, le=100_000, description="routing keys of a %d pattern in "
                                                            "routing_keys")
    key_order: Literal["random", "sequential", "zipf"] = Field(
        "random", description="how each message's routing key is picked from routing_keys: "
                              "uniformly at random, in turn, or by a Zipf distribution (the "
                              "first key the most often)")
    zipf_exponent: Number = Field(1.0, gt=0, le=10, description="key_order zipf: the "
                                                                "distribution's exponent s")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """Routing keys go with an exchange; a key pattern with a count."""
        found: list[tuple[Loc, str]] = []
        if not self.exchange and (self.routing_key or self.routing_keys):
            found.append((("routing_key" if self.routing_key else "routing_keys",),
                          "routing keys need an exchange (workload.exchange); with the default "
                          "exchange each sender publishes to its queue by name"))
        if self.routing_key and self.routing_keys:
            found.append((("routing_keys",), "give routing_key (one) or routing_keys (several), "
                                             "not both"))
        patterned = any("%d" in key for key in self.routing_keys)
        if patterned != (self.key_count > 1) or (patterned and len(self.routing_keys) > 1):
            found.append((("key_count",), "a key_count above 1 goes with one routing key "
                                          "pattern holding %d, e.g. routing_keys: [key-%d]"))
        if self.exchange and self.pattern == "request-reply":
            found.append((("exchange",), "request-reply sends requests to the queue by name: "
                                         "leave exchange empty"))
        return found

    @property
    def keys(self) -> list[str]:
        """Every routing key a sender may use (the one key, or those of routing_keys)."""
        if self.key_count > 1:
            return [self.routing_keys[0].replace("%d", str(i))
                    for i in range(1, self.key_count + 1)]
        return list(self.routing_keys) or [self.routing_key]

    @field_validator("reply_size")
    @classmethod
    def _reply_fits_header(cls, size: int | None) -> int | None:
        if size is not None and size < MIN_MESSAGE_BYTES:
            raise ValueError(f"must be at least {MIN_MESSAGE_BYTES} bytes (the message header)")
        return size


def _shorthand(field: str):
    """Accept ``"VALUE:SECONDS"`` (PerfTest's ``-vr`` / ``-vl`` form) for a step mapping."""
    def parse(value: object) -> object:
        if isinstance(value, str) and ":" in value:
            amount, _, hold = value.partition(":")
            return {field: amount.strip(), "hold": hold.strip()}
        return value
    return parse


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

    @field_validator("senders")
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


class FaultSpec(Spec):
    """An adverse condition the controller applies at a time or at the start of a plan step."""

    kind: Literal["kill_member", "stop_member", "rolling_restart", "consumer_slowdown",
                  "publish_spike", "memory_alarm", "delete_queues"] = Field(
        description="kill_member: SIGKILL, restart after restart_after; stop_member: graceful "
                    "stop and start; rolling_restart: each running member's VM stopped and "
                    "started in turn, the next once every quorum queue has its leader and all "
                    "its members again; consumer_slowdown: receivers take `delay` per message "
                    "for `duration`; publish_spike: senders publish `factor` x the plan rate "
                    "for `duration`; memory_alarm: the member's (every running member's if "
                    "none) memory alarm set off for `duration`, the broker blocking publishers; "
                    "delete_queues: the topology's queues deleted (consumers cancelled by the "
                    "broker, their messages lost) and declared again after restart_after")
    at: Seconds | None = Field(None, ge=0, description="seconds into the plan")
    at_step: int | None = Field(None, ge=1, description="at the start of this plan step")
    member: int | None = Field(None, ge=0, description="member index (kill_member, stop_member, "
                                                       "memory_alarm)")
    restart_after: Seconds = Field(10.0, ge=0, description="seconds before the member starts "
                                                           "again (delete_queues: before the "
                                                           "queues are declared again)")
    duration: Seconds = Field(30.0, gt=0, description="how long a slowdown, spike or memory "
                                                      "alarm lasts")
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
                                "leave out faults and scaling")
                      for name in ("faults", "scaling") if getattr(self, name)]
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
        spike = max((f.factor for f in self.faults if f.kind == "publish_spike"), default=1.0)
        found += plan_problems(self.plan, self.workload.senders, spike, steps <= MAX_PHASES)
        for i, fault in enumerate(self.faults):
            if fault.at_step is not None and fault.at_step > steps:
                found.append((("faults", i, "at_step"), f"the plan has {steps} steps"))
        slowed = self.consumer_profile or any(f.kind == "consumer_slowdown" for f in self.faults)
        if slowed and self.workload.ack == "auto":
            found.append((("workload", "ack"), "a consumer_profile or consumer_slowdown needs "
                                               "workload.ack: manual (with auto ack the "
                                               "prefetch does not hold messages back)"))
        return found
