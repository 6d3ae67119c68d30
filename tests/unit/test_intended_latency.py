"""Latency from the intended send time (no coordinated omission), with fake time: a sender's
schedule places every message, its header carries the schedule lag, receivers and requesters
measure from the intended time too, and the figures reach the snapshot, the tick and step rows
and the run directory (old run directories without them still read)."""

import json
import sys
from types import SimpleNamespace

import pytest

from drivers import protocol, workers
from drivers.amqp.frames import FrameEncoder
from drivers.header import decode
from drivers.message import PayloadBuilder
from drivers.rate import RateSchedule
from drivers.workers import ReceiverRole, Recorder, RequesterRole, SenderRole
from orchestrator.run import rows
from orchestrator.run.sampling import AgentReading, TickMath
from results.rundir.histogram import LatencyHistogram
from results.rundir.steps import as_text, step_rows

WALL_S = 1_700_000_000.0  # the fake wall clock is this plus the fake monotonic clock


class FakeClock(SimpleNamespace):
    """What the roles read of ``time``: one fake monotonic clock, the wall clock beside it."""

    def __init__(self):
        super().__init__(t=0.0)

    def monotonic(self):
        return self.t

    def monotonic_ns(self):
        return round(self.t * 1e9)

    def time_ns(self):
        return round((WALL_S + self.t) * 1e9)

    def process_time(self):
        return 0.0


@pytest.fixture
def clock(monkeypatch):
    """The fake clock, read by the pure roles and by the compiled receiver alike."""
    fake = FakeClock()
    monkeypatch.setattr(workers, "time", fake)
    speedups = sys.modules.get("drivers._speedups")
    if speedups is not None:
        speedups.use_clocks(wall=fake.time_ns)
    yield fake
    if speedups is not None:
        speedups.use_clocks()


def test_the_schedule_says_when_the_last_message_handed_out_was_due():
    schedule = RateSchedule(100.0, now=10.0)
    assert schedule.due(10.0) == 1 and schedule.last_due == pytest.approx(10.0)
    assert schedule.due(10.205) == 20 and schedule.last_due == pytest.approx(10.20)
    # a stall of 3 s: one second's worth handed out, the latest due, the oldest skipped
    assert schedule.due(13.2) == 100 and schedule.skipped == 200
    assert schedule.last_due == pytest.approx(13.2)


def test_each_message_of_a_batch_carries_its_own_lag_from_the_schedule(clock):
    recorder = Recorder()
    sender = SenderRole(1, 100.0, PayloadBuilder(64), recorder, now=0.0)
    clock.t = 0.0
    sender.take(sender.due())  # message 0, due at 0.0
    clock.t = 0.205  # messages 1..20 are due at 0.01 .. 0.20
    n = sender.due()
    first = sender.take(n)
    assert (first, n) == (1, 20)
    lags = [decode(sender.body(seq))[3] for seq in range(first, first + n)]
    expected = [round((0.205 - seq / 100) * 1e6) for seq in range(first, first + n)]
    assert lags == pytest.approx(expected, abs=1)
    template = FrameEncoder(1, "q", 64, False, 131072)
    batch = template.batch(n, 1, first, clock.time_ns(), sender.lags(first))
    stamped = [decode(batch, template.header_offset + i * template.length) for i in range(n)]
    assert [s[1] for s in stamped] == list(range(first, first + n))
    assert [s[3] for s in stamped] == pytest.approx(expected, abs=1)


@pytest.mark.parametrize("fast_path", [False, True])
def test_a_stalled_sender_shows_the_stall_in_intended_latency_only(clock, fast_path):
    """100 msg/s, the sender's loop stalls for 1 s; each message takes 1 ms to arrive. From
    the actual send time nothing was late; from the intended one, up to the second."""
    recorder = Recorder()
    sender = SenderRole(1, 100.0, PayloadBuilder(64), recorder, now=0.0)
    receiver = ReceiverRole(recorder)
    template = FrameEncoder(1, "q", 64, False, 131072)

    def publish_at(t):
        clock.t = t
        n = sender.due()
        if not n:
            return
        first = sender.take(n)
        if fast_path:
            batch = template.batch(n, 1, first, clock.time_ns(), sender.lags(first))
            bodies = [(batch, template.header_offset + i * template.length) for i in range(n)]
        else:
            bodies = [(sender.body(seq), 0) for seq in range(first, first + n)]
        clock.t = t + 0.001
        for body, offset in bodies:
            receiver.on_body(body, offset)

    for tick in range(100):  # on time: 0.00 .. 0.99
        publish_at(tick / 100)
    before = recorder.snapshot()
    publish_at(2.0)  # stalled from 0.99 to 2.0: a second's worth goes out at once
    for tick in range(201, 250):
        publish_at(tick / 100)
    after = recorder.snapshot()
    actual = LatencyHistogram.from_dict(after.latency)
    intended = LatencyHistogram.from_dict(after.intended_latency)
    assert LatencyHistogram.from_dict(before.intended_latency).max_us <= 1_100
    assert actual.max_us <= 1_100  # 1 ms in flight, whatever the stall
    assert 0.95e6 <= intended.max_us <= 1.05e6  # the message due at 1.01 went at 2.0
    assert intended.count == actual.count == 149 and sender.schedule.skipped == 1
    assert intended.percentile(50) > 100 * actual.percentile(50)


def test_an_unlimited_sender_has_no_schedule_and_no_intended_latency(clock):
    recorder = Recorder()
    sender = SenderRole(1, 0.0, PayloadBuilder(64), recorder, now=0.0)
    first = sender.take(sender.due())
    assert sender.lags(first) == (0, 0, 0.0)
    body = sender.body(first)
    assert decode(body)[3] is None
    ReceiverRole(recorder).on_body(body)
    assert recorder.latency.count == 1 and recorder.intended_latency.count == 0


def test_a_requester_measures_the_round_trip_from_the_intended_send_time_too(clock):
    """10 requests/s, one in flight, each reply 0.5 s later: the requester falls behind."""
    recorder = Recorder()
    requester = RequesterRole(7, 10.0, PayloadBuilder(64), recorder, in_flight=1, now=0.0)
    assert requester.room() == 1
    first, _ = requester.request()  # due at 0.0
    clock.t = 0.5
    requester.on_reply(first)
    assert requester.room() == 1  # 5 are owed now (due at 0.1 .. 0.5), the oldest goes first
    second, body = requester.request()
    assert decode(body)[3] == pytest.approx(400_000, abs=1)  # due at 0.1, sent at 0.5
    clock.t = 1.0
    requester.on_reply(second)
    latency, intended = recorder.latency, recorder.intended_latency
    assert latency.count == intended.count == 2
    assert latency.max_us == pytest.approx(500_000, rel=0.01)
    assert intended.max_us == pytest.approx(900_000, rel=0.01)


def test_a_closed_loop_requester_has_no_intended_latency(clock):
    recorder = Recorder()
    requester = RequesterRole(7, 0.0, PayloadBuilder(64), recorder, in_flight=1, now=0.0)
    requester.room()
    correlation, _ = requester.request()
    clock.t = 0.2
    requester.on_reply(correlation)
    assert recorder.latency.count == 1 and recorder.intended_latency.count == 0


def test_the_snapshot_carries_intended_latency_and_an_older_agent_s_still_reads(clock):
    recorder = Recorder()
    recorder.latency.record(1_000)
    recorder.intended_latency.record(250_000)
    snapshot = recorder.snapshot()
    wire = json.loads(protocol.dumps(snapshot))
    assert protocol.decode(protocol.Snapshot, wire) == snapshot
    assert recorder.intended_latency.count == 0  # a fresh interval
    old = {k: v for k, v in wire.items() if k != "intended_latency"}
    older = protocol.decode(protocol.Snapshot, old)
    reading = AgentReading.from_snapshot(0, older, 1.0)
    assert reading.intended.count == 0 and reading.latency.count == 1


def test_tick_and_step_rows_carry_the_intended_percentiles_beside_the_actual_ones(clock):
    math, ticks = TickMath(), []
    for second in range(1, 8):
        recorder = Recorder()
        for _ in range(100):
            recorder.latency.record(2_000)
            recorder.intended_latency.record(2_000 if second < 4 else 800_000)
        snapshot = protocol.Snapshot(**{**vars(recorder.snapshot()), "monotonic_s": second})
        tick = math.step(float(second), {0: AgentReading.from_snapshot(0, snapshot, second)})
        row = rows.tick_row(rows.stamp(WALL_S + second, float(second), 1), tick,
                            lateness_s=0.0, target_rate=100.0, members_running=1,
                            queue_depth=0, depth_age_s=0.0, read_span_s=0.0,
                            broker_missing=False)
        ticks.append(row)
    assert ticks[0]["latency_p99_ms"] == pytest.approx(2.0, rel=0.04)
    assert ticks[0]["intended_p99_ms"] == pytest.approx(2.0, rel=0.04)
    assert ticks[-1]["intended_p50_ms"] == pytest.approx(800.0, rel=0.04)
    assert sum(ticks[-1]["intended_counts"]) == 100
    phases = [{"index": 1, "rate_per_sender": 100, "start_s": 0, "end_s": 8}]
    (row,) = step_rows(phases, ticks, [], settle_s=1)
    assert row.p99_ms == pytest.approx(2.0, rel=0.04)
    assert row.intended_p50_ms == pytest.approx(800.0, rel=0.04)  # 4 of 6 seconds late
    assert row.intended_max_ms == pytest.approx(800.0, rel=0.04)
    assert "intended p99 ms" in as_text([row])


def test_ticks_without_intended_latency_give_unknown_figures(clock):
    tick = TickMath().step(1.0, {0: AgentReading.from_snapshot(
        0, protocol.Snapshot(monotonic_s=1.0), 1.0)})
    row = rows.tick_row(rows.stamp(WALL_S, 1.0, 1), tick, lateness_s=0.0, target_rate=0.0,
                        members_running=1, queue_depth=0, depth_age_s=0.0, read_span_s=0.0,
                        broker_missing=False)
    assert row["intended_p50_ms"] is None and row["intended_counts"] == []


def synthetic_steps(tmp_path, **options):
    from results.rundir.manifest import read_manifest
    from results.rundir.tables import read_table
    from results.synthetic import write_run
    write_run(tmp_path / "run", **options)
    manifest = read_manifest(tmp_path / "run")
    ticks = sorted(read_table(tmp_path / "run", "ticks").to_pylist(),
                   key=lambda r: r["elapsed_s"])
    return ticks, step_rows(manifest.phases, ticks, [], manifest.settle_s)


def test_a_run_directory_records_the_intended_latency(tmp_path):
    from results.synthetic import SCHEDULE_LAG_US
    ticks, steps = synthetic_steps(tmp_path)
    assert ticks[5]["intended_p50_ms"] > ticks[5]["latency_p50_ms"]
    for step in steps:
        assert step.intended_max_ms == pytest.approx(step.max_ms + SCHEDULE_LAG_US / 1000,
                                                     rel=0.04)
        assert step.intended_p99_ms > step.p99_ms


@pytest.mark.parametrize("options", [{"intended": False}, {"format_version": 2}])
def test_an_older_run_directory_without_the_columns_still_reads(tmp_path, options):
    ticks, steps = synthetic_steps(tmp_path, **options)
    assert "intended_p99_ms" not in ticks[0] and ticks[0]["latency_p99_ms"] is not None
    assert steps and all(s.p99_ms is not None for s in steps)
    assert all(s.intended_p50_ms is s.intended_p99_ms is s.intended_max_ms is None
               for s in steps)


def test_requests_taken_as_a_batch_are_placed_and_stamped_as_one_by_one(clock):
    """Six requests owed at 10/s (due at 0.0 .. 0.5, sent at 0.5), five may be in flight: a
    batch of the five oldest waits with the same correlation ids and intended times, and their
    bodies carry the same lags, as five taken one at a time."""
    def owing() -> RequesterRole:
        clock.t = 0.0
        role = RequesterRole(7, 10.0, PayloadBuilder(64), Recorder(), in_flight=5, now=0.0)
        clock.t = 0.5
        assert role.room() == 5
        return role
    one_by_one = owing()
    bodies = [one_by_one.request()[1] for _ in range(5)]
    batched = owing()
    first = batched.take_requests(5)
    encoder = FrameEncoder(1, "q", 64, persistent=False, frame_max=4096)
    batch = encoder.batch(5, 7, first, 0, batched.lags(first))
    assert list(batched.waiting) == list(one_by_one.waiting) == [
        batched.correlation(seq) for seq in range(5)]
    for (sent, intended), (sent_1, intended_1) in zip(batched.waiting.values(),
                                                      one_by_one.waiting.values()):
        assert sent == sent_1 and intended == pytest.approx(intended_1, abs=1)
    assert [decode(batch, encoder.header_offset + k * encoder.length)[3] for k in range(5)] \
        == [pytest.approx(decode(b)[3], abs=1) for b in bodies]
    assert decode(bodies[0])[3] == pytest.approx(500_000, abs=1)  # due at 0.0
    assert batched.owed == one_by_one.owed == 1 and batched.seq == one_by_one.seq == 5
