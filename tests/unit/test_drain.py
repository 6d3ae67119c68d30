"""The queue depth of a tick and the drain it ends, on a fake clock: the depth is the ready
messages the queues say plus what the live agents' receivers hold unacknowledged, known only
when every one of those readings is at most a second old; the drain ends at the first tick,
read after the stop, that sees every message received and a known depth of 0."""

import dataclasses
import json

import pytest

from drivers import protocol
from orchestrator.run.controller import Controller
from orchestrator.run.depth import QueueDepth
from orchestrator.run.sampling import AgentReading, DepthReading
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import QueueSpec, TopologySpec
from tests.fakes import (
    FakeClock,
    MemoryAgent,
    MemoryLauncher,
    ScriptedProvisioner,
    idle_host,
    no_probe,
)

TOPOLOGY = TopologySpec(name="mem", members=1, start=1, cpu_per_member=1.0,
                        queues=[QueueSpec(name="perf")])


class Probe:
    """The queues' ready counts as the broker would answer a passive declare: ``ready`` at
    each read, the reading ``age_s`` old when it arrives (a broker answering late)."""

    def __init__(self, clock: FakeClock, ready: int = 0, age_s: float = 0.0):
        self.clock, self.ready, self.age_s = clock, ready, age_s
        self.queues: list[str] = []

    def __call__(self, broker, endpoints, queues, settings) -> "Probe":
        self.queues = list(queues)
        return self

    def read(self) -> tuple[dict[str, int], float]:
        now = self.clock.monotonic()
        return {q: self.ready for q in self.queues}, now - self.age_s

    def check(self) -> None:
        pass

    def close(self) -> None:
        pass


@dataclasses.dataclass
class DrainingAgent(MemoryAgent):
    """Receivers ``behind`` messages behind the senders until ``caught_up_s`` after the senders
    stop, holding ``unacked`` deliveries whose ack has not gone until ``acked_s`` after it."""

    behind: int = 0
    caught_up_s: float = 0.0
    unacked: int = 0
    acked_s: float = 0.0
    stopped_at: float | None = None

    def stop_senders(self) -> protocol.Done:
        done = super().stop_senders()
        self.stopped_at = self.clock.monotonic()
        return done

    def snapshot(self, timeout_s: float = 30.0) -> protocol.Snapshot:
        snapshot = super().snapshot(timeout_s)
        since = None if self.stopped_at is None else self.clock.monotonic() - self.stopped_at
        received = snapshot.sent if since is not None and since >= self.caught_up_s \
            else max(0, snapshot.sent - self.behind)
        unacked = 0 if since is not None and since >= self.acked_s else self.unacked
        return dataclasses.replace(snapshot, received=received, unacked=unacked)


def drained(tmp_path, probe_ready: int = 0, probe_age_s: float = 0.0, drain_s: int = 30,
            **agent):
    """Run 3 s of load with one draining agent and a probe; the drain's rows and the
    ``drained`` event."""
    clock = FakeClock()
    launcher = MemoryLauncher(1, clock)
    launcher.agents = [DrainingAgent(0, clock, **agent)]
    spec = ScenarioSpec.model_validate({
        "name": "drain", "topology": "mem.yaml",
        "workload": {"queue": "perf", "senders": 1, "receivers": 1},
        "plan": [{"rate_per_sender": 100, "hold": "3s"}],
        "measure": {"settle": 1, "drain": drain_s}})
    controller = Controller(spec, TOPOLOGY, tmp_path, live=False,
                            provisioner=ScriptedProvisioner(TOPOLOGY, clock),
                            launcher=launcher, clock=clock, host_cpu=idle_host,
                            probes=Probe(clock, probe_ready, probe_age_s), preflights=no_probe,
                            background=False, sd_dir=tmp_path / "sd")
    result = controller.run()
    events = [json.loads(line) for line in
              (controller.run_dir / "events.jsonl").read_text().splitlines()]
    load_end = controller.schedule.phases[-1].end_s
    rows = [t for t in controller.ticks if t["elapsed_s"] > load_end]
    return result, rows, next(e for e in events if e["kind"] == "drained")


def test_the_drain_ends_at_the_first_tick_after_the_stop_when_everything_is_in(tmp_path):
    result, rows, event = drained(tmp_path)
    assert len(rows) == 1 and event["queue_depth"] == 0
    assert rows[0]["queue_depth"] == 0 and rows[0]["depth_age_s"] == 0.0
    assert rows[0]["received"] == rows[0]["sent"] > 0
    assert result.accounting.lost == 0


def test_deliveries_the_receivers_have_not_acknowledged_keep_it_until_they_are(tmp_path):
    _, rows, event = drained(tmp_path, unacked=20, acked_s=2.5)
    assert [r["queue_depth"] for r in rows] == [20, 20, 0]
    assert [r["unacked"] for r in rows] == [20, 20, 0]
    assert all(r["received"] == r["sent"] for r in rows) and event["queue_depth"] == 0


def test_messages_still_on_their_way_keep_it_until_they_are_received(tmp_path):
    _, rows, _ = drained(tmp_path, behind=30, caught_up_s=1.5)
    assert [r["sent"] - r["received"] for r in rows] == [30, 0]
    assert [r["queue_depth"] for r in rows] == [0, 0]


def test_ready_messages_keep_it_for_its_whole_time(tmp_path):
    _, rows, event = drained(tmp_path, probe_ready=50, drain_s=6)
    assert len(rows) == 6 and {r["queue_depth"] for r in rows} == {50}
    assert event["queue_depth"] == 50


def test_a_depth_read_more_than_a_second_ago_is_unknown_and_ends_nothing(tmp_path):
    _, rows, event = drained(tmp_path, probe_age_s=1.5, drain_s=5)
    assert len(rows) == 5
    assert all(r["queue_depth"] is None and r["depth_age_s"] is None for r in rows)
    assert event["queue_depth"] is None


def reading(index: int, seen: float, held: int = 0, unacked: int = 0,
            asked: float | None = None) -> AgentReading:
    snapshot = protocol.Snapshot(monotonic_s=seen, held=held, unacked=unacked)
    return AgentReading.from_snapshot(index, snapshot, seen, asked)


def depth_at(clock: FakeClock, ready: int, read_at: float) -> QueueDepth:
    """A rabbitmq depth whose probe last read ``ready`` messages in ``perf`` at ``read_at``."""
    provisioner = ScriptedProvisioner(TOPOLOGY, clock)
    provisioner.up()
    depth = QueueDepth("rabbitmq", TOPOLOGY.queues[0], provisioner, clock, Probe(clock),
                       no_probe)
    depth.open(1)
    depth.fold(DepthReading({"perf": ready, "other": 7}, read_at))
    return depth


@pytest.mark.parametrize("queue_age, agents, expected", [
    # ready + every live agent's held and unacked; the age is the oldest reading's
    (0.2, [(0.1, 3, 2), (0.5, 0, 4)], (14, 0.5)),
    (0.0, [(0.0, 0, 0)], (5, 0.0)),
    (1.0, [(0.3, 0, 0)], (5, 1.0)),  # a second old still counts
    (1.01, [(0.0, 0, 0)], (None, None)),  # the queue reading too old
    (0.0, [(0.0, 0, 0), (1.2, 9, 9)], (None, None)),  # one agent's reading too old
    (0.0, [(0.0, 0, 0), None], (None, None)),  # one agent not read yet
])
def test_a_depth_is_ready_plus_what_receivers_hold_and_known_only_if_fresh(
        queue_age, agents, expected):
    clock = FakeClock()
    now = clock.monotonic()
    depth = depth_at(clock, 5, now - queue_age)
    readings = [None if a is None else reading(i, now - a[0], a[1], a[2])
                for i, a in enumerate(agents)]
    total, age = depth.now(None, readings)
    assert total == expected[0]
    assert age == (None if expected[1] is None else pytest.approx(expected[1]))


def test_an_agent_reading_counts_from_when_it_was_asked_for_and_taken():
    clock = FakeClock()
    now = clock.monotonic()
    depth = depth_at(clock, 0, now - 0.1)
    # asked 1.4 s ago, answered now: taken at the midpoint, 0.7 s ago
    assert depth.now(None, [reading(0, now, asked=now - 1.4)]) == (0, pytest.approx(0.7))
    assert depth.read_since(now - 1.5) and not depth.read_since(now - 1.0)
    # asked 2.4 s ago: taken 1.2 s ago, too old
    assert depth.now(None, [reading(0, now, asked=now - 2.4)]) == (None, None)
    assert not depth.read_since(now - 10)  # an unknown depth was read at no time


def test_a_depth_without_a_probe_is_the_brokers_and_read_with_its_sample():
    from topologies.base import BrokerSample
    clock = FakeClock()
    provisioner = ScriptedProvisioner(TOPOLOGY, clock)
    depth = QueueDepth("ibmmq", TOPOLOGY.queues[0], provisioner, clock, no_probe, no_probe)
    assert depth.open(1) is None
    sample = BrokerSample([], queue_depths={"perf": 12, "other": 3})
    assert depth.now(sample, [None]) == (12, None)  # IBM MQ: CURDEPTH, agents not asked
    assert depth.read_since(clock.monotonic())
    assert depth.now(None, []) == (None, None)
