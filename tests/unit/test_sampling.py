"""The tick arithmetic with fake time: every rate is its source's delta over its own interval."""

import pytest

from drivers.protocol import Snapshot
from orchestrator.run.sampling import (
    AgentReading,
    TickMath,
    Timeliness,
    destinations,
    quantiles,
    rate,
)
from results.rundir.histogram import LatencyHistogram
from topologies.base import BrokerResources, CpuReading, MemberSample


def agent(index, at, sent, received, latencies=(), seen=None, cpu=None):
    histogram = LatencyHistogram()
    for value in latencies:
        histogram.record(value)
    snapshot = Snapshot(monotonic_s=at, sent=sent, received=received, connections=2,
                        latency=histogram.to_dict(), cpu_seconds=cpu)
    return AgentReading.from_snapshot(index, snapshot, seen if seen is not None else at)


def member(cpu_seconds, at, running=True, name="m0"):
    reading = CpuReading(cpu_seconds, at) if cpu_seconds is not None else None
    return MemberSample(name, running, reading, 0.5)


def test_rates_are_each_agents_delta_over_its_own_interval():
    math = TickMath()
    math.step(1.0, {0: agent(0, 10.0, 100, 90), 1: agent(1, 500.0, 100, 100)})
    # agent 0 was read 1.25 s after its previous reading, agent 1 only 0.5 s after
    tick = math.step(2.0, {0: agent(0, 11.25, 600, 590, [1000, 2000]),
                           1: agent(1, 500.5, 300, 300, [3000])})
    assert tick.rates["sent"] == pytest.approx(500 / 1.25 + 200 / 0.5)
    assert tick.rates["received"] == pytest.approx(500 / 1.25 + 200 / 0.5)
    assert tick.totals["sent"] == 900 and tick.totals["connections"] == 4
    assert tick.latency.count == 3 and tick.agents_missing == 0


def test_a_late_tick_does_not_inflate_the_rate():
    """The old bug: a tick firing 0.16 s after a slow one divided a whole second's messages by
    0.16 s. Readings timed at the source give the true rate whatever the tick times."""
    math = TickMath()
    math.step(64.0, {0: agent(0, 100.00, 0, 0)})
    math.step(65.94, {0: agent(0, 100.95, 4000, 4000)})  # the scrape itself was on time
    tick = math.step(66.10, {0: agent(0, 101.95, 8000, 8000)})
    assert tick.rates["received"] == pytest.approx(4000.0)


def test_a_missing_agent_makes_the_total_unknown_then_spans_the_gap():
    math = TickMath()
    math.step(1.0, {0: agent(0, 1.0, 0, 0), 1: agent(1, 1.0, 0, 0)})
    missed = math.step(2.0, {0: agent(0, 2.0, 1000, 1000), 1: None})
    assert missed.rates["sent"] is None and missed.agents_missing == 1
    assert missed.totals["sent"] == 1000  # the last known counts, flagged by agents_missing
    back = math.step(3.0, {0: agent(0, 3.0, 2000, 2000), 1: agent(1, 3.05, 2050, 2050)})
    assert back.rates["sent"] == pytest.approx(1000 + 2050 / 2.05)


def test_jittered_readings_still_sum_to_the_true_rate():
    math = TickMath()
    true_rate, at = 1500.0, 0.0
    math.step(0.0, {0: agent(0, 0.0, 0, 0)})
    for k, jitter in enumerate([0.3, -0.2, 0.45, 0.05, -0.4], start=1):
        at_next = k + jitter * 0.5
        tick = math.step(float(k), {0: agent(0, at_next, int(true_rate * at_next),
                                             int(true_rate * at_next))})
        assert tick.rates["sent"] == pytest.approx(true_rate, rel=0.01)
        at = at_next
    assert at > 0


def test_member_cpu_is_over_the_reading_interval_and_never_above_the_quota():
    math = TickMath()
    math.step(1.0, {}, [member(10.0, 100.0)])
    # a quarter-core member read 1.6 s later (its host was busy): 0.4 s CPU is 25 %, not 40 %
    tick = math.step(2.0, {}, [member(10.4, 101.6)])
    assert tick.member_cpu_percent["m0"] == pytest.approx(25.0)
    assert tick.member_cpu_interval_s["m0"] == pytest.approx(1.6)


def test_a_period_straddling_a_read_moves_to_the_next_second_and_no_second_reads_above_quota():
    math = TickMath()
    math.step(0.0, {}, [member(0.0, 0.0)])
    # half a core: 0.508 s then 0.492 s of CPU in two seconds (a 100 ms period's share fell
    # before the read), shown as 50 % and 50 %, never 50.8 %; the total is kept
    first = math.step(1.0, {}, [member(0.508, 1.0)]).member_cpu_percent["m0"]
    second = math.step(2.0, {}, [member(1.0, 2.0)]).member_cpu_percent["m0"]
    assert (first, second) == (pytest.approx(50.0), pytest.approx(50.0))
    # more than a period's share over is no alignment: a quota not in force is shown as read
    over = math.step(3.0, {}, [member(1.8, 3.0)]).member_cpu_percent["m0"]
    assert over == pytest.approx(75.0)  # 0.8 s: 0.05 s of it moves on, the rest shows


def test_member_cpu_unknown_when_unread_stopped_or_restarted():
    math = TickMath()
    math.step(1.0, {}, [member(5.0, 1.0)])
    assert math.step(2.0, {}, [member(None, 2.0)]).member_cpu_percent["m0"] is None
    # the next reading spans the gap over its true length
    assert math.step(3.0, {}, [member(6.0, 3.0)]).member_cpu_percent["m0"] == pytest.approx(50)
    assert math.step(4.0, {}, [member(7.0, 4.0, running=False)]).member_cpu_percent["m0"] is None
    assert math.step(5.0, {}, [member(0.2, 5.0)]).member_cpu_percent["m0"] is None  # restarted


def test_member_network_is_each_way_in_mbps_over_the_ticks_and_unknown_where_a_count_fell():
    math = TickMath()

    def traffic(elapsed, received, sent, running=True):
        sample = MemberSample("m0", running, None, 0.5,
                              resources=BrokerResources(network_in_bytes=received,
                                                        network_out_bytes=sent))
        return math.step(elapsed, {}, [sample]).member_network_mbps["m0"]

    assert traffic(1.0, 1_000_000, 0) == (None, None)  # a first reading gives no rate
    # 1.25 MB in over 2 s is 5 Mb/s; 250 kB out is 1 Mb/s
    assert traffic(3.0, 2_250_000, 250_000) == (pytest.approx(5.0), pytest.approx(1.0))
    # a connection closed and took its bytes: in is unknown this second, out still known
    assert traffic(4.0, 100_000, 375_000) == (None, pytest.approx(1.0))
    assert traffic(5.0, 200_000, 375_000, running=False) == (None, None)
    assert math.step(6.0, {}, [member(1.0, 6.0)]).member_network_mbps["m0"] == (None, None)
    # the unknown seconds are spanned: from the reading at 4 s, 0.5 MB in over 3 s; out has
    # not moved for 3 s: no traffic
    assert traffic(7.0, 475_000, 375_000) == (pytest.approx(1.0), 0.0)


def test_a_byte_count_the_broker_has_not_refreshed_is_unknown_not_zero_then_spanned():
    math = TickMath()

    def traffic(elapsed, received):
        sample = MemberSample("m0", True, None, 0.5,
                              resources=BrokerResources(network_in_bytes=received,
                                                        network_out_bytes=0))
        return math.step(elapsed, {}, [sample]).member_network_mbps["m0"][0]

    # 1 Mb/s throughout, the count refreshed every other second
    assert traffic(1.0, 0) is None
    assert traffic(2.0, 0) is None  # not refreshed: neither 0 nor, next, twice the rate
    assert traffic(3.0, 250_000) == pytest.approx(1.0)
    assert traffic(4.0, 250_000) is None
    assert traffic(5.0, 500_000) == pytest.approx(1.0)
    assert [traffic(t, 500_000) for t in (6.0, 7.0, 8.0)] == [None, None, 0.0]  # idle


def test_host_cpu_is_busy_over_capacity_of_the_whole_host():
    math = TickMath()
    math.step(1.0, {}, hosts={"h": CpuReading(100.0, 50.0, 400.0)})
    tick = math.step(2.0, {}, hosts={"h": CpuReading(101.0, 51.0, 402.0), "g": None})
    assert tick.host_cpu_percent == {"h": pytest.approx(50.0), "g": None}
    # one CPU-second over one second: one of its two cores busy
    assert tick.host_cores_busy == {"h": pytest.approx(1.0), "g": None}


def test_a_step_costs_each_host_its_busy_cores_per_message():
    from results.rundir.steps import StepRow
    row = StepRow(step=1, label="1", received_rate=2000.0,
                  hosts_cores_busy={"controller": 1.5, "broker-1": 0.5})
    # 1.5 cores at 2,000 msg/s: 750 us of CPU per message
    assert row.host_us_per_msg == {"controller": pytest.approx(750.0),
                                   "broker-1": pytest.approx(250.0)}


def test_agent_cpu_from_its_own_process_time():
    math = TickMath()
    math.step(1.0, {0: agent(0, 10.0, 0, 0, cpu=3.0)})
    tick = math.step(2.0, {0: agent(0, 12.0, 0, 0, cpu=4.0)})
    assert tick.agent_cpu_percent[0] == pytest.approx(50.0)


@pytest.mark.parametrize("previous, previous_at, now, at, expected", [
    (None, None, 5, 1.0, (None, None)),       # no earlier reading
    (10, 1.0, 20, 1.0005, (None, None)),     # too close to divide
    (10, 1.0, 5, 2.0, (None, None)),         # the counter restarted
    (10, 1.0, 30, 3.0, (10.0, 2.0)),
])
def test_rate_table(previous, previous_at, now, at, expected):
    assert rate(previous, previous_at, now, at) == expected


def test_timeliness_summary():
    timeliness = Timeliness()
    for late, age in [(0.001, 0.1), (0.002, None), (0.5, 0.3)]:
        timeliness.add(late, age)
    timeliness.skipped = 1
    summary = timeliness.summary()
    assert summary["tick_lateness_s"] == {"count": 3, "p50": 0.002, "p99": 0.5, "max": 0.5}
    assert summary["depth_age_s"]["count"] == 2 and summary["ticks_skipped"] == 1
    assert quantiles([])["p50"] is None
    assert summary["controller_cpu_percent"] is None  # not measured


def test_timeliness_gives_the_controllers_cpu_over_the_load():
    timeliness = Timeliness()
    timeliness.spent(cpu_s=3.0, wall_s=60.0)
    assert timeliness.summary()["controller_cpu_percent"] == pytest.approx(5.0)
    assert timeliness.summary()["load_s"] == 60.0
    timeliness.spent(cpu_s=0.1, wall_s=0.0)  # no time passed: no figure
    assert timeliness.cpu_percent() is None


def test_clients_are_summed_over_agents_and_queues_counted_once():
    def reading(index, consuming, queues, sending):
        snapshot = Snapshot(monotonic_s=1.0, consuming=consuming, sending=sending,
                            sending_queues=queues)
        return AgentReading.from_snapshot(index, snapshot, 1.0)
    math = TickMath()
    tick = math.step(1.0, {0: reading(0, 2, ["pair-1"], 3), 1: reading(1, 1, ["pair-1",
                                                                              "pair-2"], 3)})
    assert (tick.sending, tick.consuming, tick.queues_in_use) == (6, 3, 2)
    tick = math.step(2.0, {0: reading(0, 2, ["pair-1"], 3), 1: reading(1, None, [], 0)})
    assert (tick.sending, tick.consuming, tick.queues_in_use) == (3, None, 1)


def test_a_lost_agents_clients_are_no_longer_counted():
    def reading(index, sending):
        snapshot = Snapshot(monotonic_s=1.0, consuming=2, sending=sending,
                            sending_queues=[f"pair-{index}"])
        return AgentReading.from_snapshot(index, snapshot, 1.0)
    math = TickMath()
    math.step(1.0, {0: reading(0, 3), 1: reading(1, 3)})
    tick = math.step(2.0, {0: reading(0, 3)})  # agent 1 lost: no longer asked
    assert (tick.sending, tick.consuming, tick.queues_in_use) == (3, 2, 1)
    missed = math.step(3.0, {0: None})  # a missed reading keeps the agent's latest
    assert (missed.sending, missed.consuming) == (3, 2)


def test_destinations_are_summed_over_agents_and_the_first_agents_sequence_kept():
    def reading(index, counts, sequence):
        snapshot = Snapshot(monotonic_s=1.0, destinations=counts,
                            destination_sequence=sequence)
        return AgentReading.from_snapshot(index, snapshot, 1.0)
    readings = {1: reading(1, {"QM2": 5, "QM1": 1}, ["QM2", "QM1"]),
                0: reading(0, {"QM1": 3}, ["QM1", "QM1"])}
    assert destinations(readings) == {"destinations": {"QM1": 4, "QM2": 5},
                                      "destination_sequence": ["QM1", "QM1"]}
    assert destinations({0: reading(0, {}, [])}) == {}  # a driver that does not say
