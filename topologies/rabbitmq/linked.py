"""Two local RabbitMQ clusters joined by dynamic shovels (a topology's ``link``; document 004's
messages moved between queue managers).

Each side is a :class:`~topologies.rabbitmq.local.LocalRabbitMQ` of its own, made from the
topology: named ``<topology>-a`` and ``-b``, with its share of the members, its own epmd, state
and cgroups, and ports from ``port_base`` plus its first member's index, so member ``i`` of the
whole listens where it would in one cluster. Both sides use the topology's one broker user
(their ``credentials.json`` is the topology's), so a worker connects to either with the same
settings. Side b also gets the replies' exchange and queue.

The shovels are runtime parameters declared through side b's management API, so they run in
one of side b's members, or, with ``runs_on: own``, through the management API of one more
member (``<topology>-link``, no queues) that runs nothing else, whose CPU is then the link's
alone: one per queue of the topology from side a to the same queue on side b,
and one from side b's reply queue to side a's default exchange, keeping the routing key (the
requester's reply queue). Each consumes a named durable queue and, with ``on-confirm``,
acknowledges only what the far side confirmed: a dropped link loses nothing.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import shutil
import time
import urllib.parse
from pathlib import Path

from orchestrator.errors import ProvisionError
from orchestrator.specs.routing import BindingSpec, ExchangeSpec
from orchestrator.specs.topology import (
    LINK_OWN,
    LINK_SIDES,
    REPLY_EXCHANGE,
    REPLY_QUEUE,
    QueueSpec,
    TopologySpec,
)
from topologies.base import BrokerSample, Member, MemberStats, Provisioner, default_state_root
from topologies.rabbitmq import credentials, node
from topologies.rabbitmq.credentials import KeptSecrets
from topologies.rabbitmq.local import LocalRabbitMQ

LINK_TIMEOUT_S = 60.0  # until every shovel says it runs


def side_topology(topology: TopologySpec, side: int) -> TopologySpec:
    """The cluster of one side: its members, the topology's queues, and on side b the
    replies' exchange, queue and binding; side 2 is the link's own member (no queues)."""
    link = topology.link
    assert link is not None
    count = link.sides[side] if side < 2 else link.own_members
    name = LINK_SIDES[side] if side < 2 else LINK_OWN
    update: dict[str, object] = {
        "name": f"{topology.name}-{name}", "members": count, "start": count,
        "port_base": topology.port_base + link.first_of(side), "warm_pool": False, "link": None}
    if side == 1:
        update.update(
            queues=[*topology.queues, QueueSpec(name=REPLY_QUEUE)],
            exchanges=[*topology.exchanges, ExchangeSpec(name=REPLY_EXCHANGE, type="topic")],
            bindings=[*topology.bindings, BindingSpec(exchange=REPLY_EXCHANGE, queue=REPLY_QUEUE,
                                                      routing_key="#")])
    elif side == 2:
        update.update(queues=[], exchanges=[], bindings=[])
    return topology.model_copy(update=update)


class LinkedLocalRabbitMQ(KeptSecrets, Provisioner):
    """Local-process provisioner for two clusters joined by shovels (a :class:`topologies.
    base.Provisioner`); member indices run over side a, then side b."""

    asks_members = True  # every member answers for itself

    def __init__(self, topology: TopologySpec, state_root: Path | None = None):
        if topology.link is None:
            raise ValueError("a linked topology has a link section")
        self.topology, self.link = topology, topology.link
        root = state_root or default_state_root()
        self.state_dir = root / topology.name
        self.secrets_file = self.state_dir / "credentials.json"
        parts = (0, 1, 2) if topology.link.own_members else (0, 1)
        self.clusters = [LocalRabbitMQ(side_topology(topology, side), root) for side in parts]
        for cluster in self.clusters:
            cluster.plugins = node.SHOVEL_PLUGINS
            cluster.secrets_file = self.secrets_file

    def _locate(self, index: int) -> tuple[LocalRabbitMQ, int]:
        """The side cluster of member ``index`` and its index there."""
        if not 0 <= index < self.topology.members:
            raise ProvisionError(f"{self.topology.name} has no member {index}")
        side = self.link.side_of(index)
        return self.clusters[side], index - self.link.first_of(side)

    def _global(self, side: int, members: list[Member]) -> list[Member]:
        offset = self.link.first_of(side)
        return [dataclasses.replace(m, index=m.index + offset) for m in members]

    @property
    def _runs_link(self) -> LocalRabbitMQ:
        """The cluster the shovels are declared in and run in: the link's own, or side b."""
        return self.clusters[-1]

    # -- the pool ---------------------------------------------------------------------------

    def member(self, index: int) -> Member:
        """Member ``index`` (side a first, then side b)."""
        cluster, local = self._locate(index)
        return dataclasses.replace(cluster.member(local), index=index)

    def status(self) -> list[Member]:
        """Every member of both sides (and the link's own), with whether it runs."""
        return [m for side, cluster in enumerate(self.clusters)
                for m in self._global(side, cluster.status())]

    def sides(self) -> list[list[Member]]:
        """Side a's members, then side b's."""
        return [self._global(side, cluster.status())
                for side, cluster in enumerate(self.clusters[:2])]

    def up(self) -> list[Member]:
        """Start both sides (at once), then declare the shovels and wait until they run."""
        credentials.private_dir(self.state_dir)
        credentials.load_or_create(self.secrets_file)
        with concurrent.futures.ThreadPoolExecutor(len(self.clusters)) as pool:
            list(pool.map(lambda cluster: cluster.up(), self.clusters))
        self._link()
        return self.status()

    def start_member(self, index: int | None = None) -> Member:
        """Start member ``index`` again (after a fault); a linked topology does not grow."""
        if index is None:
            raise ProvisionError(f"{self.topology.name}: a linked topology starts every member "
                                 "at once and does not scale")
        cluster, local = self._locate(index)
        return dataclasses.replace(cluster.start_member(local), index=index)

    def stop_member(self, index: int, kill: bool = False) -> None:
        """Stop member ``index`` (its side's cluster carries on without it)."""
        cluster, local = self._locate(index)
        cluster.stop_member(local, kill)

    def down(self) -> list[str]:
        """Stop both sides and remove their state and the topology's secrets."""
        said = [line for cluster in self.clusters for line in cluster.down()]
        if self.state_dir.exists():
            shutil.rmtree(self.state_dir, ignore_errors=True)
            said.append(f"removed {self.state_dir}")
        return said

    # -- observation ------------------------------------------------------------------------

    def sample(self) -> BrokerSample:
        """Both sides' members (see :meth:`LocalRabbitMQ.sample`)."""
        return BrokerSample([m for cluster in self.clusters for m in cluster.sample().members])

    def member_stats(self, member: Member) -> MemberStats | None:
        """The member's own figures (:meth:`LocalRabbitMQ.member_stats`; a shovel is one more
        client of each member it connects to: its publishes and deliveries count there)."""
        return self.clusters[0].member_stats(member)

    def settled_queue_depths(self) -> dict[str, int]:
        """Messages per queue name, both sides together (a request on its way is in side a's
        queue or side b's, never both once the link has settled)."""
        total: dict[str, int] = {}
        for cluster in self.clusters[:2]:
            for name, count in cluster.settled_queue_depths().items():
                total[name] = total.get(name, 0) + count
        return total

    def link_state(self) -> dict[str, object]:
        """Each side's member names, the member the shovels run in (side b's first, or the
        link's own) and each shovel's state, as that member says."""
        sides = self.sides()
        return {"kind": "shovel", "sides": [[m.name for m in side] for side in sides],
                "runs_in": self._runs_link.member(0).name,
                "shovels": dict(sorted(self._runs_link.management().shovels().items()))}

    # -- the link ---------------------------------------------------------------------------

    def routes(self) -> dict[str, dict[str, object]]:
        """Each shovel's definition, by name, without its URIs (they carry the password)."""
        return {f"surge-{name}": {"src-queue": name, "dest-queue": name}
                for q in self.topology.queues for name in q.names} | {
            "surge-replies": {"src-queue": REPLY_QUEUE, "dest-exchange": ""}}

    def set_link(self, up: bool) -> None:
        """Declare the shovels again and wait until they run (``up``), or remove them."""
        if up:
            self._link()
            return
        api = self._runs_link.management()
        for name in self.routes():
            api.delete_shovel(name)

    def route_lines(self) -> list[str]:
        """Each shovel in words, for ``surge plan``."""
        return [f"{name}: side b's {route['src-queue']} -> side a's default exchange (the "
                f"key, the requester's reply queue, kept)" if name == "surge-replies" else
                f"{name}: side a's {route['src-queue']} -> side b's {route['dest-queue']}"
                for name, route in self.routes().items()]

    def _link(self) -> None:
        """Declare every shovel where the link runs and wait until each runs."""
        secrets = self.secrets()
        uris = [[f"amqp://{secrets.user}:{urllib.parse.quote(secrets.password, safe='')}"
                 f"@{m.host}:{m.port}" for m in cluster.status() if m.running]
                for cluster in self.clusters[:2]]
        api = self._runs_link.management()
        common = {"ack-mode": self.link.ack_mode, "src-prefetch-count": self.link.prefetch,
                  "reconnect-delay": 1}
        for name, route in self.routes().items():
            back = name == "surge-replies"
            api.set_shovel(name, {**common, **route, "src-uri": uris[1 if back else 0],
                                  "dest-uri": uris[0 if back else 1]})
        deadline = time.monotonic() + LINK_TIMEOUT_S
        while True:
            states = api.shovels()
            waiting = {n: states.get(n, "missing") for n in self.routes()
                       if states.get(n) != "running"}
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise ProvisionError(f"{self.topology.name}: shovels not running after "
                                     f"{LINK_TIMEOUT_S:.0f} s: " + ", ".join(
                                         f"{n} {s}" for n, s in sorted(waiting.items())),
                                     temporary=True)
            time.sleep(0.5)
