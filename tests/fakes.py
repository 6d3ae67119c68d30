"""In-memory stand-ins for the run loop's collaborators: a clock the test drives, agents whose
counters follow that clock, a provisioner whose members burn scripted CPU, and a launcher.

They speak the same typed protocol as the real agents (:mod:`drivers.protocol`), so the run
loop cannot tell them apart; nothing here opens a socket or starts a process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from drivers import protocol
from drivers.accounting import SequenceTracker
from orchestrator.agents.launcher import Fleet
from orchestrator.specs.topology import TopologySpec
from results.rundir.histogram import LatencyHistogram
from topologies.base import BrokerSample, CpuReading, Member, MemberSample, Provisioner

EPOCH = 1_790_000_000.0  # the fake wall clock's start


class FakeClock:
    """Time that moves only when the code under test sleeps (or a test says so)."""

    def __init__(self, start: float = 1000.0):
        self.now = start
        self.lock = threading.Lock()

    def monotonic(self) -> float:
        """The fake monotonic time."""
        with self.lock:
            return self.now

    def time(self) -> float:
        """Wall time moving with the monotonic one."""
        return EPOCH + self.monotonic()

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> None:
        """Advance at once (a set ``stop`` ends the wait as a real one would)."""
        if seconds > 0 and not (stop is not None and stop.is_set()):
            self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Move time on."""
        with self.lock:
            self.now += seconds


@dataclass
class MemoryAgent:
    """An agent whose senders publish exactly their rate on the fake clock and whose receivers
    take everything at once with a fixed latency; it records every call it gets."""

    index: int
    clock: FakeClock
    host: str = "memory"
    latency_us: int = 2000
    calls: list[Any] = field(default_factory=list)
    config: protocol.Configure | None = None
    rate: float = 0.0
    active: int | None = None
    sent: float = 0.0
    last: float | None = None
    sending: bool = True
    stopped: bool = False
    fast_path: protocol.FastPath | None = None  # what its snapshots say of the fast path

    def hello(self) -> protocol.Hello:
        return protocol.Hello(0, 0, protocol.PROTOCOL_VERSION)

    def configure(self, config: protocol.Configure) -> protocol.Configured:
        self.calls.append(config)
        self.config = config
        self.rate = config.senders[0].rate if config.senders else 0.0
        self.last = self.clock.monotonic()
        return protocol.Configured(len(config.senders), len(config.receivers))

    def set_rate(self, rate: protocol.Rate) -> protocol.RateApplied:
        self._advance()
        self.calls.append(rate)
        self.rate, self.active = rate.rate_per_sender, rate.active
        return protocol.RateApplied(self._publishing())

    def set_consumer_delay(self, delay: protocol.ConsumerDelay) -> protocol.Done:
        self.calls.append(delay)
        return protocol.Done()

    def move(self, move: protocol.Move) -> protocol.Moved:
        self.calls.append(move)
        return protocol.Moved(len(move.senders) + len(move.receivers))

    def snapshot(self, timeout_s: float = 30.0) -> protocol.Snapshot:
        self._advance()
        senders = len(self.config.senders) if self.config and self.config.senders else 1
        sent = int(self.sent) // senders * senders
        histogram = LatencyHistogram()
        if sent:
            histogram.record(self.latency_us)
        return protocol.Snapshot(monotonic_s=self.clock.monotonic(), cpu_seconds=0.0,
                                 sent=sent, received=sent, latency=histogram.to_dict(),
                                 fast_path=self.fast_path)

    def accounting(self) -> protocol.Accounting:
        """Each producer sent an equal share, and every message came back once."""
        senders = self.config.senders if self.config else []
        each = {s.producer_id: int(self.sent) // len(senders) for s in senders}
        tracker = SequenceTracker()
        for producer, count in each.items():
            for seq in range(count):
                tracker.record(producer, seq)
        return protocol.Accounting(each, {"": tracker.export()})

    def clock_now(self) -> protocol.Clock:
        return protocol.Clock(int(self.clock.time() * 1e9))

    def stop_senders(self) -> protocol.Done:
        self._advance()
        self.sending = False
        return protocol.Done()

    def stop_receivers(self) -> protocol.Done:
        return protocol.Done()

    def stop(self, timeout_s: float = 20.0) -> None:
        self.stopped = True

    def _publishing(self) -> int:
        senders = len(self.config.senders) if self.config else 0
        if self.active is None:
            return senders
        return sum(1 for s in self.config.senders if s.producer_id <= self.active)

    def _advance(self) -> None:
        now = self.clock.monotonic()
        if self.last is not None and self.sending:
            self.sent += self.rate * self._publishing() * (now - self.last)
        self.last = now


class MemoryLauncher:
    """Hands out ``count`` in-memory agents."""

    def __init__(self, count: int, clock: FakeClock):
        self.agents = [MemoryAgent(i, clock) for i in range(count)]
        self.stopped = False
        self.begun = False

    def begin(self, lifetime_s: float) -> bool:
        self.begun = True
        return True

    def start(self, lifetime_s: float) -> Fleet:
        return Fleet(list(self.agents), list(self.agents), list(self.agents))

    def stop(self, fleet: Fleet) -> list[str]:
        for agent in fleet.agents:
            agent.stop()
        self.stopped = True
        return []


class ScriptedProvisioner(Provisioner):
    """Members that use ``cpu_share`` of their quota while running, on the fake clock;
    ``slow_sample_s`` makes each sample take that long (the clock moves on meanwhile)."""

    def __init__(self, topology: TopologySpec, clock: FakeClock, cpu_share: float = 0.5):
        self.topology, self.clock, self.cpu_share = topology, clock, cpu_share
        self.running = [False] * topology.members
        self.cpu = [0.0] * topology.members
        self.last = clock.monotonic()
        self.started: list[int] = []
        self.slow_sample_s = 0.0
        self.downs = 0

    def member(self, index: int) -> Member:
        return Member(index, f"m{index}", "memory", 5672 + index, 0, 0,
                      running=self.running[index], endpoint=f"memory://m{index}")

    def up(self) -> list[Member]:
        for i in range(self.topology.start):
            self.running[i] = True
        return self.status()

    def status(self) -> list[Member]:
        return [self.member(i) for i in range(self.topology.members)]

    def start_member(self, index: int | None = None) -> Member:
        index = self.running.index(False) if index is None else index
        self.running[index] = True
        self.started.append(index)
        return self.member(index)

    def stop_member(self, index: int, kill: bool = False) -> None:
        self.running[index] = False

    def sample(self) -> BrokerSample:
        if self.slow_sample_s:
            self.clock.advance(self.slow_sample_s)
        now = self.clock.monotonic()
        quota = self.topology.cpu_per_member
        for i, running in enumerate(self.running):
            if running:
                self.cpu[i] += (now - self.last) * quota * self.cpu_share
        self.last = now
        return BrokerSample(
            [MemberSample(f"m{i}", r, CpuReading(self.cpu[i], now), quota)
             for i, r in enumerate(self.running)], queue_depths={"perf": 0})

    def client_settings(self) -> dict[str, Any]:
        return {}

    def settled_queue_depths(self) -> dict[str, int]:
        return {"perf": 0}

    def down(self) -> list[str]:
        self.downs += 1
        self.running = [False] * self.topology.members
        return ["all members stopped"]


def no_probe(broker: str, endpoints: list[str], queues: list[str], settings: dict) -> None:
    """No queue-depth probe: depths come from the provisioner's samples."""
    return None


def idle_host() -> CpuReading:
    """A controller host with nothing to do."""
    return CpuReading(0.0, 0.0, 1.0)
