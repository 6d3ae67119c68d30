"""The checks for impossible samples, each shown to fire and to stay quiet."""

from results.integrity import suspect_samples


def tick(elapsed, sent, received, depth, **extra):
    return {"elapsed_s": elapsed, "sent": sent, "received": received, "queue_depth": depth,
            "receive_rate": 1000.0, "read_span_s": 0.0, **extra}


def member(cpu, quota=0.5, running=True):
    return {"member": "m-0@h", "elapsed_s": 1.0, "running": running, "cpu_percent": cpu,
            "cpu_quota_cores": quota}


def test_cpu_above_quota_beyond_period_rounding():
    found = suspect_samples([], [member(62.0), member(63.0), member(130.0), member(None),
                                 member(90.0, quota=None), member(200.0, running=False)])
    assert found.cpu_over_quota == 2  # 63 % and 130 % of a half core; 62 % is rounding
    assert found.worst_cpu_ratio == 2.6


def test_receiving_more_than_there_plus_sent():
    ticks = [tick(1, 1000, 900, 50), tick(2, 2000, 2100, 20)]  # 100 there + 1000 sent < 1200
    found = suspect_samples(ticks, [])
    assert found.received_more_than_available == 1 and "received 1,200" in found.examples[0]
    fine = [tick(1, 1000, 900, 50), tick(2, 2000, 1900, 100)]
    assert suspect_samples(fine, []).total == 0


def test_in_flight_messages_are_there_though_no_queue_counts_them():
    # 400 sent but neither received nor queued yet (held in the broker's ingress)
    ticks = [tick(1, 1000, 600, 0), tick(2, 2000, 1900, 100)]
    found = suspect_samples(ticks, [])
    assert found.received_more_than_available == 0 and found.received_more_than_queued == 1


def test_readings_spread_in_time_are_allowed_their_spread():
    ticks = [tick(1, 1000, 1000, 0, read_span_s=0.05), tick(2, 2000, 2040, 0)]
    assert suspect_samples(ticks, []).received_more_than_available == 0  # 1000/s x 0.05 s
    ticks[0]["read_span_s"] = 0.0
    assert suspect_samples(ticks, []).received_more_than_available == 1


def test_unknown_depth_or_missing_agents_are_not_judged():
    ticks = [tick(1, 1000, 900, None), tick(2, 2000, 2100, 0),
             tick(3, 3000, 3200, 0, agents_missing=1)]
    assert suspect_samples(ticks, []).received_more_than_available == 0


def test_frozen_depth_while_messages_flow():
    ticks = [tick(k, 1000 * k, 1000 * k, 417) for k in range(1, 6)]
    ticks += [tick(6, 6000, 6000, 300)]
    found = suspect_samples(ticks, [])
    assert found.frozen_depth_runs == 1 and "depth 417 for 5 ticks" in found.examples[0]
    idle = [tick(k, 1000, 1000, 417) for k in range(1, 6)]  # nothing flows: it may stand still
    small = [tick(k, 1000 * k, 1000 * k, 2) for k in range(1, 6)]  # a couple in flight
    assert suspect_samples(idle, []).total == 0 and suspect_samples(small, []).total == 0
