"""Messages in the workload's queues, as exactly as the broker lets us know them.

Ready messages are read from the queues themselves (a passive declare per queue, on a
connection of the controller's); deliveries awaiting an acknowledgement are the ones the run's
own receivers hold, as each live agent reports them (``held``: not yet handled; ``unacked``:
handled, the batched ack not sent yet). Both are current counts read at a known time, never
the difference of two lifetime counters: a member's ``delivered - acknowledged`` keeps every
delivery a closed channel requeued (another client's, a shovel's, an earlier run's), so it
never came back to 0 and froze the depth while it looked fresh. Deliveries on their way to a
receiver, and those of consumers that are not the run's, are in no figure: the row's backlog
(sent - received) counts them. The depth is known when the queue reading and every live
agent's latest reading are at most ``MAX_DEPTH_AGE_S`` old (its age is the oldest's);
otherwise it is unknown (``None``), never 0. Where the broker offers no probe, the provisioner's
sample carries the depths. Linked clusters (:meth:`Provisioner.sides`) are read side by side,
each queue's messages summed over the sides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from drivers.base import MessageTooLarge, Unchecked
from orchestrator.clock import Clock
from orchestrator.errors import ProvisionError
from orchestrator.run.sampling import AgentReading, DepthReading
from orchestrator.specs.topology import QueueSpec
from orchestrator.specs.workload import WorkloadSpec
from topologies.base import BrokerSample, Member, Provisioner

MAX_DEPTH_AGE_S = 1.0  # an older queue or agent reading makes the depth unknown
SETTLE_READS, SETTLE_PAUSE_S = 5, 0.5  # final depth: read until two reads agree

ProbeFactory = Callable[[str, list[str], list[str], dict[str, Any]], Any]
"""How a run opens a depth probe (:func:`drivers.depth.depth_probe`) or its check before any
load (:func:`drivers.depth.preflight`)."""
CREATE_HINT = {
    "rabbitmq": "create them before the run (or, on a cluster surge did not start, let it "
                "declare them: existing.declare: true)",
    "ibmmq": "define them on the queue managers before the run (DEFINE QLOCAL)"}


class SideProbes:
    """The probes of linked clusters, one per side, used as one: each queue's ready messages
    summed over the sides, read at the midpoint of the sides' reads."""

    def __init__(self, probes: list[Any]):
        self.probes = probes

    def read(self) -> tuple[dict[str, int], float]:
        """``({queue: ready messages over the sides}, when)``."""
        ready: dict[str, int] = {}
        times = []
        for probe in self.probes:
            counts, at = probe.read()
            times.append(at)
            for name, count in counts.items():
                ready[name] = ready.get(name, 0) + count
        return ready, sum(times) / len(times)

    def check(self) -> None:
        """Each side's check (the queues exist on both)."""
        for probe in self.probes:
            probe.check()

    def check_size(self, size: int) -> None:
        """Each side takes the largest message, where its probe can ask."""
        for probe in self.probes:
            if hasattr(probe, "check_size"):
                probe.check_size(size)

    def identify(self) -> dict[str, Any] | None:
        """What side a's broker says it is, where its check can ask (both sides run the same
        broker)."""
        first = self.probes[0]
        return first.identify() if hasattr(first, "identify") else None

    def close(self) -> None:
        """Close every side's probe."""
        for probe in self.probes:
            probe.close()


class QueueDepth:
    """The queue depth of one run: its probe, the latest readings, and the final count."""

    def __init__(self, broker: str, queue: QueueSpec, provisioner: Provisioner,
                 clock: Clock, probes: ProbeFactory, preflights: ProbeFactory):
        self.broker, self.queue, self.provisioner = broker, queue, provisioner
        self.clock, self.probes, self.preflights = clock, probes, preflights
        self.probe: Any = None
        self.reading: DepthReading | None = None
        # a time every reading of the latest known depth was taken after (None: unknown,
        # or from the broker's sample, which does not say)
        self.read_after: float | None = None
        self.identity: dict[str, Any] | None = None  # what the broker said it is, if asked

    def open(self, members: int) -> Callable[[], DepthReading] | None:
        """Open the probe over every member's endpoint; the collector's source for it, or
        ``None`` where the broker has no probe or there is no queue name to read (a queue per
        receiver: the broker names each)."""
        queues = self.queue.instances(range(members))
        if not queues:
            return None
        self.probe = self._probe(self.probes, self.provisioner.status(), queues)
        if self.probe is None:
            return None
        return lambda: DepthReading(*self.probe.read())

    @staticmethod
    def _unsubscribed(why: str, subscriptions: list[Any]) -> str:
        """``why`` the check cannot be made, unless subscriptions had to be: then a
        :class:`ProvisionError` (without them the bindings would route nothing)."""
        if subscriptions:
            raise ProvisionError(f"the topology's bindings are subscriptions surge makes from "
                                 f"this machine before the load, and it cannot: {why}")
        return why

    def check(self, running: list[Member], workload: WorkloadSpec | None = None) -> str | None:
        """Before any load: the run's clients can connect to every running member (credentials,
        TLS), the workload's queues exist and, where the broker can be asked, every member
        takes the workload's largest message (its request or reply);
        :class:`ProvisionError` saying which does not.
        Returns why nothing could be checked from here (the broker's client library is missing
        on this machine, the provisioner says the members cannot be reached from it), or
        ``None``: checked, or no check for this broker."""
        subscriptions = self.provisioner.subscriptions()
        why = self.provisioner.unreachable_from_controller()
        if why:
            return self._unsubscribed(why, subscriptions)
        probe = self._probe(self.preflights, running,
                            self.queue.instances([m.index for m in running]))
        if probe is None:
            return None
        try:
            probe.check()
            if hasattr(probe, "identify"):
                self.identity = probe.identify()
            if subscriptions:
                probe.subscribe(subscriptions)
            if workload is not None and hasattr(probe, "check_size"):
                probe.check_size(max(workload.message.largest, workload.reply_size or 0))
        except MessageTooLarge as error:
            raise ProvisionError(f"workload.message.size: {error}; send smaller messages or "
                                 f"raise the broker's max_message_size") from None
        except Unchecked as error:
            return self._unsubscribed(str(error), subscriptions)
        except ConnectionError as error:
            raise ProvisionError(f"the run's clients cannot connect to {error}") from None
        except LookupError as error:
            raise ProvisionError(f"the workload's queues do not exist: {error}; "
                                 f"{CREATE_HINT.get(self.broker, 'create them')}") from None
        finally:
            probe.close()
        return None

    def fold(self, reading: DepthReading | None) -> None:
        """Keep this tick's new queue reading (a missing one leaves the previous in place)."""
        self.reading = reading or self.reading

    def now(self, broker: BrokerSample | None, agents: Iterable[AgentReading | None]
            ) -> tuple[int | None, float | None]:
        """Messages in the workload's queues: ready, plus the deliveries the receivers of the
        live ``agents`` (each one's latest reading; ``None``: none yet) hold unacknowledged;
        and the age of the oldest of those readings in seconds. ``(None, None)`` when any of
        them is missing or older than ``MAX_DEPTH_AGE_S``."""
        self.read_after = None
        if self.probe is None:
            depths = broker.queue_depths if broker else None
            return (None, None) if depths is None else (self.total(depths), None)
        now = self.clock.monotonic()
        if self.reading is None or now - self.reading.at > MAX_DEPTH_AGE_S:
            return None, None
        readings = list(agents)
        if any(r is None or now - r.taken_at > MAX_DEPTH_AGE_S for r in readings):
            return None, None
        ready = self.total(self.reading.ready)
        held = sum(int(r.counters["held"] + r.counters["unacked"]) for r in readings)
        oldest = min([self.reading.at] + [r.taken_at for r in readings])
        self.read_after = min([self.reading.at] + [r.taken_after for r in readings])
        return ready + held, now - oldest

    def read_since(self, since: float) -> bool:
        """Whether the latest depth was read entirely after ``since`` (controller clock):
        every reading it is made of taken later (the queue reading's midpoint; each agent's
        snapshot asked for after it). A depth from the broker's sample (no probe) is this
        tick's sample, and counts as read after ``since``."""
        if self.probe is None:
            return True
        return self.read_after is not None and self.read_after > since

    def fresh_at(self) -> float | None:
        """When the queue reading was taken, if it is fresh enough to count in this tick."""
        if self.reading is not None and \
                self.clock.monotonic() - self.reading.at <= MAX_DEPTH_AGE_S:
            return self.reading.at
        return None

    def readable(self, broker: BrokerSample | None) -> bool:
        """Whether this run can read queue depths at all (a probe, or the broker's metrics)."""
        return self.probe is not None or (broker is not None and broker.queue_depths is not None)

    def total(self, depths: dict[str, int]) -> int:
        """Messages in the workload queue, over all its per-member instances, and those on
        their way to it between linked clusters (:attr:`Provisioner.transit_queues`)."""
        return sum(n for name, n in depths.items()
                   if self.queue.owns(name) or name in self.provisioner.transit_queues)

    def settled(self) -> dict[str, int] | None:
        """Messages per queue once the receivers are gone (each delivery they had not
        acknowledged is back in its queue): read from the queues themselves until two reads
        agree, or the provisioner's own reading where there is no probe. (``rabbitmqctl
        list_queues`` was seen to lag here: 24 and 34 messages of a quorum queue reported right
        after the queue itself said it was empty.)"""
        if self.probe is None:
            return self.provisioner.settled_queue_depths()
        previous = None
        for _ in range(SETTLE_READS):
            try:
                ready, _ = self.probe.read()
            except ConnectionError:
                return self.provisioner.settled_queue_depths()
            if ready == previous:
                break
            previous = ready
            self.clock.sleep(SETTLE_PAUSE_S)
        return previous

    def ready_in(self, queue: str) -> int | None:
        """Messages ready in one queue now, over a connection of its own (the scaler asks from
        its thread while the tick reads the others); ``None``: unknown."""
        probe = self._probe(self.probes, [m for m in self.provisioner.status() if m.running],
                            [queue])
        if probe is None:
            depths = self.provisioner.settled_queue_depths()
            return None if depths is None else depths.get(queue, 0)
        try:
            return probe.read()[0].get(queue)
        except ConnectionError:
            return None
        finally:
            probe.close()

    def _probe(self, factory: ProbeFactory, members: list[Member], queues: list[str]) -> Any:
        """A probe (or check) from ``factory`` over ``members``' endpoints; over linked
        clusters, one per side as one (:class:`SideProbes`). ``None``: the broker has none."""
        names = {m.name for m in members}
        groups = [[m.endpoint for m in side if m.name in names]
                  for side in self.provisioner.sides()] or [[m.endpoint for m in members]]
        settings = self.provisioner.client_settings()
        probes = [factory(self.broker, group, queues, settings) for group in groups if group]
        if not probes or any(p is None for p in probes):
            return None
        return probes[0] if len(probes) == 1 else SideProbes(probes)

    def close(self) -> None:
        """Close the probe's connection."""
        if self.probe is not None:
            self.probe.close()
