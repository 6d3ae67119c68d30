"""The topology spec: which broker, where, how many members of what size, and the queues,
exchanges and bindings declared on it once it is up."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from orchestrator.specs.base import Bytes, Loc, Seconds, Spec
from orchestrator.specs.existing import ExistingSpec
from orchestrator.specs.hosts import HostSpec, RabbitKubernetesSpec
from orchestrator.specs.limits import MAX_CORES_PER_MEMBER, MAX_NETWORK_MBPS, Number
from orchestrator.specs.mq import MQ_NAME, MqSpec
from orchestrator.specs.routing import (
    BindingSpec,
    ExchangeSpec,
    mq_routing_problems,
    routes,
    routing_problems,
)


class QueueSpec(Spec):
    """A queue the provisioner declares once the cluster is up: one queue, one per running
    member (``per_member``), or a numbered pattern (``perf-test-%d`` with ``count``)."""

    name: str = Field(min_length=1, description="a name, or a pattern with %d and a count")
    count: int = Field(1, ge=1, le=10000, description="queues perf-test-1 .. perf-test-<count> "
                                                      "when the name holds %d")
    type: Literal["classic", "quorum", "stream"] = Field(
        "classic", description="RabbitMQ queue type; a stream keeps its messages when they are "
                               "consumed, every consumer reading it from its own offset "
                               "(workload.stream_offset)")
    durable: bool = Field(True, description="the queue survives a broker restart")
    auto_delete: bool = Field(
        False, description="the broker deletes the queue when its last consumer goes")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="x-arguments, passed to the broker unchanged")
    max_length_bytes: Bytes | None = Field(
        None, gt=0, description="the broker drops the oldest messages (a stream: its oldest "
                                "segments) beyond this many bytes (x-max-length-bytes)")
    max_age: Seconds | None = Field(
        None, gt=0, description="a stream drops segments older than this (x-max-age); "
                                "streams only")
    segment_size: Bytes | None = Field(
        None, gt=0, description="a stream's segment files are this large "
                                "(x-stream-max-segment-size-bytes); streams only")
    per_member: bool = Field(
        False, description="one instance per running member, named <name>.<member index> and "
                           "led by that member (like a cluster queue's instance on each queue "
                           "manager); workers use the instance of the member they connect to")
    per_receiver: bool = Field(
        False, description="no queue of this name is declared: each receiver declares one of "
                           "its own when it connects, named by the broker, exclusive to its "
                           "connection and deleted with it, and binds it as the bindings to "
                           "this queue say, so every receiver gets its own copy of what is "
                           "routed here (PerfTest's queues when -u is not given; -E). Classic, "
                           "RabbitMQ only, with workload.exchange")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """A %d pattern goes with a count, and not with per_member; stream settings with a
        stream."""
        found: list[tuple[Loc, str]] = []
        if self.type != "stream":
            found += [((name,), "streams only (type: stream)") for name in
                      ("max_age", "segment_size") if getattr(self, name) is not None]
        elif not self.durable or self.auto_delete:
            found.append((("durable" if not self.durable else "auto_delete",),
                          "a stream is durable and never auto-deleted"))
        if ("%d" in self.name) != (self.count > 1):
            found.append((("count" if self.count > 1 else "name",),
                          f"a queue name with %d needs a count above 1 and a count needs %d in "
                          f"the name (name {self.name!r}, count {self.count})"))
        if self.count > 1 and self.per_member:
            found.append((("per_member",), "give either per_member or a %d pattern with a "
                                           "count, not both"))
        if self.per_receiver and (self.type != "classic" or self.count > 1 or self.per_member):
            found.append((("per_receiver",), "a queue per receiver is one classic queue: not "
                                             "quorum, a stream, a %d pattern nor per_member"))
        return found

    @property
    def each_reader(self) -> bool:
        """Whether every receiver gets every message routed here, a subscription of its own:
        a stream (read from each receiver's offset) or a queue per receiver."""
        return self.type == "stream" or self.per_receiver

    @property
    def declared_arguments(self) -> dict[str, Any]:
        """Its x-arguments as declared: its own, its type, and those of its typed fields."""
        out = dict(self.arguments)
        out.setdefault("x-queue-type", self.type)
        for name, value in (("x-max-length-bytes", self.max_length_bytes),
                            ("x-max-age", None if self.max_age is None
                             else f"{max(1, round(self.max_age))}s"),
                            ("x-stream-max-segment-size-bytes", self.segment_size)):
            if value is not None:
                out.setdefault(name, value)
        return out

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
        instances, or the pattern's queues, or the one queue; none for a queue per receiver
        (each receiver declares its own)."""
        if self.per_receiver:
            return []
        if self.per_member:
            return [self.instance(i) for i in member_indices]
        return self.names

    def slot(self, worker: int, workers: int) -> int:
        """The queue of a pattern that worker ``worker`` (0-based) of ``workers`` uses: the
        workers fill the queues in blocks, in order."""
        return worker * self.count // workers

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


LINK_SIDES = "ab"  # the sides of linked clusters, as their members' names carry them
LINK_OWN = "link"  # the name part of a linked topology's own link member
REPLY_EXCHANGE = "surge.replies"  # a linked topology's replies, on the servers' side
REPLY_QUEUE = "surge.replies.to-a"  # where they wait for the link back to the requesters


class LinkSpec(Spec):
    """Two clusters joined by the broker's own link (document 004: messages moved between
    queue managers): the members split into side a (requesters and senders connect there) and
    side b (servers and receivers).

    ``shovel`` (RabbitMQ, placement local): each side a cluster of its own declaring the
    topology's queues. A dynamic shovel per queue moves what is published on side a to the
    same queue on side b; responders publish replies to the exchange surge.replies on side b,
    whose queue surge.replies.to-a a shovel empties into side a's default exchange (the reply
    queue's name, kept as the routing key, finds the requester). The shovels run inside side
    b's first member: their CPU is part of that member's.

    ``channel`` (IBM MQ, placement ssh): two queue managers, each with a transmission queue
    named after the other and a sender channel emptying it into the other's receiver channel
    (``<QMA>.TO.<QMB>`` and back). On side a each request queue is a remote queue definition
    pointing at side b's local queue and each reply queue (``PAIR1.REPLY`` of ``PAIR1``) is
    local; a responder's reply, addressed to the requester's queue manager, goes onto side b's
    transmission queue named after it. The channels' agents run inside each queue manager."""

    kind: Literal["shovel", "channel"] = Field(
        "shovel", description="shovel: RabbitMQ dynamic shovels; channel: IBM MQ sender and "
                              "receiver channels with a transmission queue each way")
    sides: list[int] = Field([1, 1], min_length=2, max_length=2,
                             description="members of side a and of side b; together the "
                                         "topology's members")
    ack_mode: Literal["on-confirm", "on-publish", "no-ack"] = Field(
        "on-confirm", description="shovel: when it acknowledges at its source: on-confirm "
                                  "(after the far side confirmed; nothing lost when the link "
                                  "drops), on-publish, or no-ack")
    prefetch: int = Field(1000, ge=1, le=65535,
                          description="shovel: messages it takes from its source before acks")
    npmspeed: Literal["normal", "fast"] = Field(
        "normal", description="channel: NPMSPEED; normal carries non-persistent messages "
                              "inside the batch's unit of work (nothing lost when the channel "
                              "stops), fast outside it")
    batch_size: int = Field(50, ge=1, le=9999,
                            description="channel: BATCHSZ, messages sent before the receiver "
                                        "commits")
    xmitq_maxdepth: int = Field(100000, ge=1, le=999999999,
                                description="channel: MAXDEPTH of each transmission queue "
                                            "(requests wait there while the link is down)")

    runs_on: Literal["b", "own"] = Field(
        "b", description="shovel: where the shovels run: b, inside side b's first member "
                         "(its CPU is broker B's and the link's together); own, in one more "
                         "member after side b's, of the same size, whose CPU is the link's "
                         "alone (an upper bound: both its ends are network clients)")

    @property
    def own_members(self) -> int:
        """Members of the link's own (1 with ``runs_on: own``), after side b's."""
        return 1 if self.runs_on == "own" else 0

    def side_of(self, index: int) -> int:
        """0 (side a), 1 (side b) or 2 (the link's own member): where member ``index`` is."""
        return 0 if index < self.sides[0] else 1 if index < sum(self.sides) else 2

    def first_of(self, side: int) -> int:
        """The index of ``side``'s first member (2: the link's own)."""
        return sum(self.sides[:side])


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
    network_mbps: Number | None = Field(
        None, gt=0, le=MAX_NETWORK_MBPS,
        description="bandwidth of each member's network link in Mb/s, each way (10 GbE: "
                    "10000); a step where a member's client traffic reaches 90% of it names "
                    "the network as its limit; null = unknown, never named")
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
        default_factory=list, description="exchanges declared once the queues are; on IBM MQ "
                                          "each is a topic tree (topic string EXCHANGE/key/"
                                          "words)")
    bindings: list[BindingSpec] = Field(
        default_factory=list, description="bindings from the exchanges to queues or exchanges, "
                                          "declared after them; on IBM MQ each bound queue "
                                          "is a durable subscription (DEFINE SUB, or MQSUB "
                                          "on queue managers surge did not start)")
    ibmmq: MqSpec | None = Field(None, description="queue managers, cluster, CCDT (broker ibmmq)")
    hosts: list[HostSpec] = Field(
        default_factory=list, description="SSH hosts: RabbitMQ members (role broker, placement "
                                          "ssh) and load agents (role load, any placement)")
    kubernetes: RabbitKubernetesSpec | None = Field(
        None, description="RabbitMQ through the cluster operator (placement kubernetes)")
    existing: ExistingSpec | None = Field(
        None, description="a cluster surge did not start (placement existing)")
    link: LinkSpec | None = Field(
        None, description="two clusters joined by the broker's link instead of one (RabbitMQ "
                          "shovels, placement local; IBM MQ channels, placement ssh): "
                          "requesters on side a, servers on side b")

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
        if self.broker == "ibmmq":
            found += mq_routing_problems(self.exchanges, self.bindings)
            found += [(("queues", i, "per_receiver"), "RabbitMQ only: on IBM MQ bind a queue "
                                                      "per subscription")
                      for i, q in enumerate(self.queues) if q.per_receiver]
            if self.placement != "kubernetes":  # there the CR's rendering checks them
                found += _mq_name_problems(self.queues, self.members)
        if self.link is not None:
            found += self._link_problems(self.link)
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

    def _link_problems(self, link: LinkSpec) -> list[tuple[Loc, str]]:
        """Linked clusters are local RabbitMQ joined by shovels or two IBM MQ queue managers
        over SSH joined by channels, each side whole from the start, and every queue a named
        one the link can move messages of."""
        found = self._link_kind_problems(link)
        if found:
            return found
        if min(link.sides) < 1 or sum(link.sides) + link.own_members != self.members:
            own = " with the link's own" if link.own_members else ""
            found.append((("link", "sides"), f"each side needs a member and together{own} they "
                                             f"are the topology's members ({self.members}); "
                                             f"sides say {link.sides}"))
        if self.start != self.members:
            found.append((("start",), "a linked topology starts every member: start = members"))
        found += [(("queues", i), "a link moves messages of a named queue: not per_member, "
                                  "per_receiver or a stream")
                  for i, q in enumerate(self.queues) if q.per_member or q.per_receiver
                  or q.type == "stream"]
        return found

    def _link_kind_problems(self, link: LinkSpec) -> list[tuple[Loc, str]]:
        """The link the broker has, where surge can build it."""
        if link.kind == "shovel" and (self.broker != "rabbitmq" or self.placement != "local"):
            return [(("link", "kind"), "shovels join two local RabbitMQ clusters: broker "
                                       "rabbitmq, placement local (IBM MQ: kind channel)")]
        if link.kind == "shovel":
            return []
        mq = self.ibmmq
        if self.broker != "ibmmq" or self.placement != "ssh" or mq is None:
            return [(("link", "kind"), "channels join two IBM MQ queue managers surge creates "
                                       "over SSH: broker ibmmq, placement ssh (RabbitMQ: kind "
                                       "shovel)")]
        if link.sides != [1, 1]:
            return [(("link", "sides"), f"channels join one queue manager on each side: sides "
                                        f"[1, 1]; sides say {link.sides}")]
        if link.runs_on == "own":
            return [(("link", "runs_on"), "channels run inside each queue manager (their "
                                          "agents): runs_on b")]
        found: list[tuple[Loc, str]] = []
        if mq.cluster_queues:
            found.append((("ibmmq", "cluster_queues"), "queue managers joined by channels "
                                                       "hold queues of their own: false"))
        names = [mq.qm_name(0), mq.qm_name(1)]
        channel = f"{names[0]}.TO.{names[1]}"
        if len(channel) > 20:
            found.append((("ibmmq", "qm_prefix"), f"the channel {channel} is longer than MQ's "
                                                  f"20 characters: a shorter qm_prefix"))
        found += [(("queues", i), f"a queue may not be named like a queue manager ({name}): "
                                  f"the transmission queues carry those names")
                  for i, q in enumerate(self.queues) for name in q.names if name in names]
        return found

    def _existing_problems(self) -> list[tuple[Loc, str]]:
        """A cluster surge did not start is described by its existing section (RabbitMQ
        members there, IBM MQ queue managers in the ibmmq section)."""
        if self.existing is None:
            return [(("placement",), "placement existing needs an existing section (members' "
                                     "URIs, credentials)")]
        existing = self.existing
        if self.broker == "rabbitmq" and existing.mechanism == "EXTERNAL" and (
                existing.tls is None or existing.tls.cert_file is None
                or not all(m.tls for m in existing.members)):
            return [(("existing", "mechanism"), "EXTERNAL authenticates with a client "
                                                "certificate: give existing.tls.cert_file and "
                                                "key_file, and amqps:// member URIs")]
        if self.broker == "rabbitmq" and existing.credentials is None and \
                existing.mechanism == "PLAIN":
            return [(("existing",), "RabbitMQ needs credentials: existing.credentials with a "
                                    "user and password_env or password_file (or mechanism: "
                                    "EXTERNAL with a client certificate)")]
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
        instance on each member of the pool, or the one queue (a queue per receiver: its name,
        each receiver's copy counted by the accounting)."""
        queue = self.queue(name)
        if queue is None or queue.per_receiver:
            return [name]
        return queue.instances(range(self.members))

    def routes(self, exchange: str, routing_key: str,
               headers: dict[str, Any] | None = None) -> frozenset[str]:
        """The queues a message published to ``exchange`` with ``routing_key`` (and
        ``headers``) reaches (:func:`orchestrator.specs.routing.routes`)."""
        return routes(self.exchanges, self.bindings, self.queue_names, exchange, routing_key,
                      headers)


def _mq_name_problems(queues: list[QueueSpec], members: int) -> list[tuple[Loc, str]]:
    """Each queue whose names (a pattern's, a per-member queue's instances) are not MQ object
    names: MQ refuses to define them."""
    found = []
    for i, queue in enumerate(queues):
        bad = [name for name in queue.instances(range(members)) if not re.match(MQ_NAME, name)]
        if bad:
            found.append((("queues", i, "name"), f"{bad[0]!r} is not an MQ object name (at most "
                                                 f"48 of A-Z a-z 0-9 . _ / %; no -)"))
    return found
